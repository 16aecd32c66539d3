"""OTLP JSON readers: collector ``file`` exporter lines and single documents.

Lines are read by the native reader (`analyzer.ingest._otlp_lines`, C, built with the package):
it parses each line straight into Arrow buffers, with no Python object per span or attribute,
and refuses, whole, every line it is not certain to read as the robust path does. The refused
lines, and every line where the extension is not built, go through the robust path
(`analyzer.ingest.otlp_objects.add_request`), and rows are put back in line order: either way
a line gives the same rows (tests/test_reader_properties.py compares the two).
"""

from __future__ import annotations

import gc
import re
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import BinaryIO

import msgspec
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from analyzer.ingest import limits
from analyzer.ingest.accounting import EXCERPT_BYTES, FileLog
from analyzer.ingest.limits import nesting_reason, record_too_long
from analyzer.ingest.otlp_objects import add_request, json_slot
from analyzer.spans import (
    ATTR,
    ATTRS,
    EVENT,
    KINDS,
    LINK,
    SHARED_SCHEMA,
    STATUSES,
    SpanBatchBuilder,
    plain_resources,
)

try:
    from analyzer.ingest import _otlp_lines as _native
except ImportError:  # built without a C compiler: the robust path reads every line
    _native = None

__all__ = ["read_document", "read_lines"]

#: Bytes read at a time; a chunk is cut at its last newline (a longer line is read whole).
CHUNK_BYTES = 32 << 20

#: Lines parsed together at most: a chunk of tiny lines (or a decompressed run of newlines)
#: must not become tens of millions of Python objects at once.
GROUP_LINES = 1 << 16

_CONTENT = re.compile(rb"[^\n]")  # where a line that is not empty starts

#: The robust path's JSON parser. Its grammar is the reference the native reader keeps to
#: (numbers out of range refused, duplicate fields: the last wins), and its error messages
#: are the quarantine's reasons.
_PARSER = msgspec.json.Decoder()


# --- the native reader ------------------------------------------------------------------------

_KIND_TABLE = pa.array(KINDS, pa.string())
_STATUS_TABLE = pa.array(STATUSES, pa.string())


def _column(spec: tuple, typ: pa.DataType) -> pa.Array:
    """An Arrow array from the native (length, null count, validity, offsets, data)."""
    n, nulls, valid, offsets, data = spec
    buffers = [None if valid is None else pa.py_buffer(valid)]
    buffers += [pa.py_buffer(b) for b in (offsets, data) if b is not None]
    return pa.Array.from_buffers(typ, n, buffers, null_count=nulls)


def _lists(spec: tuple, values: pa.Array, typ: pa.DataType) -> pa.Array:
    """A list array: the native list offsets over `values`."""
    n, _, _, offsets, _ = spec
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offsets)], children=[values])


def _pool_lists(pool: dict[str, tuple], spec: tuple) -> pa.Array:
    """`ATTRS` lists over one native attribute pool; its pending JSON texts converted here."""
    json = _column(pool["json"], pa.string())
    if pool["pending_index"][0]:
        index = _column(pool["pending_index"], pa.int64())
        kinds = _column(pool["pending_kind"], pa.uint8()).to_pylist()
        texts = json.take(index).to_pylist()
        # the robust path's own conversion (arrays, key-value lists, bytes that are not plain)
        values = [
            json_slot(k, _PARSER.decode(t.encode()))[1] for k, t in zip(kinds, texts, strict=True)
        ]
        json = pl.from_arrow(json).scatter(index, values).to_arrow().cast(pa.string())
    values = pa.StructArray.from_arrays(
        [json if f.name == "json" else _column(pool[f.name], f.type) for f in ATTR],
        fields=list(ATTR),
    )
    return _lists(spec, values, ATTRS)


def _native_lines(
    lines: list[memoryview | bytes], numbers: list[int], todo: list[int], path: str
) -> tuple[pa.RecordBatch | None, list[int], int]:
    """The native reader over ``lines[i] for i in todo``: (rows, lines refused, spans read);
    the rows in `SHARED_SCHEMA` (each resource's attributes once)."""
    try:
        cols, refused, spans = _native.parse([lines[i] for i in todo], [numbers[i] for i in todo])
    except OverflowError:  # a column outgrew Arrow's 32-bit offsets: the robust path copes
        return None, list(todo), 0
    refused = [todo[k] for k in refused]
    n = cols["trace_id"][0]
    if n == 0:
        return None, refused, spans
    events = pa.StructArray.from_arrays(
        [
            _column(cols["event_time"], pa.int64()),
            _column(cols["event_name"], pa.string()),
            _pool_lists(cols["event_attrs"], cols["event_attributes"]),
        ],
        fields=list(EVENT),
    )
    links = pa.StructArray.from_arrays(
        [
            _column(cols["link_trace_id"], pa.string()),
            _column(cols["link_span_id"], pa.string()),
            _pool_lists(cols["link_attrs"], cols["link_attributes"]),
        ],
        fields=list(LINK),
    )
    columns = {  # the other columns come as the schema has them
        "kind": _KIND_TABLE.take(_column(cols["kind"], pa.uint8())),
        "status_code": _STATUS_TABLE.take(_column(cols["status_code"], pa.uint8())),
        "attributes": _pool_lists(cols["span_attrs"], cols["attributes"]),
        "resource_attributes": pa.DictionaryArray.from_arrays(
            _column(cols["resource_index"], pa.int32()),
            _pool_lists(cols["resource_attrs"], cols["resource_attributes"]),
        ),
        "events": _lists(cols["events"], events, pa.list_(EVENT)),
        "links": _lists(cols["links"], links, pa.list_(LINK)),
        "source_file": pa.repeat(pa.scalar(path, pa.string()), n),
    }
    batch = pa.RecordBatch.from_arrays(
        [
            columns[f.name] if f.name in columns else _column(cols[f.name], f.type)
            for f in SHARED_SCHEMA
        ],
        schema=SHARED_SCHEMA,
    )
    return batch, refused, spans


# --- lines ------------------------------------------------------------------------------------


def _robust_line(
    line: bytes | memoryview, line_no: int, builder: SpanBatchBuilder, log: FileLog
) -> None:
    """One line through the robust path (the caller has counted the record)."""
    if len(line) > limits.MAX_RECORD_BYTES:
        obj, reason = None, record_too_long(len(line))
    else:
        obj, reason = _decode(line)
    if reason is not None:
        log.quarantine_record(f"line {line_no}", reason, bytes(line[:EXCERPT_BYTES]))
        return
    add_request(obj, builder, log, source_pos=line_no, position=f"line {line_no}")


def _decode(raw: bytes | memoryview) -> tuple[object, str | None]:
    """`raw` parsed by the robust path's parser, and None; or None and why it cannot be."""
    try:
        return _PARSER.decode(raw), None
    except msgspec.DecodeError as exc:
        return None, f"invalid JSON: {exc}"
    except RecursionError:
        return None, nesting_reason(text=raw)


def _blank(line: bytes | memoryview) -> bool:
    return not line or (line[0] in b" \t\r\n\f\v" and not bytes(line).strip())


def _process_lines(
    lines: list[memoryview | bytes], numbers: list[int], log: FileLog
) -> Iterator[pa.RecordBatch]:
    """Rows of `lines` (without their newlines), whose line numbers are `numbers`; in
    `SHARED_SCHEMA` or `SPAN_SCHEMA` (`read_lines` gives the latter)."""
    enabled = gc.isenabled()
    gc.disable()  # millions of young containers: collections would cost more than the work
    try:
        todo: list[int] = []
        robust: list[int] = []
        max_record = limits.MAX_RECORD_BYTES
        native = _native is not None
        for i, line in enumerate(lines):
            if _blank(line):
                continue
            log.records += 1
            # the robust path quarantines a line over the size limit unread
            if native and len(line) <= max_record:
                todo.append(i)
            else:
                robust.append(i)
        batch = None
        if todo:
            batch, refused, spans = _native_lines(lines, numbers, todo, log.path)
            robust.extend(refused)
            log.spans_read += spans
        robust.sort()
        extra = None
        if robust:
            builder = SpanBatchBuilder()
            for i in robust:
                _robust_line(lines[i], numbers[i], builder, log)
            extra = builder.flush()
    finally:
        if enabled:
            gc.enable()
    if batch is None or extra is None:
        yield from (b for b in (batch, extra) if b is not None)
        return
    table = pa.Table.from_batches([plain_resources(batch), extra])
    order = pc.sort_indices(table, [("source_pos", "ascending")])  # stable: keeps span order
    yield from table.take(order).combine_chunks().to_batches()


def _line_groups(
    buf: bytes,
    view: memoryview,
    pos: int,
    end: int,
    cursor: list[int],
    last: bytes | None = None,
) -> Iterator[tuple[list[int], list[memoryview | bytes]]]:
    """The non-empty lines of ``buf[pos:end]`` (views), then `last`, with their line numbers.

    In groups of `GROUP_LINES` at most. ``cursor[0]`` is the number of the line at `pos`; it is
    left at the number of the line after. Empty lines are counted, never made into objects.
    """
    numbers: list[int] = []
    lines: list[memoryview | bytes] = []
    line_no = cursor[0]
    find = buf.find
    search = _CONTENT.search
    while pos < end:
        found = search(buf, pos, end)
        if found is None:  # only newlines left: each ends an empty line
            line_no += end - pos
            break
        start = found.start()
        line_no += start - pos
        nl = find(b"\n", start, end)
        stop = end if nl < 0 else nl
        numbers.append(line_no)
        lines.append(view[start:stop])
        line_no += 1
        pos = stop + 1
        if len(lines) >= GROUP_LINES:
            yield numbers, lines
            numbers, lines = [], []
    if last is not None:
        numbers.append(line_no)
        lines.append(last)
        line_no += 1
    cursor[0] = line_no
    if lines:
        yield numbers, lines


def _line_blocks(
    stream: BinaryIO, size: int, limit: int | None, cursor: list[int]
) -> Iterator[tuple[list[int], list[memoryview | bytes]]]:
    """Groups of whole lines (views into blocks of about `size` bytes) and their numbers.

    Reads `limit` bytes at most; a line that runs past a block is completed with readline.
    """
    remaining = limit
    first = True
    while remaining is None or remaining > 0:
        block = stream.read(size if remaining is None else min(size, remaining))
        if not block:
            return
        if remaining is not None:
            remaining -= len(block)
        tail = b""
        if not block.endswith(b"\n") and (remaining is None or remaining > 0):
            tail = stream.readline(-1 if remaining is None else remaining)
            if remaining is not None:
                remaining -= len(tail)
        if first and block.startswith(b"\xef\xbb\xbf"):
            block = block[3:]  # a UTF-8 byte order mark
        first = False
        end = len(block)
        last = None
        if tail:  # the last line, completed by readline: the one line copied
            end = block.rfind(b"\n") + 1
            last = block[end:] + tail
            last = last[:-1] if last.endswith(b"\n") else last
        yield from _line_groups(block, memoryview(block), 0, end, cursor, last)


def _read_lines(
    stream: BinaryIO, log: FileLog, cursor: list[int], limit: int | None, jobs: int = 1
) -> Iterator[pa.RecordBatch]:
    """Rows of the lines from the stream's position on (at most `limit` bytes), the first
    numbered ``cursor[0]``; in `SHARED_SCHEMA` or `SPAN_SCHEMA`, batch by batch. Once read,
    ``cursor[0]`` is the number of the line after the last (each newline read counts one)."""
    yield from _processed(_line_blocks(stream, CHUNK_BYTES, limit, cursor), log, jobs)


def _processed(
    groups: Iterator[tuple[list[int], list[memoryview | bytes]]], log: FileLog, jobs: int
) -> Iterator[pa.RecordBatch]:
    """`_process_lines` of each group of lines, in order, on `jobs` threads.

    The native parser lets go of the GIL, so threads read groups side by side. Each group
    counts into a log of its own, added to `log` in reading order: the same counts and
    quarantine as one thread. At most `jobs` + 1 groups are in flight.
    """
    if jobs <= 1:
        for numbers, lines in groups:
            yield from _process_lines(lines, numbers, log)
        return

    def run(numbers, lines, part):
        return list(_process_lines(lines, numbers, part))

    with ThreadPoolExecutor(jobs, thread_name_prefix="agenttrace-lines") as pool:
        pending: deque[tuple[FileLog, Future[list[pa.RecordBatch]]]] = deque()
        try:
            for numbers, lines in groups:
                part = FileLog(log.path)
                pending.append((part, pool.submit(run, numbers, lines, part)))
                del lines
                while len(pending) > jobs:
                    yield from _done(pending.popleft(), log)
        except Exception:  # the stream broke: first the rows of the lines read before it
            while pending:
                yield from _done(pending.popleft(), log)
            raise
        while pending:
            yield from _done(pending.popleft(), log)


def _done(item: tuple[FileLog, Future[list[pa.RecordBatch]]], log: FileLog) -> list[pa.RecordBatch]:
    """The batches of a finished group; its counts, quarantine and warnings added to `log`."""
    part, future = item
    batches = future.result()
    log.records += part.records
    log.spans_read += part.spans_read
    log.records_quarantined += part.records_quarantined
    log.spans_quarantined += part.spans_quarantined
    log.quarantine.extend(part.quarantine)
    log.warnings.extend(part.warnings)
    return batches


def read_lines(
    stream: BinaryIO, log: FileLog, *, jobs: int = 1, first_line: int = 1
) -> Iterator[pa.RecordBatch]:
    """Spans of an OTLP JSON lines stream (the collector ``file`` exporter): one request a line.

    ``source_pos`` is the 1-based line number (the stream's first line is `first_line`: blank
    lines already read off it are counted). Blank lines are skipped and not counted; a line
    that is not JSON is quarantined as a record; a span that cannot be read is quarantined alone.
    Groups of lines are read on `jobs` threads; rows, counts and quarantine are the same for
    any value.
    """
    for batch in _read_lines(stream, log, [first_line], None, jobs):
        yield plain_resources(batch)


# --- documents --------------------------------------------------------------------------------


def read_document(data: bytes, log: FileLog) -> Iterator[pa.RecordBatch]:
    """Spans of one OTLP JSON document: a request with top-level ``resourceSpans``.

    The document counts as one record; its spans are positioned "document span 3" in the
    quarantine. (Lists of requests and other envelopes are read by `analyzer.ingest.documents`.)
    """
    log.records += 1
    raw = bytes(data).removeprefix(b"\xef\xbb\xbf")
    obj, reason = _decode(raw)
    if reason is not None:
        log.quarantine_record("document", reason, raw)
        return
    builder = SpanBatchBuilder()
    add_request(obj, builder, log, source_pos=0, position="document")
    batch = builder.flush()
    if batch is not None:
        yield batch
