"""Hostile files: each is read into a batch that keeps the good spans and names what it refused.

Every file is generated in tmp_path. Covered: truncated gzip, zstd bombs, a 50 MB attribute
value (cut at the attribute limit, marked, warned), lines and frames over the record limit,
10,000-deep JSON nesting (and nesting just deep enough to parse but not to write back), NUL
bytes and zero-filled files, invalid UTF-8, numbers beyond 64 bits, clock skew (warned; no
negative duration), children before their parents, parent-id cycles (warned, no hang), a
binary file and a CSV among the traces, and control and escape sequences in trace text (never
raw on the terminal, exact in the files).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import random
import re
import signal
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard

from analyzer.engine import analyze_paths
from analyzer.ingest import limits, read_traces

pytest.importorskip("analyzer.ingest.otlp_json")

TRACE = "5b8efff798038103d269b633813fc60c"
T0 = 1_700_000_000_000_000_000
DEEP = 10_000


def too_deep(found: int) -> str:
    return f"nesting deeper than 512 levels ({found:,} found)"


class Hang(BaseException):
    """Raised by `no_hang` (a BaseException, so no reader can swallow it)."""


@contextlib.contextmanager
def no_hang(seconds: float = 10) -> Iterator[None]:
    def fire(signum, frame):
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def attr(key: str, value) -> dict:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def span(span_id: str, parent: str | None = None, name: str = "s", start=1, end=2, attrs=()):
    out = {
        "traceId": TRACE,
        "spanId": span_id,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end),
        "attributes": list(attrs),
    }
    if parent:
        out["parentSpanId"] = parent
    return out


def line(*spans: dict) -> str:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]})


def sdk_span(span_id: str, attributes: str = "{}", start: str = "2024-01-01T00:00:00.000001Z"):
    """One span as the Python SDK's ConsoleSpanExporter prints it (attributes as JSON text)."""
    return (
        "{\n"
        '    "name": "s",\n'
        f'    "context": {{"trace_id": "0x{TRACE}", "span_id": "0x{span_id}"}},\n'
        '    "kind": "SpanKind.INTERNAL",\n'
        '    "parent_id": null,\n'
        f'    "start_time": "{start}",\n'
        '    "end_time": "2024-01-01T00:00:01.000001Z",\n'
        '    "status": {"status_code": "UNSET"},\n'
        f'    "attributes": {attributes},\n'
        '    "events": [],\n'
        '    "links": [],\n'
        '    "resource": {"attributes": {}}\n'
        "}\n"
    )


GOOD = line(span("00000000000000a1")) + "\n"


def read(*paths: Path):
    with no_hang():
        ingested = read_traces(list(paths))
    assert ingested.log.balanced()
    return ingested


def entries(ingested) -> list[tuple[str, str, str, int]]:
    return [(Path(q.file).name, q.position, q.reason, q.spans) for q in ingested.log.quarantine]


def kept_ids(ingested) -> list[str]:
    return ingested.spans.column("span_id").to_pylist()


# --- compression ---------------------------------------------------------------------------------


def test_truncated_gzip_keeps_every_complete_line_before_the_break(tmp_path: Path):
    body = "".join(line(span(f"{i:016x}", start=i, end=i + 1)) + "\n" for i in range(1, 2001))
    data = gzip.compress(body.encode(), mtime=0)
    cut = data[: len(data) // 2]
    # what any gzip reader can recover from the cut file: a prefix ending inside a line
    prefix = zlib.decompressobj(wbits=31).decompress(cut)
    complete = prefix.count(b"\n")
    assert 0 < complete < 2000 and not prefix.endswith(b"\n")
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(cut)
    ingested = read(path)
    assert ingested.log.files[0].format == "jsonl+gzip"
    assert kept_ids(ingested) == [f"{i:016x}" for i in range(1, complete + 1)]
    [(_, pos1, why1, _), (_, pos2, why2, lost)] = entries(ingested)
    assert (pos1, why1) == (f"line {complete + 1}", "invalid JSON: Input data was truncated")
    assert pos2 == f"byte {len(prefix)}" and "truncated gzip" in why2 and lost == 0


def _zstd_bomb(first: bytes, megabytes: int, *, streamed: bool) -> bytes:
    """`first` then `megabytes` MiB of spaces, zstd-compressed to a few KB (never in memory)."""
    compressor = zstandard.ZstdCompressor()
    block = b" " * (1 << 20)
    if not streamed:  # one frame per MiB, each header giving its size
        return compressor.compress(first) + compressor.compress(block) * megabytes
    out = io.BytesIO()
    with compressor.stream_writer(out, closefd=False) as writer:  # one frame, no size given
        writer.write(first)
        for _ in range(megabytes):
            writer.write(block)
    return out.getvalue()


@pytest.mark.parametrize("streamed", [False, True], ids=["sized-frames", "streamed"])
def test_zstd_bomb_is_refused_and_its_neighbours_are_read(tmp_path: Path, streamed: bool):
    bomb = tmp_path / "b-bomb.jsonl.zst"
    bomb.write_bytes(_zstd_bomb(GOOD.encode(), 1024, streamed=streamed))  # 1 GiB from a few KB
    assert bomb.stat().st_size < 60_000
    good = tmp_path / "a-good.jsonl"
    good.write_text(line(span("00000000000000b1")) + "\n")
    started = time.monotonic()
    ingested = read(good, bomb)
    assert time.monotonic() - started < 5
    assert kept_ids(ingested) == ["00000000000000b1"]
    [(name, position, reason, _)] = entries(ingested)
    assert (name, position) == ("b-bomb.jsonl.zst", "file")
    assert "decompression bomb" in reason


# --- sizes and depths ---------------------------------------------------------------------------

FIFTY_MB = 50 << 20


def _fifty_mb_file(tmp_path: Path) -> Path:
    big = span("00000000000000a2", attrs=[attr("big", "x" * FIFTY_MB), attr("small", "ok")])
    path = tmp_path / "big.jsonl"
    path.write_text(GOOD + line(big) + "\n")
    return path


def test_fifty_megabyte_attribute_value_is_truncated_marked_and_warned(tmp_path: Path):
    ingested = read(_fifty_mb_file(tmp_path))
    assert kept_ids(ingested) == ["00000000000000a1", "00000000000000a2"]
    assert ingested.log.quarantine == []
    attrs = {a["key"]: a["str"] for a in ingested.spans.column("attributes")[1].as_py()}
    marker = "…[agenttrace: truncated from 52,428,800 bytes to 1,048,576]"
    assert attrs == {"big": "x" * (1 << 20) + marker, "small": "ok"}
    assert [(Path(w.file).name, w.position, w.reason, w.spans) for w in ingested.log.warnings] == [
        (
            "big.jsonl",
            "line 2, span 00000000000000a2",
            "attribute 'big': value of 52,428,800 bytes cut to 1,048,576 and marked",
            1,
        )
    ]
    assert ingested.log.as_dict()["warnings"][0]["position"] == "line 2, span 00000000000000a2"


def test_value_one_byte_over_the_cap_is_cut_between_characters(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(limits, "MAX_ATTRIBUTE_BYTES", 8)
    at_cap = span("00000000000000a1", attrs=[attr("k", "12345678")])  # 8 bytes: kept whole
    # 9 bytes, "é" (2 bytes) straddling the cut: the cut character is dropped, not split
    over = span("00000000000000a2", attrs=[attr("k", "1234567é")])
    doc = {"key": "j", "value": {"arrayValue": {"values": [{"stringValue": "abcdefgh"}]}}}
    as_json = span("00000000000000a3", attrs=[doc])  # ["abcdefgh"]: 12 bytes of JSON text
    event = span("00000000000000a4")
    event["events"] = [{"timeUnixNano": "5", "name": "e", "attributes": [attr("m", "x" * 20)]}]
    path = tmp_path / "caps.jsonl"
    path.write_text("".join(line(s) + "\n" for s in (at_cap, over, as_json, event)))
    ingested = read(path)
    assert kept_ids(ingested) == [f"00000000000000a{i}" for i in range(1, 5)]
    rows = ingested.spans.to_pylist()
    mark = "…[agenttrace: truncated from {:,} bytes to 8]"
    assert [a["str"] for a in rows[0]["attributes"]] == ["12345678"]
    assert [a["str"] for a in rows[1]["attributes"]] == ["1234567" + mark.format(9)]
    # cut JSON text is no JSON any more: it moves from `json` to `str`
    assert [(a["str"], a["json"]) for a in rows[2]["attributes"]] == [
        ('["abcdef' + mark.format(12), None)
    ]
    assert [a["str"] for a in rows[3]["events"][0]["attributes"]] == ["x" * 8 + mark.format(20)]
    assert [(w.position, w.reason) for w in ingested.log.warnings] == [
        ("line 2, span 00000000000000a2", "attribute 'k': value of 9 bytes cut to 8 and marked"),
        ("line 3, span 00000000000000a3", "attribute 'j': value of 12 bytes cut to 8 and marked"),
        (
            "line 4, span 00000000000000a4",
            "event attribute 'm': value of 20 bytes cut to 8 and marked",
        ),
    ]


def test_line_over_the_record_limit_is_quarantined_unread(tmp_path: Path, monkeypatch):
    big = line(span("00000000000000a2", attrs=[attr("k", "x" * 500)]))
    monkeypatch.setattr(limits, "MAX_RECORD_BYTES", len(big) - 1)
    path = tmp_path / "long.jsonl"
    path.write_text(GOOD + big + "\n" + line(span("00000000000000a3")) + "\n")
    ingested = read(path)
    assert kept_ids(ingested) == ["00000000000000a1", "00000000000000a3"]
    reason = f"record of {len(big):,} bytes, longer than the {len(big) - 1:,} read at most"
    assert entries(ingested) == [("long.jsonl", "line 2", reason, 0)]
    assert ingested.log.records == 3


def test_frame_over_the_record_limit_is_skipped_unread(tmp_path: Path, monkeypatch):
    first, last = _frame("00000000000000a1"), _frame("00000000000000a3")
    big = _frame("00000000000000a2", name="x" * 100)
    monkeypatch.setattr(limits, "MAX_RECORD_BYTES", len(first) - 4)  # the small frames fit
    path = tmp_path / "frames.binpb"
    path.write_bytes(first + big + last)
    ingested = read(path)
    assert kept_ids(ingested) == ["00000000000000a1", "00000000000000a3"]
    reason = f"record of {len(big) - 4:,} bytes, longer than the {len(first) - 4:,} read at most"
    assert entries(ingested) == [("frames.binpb", f"byte {len(first)}", reason, 0)]
    assert ingested.log.records == 3


def test_ten_thousand_deep_json_document_is_quarantined_not_fatal(tmp_path: Path):
    arrays = tmp_path / "arrays.json"
    arrays.write_bytes(b"[" * DEEP + b"]" * DEEP)
    objects = tmp_path / "objects.json"
    objects.write_bytes(b'{"a":' * DEEP + b"1" + b"}" * DEEP)
    good = tmp_path / "good.jsonl"
    good.write_text(GOOD)
    ingested = read(arrays, good, objects)
    assert kept_ids(ingested) == ["00000000000000a1"]
    assert entries(ingested) == [
        ("arrays.json", "line 1", f"unparseable JSON: {too_deep(10_000)}", 0),
        ("objects.json", "line 1", f"unparseable JSON: {too_deep(10_000)}", 0),
    ]
    assert [f.records for f in ingested.log.files] == [1, 1, 1]


def test_sdk_console_spans_around_a_ten_thousand_deep_one_are_kept(tmp_path: Path):
    deep = "[" * DEEP + "]" * DEEP
    first = sdk_span("00000000000000a1")
    path = tmp_path / "console.json"
    path.write_text(first + sdk_span("00000000000000a2", deep) + sdk_span("00000000000000a3"))
    ingested = read(path)
    assert kept_ids(ingested) == ["00000000000000a1", "00000000000000a3"]
    [(_, position, reason, _)] = entries(ingested)
    assert position == f"line {first.count(chr(10)) + 1}"  # where the deep span starts
    # measured from the deep span on: the span object, then 10,000 arrays
    assert reason == f"unparseable JSON: {too_deep(10_001)}"


def test_attribute_too_deep_to_write_back_loses_only_its_span(tmp_path: Path):
    # 1,000 levels: orjson parses it (up to 1,024) but no JSON writer can write it back
    deep = "[" * 1000 + "]" * 1000
    console = tmp_path / "console.json"
    console.write_text(sdk_span("00000000000000a2", '{"k": ' + deep + "}"))
    requests = tmp_path / "requests.json"
    request = line(span("00000000000000b1"), span("00000000000000b2", attrs=[attr("k", "@")]))
    requests.write_text("[" + request.replace('{"stringValue": "@"}', deep) + "]")
    ingested = read(console, requests)
    assert kept_ids(ingested) == ["00000000000000b1"]
    assert [e[:3] for e in entries(ingested)] == [
        # span object, attributes object, 1,000 arrays
        ("console.json", "line 1", f"unreadable span: {too_deep(1002)}"),
        # span object, attributes list, attribute object, 1,000 arrays
        ("requests.json", "request 1 span 2", f"unreadable span: {too_deep(1003)}"),
    ]
    assert ingested.log.spans_quarantined == 2


def _any_agent(trace: int, final_output: str) -> str:
    """An any-agent AgentTrace dump (decimal ids, integer times) with its final_output."""
    spans = [
        {
            "name": "invoke_agent",
            "context": {"trace_id": trace, "span_id": 7},
            "parent": None,
            "start_time": 1,
            "end_time": 5,
            "attributes": {},
        },
        {
            "name": "chat",
            "context": {"trace_id": trace, "span_id": 8},
            "parent": {"span_id": 7},
            "start_time": 2,
            "end_time": 3,
            "attributes": {},
        },
    ]
    return '{"spans": ' + json.dumps(spans) + ', "final_output": ' + final_output + "}"


def test_any_agent_final_output_beyond_64_bits_or_deep_is_kept_or_accounted(tmp_path: Path):
    big = tmp_path / "a-big.json"
    big.write_text(_any_agent(1, "[1180591620717411303424]"))
    deep = tmp_path / "b-deep.json"
    deep.write_text(_any_agent(2, "[" * 300 + "]" * 300))  # deeper than orjson writes
    deeper = tmp_path / "c-deeper.json"
    deeper.write_text(_any_agent(3, "[" * 1000 + "]" * 1000))  # deeper than anything writes
    ingested = read(big, deep, deeper)
    assert [(f.spans_kept, f.spans_quarantined) for f in ingested.log.files] == [
        (2, 0),
        (2, 0),
        (0, 2),
    ]
    outputs = [
        a["str"]
        for attrs in ingested.spans.column("attributes").to_pylist()
        for a in attrs
        if a["key"] == "agenttrace.final_output"
    ]
    assert outputs == ["[1180591620717411303424]", "[" * 300 + "]" * 300]
    reason = f"unreadable value: {too_deep(1001)}"  # the document, then 1,000 arrays
    assert entries(ingested) == [("c-deeper.json", "line 1", reason, 2)]


def _deep_value() -> str:
    return '{"arrayValue":{"values":[' * DEEP + '{"stringValue":"x"}' + "]}}" * DEEP


def test_ten_thousand_deep_otlp_json_line_is_quarantined_alone(tmp_path: Path):
    deep = line(span("00000000000000a2", attrs=[attr("k", "@")]))
    deep = deep.replace('{"stringValue": "@"}', _deep_value())
    path = tmp_path / "deep.jsonl"
    path.write_text(GOOD + deep + "\n" + line(span("00000000000000a3")) + "\n")
    ingested = read(path)
    assert kept_ids(ingested) == ["00000000000000a1", "00000000000000a3"]
    # 9 levels down to the attribute object (request, resourceSpans list and object,
    # scopeSpans list and object, spans list, span, attributes list, attribute), then 3 per
    # nested AnyValue ({"arrayValue": {"values": [), then the innermost {"stringValue": "x"}
    depth = 9 + 3 * DEEP + 1
    assert entries(ingested) == [("deep.jsonl", "line 2", too_deep(depth), 0)]


def test_ten_thousand_deep_otlp_json_document_is_quarantined(tmp_path: Path):
    document = line(span("00000000000000a2", attrs=[attr("k", "@")]))
    path = tmp_path / "deep.json"
    # "{" alone on the first line: one document, not a JSON line
    path.write_text("{\n" + document[1:].replace('{"stringValue": "@"}', _deep_value()))
    ingested = read(path)
    assert ingested.log.files[0].format == "otlp-json"
    assert ingested.spans.num_rows == 0
    assert entries(ingested) == [("deep.json", "document", too_deep(9 + 3 * DEEP + 1), 0)]


def test_protobuf_nesting_beyond_the_decoder_limit_quarantines_the_frame(tmp_path: Path):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    def request(span_id: str, depth: int) -> bytes:
        req = ExportTraceServiceRequest()
        s = req.resource_spans.add().scope_spans.add().spans.add()
        s.trace_id, s.span_id = bytes.fromhex(TRACE), bytes.fromhex(span_id)
        s.start_time_unix_nano, s.end_time_unix_nano = 1, 2
        value = s.attributes.add(key="k").value
        for _ in range(depth):
            value = value.array_value.values.add()
        value.string_value = "x"
        return req.SerializeToString()

    payloads = [request("00000000000000a1", 3), request("00000000000000a2", 300)]
    path = tmp_path / "deep.binpb"
    path.write_bytes(b"".join(struct.pack(">I", len(p)) + p for p in payloads))
    ingested = read(path)
    assert kept_ids(ingested) == ["00000000000000a1"]
    [(_, position, reason, _)] = entries(ingested)
    assert position == f"byte {4 + len(payloads[0])}"
    assert reason.startswith("corrupt frame:") and "MaxDepth" in reason


# --- bytes that are not text ---------------------------------------------------------------------


def test_nul_bytes_quarantine_their_line_and_escaped_nul_is_kept(tmp_path: Path):
    escaped = line(span("00000000000000a3", name="a\u0000b"))  # valid JSON: \u0000
    raw_nul = line(span("00000000000000a4", name="@")).replace("@", "raw\x00nul")
    path = tmp_path / "nul.jsonl"
    path.write_bytes(GOOD.encode() + b"\x00" * 100 + b"\n" + f"{escaped}\n{raw_nul}\n".encode())
    ingested = read(path)
    assert kept_ids(ingested) == ["00000000000000a1", "00000000000000a3"]
    assert ingested.spans.column("name").to_pylist() == ["s", "a\x00b"]
    assert [(p, r.split(":")[0]) for _, p, r, _ in entries(ingested)] == [
        ("line 2", "invalid JSON"),
        ("line 4", "invalid JSON"),
    ]
    assert ingested.log.records == 4


def test_zero_filled_file_is_not_a_trace(tmp_path: Path):
    path = tmp_path / "preallocated.log"
    path.write_bytes(b"\x00" * (1 << 20))
    ingested = read(path)
    assert ingested.log.files[0].format == "unknown"
    assert [e[1:] for e in entries(ingested)] == [
        ("file", "not a trace file (no known format recognised)", 0)
    ]
    assert ingested.log.records == 0


def _frame(span_id: str, name: str = "") -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    req = ExportTraceServiceRequest()
    s = req.resource_spans.add().scope_spans.add().spans.add()
    s.trace_id, s.span_id, s.name = bytes.fromhex(TRACE), bytes.fromhex(span_id), name
    s.start_time_unix_nano, s.end_time_unix_nano = 1, 2
    payload = req.SerializeToString()
    return struct.pack(">I", len(payload)) + payload


def test_zero_filled_region_between_protobuf_frames_is_one_record(tmp_path: Path):
    first, last = _frame("00000000000000a1"), _frame("00000000000000a2")
    zeros = 64 << 20  # 16 Mi empty "frames": read one by one, this took about 45 s
    path = tmp_path / "crashed.binpb"
    with path.open("wb") as fh:
        fh.write(first)
        fh.write(b"\x00" * zeros)
        fh.write(last)
    started = time.monotonic()
    ingested = read(path)
    assert time.monotonic() - started < 5
    assert kept_ids(ingested) == ["00000000000000a1", "00000000000000a2"]
    assert entries(ingested) == [
        ("crashed.binpb", f"byte {len(first)}", "67,108,864 zero bytes where frames should be", 0)
    ]
    assert ingested.log.records == 3
    assert ingested.spans.column("source_pos").to_pylist() == [0, len(first) + zeros]


def test_single_empty_protobuf_frame_is_still_an_empty_request(tmp_path: Path):
    first, last = _frame("00000000000000a1"), _frame("00000000000000a2")
    path = tmp_path / "empty-frame.binpb"
    path.write_bytes(first + b"\x00\x00\x00\x00" + last)
    ingested = read(path)
    assert kept_ids(ingested) == ["00000000000000a1", "00000000000000a2"]
    assert ingested.log.quarantine == [] and ingested.log.records == 3


def test_invalid_utf8_quarantines_an_otlp_line_and_is_replaced_in_a_document(tmp_path: Path):
    lines = tmp_path / "lines.jsonl"
    bad = line(span("00000000000000a2", name="@")).encode().replace(b"@", b"caf\xe9")
    lines.write_bytes(GOOD.encode() + bad + b"\n" + line(span("00000000000000a3")).encode())
    console = tmp_path / "console.json"
    text = sdk_span("00000000000000b1") + sdk_span("00000000000000b2", '{"k": "@"}')
    console.write_bytes(text.encode().replace(b"@", b"caf\xe9"))
    ingested = read(lines, console)
    assert kept_ids(ingested) == [
        "00000000000000a1",
        "00000000000000a3",
        "00000000000000b1",
        "00000000000000b2",
    ]
    assert [e[:3] for e in entries(ingested)] == [
        ("lines.jsonl", "line 2", "invalid JSON: Invalid UTF-8 encoded string")
    ]
    [attrs] = [a for a in ingested.spans.column("attributes").to_pylist() if a]
    assert attrs[0]["str"] == "caf\ufffd"
    first_bad = text.encode().index(b"@") + 3  # "caf" then the lone 0xE9
    assert [(Path(w.file).name, w.position, w.reason) for w in ingested.log.warnings] == [
        (
            "console.json",
            f"line {text[: text.index('@')].count(chr(10)) + 1}",
            f"invalid UTF-8 (first at byte {first_bad:,}) replaced by U+FFFD; spans kept",
        )
    ]


def test_numbers_beyond_64_bits_lose_only_their_span_or_stay_as_text(tmp_path: Path):
    # an attribute list holding a 70-bit integer, and a start time past the year 2262
    path = tmp_path / "console.json"
    path.write_text(
        sdk_span("00000000000000a1", '{"big": [1180591620717411303424], "n": 3}')
        + sdk_span("00000000000000a2").replace(
            '"start_time": "2024-01-01T00:00:00.000001Z"', '"start_time": 18446744073709551616'
        )
        + sdk_span("00000000000000a3")
    )
    ingested = read(path)
    assert kept_ids(ingested) == ["00000000000000a1", "00000000000000a3"]
    attrs = ingested.spans.column("attributes")[0].as_py()
    assert [(a["key"], a["json"], a["int"]) for a in attrs] == [
        ("big", "[1180591620717411303424]", None),
        ("n", None, 3),
    ]
    [(_, position, reason, lost)] = entries(ingested)
    assert (position, lost) == ("line 14", 1)
    assert reason == "start time 18446744073709551616 ns does not fit in int64"


def test_corrupt_legacy_group_quarantines_its_frame_alone(tmp_path: Path):
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans

    resource_spans = ResourceSpans()
    s = resource_spans.scope_spans.add().spans.add()
    s.trace_id, s.span_id = bytes.fromhex(TRACE), bytes.fromhex("00000000000000b2")
    s.start_time_unix_nano, s.end_time_unix_nano = 1, 2
    # field 1000 (instrumentation_library_spans, before proto 0.19) holding 3 bytes of garbage
    body = resource_spans.SerializeToString() + b"\xc2\x3e\x03\xff\xff\xff"
    payload = b"\x0a" + bytes([len(body)]) + body
    bad = struct.pack(">I", len(payload)) + payload
    first = _frame("00000000000000a1")
    path = tmp_path / "legacy.binpb"
    path.write_bytes(first + bad + _frame("00000000000000a3"))
    ingested = read(path)
    assert kept_ids(ingested) == ["00000000000000a1", "00000000000000a3"]
    [(_, position, reason, lost)] = entries(ingested)
    assert (position, lost) == (f"byte {len(first)}", 0)
    assert reason.startswith("corrupt frame: Error parsing message with type")
    assert ingested.log.spans_read == 2  # the corrupt frame's span was never half-counted


def test_binary_file_and_csv_in_a_folder_are_named_and_skipped(tmp_path: Path):
    folder = tmp_path / "dump"
    folder.mkdir()
    (folder / "a.jsonl").write_text(GOOD)
    noise = random.Random(7)
    png = b"\x89PNG\r\n\x1a\n" + bytes(noise.randrange(256) for _ in range(4096))
    (folder / "b.png").write_bytes(png)
    (folder / "c.csv").write_text(f"trace_id,span_id,name\n{TRACE},00000000000000a9,chat\n")
    (folder / "d.md").write_text("# notes\n")
    ingested = read(folder)
    assert kept_ids(ingested) == ["00000000000000a1"]
    assert ingested.skipped == [str(folder / "d.md")]
    not_trace = "not a trace file (no known format recognised)"
    assert [(n, p, r) for n, p, r, _ in entries(ingested)] == [
        ("b.png", "file", not_trace),
        ("c.csv", "file", not_trace),
    ]
    excerpts = [q.excerpt for q in ingested.log.quarantine]
    assert excerpts[0].startswith("\\x89PNG\\r\\n\\x1a\\n") and excerpts[1].startswith("trace_id,")
    assert [f.format for f in ingested.log.files] == ["jsonl", "unknown", "unknown"]


# --- time and structure -------------------------------------------------------------------------

AGENT = [attr("gen_ai.operation.name", "invoke_agent"), attr("gen_ai.agent.name", "bot")]
CHAT = [
    attr("gen_ai.operation.name", "chat"),
    attr("gen_ai.request.model", "gpt-4.1"),
    attr("gen_ai.usage.input_tokens", 10),
    attr("gen_ai.usage.output_tokens", 5),
]


def tool(name: str) -> list[dict]:
    return [attr("gen_ai.operation.name", "execute_tool"), attr("gen_ai.tool.name", name)]


# The agent ends before it starts; its model call starts 900 ns before it; its tool call ends
# before it starts.
SKEWED = [
    span("00000000000000a1", None, "invoke_agent bot", T0 + 1000, T0 + 500, AGENT),
    span("00000000000000a2", "00000000000000a1", "chat gpt-4.1", T0 + 100, T0 + 200, CHAT),
    span(
        "00000000000000a3",
        "00000000000000a1",
        "execute_tool lookup",
        T0 + 300,
        T0 + 250,
        tool("lookup"),
    ),
]


def analyze(path: Path):
    with no_hang():
        analysis = analyze_paths([path])
    assert analysis.ingested.log.balanced()
    return analysis


def _steps(analysis) -> list[tuple]:
    return [
        (s["index"], s["kind"], s["span_id"], s["name"], s["start_ns"] - T0)
        for s in analysis.runs.steps.iter_rows(named=True)
    ]


@pytest.mark.parametrize("order", ["parents-first", "children-first"])
def test_clock_skew_and_children_before_parents_keep_every_span_and_step(tmp_path, order):
    spans = SKEWED if order == "parents-first" else SKEWED[::-1]
    path = tmp_path / "skew.jsonl"
    path.write_text("".join(line(s) + "\n" for s in spans))
    analysis = analyze(path)
    log = analysis.ingested.log
    assert (log.spans_kept, log.spans_quarantined, log.orphans) == (3, 0, 0)
    [run] = analysis.runs.runs.iter_rows(named=True)
    assert (run["run_id"], run["agent"], run["model_calls"], run["tool_calls"]) == (
        TRACE,
        "bot",
        1,
        1,
    )
    assert _steps(analysis) == [
        (0, "model_call", "00000000000000a2", "gpt-4.1", 100),
        (1, "tool_call", "00000000000000a3", "lookup", 300),
    ]


def test_clock_skew_never_gives_a_negative_duration_and_is_warned(tmp_path: Path):
    path = tmp_path / "skew.jsonl"
    path.write_text("".join(line(s) + "\n" for s in SKEWED))
    analysis = analyze(path)
    [run] = analysis.runs.runs.iter_rows(named=True)
    # the agent span's own duration is negative: the run's extent is taken instead, from the
    # first start (the model call, T0+100) to the last end (the agent, T0+500)
    assert run["duration_s"] == 4e-7
    assert [(w.position, w.reason, w.spans) for w in analysis.ingested.log.warnings] == [
        (
            "line 1, span 00000000000000a1",
            "ends 500 ns before it starts (clock skew); kept as read",
            1,
        ),
        (
            "line 3, span 00000000000000a3",
            "ends 50 ns before it starts (clock skew); kept as read",
            1,
        ),
    ]


def test_run_whose_every_span_ends_before_it_starts_has_no_duration(tmp_path: Path):
    path = tmp_path / "skew.jsonl"
    path.write_text(line(span("00000000000000a1", None, "chat", T0 + 9, T0 + 1, CHAT)) + "\n")
    [run] = analyze(path).runs.runs.iter_rows(named=True)
    assert run["duration_s"] is None  # unknown, never negative and never a made-up zero


def test_skew_warnings_stop_at_the_cap_and_count_the_rest(tmp_path: Path, monkeypatch):
    from analyzer.ingest import accounting

    monkeypatch.setattr(accounting, "MAX_WARNINGS", 2)
    spans = [span(f"{i:016x}", None, "s", T0 + 10, T0 + i) for i in range(1, 6)]
    path = tmp_path / "skew.jsonl"
    path.write_text(line(*spans) + "\n")
    ingested = read(path)
    assert [(w.position, w.reason, w.spans) for w in ingested.log.warnings] == [
        (
            "line 1, span 0000000000000001",
            "ends 9 ns before it starts (clock skew); kept as read",
            1,
        ),
        (
            "line 1, span 0000000000000002",
            "ends 8 ns before it starts (clock skew); kept as read",
            1,
        ),
        ("file", "3 more spans end before they start", 3),
    ]


@pytest.mark.parametrize("cap", [100, 3])
def test_skew_and_cycle_warnings_do_not_depend_on_the_partitions(
    tmp_path: Path, monkeypatch, cap: int
):
    # eight traces, each with a span that ends before it starts and a span its own parent,
    # spread over 3 partitions: the warnings are those of the input read in memory, in order;
    # under a cap of 3, its first 3 skewed spans listed, the 5 others counted
    from analyzer.ingest import accounting

    monkeypatch.setattr(accounting, "MAX_WARNINGS", cap)
    lines = []
    for t in range(8):
        trace = {"traceId": f"{t + 1:032x}"}
        skewed = span(f"{2 * t + 1:016x}", None, "chat", T0 + 9, T0 + 1, CHAT) | trace
        looped = span(f"{2 * t + 2:016x}", f"{2 * t + 2:016x}", "s", T0, T0 + 1) | trace
        lines.append(line(skewed, looped) + "\n")
    path = tmp_path / "skew.jsonl"
    path.write_text("".join(lines))
    logs = [analyze_paths([path], partitions=p, jobs=1).ingested.log.warnings for p in (None, 3)]
    assert logs[0] == logs[1]
    listed = min(cap, 8)
    assert [w.position for w in logs[0]][:3] == [
        "line 1, span 0000000000000001",
        "line 2, span 0000000000000003",
        "line 3, span 0000000000000005",
    ]
    assert [w.position for w in logs[0]][listed : listed + 2] == [
        f"trace {1:032x}",
        f"trace {2:032x}",
    ]
    more = [(w.reason, w.spans) for w in logs[0] if w.position == "file"]
    assert more == ([] if cap == 100 else [("5 more spans end before they start", 5)])


def test_parent_id_cycles_end_and_keep_their_spans(tmp_path: Path):
    spans = [
        # two agents, each the other's parent; a model call its own parent; a tool under one
        span("00000000000000c1", "00000000000000c2", "invoke_agent x", T0, T0 + 10, AGENT),
        span("00000000000000c2", "00000000000000c1", "invoke_agent y", T0 + 1, T0 + 9, AGENT),
        span("00000000000000c3", "00000000000000c3", "chat gpt-4.1", T0 + 2, T0 + 3, CHAT),
        span("00000000000000c4", "00000000000000c1", "execute_tool t", T0 + 4, T0 + 5, tool("t")),
    ]
    path = tmp_path / "cycle.jsonl"
    path.write_text("".join(line(s) + "\n" for s in spans))
    analysis = analyze(path)
    assert (analysis.ingested.log.spans_kept, analysis.ingested.log.orphans) == (4, 0)
    assert [(w.position, w.reason, w.spans) for w in analysis.ingested.log.warnings] == [
        (
            f"trace {TRACE}",
            "parent ids form a cycle of 2 spans (00000000000000c1 -> 00000000000000c2 -> "
            "00000000000000c1); 3 spans in or under it have no root",
            3,
        ),
        (
            f"trace {TRACE}",
            "parent ids form a cycle of 1 spans (00000000000000c3 -> 00000000000000c3); "
            "1 spans in or under it have no root",
            1,
        ),
    ]
    # no agent is top-level (each has an agent above it), so the trace is the one run
    assert analysis.runs.runs.get_column("run_id").to_list() == [TRACE]
    assert _steps(analysis) == [
        (0, "model_call", "00000000000000c3", "gpt-4.1", 2),
        (1, "tool_call", "00000000000000c4", "t", 4),
    ]


def test_ten_thousand_span_parent_ring_ends_quickly(tmp_path: Path):
    n = 10_000
    ring = [
        span(
            f"{i + 1:016x}",
            f"{(i + 1) % n + 1:016x}",  # span i's parent is span i+1; the last one's is the first
            "invoke_agent r" if i % 2 else "chat gpt-4.1",
            T0 + i,
            T0 + i + 1,
            AGENT if i % 2 else CHAT,
        )
        for i in range(n)
    ]
    path = tmp_path / "ring.jsonl"
    path.write_text(line(*ring) + "\n")
    started = time.monotonic()
    analysis = analyze(path)
    assert time.monotonic() - started < 5
    [warning] = analysis.ingested.log.warnings
    assert warning.reason == (
        "parent ids form a cycle of 10,000 spans (0000000000000001 -> 0000000000000002 -> "
        "0000000000000003 -> 0000000000000004 -> ...); 10,000 spans in or under it have no root"
    )
    assert analysis.runs.runs.height == 1
    assert analysis.runs.steps.height == n // 2  # every model call, in start order
    assert analysis.runs.steps.get_column("span_id").to_list()[:2] == [
        f"{1:016x}",
        f"{3:016x}",
    ]


# --- untrusted text on the terminal --------------------------------------------------------------

# CSI colour, an OSC title ended by BEL, a right-to-left override, the one-byte C1 CSI, a newline
EVIL = "x\x1b[31mred\x1b]0;title\x07\u202egnp.exe\x9b2J\ny"
SHOWN = "x\\x1b[31mred\\x1b]0;title\\x07\\u202egnp.exe\\x9b2J y"  # as terminal_safe prints it
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _evil_trace(tmp_path: Path) -> tuple[Path, Path]:
    output = [{"role": "assistant", "parts": [{"type": "text", "content": "answer " + EVIL}]}]
    spans = [
        span(
            "00000000000000a1",
            None,
            "invoke_agent",
            T0,
            T0 + 100,
            [*AGENT[:1], attr("gen_ai.agent.name", "bot" + EVIL)],
        ),
        span(
            "00000000000000a2",
            "00000000000000a1",
            "execute_tool",
            T0 + 10,
            T0 + 20,
            [
                *tool("look" + EVIL),
                attr("gen_ai.tool.call.arguments", json.dumps({"q": EVIL})),
                attr("gen_ai.tool.call.result", "res " + EVIL),
            ],
        ),
        span(
            "00000000000000a3",
            "00000000000000a1",
            "chat",
            T0 + 30,
            T0 + 40,
            [*CHAT, attr("gen_ai.output.messages", json.dumps(output))],
        ),
    ]
    path = tmp_path / "evil.jsonl"
    path.write_text("".join(line(s) + "\n" for s in spans))
    pack = tmp_path / "pack.yaml"
    pack.write_text(
        "pack: p\nrules:\n  - {id: t, type: forbidden_text, patterns: ['red.{0,5}title']}\n"
    )
    return path, pack


def test_terminal_output_strips_controls_and_files_keep_the_exact_text(tmp_path: Path):
    from click.testing import CliRunner

    from analyzer.cli import main

    path, pack = _evil_trace(tmp_path)
    out = tmp_path / "out"
    f, p = str(path), str(pack)
    printed = {}
    for name, args in {
        "report": ["report", f, "--rules", p, "--out", str(out)],
        "report json": ["report", f, "--rules", p, "--format", "json"],
        "runs": ["runs", f],
        "runs jsonl": ["runs", f, "--format", "jsonl"],
        "runs by agent": ["runs", f, "--run-key", "gen_ai.agent.name"],
        "show": ["show", TRACE[:8], f],
        "show by agent": ["show", "bot", f, "--run-key", "gen_ai.agent.name"],
        "no such run": ["show", "\x1b[2J", f],
    }.items():
        result = CliRunner().invoke(main, args)
        assert result.exit_code == (2 if name == "no such run" else 0), result.output
        printed[name] = result.stdout + result.stderr
    assert {n: RAW_CONTROL.findall(t) for n, t in printed.items()} == {n: [] for n in printed}
    show = printed["show"].splitlines()
    assert show[1] == f"agent    bot{SHOWN}   case -"
    assert printed["show by agent"].splitlines()[0] == f"run      bot{SHOWN}"
    assert (
        "Error: no run or case with id '\\x1b[2J' in the input (1 runs read)"
        in printed["no such run"]
    )
    # JSON on the terminal: escapes instead of raw characters, the very same text once parsed
    assert json.loads(printed["report json"])["runs"]["agents"] == {"bot" + EVIL: 1}
    assert json.loads(printed["runs jsonl"].splitlines()[0])["agent"] == "bot" + EVIL
    # files keep the exact text
    import pyarrow.parquet as pq

    [tool_step, _] = pq.read_table(out / "steps.parquet").to_pylist()
    assert (tool_step["name"], tool_step["arguments"], tool_step["result"]) == (
        "look" + EVIL,
        json.dumps({"q": EVIL}),
        "res " + EVIL,
    )
    [run] = pq.read_table(out / "runs.parquet").to_pylist()
    assert (run["agent"], run["answer"]) == ("bot" + EVIL, "answer " + EVIL)
    [finding] = [json.loads(x) for x in (out / "findings.jsonl").read_text().splitlines()]
    assert (
        finding["detail"] == "'red.{0,5}title' found 1 time in the answer, first 'red\x1b]0;title'"
    )
    assert json.loads((out / "summary.json").read_text())["runs"]["agents"] == {"bot" + EVIL: 1}


def test_warnings_reach_summary_json_and_the_terminal(tmp_path: Path):
    from click.testing import CliRunner

    from analyzer.cli import main

    path = tmp_path / "skew.jsonl"
    path.write_text("".join(line(s) + "\n" for s in SKEWED))
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["report", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    at = lines.index("WARNINGS 2 (kept, but altered or suspect; see summary.json):")
    assert lines[at + 1 : at + 3] == [
        "  skew.jsonl line 1, span 00000000000000a1: ends 500 ns before it starts (clock skew); "
        "kept as read",
        "  skew.jsonl line 3, span 00000000000000a3: ends 50 ns before it starts (clock skew); "
        "kept as read",
    ]
    warnings = json.loads((out / "summary.json").read_text())["ingest"]["warnings"]
    assert [(w["position"], w["spans"]) for w in warnings] == [
        ("line 1, span 00000000000000a1", 1),
        ("line 3, span 00000000000000a3", 1),
    ]
    runs = CliRunner().invoke(main, ["runs", str(path)])
    assert runs.stderr.rstrip().endswith(
        "2 warnings (kept, but altered or suspect: a report lists them)"
    )


def test_parents_found_at_ingest_are_the_rows_of_the_parent_spans(tmp_path: Path):
    """`Ingested.parents` (found while de-duplicating, and read by the run model instead of a
    second lookup) points each span at its parent's row: across files and duplicates, with
    children before parents, cycles, orphans, and span ids shared by two traces."""
    other = "0af7651916cd43dd8448eb211c80319c"
    first = [
        span("00000000000000d3", "00000000000000d2", "c", T0 + 5, T0 + 6),  # before its parent
        span("00000000000000d1", None, "root", T0, T0 + 9),
        span("00000000000000d2", "00000000000000d1", "b", T0 + 1, T0 + 8),
        span("00000000000000d4", "00000000000000ff", "orphan", T0 + 2, T0 + 3),
        span("00000000000000d5", "00000000000000d6", "ring", T0 + 3, T0 + 4),
        span("00000000000000d6", "00000000000000d5", "ring", T0 + 4, T0 + 5),
    ]
    second = [  # a copy of d2 (dropped), and a trace reusing d1 and d2 as its ids
        span("00000000000000d2", "00000000000000d1", "b", T0 + 1, T0 + 8),
        {**span("00000000000000d2", "00000000000000d1", "b2", T0 + 1, T0 + 2), "traceId": other},
        {**span("00000000000000d1", None, "root2", T0, T0 + 3), "traceId": other},
    ]
    (tmp_path / "a.jsonl").write_text("".join(line(s) + "\n" for s in first))
    (tmp_path / "b.jsonl").write_text("".join(line(s) + "\n" for s in second))
    ingested = read(tmp_path / "b.jsonl", tmp_path / "a.jsonl")
    rows = ingested.spans.select(["trace_id", "span_id", "parent_span_id"]).to_pylist()
    where = {(r["trace_id"], r["span_id"]): i for i, r in enumerate(rows)}
    expected = [where.get((r["trace_id"], r["parent_span_id"])) for r in rows]
    assert len(rows) == 8
    assert expected.count(None) == 3  # two roots and the orphan
    assert ingested.parents.to_pylist() == expected
