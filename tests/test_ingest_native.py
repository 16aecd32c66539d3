"""The native (C) reader of OTLP JSON lines: what it reads itself, what it leaves to the robust
path, and that either way the rows are the robust path's, byte for byte."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import orjson
import pyarrow as pa
import pytest
from factories import robust_lines
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_ingest_otlp import _ABSENT, S1, S2, T1, span  # the reader tests' span builder

from analyzer.ingest import otlp_json
from analyzer.ingest.accounting import FileLog
from analyzer.spans import SHARED_SCHEMA, SPAN_SCHEMA

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))


def test_the_native_reader_is_built():
    # built by `pip install` with the package (a C compiler is on every supported machine);
    # without it the robust path reads every line, correctly but more slowly
    assert otlp_json._native is not None


def _read(text: bytes, reader) -> tuple[pa.Table, FileLog]:
    log = FileLog("f.jsonl")
    table = pa.Table.from_batches(list(reader(io.BytesIO(text), log)), schema=SPAN_SCHEMA)
    assert log.spans_read == table.num_rows + log.spans_quarantined
    return table, log


def _native_read(text: bytes, monkeypatch) -> tuple[pa.Table, FileLog]:
    assert otlp_json._native is not None
    return _read(text, otlp_json.read_lines)


def _refused(text: bytes) -> bool:
    _, refused, _ = otlp_json._native.parse([text], [1])
    return refused == [0]


def _same_as_robust(text: bytes, monkeypatch) -> pa.Table:
    table, log = _native_read(text, monkeypatch)
    robust, robust_log = _read(text, robust_lines)
    # to_pylist: NaN compared as text; equal tables also compare equal cell by cell
    assert json.dumps(table.to_pylist(), default=str) == json.dumps(robust.to_pylist(), default=str)
    assert log == robust_log
    return table


def _line(*spans: dict, **request) -> bytes:
    body = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "a"}}]
                },
                "scopeSpans": [{"scope": {"name": "lib", "version": "1"}, "spans": list(spans)}],
            }
        ],
        **request,
    }
    return orjson.dumps(body)


def _attrs(*pairs) -> list[dict]:
    return [{"key": k, "value": v} for k, v in pairs]


READ_NATIVELY = {
    "escapes in values and keys": _line(
        span(
            name='say "hi"\n\t\u00e9\U0001f600',
            attributes=_attrs(("k\u00e9y\n", {"stringValue": "a\\b/\u0001\U0001f600"})),
        )
    ),
    "escaped spellings of the same text": (
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"' + T1.encode() + b'",'
        b'"spanId":"' + S1.encode() + b'","name":"\\u00e9\\ud83d\\ude00\\/\\"",'
        b'"startTimeUnixNano":1,"endTimeUnixNano":2}]}]}]}'
    ),
    "spaced JSON": json.dumps(json.loads(_line(span(kind=2)))).encode(),
    "upper-case ids": _line(span(spanId="EEE19B7EC3C1B174")),
    "roots: empty or zero parent": _line(
        span(parentSpanId=""), span(spanId=S2, parentSpanId="0000000000000000")
    ),
    "kind and status numbers": _line(
        span(kind=2, status={"code": 2, "message": "boom"}),
        span(kind=99, status={"code": 1, "message": ""}),
        span(kind=-1, status=None),
    ),
    "scalar attribute values": _line(
        span(
            attributes=_attrs(
                ("i", {"intValue": "9223372036854775807"}),
                ("j", {"intValue": -9223372036854775808}),
                ("z", {"intValue": "-0"}),
                ("d", {"doubleValue": 0.1}),
                ("e", {"doubleValue": 1e-7}),
                ("n", {"doubleValue": 5}),
                ("b", {"boolValue": False}),
                ("s", {"stringValue": ""}),
                ("first wins", {"stringValue": None, "intValue": "3", "doubleValue": 1.5}),
                ("empty", {}),
                ("null", None),
                (None, {"stringValue": "no key"}),
            )
        )
    ),
    "arrays, key-value lists and bytes": _line(
        span(
            attributes=_attrs(
                ("plain", {"arrayValue": {"values": [{"stringValue": "a"}, {"stringValue": "é"}]}}),
                ("empty", {"arrayValue": {"values": []}}),
                ("mixed", {"arrayValue": {"values": [{"intValue": "1"}, {"doubleValue": 2.5}]}}),
                ("escaped", {"arrayValue": {"values": [{"stringValue": 'say "hi"'}]}}),
                ("kv", {"kvlistValue": {"values": [{"key": "x", "value": {"boolValue": True}}]}}),
                ("bytes", {"bytesValue": "aGk="}),
                ("odd bytes", {"bytesValue": 5}),
            )
        )
    ),
    "events and links": _line(
        span(
            events=[
                {"timeUnixNano": "5", "name": "e", "attributes": _attrs(("a", {"intValue": 1}))},
                {"name": None},
            ],
            links=[
                {"traceId": T1, "spanId": S2, "attributes": _attrs(("l", {"stringValue": "x"}))},
                {"traceState": "t"},
            ],
        ),
        span(spanId=S2, events=None, links=None),
    ),
    "unknown fields and nulls everywhere": (
        b'{"extra":{"a":[1,{"b":null}]},"resourceSpans":[{"schemaUrl":"u","resource":null,'
        b'"scopeSpans":[{"scope":null,"schemaUrl":"x","spans":[{"traceId":"' + T1.encode() + b'",'
        b'"spanId":"' + S1.encode() + b'","flags":257,"traceState":"","droppedAttributesCount":0,'
        b'"startTimeUnixNano":"1","endTimeUnixNano":"2","attributes":null,"status":{"x":1}}]},'
        b'{"spans":null}]},{"scopeSpans":null}]}'
    ),
    "no spans at all": b'{"resourceSpans":[]}',
    "null resourceSpans": b'{"resourceSpans":null}',
    # the first and last characters of each UTF-8 length, raw, in a name, a key and a value
    "UTF-8 of every length": _line(
        span(
            name="\u0080\u07ff\u0800\uffff\U00010000\U0010ffff",
            attributes=_attrs(("\u00e9t\u00e9", {"stringValue": "\u20ac \U0001f600"})),
        )
    ),
}


@pytest.mark.parametrize("text", READ_NATIVELY.values(), ids=READ_NATIVELY.keys())
def test_lines_the_native_reader_reads_itself(text, monkeypatch):
    assert not _refused(text)
    _same_as_robust(text, monkeypatch)


def _with_field(field: str, value) -> bytes:
    return _line(span(attributes=_attrs(("k", {field: value}))))


LEFT_TO_ROBUST = {
    "proto field names": _line({**span(), "trace_id": T1}),
    "legacy scope spans": orjson.dumps(
        {"resourceSpans": [{"instrumentationLibrarySpans": [{"spans": [span()]}]}]}
    ),
    "duplicate span field": _line(span()).replace(b'"name":"chat"', b'"name":"a","name":"b"'),
    "duplicate value field": _with_field("intValue", "1").replace(
        b'"intValue":"1"', b'"intValue":"1","intValue":"2"'
    ),
    "lone surrogate": _line(span()).replace(b'"name":"chat"', b'"name":"\\ud800x"'),
    "negative zero double": _with_field("doubleValue", -0.0),
    "double as a string": _with_field("doubleValue", "NaN"),
    "double overflow": _with_field("doubleValue", 1).replace(
        b'"doubleValue":1', b'"doubleValue":1e400'
    ),
    "int with a plus sign": _with_field("intValue", "+5"),
    "int as a float": _with_field("intValue", 1e3),
    "int over int64": _with_field("intValue", "9223372036854775808"),
    "bool as a string": _with_field("boolValue", "true"),
    "string of another type": _with_field("stringValue", 12),
    "bare value": _line(span(attributes=[{"key": "k", "value": "bare"}])),
    "0x id": _line(span(spanId="0x" + S1)),
    "base64 ids": _line(
        span(traceId="W47/95gDgQPSabYzgT/GDA==", spanId="7uGbfsPBsXQ=", parentSpanId="")
    ),
    "non-canonical base64 id": _line(span(spanId="7uGbfsPBsXR=")),
    "kind and status names": _line(
        span(kind="client", status={"code": "STATUS_CODE_ERROR", "message": "boom"}),
        span(kind="Span_Kind_Server", status={"code": "2"}),
    ),
    "missing trace id": _line(span(traceId=_ABSENT)),
    "missing start": _line(span(startTimeUnixNano=_ABSENT)),
    "kind of another type": _line(span(kind=True)),
    "kind beyond ASCII": _line(span(kind="ſerver")),
    "escaped field name": _line(span()).replace(b'"name":', b'"\\u006eame":'),
    "deep unknown field": _line({**span(), "x": json.loads("[" * 40 + "]" * 40)}),
    "text after the object": _line(span()) + b" x",
    "invalid JSON": _line(span())[:-3],
    # a number msgspec refuses makes the whole line invalid JSON, wherever it stands
    "double out of range, unread": _line(span()).replace(b'"name":', b'"x":1e999,"name":'),
    "double out of range in an array": _with_field("arrayValue", {"values": []}).replace(
        b'"values":[]', b'"values":[{"doubleValue":-1.5e400}]'
    ),
    "not a request": b'{"resourceLogs":[]}',
    # bytes that are no UTF-8 in a string, wherever it stands: the robust path decides
    **{
        f"not UTF-8 ({what}) in {where}": _line(
            span(attributes=_attrs(("k", {"stringValue": "v"}))), schemaUrl="u"
        ).replace(old, old[:-1] + raw + b'"')
        for what, raw in {
            "a stray continuation byte": b"\x80",
            "an overlong slash": b"\xc0\xaf",
            "an overlong three-byte form": b"\xe0\x80\xaf",
            "a surrogate": b"\xed\xa0\x80",
            "past U+10FFFF": b"\xf4\x90\x80\x80",
            "a lead byte that never starts one": b"\xf5\x80\x80\x80",
            "a cut sequence": b"\xe2\x82",
            "a lead byte before ASCII": b"\xc3(",
        }.items()
        for where, old in {
            "a value": b'"v"',
            "a key": b'"k"',
            "the span name": b'"chat"',
            "the scope name": b'"lib"',
            "an unread field": b'"u"',
        }.items()
    },
}


@pytest.mark.parametrize("text", LEFT_TO_ROBUST.values(), ids=LEFT_TO_ROBUST.keys())
def test_lines_the_native_reader_leaves_to_the_robust_path(text, monkeypatch):
    assert _refused(text)
    _same_as_robust(text, monkeypatch)


def test_a_refused_line_leaves_nothing_behind(monkeypatch):
    # refused mid-span (after attributes, events and links were written): rolled back whole
    good = READ_NATIVELY["events and links"]
    bad = _line(
        span(
            events=[{"name": "e", "attributes": _attrs(("a", {"intValue": 1}))}],
            links=[{"traceId": T1, "spanId": S2}],
            kind=True,
        )
    )
    text = b"\n".join(
        [good, bad, good, b"", bad, READ_NATIVELY["arrays, key-value lists and bytes"]]
    )
    _, refused, spans = otlp_json._native.parse(
        [line for line in text.split(b"\n") if line], [1, 2, 3, 5, 6]
    )
    assert refused == [1, 3] and spans == 5
    table = _same_as_robust(text, monkeypatch)
    assert table.column("source_pos").to_pylist() == [1, 1, 2, 3, 3, 5, 6]


def test_each_resource_is_read_once_and_its_spans_point_at_it(monkeypatch):
    def block(name: str, *spans: dict) -> dict:
        tags = {"arrayValue": {"values": [{"stringValue": name}]}}  # converted after parsing
        attributes = _attrs(("service.name", {"stringValue": name}), ("tags", tags))
        return {"resource": {"attributes": attributes}, "scopeSpans": [{"spans": list(spans)}]}

    def request(*blocks: dict) -> bytes:
        return orjson.dumps({"resourceSpans": list(blocks)})

    text = b"\n".join(
        [
            # a resource without spans gives no entry; a refused line's resource is rolled back
            request(block("a", span(), span(spanId=S2)), block("none"), block("b", span())),
            request(block("refused", span()), block("x", span(kind=True))),
            request(block("c", span(), span(spanId=S2), span(spanId="eee19b7ec3c1b172"))),
            # a resource met before is listed once; the refused line's is listed anew
            request(block("refused", span()), block("a", span(spanId=S2))),
        ]
    )
    lines = text.split(b"\n")
    native, refused, _ = otlp_json._native_lines(lines, [1, 2, 3, 4], [0, 1, 2, 3], "f")
    assert refused == [1] and native.schema == SHARED_SCHEMA
    shared = native.column("resource_attributes")
    listed = shared.dictionary.to_pylist()
    assert [r[0]["str"] for r in listed] == ["a", "b", "c", "refused"]
    assert [r[1]["json"] for r in listed] == ['["a"]', '["b"]', '["c"]', '["refused"]']
    assert shared.indices.to_pylist() == [0, 0, 1, 2, 2, 2, 3, 0]
    table = _same_as_robust(text, monkeypatch)  # read_lines gives each span its own list
    assert table.schema == SPAN_SCHEMA
    names = [r[0]["str"] for r in table.column("resource_attributes").to_pylist()]
    assert names == ["a", "a", "b", "refused", "x", "c", "c", "c", "refused", "a"]
    # past the first 32 resources of a call, a resource is listed at each meeting
    many = request(*(block(f"r{k}", span()) for k in range(40)))
    native, _, _ = otlp_json._native_lines([many, many], [1, 2], [0, 1], "f")
    assert len(native.column("resource_attributes").dictionary) == 32 + 8 + 8
    _same_as_robust(many + b"\n" + many, monkeypatch)


def test_generated_dump_is_read_natively_and_equals_the_robust_path(tmp_path, monkeypatch):
    from gen_otlp import generate  # bench/gen_otlp.py: what the benchmarks read

    path = tmp_path / "gen.jsonl"
    generate(path, 3000, 11, concurrency=16)
    lines = path.read_bytes().splitlines()
    _, refused, spans = otlp_json._native.parse(lines, list(range(1, len(lines) + 1)))
    assert refused == [] and spans >= 3000
    native, native_log = _native_read(path.read_bytes(), monkeypatch)
    monkeypatch.setattr(otlp_json, "_native", None)
    robust, robust_log = _read(path.read_bytes(), otlp_json.read_lines)
    assert native.equals(robust) and native_log == robust_log


def test_columns_beyond_32_bit_offsets_fall_back_to_the_robust_path(monkeypatch):
    class Overflowing:
        @staticmethod
        def parse(lines, numbers):
            raise OverflowError("a column outgrew 32-bit offsets")

    text = READ_NATIVELY["events and links"]
    expected, expected_log = _native_read(text, monkeypatch)
    monkeypatch.setattr(otlp_json, "_native", Overflowing)
    table, log = _read(text, otlp_json.read_lines)
    assert table.equals(expected) and log == expected_log


def test_without_the_native_reader_the_robust_path_reads_lines(tmp_path):
    # as on a machine where the package was installed without a C compiler
    path = tmp_path / "one.jsonl"
    path.write_bytes(READ_NATIVELY["events and links"] + b"\n")
    code = (
        "import sys; sys.modules['analyzer.ingest._otlp_lines'] = None\n"
        "from analyzer.ingest import otlp_json\n"
        "from analyzer.ingest.accounting import FileLog\n"
        "assert otlp_json._native is None\n"
        "log = FileLog('one.jsonl')\n"
        f"rows = sum(b.num_rows for b in otlp_json.read_lines(open({str(path)!r}, 'rb'), log))\n"
        "print(rows, log.spans_read, log.spans_quarantined)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["2", "2", "0"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    number=st.from_regex(
        r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,24})?([eE][-+]?[0-9]{1,3})?", fullmatch=True
    ),
    place=st.sampled_from(["unread", "doubleValue", "intValue", "array", "event time"]),
)
def test_any_number_reads_as_the_robust_path_reads_it(number, place):
    # JSON numbers of every shape and range, where the native reader parses them and where it
    # only steps over them: the same rows and quarantine as the reference
    token = number.encode()
    base = _line(
        span(
            events=[{"name": "e", "timeUnixNano": 7}],
            attributes=_attrs(("k", {"stringValue": "v"})),
        )
    )
    marker = {
        "unread": (b'"name":"chat"', b'"x":' + token + b',"name":"chat"'),
        "doubleValue": (b'{"stringValue":"v"}', b'{"doubleValue":' + token + b"}"),
        "intValue": (b'{"stringValue":"v"}', b'{"intValue":' + token + b"}"),
        "array": (
            b'{"stringValue":"v"}',
            b'{"arrayValue":{"values":[{"doubleValue":' + token + b"}]}}",
        ),
        "event time": (b'"timeUnixNano":7', b'"timeUnixNano":' + token),
    }[place]
    text = base.replace(*marker)
    table, log = _read(text, otlp_json.read_lines)
    robust, robust_log = _read(text, robust_lines)
    assert json.dumps(table.to_pylist(), default=str) == json.dumps(robust.to_pylist(), default=str)
    assert log == robust_log
