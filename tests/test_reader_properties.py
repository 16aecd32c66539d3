"""Property tests: every reader, fed valid or mutated traces, never crashes, never hangs, and
accounts for every span (read = kept + duplicate + quarantined, each rejection with a place).

Valid inputs are built by hypothesis strategies (OTLP requests with every attribute type, ids in
hex or base64, int64 as strings or numbers, enums as numbers or names; Python SDK console spans)
and written as OTLP JSON lines, one OTLP JSON document, a JSON list of requests, collector
protobuf frames, SDK console JSON, and each of those under gzip or zstd. Valid files must be read
exactly (every span, field and attribute as generated). Mutated files (keys dropped, values of
the wrong type, truncation, flipped bytes, NUL, invalid UTF-8, stray newlines, corrupt
compression) must be read without an exception, with the accounting balanced and every
quarantine entry naming its file, its place and a reason.

Settings are derandomized and bounded so CI runs the same examples in well under a minute.
"""

from __future__ import annotations

import base64
import calendar
import contextlib
import copy
import gzip
import io
import json
import math
import re
import signal
import struct
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import zstandard
from factories import robust_lines
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from analyzer.errors import TraceFormatError
from analyzer.ingest import otlp_json, read_traces
from analyzer.ingest.accounting import FileLog, IngestLog
from analyzer.ingest.documents import read_json_document
from analyzer.ingest.otlp_json import read_lines
from analyzer.ingest.otlp_proto import read_frames
from analyzer.spans import KINDS, SPAN_SCHEMA, STATUSES

INT64_MAX = 2**63 - 1
#: Seconds one example may take before it counts as a hang.
HANG_SECONDS = 10


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        print_blob=False,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.function_scoped_fixture,
        ],
    )


class Hang(BaseException):
    """A reader ran past `HANG_SECONDS` (BaseException: no reader may swallow it)."""


@contextlib.contextmanager
def no_hang(seconds: float = HANG_SECONDS) -> Iterator[None]:
    def fire(signum, frame):
        raise Hang(f"reader still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# --- strategies: OTLP requests with the rows they must give ------------------------------------

# Each attribute strategy draws (the OTLP JSON AnyValue, the (slot, value) it must be stored as);
# `json` slots are compared after json.loads, NaN stands as the string "<nan>".
NAN = "<nan>"


def _spell_int(value: int) -> st.SearchStrategy[int | str]:
    return st.sampled_from([value, str(value)])


_INT64 = st.integers(-(2**63), INT64_MAX)
_FINITE = st.floats(allow_nan=False, allow_infinity=False)
_SPECIAL_DOUBLES = {"NaN": NAN, "Infinity": math.inf, "-Infinity": -math.inf}


@st.composite
def scalar_value(draw) -> tuple[dict, tuple[str, Any], Any]:
    """(AnyValue, stored (slot, value), plain JSON value inside an array)."""
    which = draw(st.sampled_from(["string", "bool", "int", "double", "special", "bytes"]))
    if which == "string":
        s = draw(st.text(max_size=12))
        return {"stringValue": s}, ("str", s), s
    if which == "bool":
        b = draw(st.booleans())
        return {"boolValue": b}, ("bool", b), b
    if which == "int":
        i = draw(_INT64)
        return {"intValue": draw(_spell_int(i))}, ("int", i), i
    if which == "double":
        f = draw(_FINITE | st.integers(-(10**6), 10**6))
        return {"doubleValue": f}, ("float", float(f)), float(f)
    if which == "special":
        name = draw(st.sampled_from(sorted(_SPECIAL_DOUBLES)))
        return {"doubleValue": name}, ("float", _SPECIAL_DOUBLES[name]), None  # JSON null
    raw = draw(st.binary(max_size=12))
    b64 = base64.b64encode(raw).decode()
    return {"bytesValue": b64}, ("json", b64), b64


def _nested(inner: st.SearchStrategy) -> st.SearchStrategy:
    def array(items):
        return {"arrayValue": {"values": [i[0] for i in items]}}, None, [i[2] for i in items]

    def kvlist(pairs):
        plain = {}
        for key, item in pairs:
            plain[key] = item[2]  # a repeated key: the last one wins
        values = [{"key": key, "value": item[0]} for key, item in pairs]
        return {"kvlistValue": {"values": values}}, None, plain

    return st.one_of(
        st.lists(inner, max_size=3).map(array),
        st.lists(st.tuples(st.text(max_size=6), inner), max_size=3).map(kvlist),
    )


def _with_slot(item):
    value, stored, plain = item
    return value, stored if stored is not None else ("json", plain), plain


any_value = st.recursive(scalar_value(), _nested, max_leaves=5).map(_with_slot)


@st.composite
def attributes(draw, max_size: int = 4) -> tuple[list[dict], list[tuple[str, str, Any]]]:
    items = draw(st.lists(st.tuples(st.text(max_size=10), any_value), max_size=max_size))
    otlp = [{"key": k, "value": v[0]} for k, v in items]
    return otlp, [(k, *v[1]) for k, v in items]


def _id_bytes(nbytes: int) -> st.SearchStrategy[bytes]:
    return st.integers(1, 2 ** (8 * nbytes) - 1).map(lambda i: i.to_bytes(nbytes, "big"))


@st.composite
def spelled_id(draw, raw: bytes) -> str:
    spelling = draw(st.sampled_from(["hex", "HEX", "base64"]))
    if spelling == "base64":
        return base64.b64encode(raw).decode()
    return raw.hex() if spelling == "hex" else raw.hex().upper()


@st.composite
def otlp_span(draw, traces: list[bytes], spans: list[bytes]) -> tuple[dict, dict]:
    """(OTLP JSON span, the span-table row it must give, less scope/resource/source)."""
    trace = draw(st.sampled_from(traces))
    span_id = draw(st.sampled_from(spans))
    parent = draw(st.none() | st.sampled_from(spans))
    start, end = draw(st.integers(0, INT64_MAX)), draw(st.integers(0, INT64_MAX))
    kind, status = draw(st.integers(0, 5)), draw(st.integers(0, 2))
    name, message = draw(st.text(max_size=10)), draw(st.text(max_size=6))
    attrs, expected_attrs = draw(attributes())
    event_times = draw(st.lists(st.integers(0, INT64_MAX), max_size=2))
    span: dict[str, Any] = {
        "traceId": draw(spelled_id(trace)),
        "spanId": draw(spelled_id(span_id)),
        "name": name,
        "kind": draw(st.sampled_from([kind, f"SPAN_KIND_{KINDS[kind].upper()}"])),
        "startTimeUnixNano": draw(_spell_int(start)),
        "endTimeUnixNano": draw(_spell_int(end)),
        "attributes": attrs,
        "events": [
            {"timeUnixNano": draw(_spell_int(t)), "name": f"e{i}"}
            for i, t in enumerate(event_times)
        ],
        "status": {
            "code": draw(st.sampled_from([status, f"STATUS_CODE_{STATUSES[status].upper()}"])),
            "message": message,
        },
    }
    if parent is not None:
        span["parentSpanId"] = draw(spelled_id(parent))
    elif draw(st.booleans()):
        span["parentSpanId"] = ""
    row = {
        "trace_id": trace.hex(),
        "span_id": span_id.hex(),
        "parent_span_id": parent.hex() if parent is not None else None,
        "name": name,
        "kind": KINDS[kind],
        "start_ns": start,
        "end_ns": end,
        "status_code": STATUSES[status],
        "status_message": message or None,
        "attributes": expected_attrs,
        "events": [(t, f"e{i}") for i, t in enumerate(event_times)],
    }
    return span, row


@st.composite
def otlp_requests(draw, max_requests: int = 4) -> tuple[list[dict], list[list[dict]]]:
    """OTLP requests and, per request, the rows of its spans in order.

    Ids come from small pools, so the same span is often exported twice (a duplicate).
    """
    traces = draw(st.lists(_id_bytes(16), min_size=1, max_size=2, unique=True))
    spans = draw(st.lists(_id_bytes(8), min_size=1, max_size=6, unique=True))
    requests, rows = [], []
    for _ in range(draw(st.integers(1, max_requests))):
        resource_spans, request_rows = [], []
        for _ in range(draw(st.integers(1, 2))):
            res_otlp, res_expected = draw(attributes(max_size=2))
            scope_spans = []
            for _ in range(draw(st.integers(1, 2))):
                scope = {"name": draw(st.text(max_size=5)), "version": draw(st.text(max_size=3))}
                drawn = draw(st.lists(otlp_span(traces, spans), max_size=3))
                scope_spans.append({"scope": scope, "spans": [s for s, _ in drawn]})
                for _, row in drawn:
                    row["scope_name"] = scope["name"] or None
                    row["scope_version"] = scope["version"] or None
                    row["resource_attributes"] = res_expected
                    request_rows.append(row)
            resource_spans.append({"resource": {"attributes": res_otlp}, "scopeSpans": scope_spans})
        requests.append({"resourceSpans": resource_spans})
        rows.append(request_rows)
    return requests, rows


# --- comparing what was read with what was generated ------------------------------------------


def _stored(attr: dict) -> tuple[str, str, Any]:
    slots = [s for s in ("str", "int", "float", "bool", "json") if attr[s] is not None]
    assert len(slots) == 1, f"attribute {attr['key']!r} sets {slots}"
    value = attr[slots[0]]
    if slots[0] == "json":
        value = json.loads(value)
    elif slots[0] == "float" and math.isnan(value):
        value = NAN
    return attr["key"], slots[0], value


def _actual(row: dict) -> dict:
    return {
        "trace_id": row["trace_id"],
        "span_id": row["span_id"],
        "parent_span_id": row["parent_span_id"],
        "name": row["name"],
        "kind": row["kind"],
        "start_ns": row["start_ns"],
        "end_ns": row["end_ns"],
        "status_code": row["status_code"],
        "status_message": row["status_message"],
        "attributes": [_stored(a) for a in row["attributes"]],
        "events": [(e["time_ns"], e["name"]) for e in row["events"]],
        "scope_name": row["scope_name"],
        "scope_version": row["scope_version"],
        "resource_attributes": [_stored(a) for a in row["resource_attributes"]],
    }


def _first_copies(rows: list[tuple[int, dict]]) -> dict[tuple[str, str], tuple[int, dict]]:
    """The copy of each span kept by de-duplication: the first in file order."""
    kept: dict[tuple[str, str], tuple[int, dict]] = {}
    for pos, row in rows:
        kept.setdefault((row["trace_id"], row["span_id"]), (pos, row))
    return kept


def assert_read_exactly(log: IngestLog, table: pa.Table, rows: list[tuple[int, dict]]) -> None:
    """The batch holds exactly the first copy of every generated span, nothing quarantined."""
    kept = _first_copies(rows)
    assert log.spans_read == len(rows)
    assert (log.spans_kept, log.duplicates) == (len(kept), len(rows) - len(kept))
    assert log.spans_quarantined == 0 and log.records_quarantined == 0, log.quarantine[:3]
    got = {(r["trace_id"], r["span_id"]): r for r in table.to_pylist()}
    assert sorted(got) == sorted(kept)
    for key, (pos, expected) in kept.items():
        assert got[key]["source_pos"] == pos
        assert _actual(got[key]) == expected, key


#: Every place a reader or the batch reader may give to a quarantine entry.
POSITION = re.compile(
    r"(file|end of readable data"
    r"|(document|line \d+|byte \d+|span \d+|request \d+|trace \d+|trace_requests\[\d+\])"
    r"(,? (request \d+|trace_requests\[\d+\]))?( span \d+)?)"
)


def assert_accounted(log: FileLog, rows: int, position: re.Pattern[str] = POSITION) -> None:
    """One file's accounting balances and every quarantine entry is complete."""
    assert log.spans_read == rows + log.spans_quarantined, (log.spans_read, rows, log.quarantine)
    assert log.spans_quarantined == sum(q.spans for q in log.quarantine)
    assert len(log.quarantine) >= log.records_quarantined
    for entry in log.quarantine:
        assert entry.file == log.path
        assert position.fullmatch(entry.position), entry.position
        assert entry.reason.strip(), entry


def assert_batch_accounted(ingested, paths: list[Path]) -> None:
    log = ingested.log
    assert log.balanced()
    assert [f.path for f in log.files] == [str(p) for p in paths]
    kept = ingested.spans.column("source_file").to_pylist()
    for file_log in log.files:
        assert file_log.spans_kept == kept.count(file_log.path)
        assert file_log.spans_read == (
            file_log.spans_kept + file_log.duplicates + file_log.spans_quarantined
        )
        assert_accounted(file_log, file_log.spans_kept + file_log.duplicates)


def read_batch(paths: list[Path]):
    with no_hang():
        return read_traces(paths)


def read_with(reader: Callable[..., Iterator[pa.RecordBatch]], *args) -> pa.Table:
    with no_hang():
        return pa.Table.from_batches(list(reader(*args)), schema=SPAN_SCHEMA)


# --- mutations ----------------------------------------------------------------------------------

#: Values of the wrong type (or out of range) put in place of a field.
WRONG = [
    None,
    True,
    0,
    -1,
    2**64,
    2**70,
    1.5,
    math.nan,
    "",
    "x",
    "0x",
    "NaN",
    "-9223372036854775809",
    "18446744073709551616",
    "AAAAAAAAAAA=",
    [],
    [1, "a"],
    {},
    {"stringValue": 1},
    {"intValue": "abc"},
]
#: The values that broke readers before: drawn as often as all the others together.
HARD = [
    [2**70],  # beyond 64 bits inside a container: orjson cannot write it back
    {"arrayValue": {"values": [{"intValue": 2**70}]}},
    json.loads("[" * 300 + "]" * 300),  # deeper than orjson writes (254 levels)
]
# copied: a later mutation of the same tree must not change the shared value
wrong_values = (st.sampled_from(WRONG) | st.sampled_from(HARD)).map(copy.deepcopy)
#: Byte strings inserted at random places.
INSERTS = [
    b"\x00",
    b"\x00" * 5,
    b"\xff",
    b"\xc3\x28",
    b"\xed\xa0\x80",  # an encoded UTF-16 surrogate
    b"\xf4\x90\x80\x80",  # beyond U+10FFFF
    b"\n",
    b"\r\n",
    b"\xef\xbb\xbf",
    b"{",
    b"}",
    b"]",
    b'"',
    b"\\",
    b"\\u",
    b"\\ud800",
    b",",
    b"1e999",
]


def _paths(value: Any) -> list[tuple]:
    """The paths of every node of a JSON tree, parents first (not below 20 levels)."""
    out, todo = [], [((), value)]
    while todo:
        path, node = todo.pop()
        out.append(path)
        if len(path) < 20 and isinstance(node, dict | list):
            items = node.items() if isinstance(node, dict) else enumerate(node)
            todo.extend(((*path, k), v) for k, v in reversed(list(items)))
    return out


@st.composite
def mutate_tree(draw, value: Any) -> Any:
    """`value` (a JSON tree) with a few fields dropped, given a value of the wrong type, or added
    to an object (an attribute mapping gets an attribute of an unexpected type)."""
    value = json.loads(json.dumps(value))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(value) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = value
        for step in path[:-1]:
            parent = parent[step]
        node = parent[path[-1]]
        action = draw(st.sampled_from(["drop", "wrong", "add"]))
        if action == "add" and isinstance(node, dict):
            node["added"] = draw(wrong_values)
        elif action == "drop" and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(wrong_values)
    return value


@st.composite
def mutate_bytes(draw, data: bytes, max_ops: int = 3) -> bytes:
    """`data` truncated, with bytes flipped, deleted or inserted (NUL, invalid UTF-8...)."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, max_ops))):
        op = draw(st.sampled_from(["truncate", "flip", "insert", "insert", "delete"]))
        at = draw(st.integers(0, len(out)))
        if op == "truncate":
            del out[at:]
        elif op == "insert":
            out[at:at] = draw(st.sampled_from(INSERTS))
        elif out and at < len(out):
            if op == "flip":
                out[at] ^= draw(st.integers(1, 255))
            else:
                del out[at]
    return bytes(out)


@contextlib.contextmanager
def _fast_path(native: bool) -> Iterator[None]:
    """The lines reader with its native reader in front of the robust path (where built), or
    the robust path alone, for the duration."""
    saved = otlp_json._native
    if not native:
        otlp_json._native = None
    try:
        yield
    finally:
        otlp_json._native = saved


def _dumps(value: Any, style: int) -> str:
    """JSON text as different exporters write it: compact, spaced, or with non-ASCII escaped."""
    if style == 0:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if style == 1:
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value)


# --- OTLP JSON lines ----------------------------------------------------------------------------


@_settings(80)
@given(generated=otlp_requests(), style=st.integers(0, 2), crlf=st.booleans(), native=st.booleans())
def test_valid_otlp_json_lines_are_read_exactly(tmp_path, generated, style, crlf, native):
    requests, rows = generated
    end = "\r\n" if crlf else "\n"
    path = tmp_path / "lines.jsonl"
    path.write_text("".join(_dumps(r, style) + end for r in requests), encoding="utf-8")
    with _fast_path(native):
        ingested = read_batch([path])
    assert ingested.log.files[0].format == "jsonl"
    assert ingested.log.records == len(requests)
    numbered = [(i + 1, row) for i, request_rows in enumerate(rows) for row in request_rows]
    assert_read_exactly(ingested.log, ingested.spans, numbered)


def _jsonl_lines(data: bytes) -> list[bytes]:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return data.split(b"\n")


@st.composite
def mutated_json_lines(draw) -> bytes:
    """OTLP JSON lines in one of the exporters' styles, some requests with fields dropped or of
    the wrong type, the bytes sometimes damaged."""
    requests, _ = draw(otlp_requests(max_requests=3))
    style = draw(st.integers(0, 2))
    requests = [draw(mutate_tree(r)) if draw(st.booleans()) else r for r in requests]
    text = "".join(_dumps(r, style) + "\n" for r in requests).encode()
    return draw(mutate_bytes(text)) if draw(st.booleans()) else text


@_settings(150)
@given(text=mutated_json_lines(), native=st.booleans())
def test_mutated_otlp_json_lines_are_accounted_line_by_line(tmp_path, text, native):
    log = FileLog("mutated.jsonl")
    with _fast_path(native):
        table = read_with(read_lines, io.BufferedReader(io.BytesIO(text)), log)
    lines = _jsonl_lines(text)
    filled = {i + 1 for i, line in enumerate(lines) if line.strip()}
    assert log.records == len(filled)
    assert_accounted(log, table.num_rows, re.compile(r"line (\d+)( span \d+)?"))
    quarantined_lines = [int(q.position.split()[1]) for q in log.quarantine if q.spans == 0]
    assert len(quarantined_lines) == len(set(quarantined_lines)) == log.records_quarantined
    assert {int(q.position.split()[1]) for q in log.quarantine} <= filled
    kept_lines = set(table.column("source_pos").to_pylist())
    assert kept_lines <= filled - set(quarantined_lines)
    # The same bytes as a file in a batch: whatever the sniffer makes of them, nothing is lost.
    path = tmp_path / "mutated.jsonl"
    path.write_bytes(text)
    assert_batch_accounted(read_batch([path]), [path])


@_settings(200)
@given(text=mutated_json_lines(), native=st.booleans())
def test_the_lines_reader_reads_mutated_lines_as_the_robust_path_does(text, native):
    # whatever the native reader accepts it must read as the reference does: row for row, and
    # the same counts and quarantine (it refuses, whole, any line it is unsure of)
    fast_log, robust_log = FileLog("m.jsonl"), FileLog("m.jsonl")
    with _fast_path(native):
        fast = read_with(read_lines, io.BufferedReader(io.BytesIO(text)), fast_log)
    robust = read_with(robust_lines, io.BytesIO(text), robust_log)
    assert json.dumps(fast.to_pylist(), default=str) == json.dumps(robust.to_pylist(), default=str)
    assert fast_log == robust_log


# --- one OTLP JSON document, a JSON list of requests ---------------------------------------------


@_settings(40)
@given(generated=otlp_requests(max_requests=1), style=st.integers(0, 2))
def test_valid_otlp_json_document_is_read_exactly(tmp_path, generated, style):
    [request], [rows] = generated
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request, indent=2, ensure_ascii=style != 2), encoding="utf-8")
    ingested = read_batch([path])
    assert ingested.log.files[0].format == "otlp-json"
    assert ingested.log.records == 1
    assert_read_exactly(ingested.log, ingested.spans, [(0, row) for row in rows])


@_settings(40)
@given(generated=otlp_requests(max_requests=3))
def test_valid_list_of_otlp_requests_is_read_exactly(tmp_path, generated):
    requests, rows = generated
    path = tmp_path / "requests.json"
    path.write_text(json.dumps(requests), encoding="utf-8")
    ingested = read_batch([path])
    assert ingested.log.files[0].format == "json"
    assert ingested.log.records == len(requests)
    assert_read_exactly(ingested.log, ingested.spans, [(0, r) for rs in rows for r in rs])


@_settings(100)
@given(data=st.data(), generated=otlp_requests(max_requests=3), as_list=st.booleans())
def test_mutated_otlp_json_documents_are_accounted(tmp_path, data, generated, as_list):
    requests, _ = generated
    value: Any = requests if as_list else requests[0]
    if data.draw(st.booleans()):
        value = data.draw(mutate_tree(value))
    text = json.dumps(value, indent=data.draw(st.sampled_from([None, 2]))).encode()
    if data.draw(st.booleans()):
        text = data.draw(mutate_bytes(text))
    log = FileLog("doc.json")
    try:
        table = read_with(read_json_document, text, log)
    except TraceFormatError:
        table = SPAN_SCHEMA.empty_table()
        assert log.spans_read == 0  # refused whole before any span was read
    assert_accounted(log, table.num_rows)
    path = tmp_path / "doc.json"
    path.write_bytes(text)
    assert_batch_accounted(read_batch([path]), [path])


# --- protobuf frames ------------------------------------------------------------------------------


def _proto_ids(value: Any) -> Any:
    """The OTLP JSON tree with its ids in base64, as the protobuf JSON mapping wants them."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str) and v:
                # hex ids are 16 or 32 characters, base64 ones 12 or 24
                raw = bytes.fromhex(v) if len(v) in (16, 32) else base64.b64decode(v)
                v = base64.b64encode(raw).decode()
            out[k] = _proto_ids(v)
        return out
    if isinstance(value, list):
        return [_proto_ids(v) for v in value]
    return value


def _encode(request: dict) -> bytes:
    message = json_format.ParseDict(_proto_ids(request), ExportTraceServiceRequest())
    return message.SerializeToString()


def _frames(payloads: list[bytes], compress: list[bool]) -> tuple[bytes, list[int]]:
    out, offsets = bytearray(), []
    for payload, zstd in zip(payloads, compress, strict=True):
        if zstd:  # the collector's `compression: zstd` compresses each frame on its own
            payload = zstandard.ZstdCompressor().compress(payload)
        offsets.append(len(out))
        out += struct.pack(">I", len(payload)) + payload
    return bytes(out), offsets


@_settings(60)
@given(generated=otlp_requests(), data=st.data())
def test_valid_protobuf_frames_are_read_exactly(tmp_path, generated, data):
    requests, rows = generated
    payloads = [_encode(r) for r in requests]
    compress = [data.draw(st.booleans()) for _ in payloads]
    frames, offsets = _frames(payloads, compress)
    path = tmp_path / "traces.binpb"
    path.write_bytes(frames)
    ingested = read_batch([path])
    assert ingested.log.files[0].format == "proto"
    assert ingested.log.records == len(requests)
    numbered = [(offsets[i], row) for i, request_rows in enumerate(rows) for row in request_rows]
    assert_read_exactly(ingested.log, ingested.spans, numbered)


@_settings(120)
@given(generated=otlp_requests(max_requests=3), data=st.data())
def test_mutated_protobuf_frames_are_accounted(tmp_path, generated, data):
    requests, _ = generated
    if data.draw(st.booleans()):
        # a field of the wrong type is refused by the encoder; dropping fields is not
        requests = [_drop_keys(r, data) for r in requests]
    payloads = [_encode(r) for r in requests]
    frames, _ = _frames(payloads, [data.draw(st.booleans()) for _ in payloads])
    frames = data.draw(mutate_bytes(frames))
    log = FileLog("frames.binpb")
    table = read_with(read_frames, io.BytesIO(frames), log)
    assert_accounted(log, table.num_rows, re.compile(r"byte \d+( span \d+)?"))
    assert log.records >= log.records_quarantined
    path = tmp_path / "frames.binpb"
    path.write_bytes(frames)
    assert_batch_accounted(read_batch([path]), [path])


def _drop_keys(request: dict, data: st.DataObject) -> dict:
    value = json.loads(json.dumps(request))
    paths = [p for p in _paths(value) if p and isinstance(p[-1], str)]
    for path in data.draw(st.lists(st.sampled_from(paths), max_size=3)) if paths else []:
        parent = value
        try:
            for step in path[:-1]:
                parent = parent[step]
            del parent[path[-1]]
        except (KeyError, IndexError, TypeError):
            pass  # already gone with an ancestor
    return value


@_settings(60)
@given(data=st.binary(min_size=1, max_size=300))
def test_arbitrary_bytes_as_protobuf_are_accounted(data):
    log = FileLog("noise.binpb")
    table = read_with(read_frames, io.BytesIO(data), log)
    assert_accounted(log, table.num_rows, re.compile(r"byte \d+( span \d+)?"))


# --- Python SDK console JSON ----------------------------------------------------------------------

_SDK_VALUES = st.one_of(
    st.text(max_size=10),
    st.booleans(),
    _INT64,
    _FINITE,
    st.lists(st.integers(-1000, 1000), max_size=3).map(tuple),
    st.lists(st.text(max_size=4), max_size=3).map(tuple),
)


@st.composite
def sdk_spans(draw) -> list[tuple[str, dict]]:
    """Spans as the Python SDK's ConsoleSpanExporter prints them, with the rows they must give."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode

    traces = draw(st.lists(st.integers(1, 2**128 - 1), min_size=1, max_size=2, unique=True))
    ids = draw(st.lists(st.integers(1, 2**64 - 1), min_size=1, max_size=5, unique=True))
    out = []
    for _ in range(draw(st.integers(1, 4))):
        trace, span_id = draw(st.sampled_from(traces)), draw(st.sampled_from(ids))
        parent = draw(st.none() | st.sampled_from(ids))
        kind = draw(st.sampled_from(list(SpanKind)))
        code = draw(st.sampled_from(list(StatusCode)))
        attrs = draw(st.dictionaries(st.text(min_size=1, max_size=8), _SDK_VALUES, max_size=4))
        span = ReadableSpan(
            name=draw(st.text(max_size=10)),
            context=SpanContext(trace, span_id, is_remote=False),
            parent=SpanContext(trace, parent, is_remote=False) if parent else None,
            resource=Resource({"service.name": draw(st.text(min_size=1, max_size=5))}),
            attributes=attrs,
            events=[Event("evt", {"n": 1}, timestamp=draw(st.integers(1, 2**62)))],
            kind=kind,
            status=Status(code, "why" if code is StatusCode.ERROR else None),
            start_time=draw(st.integers(1, 2**62)),
            end_time=draw(st.integers(1, 2**62)),
        )
        text = span.to_json(indent=draw(st.sampled_from([4, None])))
        printed = json.loads(text)
        row = {
            "trace_id": f"{trace:032x}",
            "span_id": f"{span_id:016x}",
            "parent_span_id": f"{parent:016x}" if parent else None,
            "name": printed["name"],
            "kind": kind.name.lower(),
            "start_ns": _iso_ns(printed["start_time"]),
            "end_ns": _iso_ns(printed["end_time"]),
            "status_code": code.name.lower(),
            "status_message": "why" if code is StatusCode.ERROR else None,
            "attributes": sorted(_sdk_attr(k, v) for k, v in attrs.items()),
            "events": [(_iso_ns(printed["events"][0]["timestamp"]), "evt")],
            "scope_name": None,
            "scope_version": None,
            "resource_attributes": sorted(
                _sdk_attr(k, v) for k, v in printed["resource"]["attributes"].items()
            ),
        }
        out.append((text, row))
    return out


def _iso_ns(text: str) -> int:
    """Nanoseconds of the SDK's ``%Y-%m-%dT%H:%M:%S.%fZ`` (independent of the reader's parser)."""
    moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")
    seconds = calendar.timegm(moment.timetuple())
    return seconds * 1_000_000_000 + moment.microsecond * 1000


def _sdk_attr(key: str, value: Any) -> tuple[str, str, Any]:
    if isinstance(value, bool):
        return key, "bool", value
    if isinstance(value, int):
        return key, "int", value
    if isinstance(value, float):
        return key, "float", value
    if isinstance(value, str):
        return key, "str", value
    return key, "json", list(value)


def _console_text(spans: list[tuple[str, dict]]) -> bytes:
    # ConsoleSpanExporter writes each span's to_json() followed by a newline
    return "".join(text + "\n" for text, _ in spans).encode()


@_settings(50)
@given(spans=sdk_spans())
def test_valid_sdk_console_json_is_read_exactly(tmp_path, spans):
    path = tmp_path / "console.json"
    data = _console_text(spans)
    path.write_bytes(data)
    ingested = read_batch([path])
    assert ingested.log.files[0].format == "json"
    assert ingested.log.records == len(spans)
    positions, line = [], 1  # each span object is positioned by the line it starts on
    for text, _ in spans:
        positions.append(line)
        line += text.count("\n") + 1
    numbered = [(pos, row) for pos, (_, row) in zip(positions, spans, strict=True)]
    assert_read_exactly(ingested.log, ingested.spans, numbered)


@_settings(100)
@given(data=st.data(), spans=sdk_spans())
def test_mutated_sdk_console_json_is_accounted(tmp_path, data, spans):
    values = [json.loads(text) for text, _ in spans]
    if data.draw(st.booleans()):
        values = [data.draw(mutate_tree(v)) for v in values]
    text = "".join(json.dumps(v, indent=4) + "\n" for v in values).encode()
    if data.draw(st.booleans()):
        text = data.draw(mutate_bytes(text))
    log = FileLog("console.json")
    try:
        table = read_with(read_json_document, text, log)
    except TraceFormatError:
        table = SPAN_SCHEMA.empty_table()
        assert log.spans_read == 0
    assert_accounted(log, table.num_rows, re.compile(r"line \d+"))
    path = tmp_path / "console.json"
    path.write_bytes(text)
    assert_batch_accounted(read_batch([path]), [path])


# --- other JSON dumps: every document shape, with fields of any type -----------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | _FINITE | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)

#: The keys that make `span_shape`/`document_kind` pick each reader, with plausible values.
_SHAPES: dict[str, dict[str, Any]] = {
    "sdk": {
        "context": {"trace_id": "0x" + "ab" * 16, "span_id": "0x" + "cd" * 8},
        "start_time": "2024-05-01T10:00:00.000001Z",
        "end_time": 1714557600000000000,
    },
    "phoenix": {
        "context": {"trace_id": "ab" * 16, "span_id": "cd" * 8},
        "span_kind": "LLM",
        "status_code": "OK",
        "start_time": "2024-05-01T10:00:00+00:00",
        "end_time": "2024-05-01T10:00:01+00:00",
    },
    "js": {
        "spanContext": {"traceId": "ab" * 16, "spanId": "cd" * 8},
        "startTime": [1714557600, 5],
        "endTime": [1714557601, 0],
        "kind": 0,
    },
    "jaeger": {
        "traceID": "ab" * 16,
        "spanID": "cd" * 8,
        "startTime": 1714557600000000,
        "duration": 5,
        "references": [],
        "tags": [{"key": "k", "type": "string", "value": "v"}],
        "processID": "p1",
    },
    "zipkin": {
        "traceId": "ab" * 16,
        "id": "cd" * 8,
        "timestamp": 1714557600000000,
        "duration": 5,
        "tags": {"k": "v"},
    },
    "langfuse": {
        "traceId": "ab" * 16,
        "id": "cd" * 8,
        "type": "GENERATION",
        "startTime": "2024-05-01T10:00:00.000Z",
        "endTime": "2024-05-01T10:00:01.000Z",
        "metadata": "{}",
    },
}


@st.composite
def dump_documents(draw) -> Any:
    shape = draw(st.sampled_from(sorted(_SHAPES)))
    spans = []
    for _ in range(draw(st.integers(1, 3))):
        span = json.loads(json.dumps(_SHAPES[shape]))
        for key in draw(st.lists(st.sampled_from(sorted(span)), max_size=3)):
            span[key] = draw(_JSON | wrong_values)
        spans.append(span)
    wrap = draw(st.integers(0, 3))
    if shape == "jaeger":
        processes = draw(_JSON | st.just({"p1": {"serviceName": "s", "tags": []}}))
        trace = {"traceID": "ab" * 16, "spans": spans, "processes": processes}
        return {"data": [trace]} if wrap % 2 else trace
    if shape == "langfuse":
        return {"trace": {"id": "ab" * 16, "projectId": "p"}, "observations": spans}
    if shape == "sdk" and draw(st.booleans()):  # an any-agent AgentTrace
        return {"spans": spans, "final_output": draw(_JSON | wrong_values)}
    if wrap == 1:
        return {"data": spans}
    if wrap == 2 and shape == "zipkin":
        return [spans]
    return spans if len(spans) > 1 or wrap == 3 else spans[0]


@_settings(150)
@given(document=dump_documents(), data=st.data())
def test_framework_dumps_with_fields_of_any_type_are_accounted(tmp_path, document, data):
    text = json.dumps(document).encode()
    if data.draw(st.booleans()):
        text = data.draw(mutate_bytes(text, max_ops=2))
    log = FileLog("dump.json")
    try:
        table = read_with(read_json_document, text, log)
    except TraceFormatError:
        table = SPAN_SCHEMA.empty_table()
        assert log.spans_read == 0
    assert_accounted(log, table.num_rows)
    path = tmp_path / "dump.json"
    path.write_bytes(text)
    assert_batch_accounted(read_batch([path]), [path])


# --- gzip and zstd wrappers -----------------------------------------------------------------------


def _compress(data: bytes, how: str) -> bytes:
    if how == "gzip":
        return gzip.compress(data, mtime=0)
    return zstandard.ZstdCompressor().compress(data)


@_settings(40)
@given(generated=otlp_requests(max_requests=3), how=st.sampled_from(["gzip", "zstd"]))
def test_compressed_lines_read_like_the_plain_file(tmp_path, generated, how):
    requests, rows = generated
    data = "".join(json.dumps(r) + "\n" for r in requests).encode()
    path = tmp_path / f"lines.jsonl.{'gz' if how == 'gzip' else 'zst'}"
    path.write_bytes(_compress(data, how))
    ingested = read_batch([path])
    assert ingested.log.files[0].format == f"jsonl+{how}"
    numbered = [(i + 1, row) for i, request_rows in enumerate(rows) for row in request_rows]
    assert_read_exactly(ingested.log, ingested.spans, numbered)


@_settings(100)
@given(
    generated=otlp_requests(max_requests=3),
    how=st.sampled_from(["gzip", "zstd"]),
    proto=st.booleans(),
    data=st.data(),
)
def test_corrupt_compressed_files_are_accounted(tmp_path, generated, how, proto, data):
    requests, _ = generated
    if proto:
        plain, _ = _frames([_encode(r) for r in requests], [False] * len(requests))
    else:
        plain = "".join(json.dumps(r) + "\n" for r in requests).encode()
    packed = _compress(plain, how)
    header = 10 if how == "gzip" else 4  # keep the magic: the file stays recognisably compressed
    packed = packed[:header] + data.draw(mutate_bytes(packed[header:]))
    path = tmp_path / f"corrupt.{'gz' if how == 'gzip' else 'zst'}"
    path.write_bytes(packed)
    assert_batch_accounted(read_batch([path]), [path])


# --- anything at all ------------------------------------------------------------------------------


@_settings(80)
@given(
    data=st.one_of(
        st.binary(max_size=400),
        st.binary(max_size=200).map(lambda b: b'{"resourceSpans": [' + b),
        st.binary(max_size=200).map(lambda b: b"\x1f\x8b\x08\x00" + b),
        st.binary(max_size=200).map(lambda b: b"\x28\xb5\x2f\xfd" + b),
        st.binary(max_size=200).map(lambda b: b"PAR1" + b),
    )
)
def test_arbitrary_bytes_never_break_the_batch(tmp_path, data):
    good = tmp_path / "a-good.jsonl"
    good.write_text(
        json.dumps(
            {
                "resourceSpans": [
                    {
                        "scopeSpans": [
                            {
                                "spans": [
                                    {
                                        "traceId": "ab" * 16,
                                        "spanId": "cd" * 8,
                                        "startTimeUnixNano": "1",
                                        "endTimeUnixNano": "2",
                                    }
                                ]
                            }
                        ]
                    }
                ]
            }
        )
        + "\n"
    )
    noise = tmp_path / "b-noise.bin"
    noise.write_bytes(data)
    ingested = read_batch([good, noise])
    assert_batch_accounted(ingested, [good, noise])
    assert ingested.log.files[0].spans_kept == 1  # the good file is never hurt by its neighbour
