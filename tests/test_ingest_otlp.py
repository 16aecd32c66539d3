"""OTLP readers: JSON lines (fast and robust paths), JSON documents and protobuf frames."""

from __future__ import annotations

import io
import json
import math
import struct
import sys
import tempfile
from pathlib import Path

import orjson
import pyarrow as pa
import pytest
import zstandard
from factories import robust_lines

from analyzer.ingest import otlp_json
from analyzer.ingest.accounting import FileLog
from analyzer.ingest.otlp_json import read_document, read_lines
from analyzer.ingest.otlp_proto import looks_like_frames, read_frames
from analyzer.spans import SPAN_SCHEMA

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

T1 = "5b8efff798038103d269b633813fc60c"
S1 = "eee19b7ec3c1b174"
S2 = "eee19b7ec3c1b173"
START = 1544712660000000000
END = 1544712661000000000


@pytest.fixture(autouse=True, params=["native", "robust"])
def fast_path(request, monkeypatch):
    """Every test here runs both ways: the native (C) reader in front of the robust path, and
    the robust path alone (as where the extension is not built)."""
    if request.param == "robust":
        monkeypatch.setattr(otlp_json, "_native", None)
    elif otlp_json._native is None:
        pytest.skip("the native reader was not built (tests/test_ingest_native.py says so)")
    return request.param


def _table(batches) -> pa.Table:
    return pa.Table.from_batches(list(batches), schema=SPAN_SCHEMA)


def _balanced(log: FileLog, rows: int) -> None:
    assert log.spans_read == rows + log.spans_quarantined


def read_json_lines(text: bytes, *, robust: bool = False) -> tuple[list[dict], FileLog]:
    log = FileLog("f.jsonl")
    reader = robust_lines if robust else read_lines
    table = _table(reader(io.BytesIO(text), log))
    _balanced(log, table.num_rows)
    return table.to_pylist(), log


def line(*spans: dict, resource: dict | None = None, scope: dict | None = None) -> bytes:
    rs = {
        "resource": resource or {"attributes": []},
        "scopeSpans": [{"scope": scope or {}, "spans": list(spans)}],
    }
    return orjson.dumps({"resourceSpans": [rs]})


def span(**fields) -> dict:
    out = {
        "traceId": T1,
        "spanId": S1,
        "parentSpanId": S2,
        "name": "chat",
        "kind": 3,
        "startTimeUnixNano": str(START),
        "endTimeUnixNano": str(END),
    }
    out.update(fields)
    return {k: v for k, v in out.items() if v is not _ABSENT}


_ABSENT = object()


def attr_row(key, *, s=None, i=None, f=None, b=None, j=None) -> dict:
    return {"key": key, "str": s, "int": i, "float": f, "bool": b, "json": j}


def kv(key: str, value: dict) -> dict:
    return {"key": key, "value": value}


# --- JSON lines: one variant at a time, expected rows by hand ----------------------------------


def test_spec_example_line_gives_the_row_by_hand():
    text = (
        b'{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"my.service"}}]},'
        b'"scopeSpans":[{"scope":{"name":"my.library","version":"1.0.0"},"spans":[{'
        b'"traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"EEE19B7EC3C1B174",'
        b'"parentSpanId":"EEE19B7EC3C1B173","name":"I\'m a server span",'
        b'"startTimeUnixNano":"1544712660000000000","endTimeUnixNano":"1544712661000000000",'
        b'"kind":2,"attributes":[{"key":"my.span.attr","value":{"stringValue":"some value"}}]'
        b"}]}]}]}\n"
    )
    rows, log = read_json_lines(text)
    assert rows == [
        {
            "trace_id": T1,
            "span_id": S1,
            "parent_span_id": S2,
            "name": "I'm a server span",
            "kind": "server",
            "start_ns": START,
            "end_ns": END,
            "status_code": "unset",
            "status_message": None,
            "scope_name": "my.library",
            "scope_version": "1.0.0",
            "attributes": [attr_row("my.span.attr", s="some value")],
            "resource_attributes": [attr_row("service.name", s="my.service")],
            "events": [],
            "links": [],
            "source_file": "f.jsonl",
            "source_pos": 1,
        }
    ]
    assert (log.records, log.spans_read, log.records_quarantined, log.spans_quarantined) == (
        1,
        1,
        0,
        0,
    )


def test_message_to_json_style_base64_ids_and_enum_names():
    # ids of test_spec_example in base64; enums by name; int64 as numbers
    text = line(
        span(
            traceId="W47/95gDgQPSabYzgT/GDA==",
            spanId="7uGbfsPBsXQ=",
            parentSpanId="7uGbfsPBsXM=",
            kind="SPAN_KIND_INTERNAL",
            startTimeUnixNano=START,
            endTimeUnixNano=END,
            status={"code": "STATUS_CODE_ERROR", "message": "boom"},
        )
    )
    (row,), _ = read_json_lines(text)
    assert (row["trace_id"], row["span_id"], row["parent_span_id"]) == (T1, S1, S2)
    assert (row["kind"], row["status_code"], row["status_message"]) == ("internal", "error", "boom")
    assert (row["start_ns"], row["end_ns"]) == (START, END)


@pytest.mark.parametrize(
    ("kind", "code", "expected"),
    [
        (0, 0, ("unspecified", "unset")),
        (5, 1, ("consumer", "ok")),
        ("SPAN_KIND_PRODUCER", "STATUS_CODE_OK", ("producer", "ok")),
        ("span_kind_client", 2, ("client", "error")),
        (9, 7, ("unspecified", "unset")),  # unknown values: the OTLP defaults
        ("SERVER_SPAN", "BAD", ("unspecified", "unset")),
    ],
)
def test_kind_and_status_spellings(kind, code, expected):
    (row,), _ = read_json_lines(line(span(kind=kind, status={"code": code})))
    assert (row["kind"], row["status_code"]) == expected


def test_int64_as_strings_and_numbers():
    attrs = [
        kv("a", {"intValue": "12"}),
        kv("b", {"intValue": -7}),
        kv("c", {"intValue": "9223372036854775807"}),
    ]
    (row,), _ = read_json_lines(
        line(span(startTimeUnixNano=START, endTimeUnixNano=str(END), attributes=attrs))
    )
    assert (row["start_ns"], row["end_ns"]) == (START, END)
    assert row["attributes"] == [
        attr_row("a", i=12),
        attr_row("b", i=-7),
        attr_row("c", i=2**63 - 1),
    ]


def test_doubles_as_numbers_and_special_strings():
    attrs = [
        kv("t", {"doubleValue": 0.7}),
        kv("one", {"doubleValue": 1}),
        kv("inf", {"doubleValue": "Infinity"}),
        kv("ninf", {"doubleValue": "-Infinity"}),
        kv("nan", {"doubleValue": "NaN"}),
    ]
    (row,), _ = read_json_lines(line(span(attributes=attrs)))
    got = [(a["key"], a["float"]) for a in row["attributes"]]
    assert got[:4] == [("t", 0.7), ("one", 1.0), ("inf", math.inf), ("ninf", -math.inf)]
    assert got[4][0] == "nan" and math.isnan(got[4][1])
    assert all(
        a["str"] is None and a["int"] is None and a["json"] is None for a in row["attributes"]
    )


def test_legacy_instrumentation_library_spans():
    text = orjson.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": [kv("service.name", {"stringValue": "old"})]},
                    "instrumentationLibrarySpans": [
                        {
                            "instrumentationLibrary": {"name": "lib", "version": "0.1"},
                            "spans": [span()],
                        }
                    ],
                }
            ]
        }
    )
    (row,), log = read_json_lines(text)
    assert (row["scope_name"], row["scope_version"]) == ("lib", "0.1")
    assert row["resource_attributes"] == [attr_row("service.name", s="old")]
    assert log.spans_read == 1


def test_arrays_kvlists_and_bytes_become_json_text():
    attrs = [
        kv(
            "reasons",
            {"arrayValue": {"values": [{"stringValue": "stop"}, {"stringValue": "length"}]}},
        ),
        kv(
            "mixed",
            {
                "arrayValue": {
                    "values": [
                        {"stringValue": "a"},
                        {"intValue": "1"},
                        {"boolValue": True},
                        {"doubleValue": 1.5},
                    ]
                }
            },
        ),
        kv("empty", {"arrayValue": {}}),
        kv(
            "nested",
            {
                "kvlistValue": {
                    "values": [
                        kv(
                            "k",
                            {
                                "kvlistValue": {
                                    "values": [
                                        kv(
                                            "x",
                                            {
                                                "arrayValue": {
                                                    "values": [{"intValue": 1}, {"intValue": "2"}]
                                                }
                                            },
                                        )
                                    ]
                                }
                            },
                        )
                    ]
                }
            },
        ),
        kv("blob", {"bytesValue": "aGk="}),
        kv("quote", {"arrayValue": {"values": [{"stringValue": 'say "hi"'}]}}),
    ]
    (row,), _ = read_json_lines(line(span(attributes=attrs)))
    assert row["attributes"] == [
        attr_row("reasons", j='["stop","length"]'),
        attr_row("mixed", j='["a",1,true,1.5]'),
        attr_row("empty", j="[]"),
        attr_row("nested", j='{"k":{"x":[1,2]}}'),
        attr_row("blob", j='"aGk="'),
        attr_row("quote", j='["say \\"hi\\""]'),
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"stringValue": 12}, attr_row("s", j="12")),
        ({"stringValue": None, "intValue": "3"}, attr_row("s", i=3)),
        ({"boolValue": "true"}, attr_row("s", b=True)),
        ({"boolValue": 0}, attr_row("s", b=False)),
        ({"intValue": "+5"}, attr_row("s", j='"+5"')),
        ({"intValue": 1e3}, attr_row("s", i=1000)),
        ({"doubleValue": "0.25"}, attr_row("s", f=0.25)),
        ({"bytesValue": 5}, attr_row("s", j="5")),
        ({"arrayValue": None}, None),
    ],
)
def test_one_odd_value_in_a_compact_line(value, expected):
    # the only oddity of the line: read the same by the native reader and the robust path
    text = line(span(attributes=[kv("s", value), kv("ok", {"stringValue": "fine"})]))
    (fast,), _ = read_json_lines(text)
    (slow,), _ = read_json_lines(text, robust=True)
    want = ([expected] if expected else []) + [attr_row("ok", s="fine")]
    assert fast["attributes"] == want
    assert slow["attributes"] == want


def test_escaped_strings_and_keys():
    attrs = [
        kv("args", {"stringValue": '{"q":"a\\b","n":1}\n\u00e9\U0001f600'}),
        kv('we"ird\\key', {"stringValue": "x"}),
    ]
    (row,), _ = read_json_lines(line(span(attributes=attrs)))
    assert row["attributes"] == [
        attr_row("args", s='{"q":"a\\b","n":1}\n\u00e9\U0001f600'),
        attr_row('we"ird\\key', s="x"),
    ]


def test_events_and_links():
    text = line(
        span(
            events=[
                {
                    "timeUnixNano": "1544712660500000000",
                    "name": "exception",
                    "attributes": [kv("exception.type", {"stringValue": "ValueError"})],
                },
                {"name": "no-time"},
            ],
            links=[
                {"traceId": T1.upper(), "spanId": S2, "attributes": [kv("w", {"intValue": "3"})]},
                {},
            ],
        )
    )
    (row,), _ = read_json_lines(text)
    assert row["events"] == [
        {
            "time_ns": 1544712660500000000,
            "name": "exception",
            "attributes": [attr_row("exception.type", s="ValueError")],
        },
        {"time_ns": None, "name": "no-time", "attributes": []},
    ]
    assert row["links"] == [
        {"trace_id": T1, "span_id": S2, "attributes": [attr_row("w", i=3)]},
        {"trace_id": None, "span_id": None, "attributes": []},
    ]


def test_roots_with_empty_zero_or_absent_parent():
    text = line(
        span(spanId="0000000000000001", parentSpanId=""),
        span(spanId="0000000000000002", parentSpanId="0000000000000000"),
        span(spanId="0000000000000003", parentSpanId=_ABSENT),
        span(spanId="0000000000000004", parentSpanId="AAAAAAAAAAA="),  # base64 of 8 zero bytes
    )
    rows, _ = read_json_lines(text)
    assert [(r["span_id"][-1], r["parent_span_id"]) for r in rows] == [
        ("1", None),
        ("2", None),
        ("3", None),
        ("4", None),
    ]


def test_bad_lines_are_quarantined_with_their_line_numbers():
    good = line(span())
    text = b"\n".join(
        [good, b"", b"not json at all", b"   ", good, good[:40]]
    )  # truncated last line
    rows, log = read_json_lines(text)
    assert [r["source_pos"] for r in rows] == [1, 5]
    assert log.records == 4  # blank lines are not records
    assert log.records_quarantined == 2
    assert [(q.position, q.reason.split(":")[0]) for q in log.quarantine] == [
        ("line 3", "invalid JSON"),
        ("line 6", "invalid JSON"),
    ]
    assert log.quarantine[0].excerpt == "not json at all"
    assert (log.spans_read, log.spans_quarantined) == (2, 0)


def test_bad_span_is_quarantined_alone():
    text = line(
        span(spanId="0000000000000001"),
        span(spanId="0000000000000002", traceId=True),
        span(spanId="0000000000000003", startTimeUnixNano="soon"),
        span(spanId="0000000000000004", traceId="00000000000000000000000000000000"),
        span(spanId="0000000000000005", endTimeUnixNano=_ABSENT),
        span(spanId="0000000000000006"),
    )
    rows, log = read_json_lines(text)
    assert [r["span_id"] for r in rows] == ["0000000000000001", "0000000000000006"]
    assert (log.spans_read, log.spans_quarantined, log.records_quarantined) == (6, 4, 0)
    assert [(q.position, q.spans) for q in log.quarantine] == [
        ("line 1 span 2", 1),
        ("line 1 span 3", 1),
        ("line 1 span 4", 1),
        ("line 1 span 5", 1),
    ]
    reasons = [q.reason for q in log.quarantine]
    assert reasons[0].startswith("bad traceId")
    assert reasons[1] == 'unreadable startTimeUnixNano: "soon"'
    assert reasons[2] == "missing traceId"
    assert reasons[3] == "missing endTimeUnixNano"


def test_wrong_attribute_types_keep_their_json_text():
    attrs = [
        kv("i", {"intValue": "abc"}),
        kv("s", {"stringValue": 12}),
        kv("b", {"boolValue": "yes"}),
        kv("bare", "plain"),  # not an AnyValue at all
        kv("big", {"intValue": "9223372036854775808"}),
        kv("empty", {}),
        kv("first-wins", {"stringValue": "a", "intValue": "1"}),
        kv("b2", {"boolValue": "true"}),
        {"value": {"stringValue": "no key"}},
    ]
    (row,), log = read_json_lines(line(span(attributes=attrs)))
    assert row["attributes"] == [
        attr_row("i", j='"abc"'),
        attr_row("s", j="12"),
        attr_row("b", j='"yes"'),
        attr_row("bare", s="plain"),
        attr_row("big", j='"9223372036854775808"'),
        attr_row("first-wins", s="a"),
        attr_row("b2", b=True),
        attr_row("", s="no key"),
    ]
    assert log.quarantine == []


def test_records_that_are_not_requests():
    text = (
        b'{"resourceMetrics":[]}\n[1,2]\n'
        b'{"resourceSpans":[{"scopeSpans":"x"}]}\n{"resourceSpans":[]}\n'
    )
    rows, log = read_json_lines(text)
    assert rows == []
    assert (log.records, log.records_quarantined, log.spans_read) == (4, 3, 0)
    assert [q.position for q in log.quarantine] == ["line 1", "line 2", "line 3"]
    assert all(q.reason.startswith("not an OTLP trace request") for q in log.quarantine)


def test_snake_case_field_names():
    text = orjson.dumps(
        {
            "resource_spans": [
                {
                    "scope_spans": [
                        {
                            "scope": {"name": "s"},
                            "spans": [
                                {
                                    "trace_id": T1,
                                    "span_id": S1,
                                    "parent_span_id": S2,
                                    "name": "n",
                                    "start_time_unix_nano": START,
                                    "end_time_unix_nano": END,
                                    "attributes": [kv("k", {"string_value": "v"})],
                                }
                            ],
                        }
                    ]
                }
            ]
        }
    )
    (row,), _ = read_json_lines(text)
    assert (row["trace_id"], row["parent_span_id"], row["scope_name"]) == (T1, S2, "s")
    assert row["attributes"] == [attr_row("k", s="v")]


# --- the native reader equals the robust path --------------------------------------------------


def _varied_file() -> bytes:
    from gen_otlp import generate  # bench/gen_otlp.py

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gen.jsonl"
        generate(path, 600, 7, concurrency=8)
        out.append(path.read_bytes().rstrip(b"\n"))
    variants = [
        line(
            span(
                traceId="W47/95gDgQPSabYzgT/GDA==", kind="SPAN_KIND_SERVER", startTimeUnixNano=START
            )
        ),
        line(
            span(
                attributes=[
                    kv("d", {"doubleValue": "NaN"}),
                    kv("x", {"doubleValue": "1.5"}),
                    kv("z", {"doubleValue": -0.0}),
                ]
            )
        ),
        line(
            span(
                attributes=[
                    kv(
                        "n",
                        {
                            "kvlistValue": {
                                "values": [
                                    kv(
                                        "a",
                                        {
                                            "arrayValue": {
                                                "values": [
                                                    {"arrayValue": {"values": [{"intValue": 1}]}}
                                                ]
                                            }
                                        },
                                    )
                                ]
                            }
                        },
                    )
                ]
            )
        ),
        line(
            span(
                attributes=[
                    kv("i", {"intValue": "abc"}),
                    kv("e", {}),
                    kv("f", {"intValue": 1.0}),
                    kv("g", {"intValue": "1e3"}),
                ]
            )
        ),
        line(span(traceId=True), span(spanId="0000000000000009")),
        b"",
        b"garbage",
        line(
            span(
                attributes=[
                    kv("s", {"stringValue": "tab\there"}),
                    kv("u", {"stringValue": "\u00e9"}),
                    kv("k\\", {"boolValue": False}),
                ]
            )
        ),
        # whitespace and value-before-key: not the compact form exporters write
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "%s", "spanId": "%s", '
        b'"startTimeUnixNano": 1, "endTimeUnixNano": 2, '
        b'"attributes": [{"value": {"stringValue": "v"}, "key": "k"}]}]}]}]}'
        % (T1.encode(), S1.encode()),
        line(
            span(
                attributes=[
                    kv(
                        "a",
                        {
                            "arrayValue": {
                                "values": [{"stringValue": "x"}, {"doubleValue": "NaN"}, {}]
                            }
                        },
                    )
                ]
            )
        ),
        line(span(links=[{"traceId": "nothex", "spanId": S1}])),
        line(span(events=[{"timeUnixNano": "x"}])),
        line(span(attributes=[kv("b", {"bytesValue": "AAEC"}), kv("bool", {"boolValue": 1})])),
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[' + orjson.dumps(span()) + b"]}]}]}\r",
        orjson.dumps(
            {
                "resourceSpans": [
                    {
                        "scopeSpans": [
                            {
                                "spans": [
                                    span(attributes=[kv("x\u00e9", {"stringValue": "\u00e9" * 3})])
                                ]
                            }
                        ]
                    }
                ]
            }
        ),
        line(span(attributes=None, events=None)),
        line(span(attributes=[kv("dup", {"stringValue": "1"}), kv("dup", {"intValue": "2"})])),
        # one odd value each in otherwise compact lines (the native reader must not guess)
        line(span(attributes=[kv("s", {"stringValue": 12})])),
        line(span(attributes=[kv("s", {"stringValue": None}), kv("t", {"stringValue": "x"})])),
        line(span(attributes=[kv("b", {"boolValue": "true"}), kv("c", {"boolValue": 0})])),
        line(span(attributes=[kv("i", {"intValue": "+5"}), kv("j", {"intValue": "007"})])),
        line(span(attributes=[kv("d", {"doubleValue": "0.25"}), kv("e", {"doubleValue": 1e300})])),
        line(span(attributes=[kv("a", {"arrayValue": None}), kv("y", {"bytesValue": 5})])),
        line(span(attributes=[{"key": "x", "value": {"stringValue": "v"}, "extra": 1}])),
        # latin-1 in a field no reader keeps: the line is not UTF-8 all the same
        b'{"resourceSpans":[],"note":"latin-1 \xe9 is not UTF-8"}',
    ]
    out.extend(variants)
    return b"\n".join(out) + b"\n" + line(span())[:-5]  # a truncated last line


def _comparable(rows: list[dict]) -> str:
    return json.dumps(rows, default=str).replace("NaN", '"nan"')


def test_fast_path_rows_equal_robust_path_rows_on_a_varied_file():
    data = _varied_file()
    fast_rows, fast_log = read_json_lines(data)
    slow_rows, slow_log = read_json_lines(data, robust=True)
    assert len(fast_rows) > 600
    assert _comparable(fast_rows) == _comparable(slow_rows)
    assert fast_log == slow_log
    assert fast_log.records_quarantined == 3 and fast_log.spans_quarantined == 3


def test_fast_path_with_tiny_chunks_gives_the_same_rows(monkeypatch):
    data = _varied_file()
    expected, expected_log = read_json_lines(data)
    monkeypatch.setattr(otlp_json, "CHUNK_BYTES", 700)
    rows, log = read_json_lines(data)
    assert _comparable(rows) == _comparable(expected)
    assert log == expected_log


@pytest.mark.parametrize("bom", [False, True])
def test_a_file_gives_the_same_rows_as_bytes_in_memory(tmp_path, monkeypatch, bom):
    data = (b"\xef\xbb\xbf" if bom else b"") + _varied_file()
    path = tmp_path / "dump.jsonl"
    path.write_bytes(data)
    expected, expected_log = read_json_lines(data)
    for chunk in (otlp_json.CHUNK_BYTES, 700):
        monkeypatch.setattr(otlp_json, "CHUNK_BYTES", chunk)
        log = FileLog("f.jsonl")
        with path.open("rb") as f:
            rows = _table(read_lines(f, log)).to_pylist()
        assert _comparable(rows) == _comparable(expected)
        assert log == expected_log
    assert expected[0]["source_pos"] == 1


@pytest.mark.parametrize("jobs", [2, 3])
def test_lines_read_on_several_threads_equal_one(tmp_path, monkeypatch, jobs):
    # small groups, so that many are in flight at once; a file and bytes in memory alike
    path = tmp_path / "dump.jsonl"
    path.write_bytes(_varied_file())
    expected, expected_log = read_json_lines(path.read_bytes())
    monkeypatch.setattr(otlp_json, "CHUNK_BYTES", 4000)
    for on_disk in (True, False):
        log = FileLog("f.jsonl")
        with path.open("rb") as f:
            stream = f if on_disk else io.BytesIO(f.read())
            rows = _table(read_lines(stream, log, jobs=jobs)).to_pylist()
        assert _comparable(rows) == _comparable(expected)
        assert log == expected_log
        _balanced(log, len(rows))


# --- documents ---------------------------------------------------------------------------------


def test_pretty_printed_document():
    doc = json.dumps(
        {
            "resourceSpans": json.loads(line(span(), span(spanId=S2, parentSpanId="")))[
                "resourceSpans"
            ]
        },
        indent=2,
    )
    log = FileLog("d.json")
    rows = _table(read_document(doc.encode(), log)).to_pylist()
    assert [(r["span_id"], r["parent_span_id"], r["source_pos"]) for r in rows] == [
        (S1, S2, 0),
        (S2, None, 0),
    ]
    assert (log.records, log.spans_read) == (1, 2)


def test_document_errors():
    log = FileLog("d.json")
    rows = _table(read_document(line(span(), span(traceId=True)), log)).to_pylist()
    assert len(rows) == 1
    assert [q.position for q in log.quarantine] == ["document span 2"]
    _balanced(log, 1)
    log = FileLog("d.json")
    assert list(read_document(b'{"resourceSpans": [', log)) == []
    assert (log.records, log.records_quarantined, log.quarantine[0].position) == (1, 1, "document")


# --- protobuf ----------------------------------------------------------------------------------


def _sdk_request():
    """A request made by the real SDK and the OTLP exporter's own encoder."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("demo.scope", "1.2")
    with (
        tracer.start_as_current_span("invoke_agent a") as root,
        tracer.start_as_current_span(
            "chat gpt",
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.usage.input_tokens": 12,
                "t": 0.5,
                "ok": True,
                "reasons": ["stop"],
                "m": "gpt",
            },
            links=[Link(root.get_span_context(), {"w": 1})],
        ) as chat,
    ):
        chat.add_event("gen_ai.choice", {"index": 0})
        chat.set_status(Status(StatusCode.ERROR, "rate limited"))
    spans = exporter.get_finished_spans()
    provider.shutdown()
    return encode_spans(spans), spans


def _frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def _check_sdk_rows(rows, spans, offsets):
    chat, root = spans
    assert [r["span_id"] for r in rows] == [
        f"{chat.context.span_id:016x}",
        f"{root.context.span_id:016x}",
    ]
    first = rows[0]
    assert first["trace_id"] == f"{chat.context.trace_id:032x}"
    assert first["parent_span_id"] == f"{root.context.span_id:016x}"
    assert rows[1]["parent_span_id"] is None
    assert (first["kind"], first["status_code"], first["status_message"]) == (
        "client",
        "error",
        "rate limited",
    )
    assert (first["start_ns"], first["end_ns"]) == (chat.start_time, chat.end_time)
    assert (first["scope_name"], first["scope_version"]) == ("demo.scope", "1.2")
    assert first["attributes"] == [
        attr_row("gen_ai.usage.input_tokens", i=12),
        attr_row("t", f=0.5),
        attr_row("ok", b=True),
        attr_row("reasons", j='["stop"]'),
        attr_row("m", s="gpt"),
    ]
    assert attr_row("service.name", s="agent") in first["resource_attributes"]
    assert first["events"] == [
        {
            "time_ns": chat.events[0].timestamp,
            "name": "gen_ai.choice",
            "attributes": [attr_row("index", i=0)],
        }
    ]
    assert first["links"] == [
        {
            "trace_id": first["trace_id"],
            "span_id": rows[1]["span_id"],
            "attributes": [attr_row("w", i=1)],
        }
    ]
    assert [r["source_pos"] for r in rows] == offsets


@pytest.mark.parametrize("compress", [False, True])
def test_proto_frames_from_the_sdk_encoder(compress):
    request, spans = _sdk_request()
    payload = request.SerializeToString()
    if compress:
        payload = zstandard.ZstdCompressor().compress(payload)
        assert payload[:4] == b"\x28\xb5\x2f\xfd"
    data = _frame(payload) + _frame(payload)
    assert looks_like_frames(data[:64], len(data))
    log = FileLog("t.pb")
    rows = _table(read_frames(io.BytesIO(data), log)).to_pylist()
    _check_sdk_rows(rows[:2], spans, [0, 0])
    assert [r["source_pos"] for r in rows[2:]] == [4 + len(payload)] * 2
    assert (log.records, log.spans_read, log.records_quarantined) == (2, 4, 0)
    _balanced(log, 4)


def test_proto_and_json_give_the_same_rows():
    from google.protobuf.json_format import MessageToJson

    request, _ = _sdk_request()
    proto_log, json_log = FileLog("x"), FileLog("x")
    from_proto = _table(
        read_frames(io.BytesIO(_frame(request.SerializeToString())), proto_log)
    ).to_pylist()
    # MessageToJson writes base64 ids and enum names: the "wrong" OTLP JSON
    text = MessageToJson(request, indent=None).encode()
    from_json = _table(read_document(text, json_log)).to_pylist()
    assert _comparable(from_proto) == _comparable(from_json)


def test_raw_request_body():
    request, spans = _sdk_request()
    body = request.SerializeToString()
    assert body[0] == 0x0A and looks_like_frames(body[:64], len(body))
    log = FileLog("body.pb")
    rows = _table(read_frames(io.BytesIO(body), log)).to_pylist()
    _check_sdk_rows(rows, spans, [0, 0])
    assert (log.records, log.spans_read) == (1, 2)


def test_corrupt_frame_is_skipped_and_truncated_frame_ends_reading():
    request, _ = _sdk_request()
    good = _frame(request.SerializeToString())
    corrupt = _frame(b"\x0a\xff\xff\xff\x0f garbage")
    zcorrupt = _frame(b"\x28\xb5\x2f\xfd" + b"\x00" * 12)
    truncated = struct.pack(">I", 1000) + b"\x0a\x05short"
    data = good + corrupt + zcorrupt + good + truncated
    log = FileLog("t.pb")
    rows = _table(read_frames(io.BytesIO(data), log)).to_pylist()
    second_good = len(good) + len(corrupt) + len(zcorrupt)
    assert [r["source_pos"] for r in rows] == [0, 0, second_good, second_good]
    assert [q.position for q in log.quarantine] == [
        f"byte {len(good)}",
        f"byte {len(good) + len(corrupt)}",
        f"byte {second_good + len(good)}",
    ]
    assert log.quarantine[0].reason.startswith("corrupt frame")
    assert (
        log.quarantine[2].reason == "frame length 1000 runs past the end of the file (7 bytes left)"
    )
    assert (log.records, log.records_quarantined, log.spans_read) == (5, 3, 4)
    _balanced(log, 4)


def test_proto_bad_span_is_quarantined_alone():
    request, _ = _sdk_request()
    request.resource_spans[0].scope_spans[0].spans[0].trace_id = b"\x01\x02"
    log = FileLog("t.pb")
    rows = _table(read_frames(io.BytesIO(_frame(request.SerializeToString())), log)).to_pylist()
    assert len(rows) == 1
    assert [(q.position, q.reason) for q in log.quarantine] == [
        ("byte 0 span 1", "bad traceId: 2 bytes, expected 16")
    ]
    _balanced(log, 1)


@pytest.mark.parametrize(
    ("head", "size", "expected"),
    [
        (b'{"resourceSpans":[]}', 20, False),
        (b"\x00\x00\x00\x05\x0a\x03abc", 9, True),  # one frame filling the file
        (b"\x00\x00\x00\x05\x0a\x03abc\x00\x00", 11, False),  # a second length cut short
        (b"\x00\x00\x10\x00\x0a", 100, False),  # first frame longer than the file
        (b"\x0a\x03\x0a\x01x", 5, True),  # a raw body
        (b"\x0a\x7f\x0a", 5, False),  # a body longer than the file
        (b"\x00\x00\x00\x04\x28\xb5\x2f\xfd", 8, True),  # a zstd frame
        (b"\x00\x00\x00\x04ABCD", 8, False),
        (b"\x00\x00", 2, False),
    ],
)
def test_looks_like_frames(head, size, expected):
    assert looks_like_frames(head, size) is expected


@pytest.mark.parametrize("whole_file", ["gz", "zst"])
@pytest.mark.parametrize("frame_zstd", [False, True])
def test_proto_frames_inside_a_compressed_file(tmp_path, whole_file, frame_zstd):
    # a collector proto file compressed whole afterwards (logrotate, `gzip traces.pb`)
    import gzip

    from analyzer.ingest.reader import read_traces

    request, _ = _sdk_request()
    payload = request.SerializeToString()
    if frame_zstd:
        payload = zstandard.ZstdCompressor().compress(payload)
    data = _frame(payload) + _frame(payload)
    packed = (
        gzip.compress(data) if whole_file == "gz" else zstandard.ZstdCompressor().compress(data)
    )
    path = tmp_path / f"traces.pb.{whole_file}"
    path.write_bytes(packed)
    ingested = read_traces([path])
    log = ingested.log
    assert (log.spans_read, log.duplicates, log.spans_quarantined) == (4, 2, 0)
    assert ingested.spans.num_rows == 2
    assert log.balanced()


def test_a_compressed_text_file_is_not_taken_for_frames(tmp_path):
    import gzip

    from analyzer.ingest.reader import read_traces

    path = tmp_path / "notes.txt.gz"
    path.write_bytes(gzip.compress(b"hello, these are notes and no trace at all\n" * 10))
    ingested = read_traces([path])
    assert ingested.spans.num_rows == 0
    assert ingested.log.files[0].format == "unknown+gzip" and ingested.log.files[0].quarantine


def test_ids_that_are_no_encoding_are_read_as_opaque_ids_with_a_warning():
    # sanitized fixtures: "trace-1", "root", "child" keep their links, hashed to hex
    from analyzer.ingest.ids import opaque_id

    text = line(
        span(traceId="trace-1", spanId="root"),
        span(traceId="trace-1", spanId="child", parentSpanId="root"),
        span(spanId="0000000000000003"),
    )
    rows, log = read_json_lines(text)
    assert (log.spans_read, log.spans_quarantined) == (3, 0)
    root, child = rows[0], rows[1]
    assert root["trace_id"] == child["trace_id"] == opaque_id("trace-1", 16)
    assert root["span_id"] == opaque_id("root", 8) == child["parent_span_id"]
    assert len(root["span_id"]) == 16 and len(root["trace_id"]) == 32
    assert [(w.position, w.reason) for w in log.warnings] == [
        ("line 1 span 1", "traceId, spanId neither hex nor base64: read as an opaque id (hashed)"),
        (
            "line 1 span 2",
            "traceId, spanId, parentSpanId neither hex nor base64: read as an opaque id (hashed)",
        ),
    ]
