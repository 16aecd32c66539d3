"""A span exporter writing OTLP JSON lines in the shape the Collector ``file`` exporter writes.

Each ``export()`` batch becomes one line ``{"resourceSpans":[...]}``: spans grouped by resource,
then by instrumentation scope (first-seen order, as the SDK's OTLP encoder does), lowercase hex
ids, enum numbers for ``kind`` and ``status.code``, 64-bit integers as decimal strings, keys in
lowerCamelCase and in the order of the ``.proto`` declarations, default values left out, as the
Collector's ``pdata`` JSON marshaler writes them. Same spans in, same bytes out.

Usage::

    exporter = OtlpJsonLinesExporter("traces/", max_bytes=64 * 2**20, gzip=True)
    provider = TracerProvider(resource=Resource({"service.name": "kyc-agent"}))
    provider.add_span_processor(BatchSpanProcessor(exporter))  # then provider.shutdown() at exit
"""

from __future__ import annotations

import base64
import gzip as gzip_module
import json
import logging
import math
import os
import threading
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import SpanContext, SpanKind
from opentelemetry.trace.status import StatusCode

__all__ = ["OtlpJsonLinesExporter", "any_value_json", "spans_to_otlp_json"]

_logger = logging.getLogger(__name__)

# OTLP's SpanKind numbers: the Python API counts INTERNAL as 0, OTLP as 1 (0 is UNSPECIFIED).
_KIND = {
    SpanKind.INTERNAL: 1,
    SpanKind.SERVER: 2,
    SpanKind.CLIENT: 3,
    SpanKind.PRODUCER: 4,
    SpanKind.CONSUMER: 5,
}
_STATUS = {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}

# SpanFlags: bit 8 says "bit 9 is meaningful", bit 9 says "the parent is remote" (trace.proto).
_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200


def _string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _double(value: float) -> str:
    """A float64 as Go's encoding/json writes it (the Collector is written in Go).

    Shortest round-trip digits, positional between 1e-6 and 1e21, exponent otherwise, no ``.0``
    on integral values; NaN and infinities as the strings the protobuf JSON mapping uses.
    """
    if math.isnan(value):
        return '"NaN"'
    if math.isinf(value):
        return '"Infinity"' if value > 0 else '"-Infinity"'
    text = repr(value)
    magnitude = abs(value)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        mantissa, _, exponent = text.partition("e")
        sign = exponent[0] if exponent[0] in "+-" else "+"
        # Go pads to two exponent digits, then encoding/json trims "e-07" to "e-7".
        digits = exponent.lstrip("+-").lstrip("0") or "0"
        if sign == "+" and len(digits) < 2:
            digits = "0" + digits
        return f"{mantissa.removesuffix('.0')}e{sign}{digits}"
    if "e" in text or "E" in text:
        text = format(Decimal(text), "f")
    return text.removesuffix(".0")


def any_value_json(value: Any) -> str:
    """One attribute value as an OTLP JSON ``AnyValue`` object (the SDK encoder's type mapping)."""
    # bool before int: bool is a subclass of int; str and bytes before Sequence for the same reason.
    if value is None:
        return "{}"
    if isinstance(value, bool):
        return '{"boolValue":true}' if value else '{"boolValue":false}'
    if isinstance(value, str):
        return '{"stringValue":' + _string(value) + "}"
    if isinstance(value, int):
        return '{"intValue":"' + str(value) + '"}'
    if isinstance(value, float):
        return '{"doubleValue":' + _double(value) + "}"
    if isinstance(value, bytes | bytearray | memoryview):
        encoded = base64.b64encode(bytes(value)).decode("ascii")
        return '{"bytesValue":"' + encoded + '"}'
    if isinstance(value, Mapping):
        if not value:
            return '{"kvlistValue":{}}'
        items = ",".join(_key_value(str(k), v) for k, v in value.items())
        return '{"kvlistValue":{"values":[' + items + "]}}"
    if isinstance(value, Sequence):
        if not value:
            return '{"arrayValue":{}}'
        return '{"arrayValue":{"values":[' + ",".join(any_value_json(v) for v in value) + "]}}"
    raise TypeError(f"cannot encode a {type(value).__name__} as an OTLP AnyValue")


def _key_value(key: str, value: Any) -> str:
    return '{"key":' + _string(key) + ',"value":' + any_value_json(value) + "}"


def _attributes(attributes: Mapping[str, Any] | None, out: list[str], dropped: int = 0) -> None:
    """Append ``"attributes":[...]`` and ``"droppedAttributesCount"`` (each with its leading
    comma) when there are any."""
    encoded = []
    for key, value in (attributes or {}).items():
        try:
            encoded.append(_key_value(key, value))
        except TypeError:
            # The SDK's OTLP encoder logs and drops an attribute it cannot encode; so do we.
            _logger.warning("attribute %r has an unsupported type and was dropped", key)
    if encoded:
        out.append(',"attributes":[' + ",".join(encoded) + "]")
    _dropped("droppedAttributesCount", dropped, out)


def _dropped(name: str, count: int, out: list[str]) -> None:
    if count:
        out.append(f',"{name}":{count}')


def _flags(parent: SpanContext | None) -> int:
    flags = _HAS_IS_REMOTE
    if parent is not None and parent.is_remote:
        flags |= _IS_REMOTE
    return flags


def _trace_state(context: SpanContext) -> str:
    state = context.trace_state
    return ",".join(f"{k}={v}" for k, v in state.items()) if state else ""


def _span_json(span: ReadableSpan) -> str:
    context = span.get_span_context()
    out = [
        '{"traceId":"',
        f"{context.trace_id:032x}",
        '","spanId":"',
        f"{context.span_id:016x}",
        '"',
    ]
    state = _trace_state(context)
    if state:
        out.append(',"traceState":' + _string(state))
    parent = span.parent
    if parent is not None and parent.span_id:
        out.append(f',"parentSpanId":"{parent.span_id:016x}"')
    out.append(f',"flags":{_flags(parent)}')
    if span.name:
        out.append(',"name":' + _string(span.name))
    out.append(f',"kind":{_KIND[span.kind]}')
    if span.start_time:
        out.append(f',"startTimeUnixNano":"{span.start_time}"')
    if span.end_time:
        out.append(f',"endTimeUnixNano":"{span.end_time}"')
    _attributes(span.attributes, out, span.dropped_attributes)
    if span.events:
        events = []
        for event in span.events:
            part = ["{"]
            if event.timestamp:
                part.append(f'"timeUnixNano":"{event.timestamp}",')
            part.append('"name":' + _string(event.name))
            _attributes(event.attributes, part, event.dropped_attributes)
            part.append("}")
            events.append("".join(part))
        out.append(',"events":[' + ",".join(events) + "]")
    _dropped("droppedEventsCount", span.dropped_events, out)
    if span.links:
        links = []
        for link in span.links:
            ctx = link.context
            part = [f'{{"traceId":"{ctx.trace_id:032x}","spanId":"{ctx.span_id:016x}"']
            link_state = _trace_state(ctx)
            if link_state:
                part.append(',"traceState":' + _string(link_state))
            _attributes(link.attributes, part, link.dropped_attributes)
            part.append(f',"flags":{_flags(ctx)}}}')
            links.append("".join(part))
        out.append(',"links":[' + ",".join(links) + "]")
    _dropped("droppedLinksCount", span.dropped_links, out)
    status = span.status
    fields = []
    if status is not None and status.description:
        fields.append('"message":' + _string(status.description))
    code = _STATUS[status.status_code] if status is not None else 0
    if code:
        fields.append(f'"code":{code}')
    out.append(',"status":{' + ",".join(fields) + "}}")
    return "".join(out)


def _scope_json(scope: Any) -> str:
    if scope is None:
        return "{}"
    fields = []
    if scope.name:
        fields.append('"name":' + _string(scope.name))
    if scope.version:
        fields.append('"version":' + _string(scope.version))
    attrs: list[str] = []
    _attributes(scope.attributes, attrs)
    body = ",".join(fields) + "".join(attrs)
    return "{" + body.lstrip(",") + "}"


def spans_to_otlp_json(spans: Sequence[ReadableSpan]) -> str:
    """The batch as one OTLP JSON ``ExportTraceServiceRequest`` (no trailing newline).

    Grouping mirrors ``opentelemetry-exporter-otlp-proto-common``'s ``encode_spans``: one
    ``resourceSpans`` entry per distinct resource, one ``scopeSpans`` per distinct scope inside
    it, both in first-seen order, spans in batch order.
    """
    groups: dict[Any, dict[Any, list[str]]] = {}
    for span in spans:
        by_scope = groups.setdefault(span.resource, {})
        by_scope.setdefault(span.instrumentation_scope or None, []).append(_span_json(span))
    resource_parts = []
    for resource, by_scope in groups.items():
        attrs: list[str] = []
        _attributes(resource.attributes, attrs)
        scope_parts = []
        for scope, encoded in by_scope.items():
            part = '{"scope":' + _scope_json(scope) + ',"spans":[' + ",".join(encoded) + "]"
            if scope is not None and scope.schema_url:
                part += ',"schemaUrl":' + _string(scope.schema_url)
            scope_parts.append(part + "}")
        part = '{"resource":{' + "".join(attrs).lstrip(",") + "}"
        part += ',"scopeSpans":[' + ",".join(scope_parts) + "]"
        if resource.schema_url:
            part += ',"schemaUrl":' + _string(resource.schema_url)
        resource_parts.append(part + "}")
    return '{"resourceSpans":[' + ",".join(resource_parts) + "]}"


def _split_name(name: str) -> tuple[str, str]:
    """``traces.jsonl.gz`` -> (``traces``, ``.jsonl.gz``): rotated parts go between the two."""
    dot = name.find(".", 1)
    return (name, "") if dot < 0 else (name[:dot], name[dot:])


class OtlpJsonLinesExporter(SpanExporter):
    """Write each exported batch as one OTLP JSON line, like the Collector's ``file`` exporter.

    ``path`` is the file to write, or a directory (existing, ending with a separator, or given
    with ``prefix``) in which ``{prefix}.jsonl`` is written (``.jsonl.gz`` with ``gzip=True``).
    With ``max_bytes``, a line that would take the current file past that many (uncompressed)
    bytes starts the next file instead: ``traces-0001.jsonl``, ``traces-0002.jsonl``, ...; a
    line is never split, so a line longer than ``max_bytes`` gets a file of its own. Files are
    truncated when first opened unless ``append=True``. Gzip output has a zero mtime and no name
    in its header, so the same spans give the same bytes. Safe to call from several threads.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        prefix: str | None = None,
        max_bytes: int | None = None,
        gzip: bool = False,
        compresslevel: int = 6,
        append: bool = False,
    ) -> None:
        if max_bytes is not None and max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        target = Path(path)
        is_dir = prefix is not None or target.is_dir() or str(path).endswith(("/", os.sep))
        extension = ".jsonl.gz" if gzip else ".jsonl"
        first = target / f"{prefix or 'traces'}{extension}" if is_dir else target
        self._dir = first.parent
        self._stem, self._suffix = _split_name(first.name)
        self._max_bytes = max_bytes
        self._gzip = gzip
        self._level = compresslevel
        self._append = append
        self._lock = threading.Lock()
        self._index = 0  # 0 is the base name, n >= 1 is "-000n"
        self._raw: IO[bytes] | None = None
        self._stream: IO[bytes] | None = None
        self._size = 0  # uncompressed bytes in the current file
        self._closed = False

    @property
    def current_path(self) -> Path:
        """The file the next line goes to (unless it triggers a rotation)."""
        index = self._index
        return self._dir / (self._stem + (f"-{index:04d}" if index else "") + self._suffix)

    def _open(self) -> None:
        path = self.current_path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._raw = open(path, "ab" if self._append else "wb")  # noqa: SIM115 (kept open)
        # With append, rotation counts what the file already holds (compressed size for gzip).
        self._size = self._raw.tell() if self._append else 0
        if self._gzip:
            self._stream = gzip_module.GzipFile(
                filename="", mode="wb", fileobj=self._raw, compresslevel=self._level, mtime=0
            )
        else:
            self._stream = self._raw

    def _close_current(self) -> None:
        if self._stream is not None and self._stream is not self._raw:
            self._stream.close()
        if self._raw is not None:
            self._raw.close()
        self._stream = self._raw = None

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Append the batch as one line; FAILURE after shutdown or on an I/O error."""
        if self._closed:
            return SpanExportResult.FAILURE
        if not spans:
            return SpanExportResult.SUCCESS
        try:
            line = (spans_to_otlp_json(spans) + "\n").encode("utf-8", "replace")
        except Exception:  # a span the SDK itself could not have produced; keep the others going
            _logger.exception("could not encode a batch of %d spans", len(spans))
            return SpanExportResult.FAILURE
        with self._lock:
            if self._closed:
                return SpanExportResult.FAILURE
            try:
                if self._stream is None:
                    self._open()
                elif (
                    self._max_bytes is not None
                    and self._size > 0
                    and self._size + len(line) > self._max_bytes
                ):
                    self._close_current()
                    self._index += 1
                    self._open()
                assert self._stream is not None
                self._stream.write(line)
                if not self._gzip:
                    # Whole lines become visible to a reader tailing the file.
                    self._stream.flush()
                self._size += len(line)
            except OSError:
                _logger.exception("could not write spans to %s", self.current_path)
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Push buffered bytes to the OS (a gzip sync point with ``gzip=True``)."""
        with self._lock:
            if self._stream is None:
                return True
            try:
                # GzipFile.flush() ends the deflate block with Z_SYNC_FLUSH, so a reader can
                # decompress everything written so far; then the raw file goes to the OS.
                self._stream.flush()
                if self._raw is not None and self._raw is not self._stream:
                    self._raw.flush()
            except OSError:
                _logger.exception("could not flush %s", self.current_path)
                return False
        return True

    def shutdown(self) -> None:
        """Close the current file (writing the gzip trailer); later exports fail."""
        with self._lock:
            self._closed = True
            self._close_current()
