"""OTLP protobuf reader: the collector ``file`` exporter's ``format: proto`` and raw request bodies.

A frames file is a sequence of 4-byte big-endian lengths, each followed by one
``ExportTraceServiceRequest``, possibly zstd-compressed on its own (checked by its magic).
A raw body is a single ``ExportTraceServiceRequest`` as an OTLP/HTTP client posts it.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Iterator
from typing import Any, BinaryIO

import pyarrow as pa
import zstandard
from google.protobuf import unknown_fields
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans

from analyzer.ingest import limits
from analyzer.ingest.accounting import FileLog
from analyzer.ingest.limits import record_too_long
from analyzer.ingest.otlp_objects import add_groups, dumps
from analyzer.spans import KINDS, STATUSES, SpanBatchBuilder

__all__ = ["looks_like_frames", "read_frames"]

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_REQUEST_TAG = 0x0A  # field 1 (resource_spans), length-delimited
_LEGACY_SCOPE_SPANS = 1000  # instrumentation_library_spans, before proto 0.19
_INT64_MAX = 2**63 - 1
_BATCH_SPANS = 50_000


class _BadSpan(Exception):
    """A span that cannot be kept; the message is the quarantine reason."""


def _varint(data: bytes, pos: int) -> tuple[int, int] | None:
    value = shift = 0
    while pos < len(data) and shift < 64:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return value, pos
        shift += 7
    return None


def _looks_like_body(head: bytes, size: int) -> bool:
    """A raw ExportTraceServiceRequest: field 1 holding a ResourceSpans that starts sensibly."""
    if len(head) < 3 or head[0] != _REQUEST_TAG:
        return False
    parsed = _varint(head, 1)
    if parsed is None:
        return False
    length, pos = parsed
    if pos + length > size or length == 0:
        return False
    # ResourceSpans fields: 1 resource, 2 scope_spans, 3 schema_url (length-delimited), 1000 legacy
    return pos >= len(head) or head[pos] in (0x0A, 0x12, 0x1A) or head[pos : pos + 2] == b"\xc2\x3e"


def _looks_like_frame_at(head: bytes, pos: int, size: int) -> bool | None:
    """Whether a frame plausibly starts at `pos` (None when `head` is too short to tell)."""
    if pos + 4 > size:
        return False
    if pos + 4 > len(head):
        return None
    (length,) = struct.unpack_from(">I", head, pos)
    if pos + 4 + length > size:
        return False
    payload = head[pos + 4 : pos + 8]
    if length == 0:
        return True
    if len(payload) < 1:
        return None
    return payload[:4] == ZSTD_MAGIC[: len(payload)] or payload[0] == _REQUEST_TAG


def looks_like_frames(head: bytes, size: int) -> bool:
    """Whether a file that starts with `head` and has `size` bytes (-1: unknown, as inside a
    compressed file) is OTLP protobuf.

    True for collector frames (the first frame, and the second when `head` reaches it, must
    have a length that fits in the file and a payload that starts like a zstd frame or a
    request) and for a raw request body (starts with the request's field-1 tag, whose
    length fits in the file, followed by a ResourceSpans field tag). A frame length's first
    byte is 0 for frames under 16 MiB, which a body never starts with.
    """
    if size < 0:  # a decompressed stream, of unknown length: frames under 256 MiB
        size = len(head) + (1 << 28)
    if size < 4:
        return False
    # Zero bytes read as empty frames: judge by the first non-empty one (a zero-filled file
    # is not a trace).
    start = len(head) - len(head.lstrip(b"\0"))
    start -= start % 4
    if start + 4 > min(len(head), size):
        return False
    first = _looks_like_frame_at(head, start, size)
    if first:
        (length,) = struct.unpack_from(">I", head, start)
        if start + 4 + length == size:
            return True
        second = _looks_like_frame_at(head, start + 4 + length, size)
        if second is not False:
            return True
    return _looks_like_body(head, size)


# --- conversion -------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_plain(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _plain(kv.value) for kv in value.kvlist_value.values}
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return getattr(value, which)


#: The attribute slot of each scalar AnyValue field (the others are JSON text in ``json``).
_SLOTS = {"string_value": "str", "bool_value": "bool", "int_value": "int", "double_value": "float"}


def _attrs(kvs: Any) -> list[dict[str, Any]]:
    rows = []
    for kv in kvs:
        which = kv.value.WhichOneof("value")
        if which is None:
            continue  # an empty value: dropped, as in OTLP JSON
        row = {"key": kv.key, "str": None, "int": None, "float": None, "bool": None, "json": None}
        slot = _SLOTS.get(which)
        row[slot or "json"] = getattr(kv.value, which) if slot else dumps(_plain(kv.value))
        rows.append(row)
    return rows


def _id(raw: bytes, nbytes: int, what: str, *, required: bool) -> str | None:
    if not raw or raw.strip(b"\0") == b"":
        if required:
            raise _BadSpan(f"missing {what}")
        return None
    if len(raw) != nbytes:
        raise _BadSpan(f"bad {what}: {len(raw)} bytes, expected {nbytes}")
    return raw.hex()


def _time(value: int, what: str) -> int:
    if value > _INT64_MAX:
        raise _BadSpan(f"unreadable {what}: {value} does not fit in int64")
    return value


def _span_row(span: Any) -> dict[str, Any]:
    return {
        "trace_id": _id(span.trace_id, 16, "traceId", required=True),
        "span_id": _id(span.span_id, 8, "spanId", required=True),
        "parent_span_id": _id(span.parent_span_id, 8, "parentSpanId", required=False),
        "name": span.name,
        "kind": KINDS[span.kind] if 0 <= span.kind < len(KINDS) else "unspecified",
        "start_ns": _time(span.start_time_unix_nano, "startTimeUnixNano"),
        "end_ns": _time(span.end_time_unix_nano, "endTimeUnixNano"),
        "status_code": STATUSES[span.status.code]
        if 0 <= span.status.code < len(STATUSES)
        else "unset",
        "status_message": span.status.message or None,
        "attributes": _attrs(span.attributes),
        "events": [
            {
                "time_ns": _time(e.time_unix_nano, "event time"),
                "name": e.name,
                "attributes": _attrs(e.attributes),
            }
            for e in span.events
        ],
        "links": [
            {
                "trace_id": _id(link.trace_id, 16, "link traceId", required=False),
                "span_id": _id(link.span_id, 8, "link spanId", required=False),
                "attributes": _attrs(link.attributes),
            }
            for link in span.links
        ],
    }


def _scope_spans(rs: Any) -> list[Any]:
    """The ScopeSpans of a ResourceSpans, legacy ``instrumentation_library_spans`` included."""
    groups = list(rs.scope_spans)
    for field in unknown_fields.UnknownFieldSet(rs):
        if field.field_number == _LEGACY_SCOPE_SPANS and isinstance(field.data, bytes):
            groups.append(ScopeSpans.FromString(field.data))  # the same wire layout
    return groups


def _add_request(req: Any, builder: SpanBatchBuilder, log: FileLog, offset: int) -> None:
    # Legacy groups are decoded here, before any span is counted: a corrupt one raises
    # DecodeError and the frame is quarantined whole, with nothing half-counted.
    groups = []
    for rs in req.resource_spans:
        res_attrs = _attrs(rs.resource.attributes)
        for ss in _scope_spans(rs):
            groups.append((res_attrs, ss.scope.name or None, ss.scope.version or None, ss.spans))

    def read_span(span: Any, where: str) -> dict[str, Any] | None:
        try:
            return _span_row(span)
        except _BadSpan as exc:
            log.quarantine_span(where, str(exc), str(span))
            return None

    add_groups(groups, read_span, builder, log, source_pos=offset, position=f"byte {offset}")


def _parse(payload: bytes) -> Any:
    if payload[:4] == ZSTD_MAGIC:
        stream = zstandard.ZstdDecompressor().decompressobj()
        payload = stream.decompress(payload)
        if not stream.eof:  # the decompressor waits for more input instead of failing
            raise zstandard.ZstdError("incomplete zstd frame")
    return ExportTraceServiceRequest.FromString(payload)


def _chain_fits(data: bytes) -> bool:
    """Whether `data` is exactly a sequence of length-prefixed frames."""
    pos = 0
    while pos + 4 <= len(data):
        (length,) = struct.unpack_from(">I", data, pos)
        pos += 4 + length
    return pos == len(data)


def read_frames(stream: BinaryIO, log: FileLog) -> Iterator[pa.RecordBatch]:
    """Spans of an OTLP protobuf file: collector frames, or one raw request body.

    ``source_pos`` is the byte offset of the frame (0 for a body). A frame that cannot be
    decoded is quarantined as "byte N" and reading goes on at the next frame; a length that
    runs past the end of the file is quarantined and ends the reading (there is no way to
    find the next frame).
    """
    builder = SpanBatchBuilder()
    head = stream.read(4)
    if head[:1] == bytes([_REQUEST_TAG]):
        data = head + stream.read()
        if not _chain_fits(data):
            log.records += 1
            try:
                _add_request(ExportTraceServiceRequest.FromString(data), builder, log, 0)
            except DecodeError as exc:
                log.quarantine_record("byte 0", f"not an OTLP protobuf request: {exc}", data)
            batch = builder.flush()
            if batch is not None:
                yield batch
            return
        stream = _Replay(data[4:])
    else:
        stream = _Replay(b"", stream)
    offset = 0
    while head:
        if len(head) < 4:
            log.records += 1
            log.quarantine_record(
                f"byte {offset}", f"truncated frame length ({len(head)} bytes)", head
            )
            break
        (length,) = struct.unpack(">I", head)
        if length == 0 and (zeros := _zero_run(stream)):
            # Two empty frames in a row are a zero-filled region (a preallocated or crashed
            # log), not requests: one record, skipped in blocks (frame by frame, 1 GiB of
            # zeros would take minutes).
            log.records += 1
            log.quarantine_record(
                f"byte {offset}", f"{4 + zeros:,} zero bytes where frames should be", b""
            )
            offset += 4 + zeros
            head = stream.read(4)
            continue
        if length > limits.MAX_RECORD_BYTES:
            # never held in memory: skipped in blocks, then the next frame is read
            log.records += 1
            skipped = _skip(stream, length)
            if skipped < length:
                log.quarantine_record(
                    f"byte {offset}",
                    f"frame length {length} runs past the end of the file ({skipped} bytes left)",
                    head,
                )
                break
            log.quarantine_record(f"byte {offset}", record_too_long(length), head)
            offset += 4 + length
            head = stream.read(4)
            continue
        payload = stream.read(length)
        log.records += 1
        if len(payload) < length:
            log.quarantine_record(
                f"byte {offset}",
                f"frame length {length} runs past the end of the file ({len(payload)} bytes left)",
                head + payload,
            )
            break
        try:
            _add_request(_parse(payload), builder, log, offset)
        except (DecodeError, zstandard.ZstdError) as exc:
            log.quarantine_record(f"byte {offset}", f"corrupt frame: {exc}", payload)
        else:
            if len(builder) >= _BATCH_SPANS:
                yield builder.flush()  # type: ignore[misc]
        offset += 4 + length
        head = stream.read(4)
    batch = builder.flush()
    if batch is not None:
        yield batch


_ZERO_BLOCK = 1 << 16  # a multiple of 4: frame lengths stay aligned


def _skip(stream: _Replay, n: int) -> int:
    """Read and drop `n` bytes of `stream` (fewer at its end); return how many."""
    done = 0
    while done < n:
        block = stream.read(min(n - done, 1 << 20))
        if not block:
            break
        done += len(block)
    return done


def _zero_run(stream: _Replay) -> int:
    """Read past the zero bytes at the start of `stream`, a multiple of 4; return how many."""
    count = 0
    while True:
        block = stream.read(_ZERO_BLOCK)
        data = block.lstrip(b"\0")
        if data or len(block) < _ZERO_BLOCK:  # data resumes, or the stream ends
            zeros = len(block) - len(data)
            keep = zeros - zeros % 4
            stream.unread(block[keep:])
            return count + keep
        count += len(block)


class _Replay:
    """A stream over bytes already read (or put back), then the rest of `rest`, if given."""

    def __init__(self, data: bytes, rest: BinaryIO | None = None) -> None:
        self._data = data
        self._pos = 0
        self._rest = rest

    def unread(self, data: bytes) -> None:
        self._data = data + self._data[self._pos :]
        self._pos = 0

    def read(self, n: int = -1) -> bytes:
        end = len(self._data) if n < 0 else self._pos + n
        out = self._data[self._pos : end]
        self._pos += len(out)
        if self._rest is not None and (n < 0 or len(out) < n):
            out += self._rest.read(-1 if n < 0 else n - len(out))
        return out
