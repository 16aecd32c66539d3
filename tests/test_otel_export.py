"""OtlpJsonLinesExporter: collector-shaped OTLP JSON lines, rotation, gzip, determinism, threads."""

from __future__ import annotations

import base64
import gzip
import json
import threading
from pathlib import Path

import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    Link,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
)

from analyzer.otel_export import OtlpJsonLinesExporter, any_value_json, spans_to_otlp_json

TRACE = 0x0AF7651916CD43DD8448EB211C80319C
RES_A = Resource({"service.name": "kyc-agent", "service.version": "2.3.0"})
RES_B = Resource({"service.name": "other"}, schema_url="https://opentelemetry.io/schemas/1.37.0")
SCOPE_1 = InstrumentationScope("agent", "1.0")
SCOPE_2 = InstrumentationScope("llm", None, "https://example.test/schema", {"lib": "x"})


def ctx(span_id: int, trace_id: int = TRACE, remote: bool = False, state=None) -> SpanContext:
    return SpanContext(
        trace_id, span_id, is_remote=remote, trace_flags=TraceFlags(1), trace_state=state
    )


def span(
    span_id: int,
    *,
    name: str = "s",
    parent: SpanContext | None = None,
    resource: Resource = RES_A,
    scope: InstrumentationScope | None = SCOPE_1,
    **kwargs,
) -> ReadableSpan:
    kwargs.setdefault("start_time", 1_000)
    kwargs.setdefault("end_time", 2_000)
    return ReadableSpan(
        name,
        context=ctx(span_id),
        parent=parent,
        resource=resource,
        instrumentation_scope=scope,
        **kwargs,
    )


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def spans_in(document: dict) -> list[dict]:
    return [s for rs in document["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def as_proto(document: dict) -> ExportTraceServiceRequest:
    """Our OTLP JSON -> protobuf, turning the hex ids back into the base64 json_format expects."""

    def fix(node):
        if isinstance(node, dict):
            out = {}
            for key, value in node.items():
                if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):
                    value = base64.b64encode(bytes.fromhex(value)).decode()
                out[key] = fix(value)
            return out
        if isinstance(node, list):
            return [fix(v) for v in node]
        return node

    return json_format.ParseDict(fix(document), ExportTraceServiceRequest())


# --- the JSON shape ------------------------------------------------------------------------------


def test_one_span_is_written_exactly_as_the_collector_would():
    root = span(0x00F067AA0BA902B7, name="invoke_agent kyc-reviewer")
    child = span(
        0x53995C3F42CD8AD8,
        name="chat gpt-4.1",
        parent=root.get_span_context(),
        kind=SpanKind.CLIENT,
        attributes={"gen_ai.request.temperature": 0.0, "gen_ai.usage.input_tokens": 812},
        events=[Event("exception", {"exception.type": "RateLimitError"}, timestamp=1_500)],
        status=Status(StatusCode.ERROR, "429"),
    )
    expected = (
        '{"resourceSpans":[{"resource":{"attributes":['
        '{"key":"service.name","value":{"stringValue":"kyc-agent"}},'
        '{"key":"service.version","value":{"stringValue":"2.3.0"}}]},'
        '"scopeSpans":[{"scope":{"name":"agent","version":"1.0"},"spans":['
        '{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"00f067aa0ba902b7",'
        '"flags":256,"name":"invoke_agent kyc-reviewer","kind":1,'
        '"startTimeUnixNano":"1000","endTimeUnixNano":"2000","status":{}},'
        '{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"53995c3f42cd8ad8",'
        '"parentSpanId":"00f067aa0ba902b7","flags":256,"name":"chat gpt-4.1","kind":3,'
        '"startTimeUnixNano":"1000","endTimeUnixNano":"2000","attributes":['
        '{"key":"gen_ai.request.temperature","value":{"doubleValue":0}},'
        '{"key":"gen_ai.usage.input_tokens","value":{"intValue":"812"}}],'
        '"events":[{"timeUnixNano":"1500","name":"exception","attributes":['
        '{"key":"exception.type","value":{"stringValue":"RateLimitError"}}]}],'
        '"status":{"message":"429","code":2}}]}]}]}'
    )
    assert spans_to_otlp_json([root, child]) == expected


def test_every_kind_and_status_is_an_integer():
    kinds = [SpanKind.INTERNAL, SpanKind.SERVER, SpanKind.CLIENT, SpanKind.PRODUCER]
    kinds.append(SpanKind.CONSUMER)
    spans = [span(i + 1, kind=k) for i, k in enumerate(kinds)]
    spans.append(span(9, status=Status(StatusCode.OK)))
    doc = json.loads(spans_to_otlp_json(spans))
    got = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert [s["kind"] for s in got] == [1, 2, 3, 4, 5, 1]
    assert [s["status"] for s in got] == [{}, {}, {}, {}, {}, {"code": 1}]


def test_links_trace_state_and_remote_parent_flags():
    remote_parent = ctx(0x1111, remote=True)
    linked = ctx(0x2222, trace_id=0xABC, remote=True, state=TraceState([("vendor", "v1")]))
    s = ReadableSpan(
        "s",
        context=ctx(0x3333, state=TraceState([("a", "1"), ("b", "2")])),
        parent=remote_parent,
        resource=RES_A,
        links=[Link(linked, {"app.link.type": "previous_review"})],
        start_time=5,
        end_time=6,
    )
    got = json.loads(spans_to_otlp_json([s]))["resourceSpans"][0]["scopeSpans"][0]
    assert got["scope"] == {}  # no instrumentation scope: an empty message, as pdata writes it
    one = got["spans"][0]
    assert list(one) == [
        "traceId", "spanId", "traceState", "parentSpanId", "flags", "name", "kind",
        "startTimeUnixNano", "endTimeUnixNano", "links", "status",
    ]  # fmt: skip
    assert one["traceState"] == "a=1,b=2"
    assert one["flags"] == 0x300  # parent is remote: both SpanFlags bits
    assert one["links"] == [
        {
            "traceId": "00000000000000000000000000000abc",
            "spanId": "0000000000002222",
            "traceState": "vendor=v1",
            "attributes": [{"key": "app.link.type", "value": {"stringValue": "previous_review"}}],
            "flags": 0x300,
        }
    ]


def test_spans_are_grouped_by_resource_then_scope_in_first_seen_order():
    batch = [
        span(1, resource=RES_A, scope=SCOPE_1),
        span(2, resource=RES_B, scope=SCOPE_1),
        span(3, resource=RES_A, scope=SCOPE_2),
        span(4, resource=RES_A, scope=SCOPE_1),
    ]
    doc = json.loads(spans_to_otlp_json(batch))
    shape = [
        (
            rs["resource"]["attributes"][0]["value"]["stringValue"],
            rs.get("schemaUrl"),
            [(ss["scope"].get("name"), [s["spanId"][-1] for s in ss["spans"]])
             for ss in rs["scopeSpans"]],
        )
        for rs in doc["resourceSpans"]
    ]  # fmt: skip
    assert shape == [
        ("kyc-agent", None, [("agent", ["1", "4"]), ("llm", ["3"])]),
        ("other", "https://opentelemetry.io/schemas/1.37.0", [("agent", ["2"])]),
    ]
    scope2 = doc["resourceSpans"][0]["scopeSpans"][1]
    assert scope2["scope"] == {
        "name": "llm",
        "attributes": [{"key": "lib", "value": {"stringValue": "x"}}],
    }
    assert scope2["schemaUrl"] == "https://example.test/schema"


# --- AnyValue ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("é", '{"stringValue":"é"}'),
        (True, '{"boolValue":true}'),
        (False, '{"boolValue":false}'),
        (0, '{"intValue":"0"}'),
        (-42, '{"intValue":"-42"}'),
        (2**63 - 1, '{"intValue":"9223372036854775807"}'),
        (0.7, '{"doubleValue":0.7}'),
        (1.0, '{"doubleValue":1}'),
        (-0.0, '{"doubleValue":-0}'),
        (1e16, '{"doubleValue":10000000000000000}'),
        (1.5e-5, '{"doubleValue":0.000015}'),
        (1e-7, '{"doubleValue":1e-7}'),
        (1e21, '{"doubleValue":1e+21}'),
        (float("nan"), '{"doubleValue":"NaN"}'),
        (float("-inf"), '{"doubleValue":"-Infinity"}'),
        (b"\x00\xff", '{"bytesValue":"AP8="}'),
        (None, "{}"),
        ([], '{"arrayValue":{}}'),
        (("a", 1), '{"arrayValue":{"values":[{"stringValue":"a"},{"intValue":"1"}]}}'),
        ({}, '{"kvlistValue":{}}'),
        (
            {"k": [True, {"n": 2.5}]},
            '{"kvlistValue":{"values":[{"key":"k","value":{"arrayValue":{"values":['
            '{"boolValue":true},{"kvlistValue":{"values":[{"key":"n","value":'
            '{"doubleValue":2.5}}]}}]}}}]}}',
        ),
    ],
)
def test_any_value(value, expected):
    assert any_value_json(value) == expected


def test_every_any_value_type_round_trips_through_the_sdk_otlp_encoder():
    """Our JSON, read back by protobuf, equals what the SDK's own OTLP encoder builds."""
    attributes = {
        "s": "texte « français »\n",
        "b": True,
        "i": -7,
        "big": 2**62,
        "d": 0.1,
        "whole": 3.0,
        "tiny": 1e-9,
        "bytes": b"\x01\x02\x03",
        "arr": ["x", "y"],
        "mixed": [1, 2.5, False],
        "kv": {"inner": {"deep": [1, {"z": None}]}, "n": 1},
        "none": None,
    }
    spans = [
        span(
            1,
            attributes=attributes,
            kind=SpanKind.SERVER,
            events=[Event("e", {"x": [1.5]}, timestamp=1_234)],
            links=[Link(ctx(7, remote=True), {"w": 1})],
            status=Status(StatusCode.ERROR, "boom"),
        ),
        span(2, parent=ctx(1), resource=RES_B, scope=SCOPE_2),
        span(3, scope=None),
    ]
    mine = as_proto(json.loads(spans_to_otlp_json(spans)))
    assert mine == encode_spans(spans)


def test_unencodable_attribute_is_dropped_not_the_batch():
    s = span(1, attributes={"ok": 1, "bad": object()})
    attrs = json.loads(spans_to_otlp_json([s]))["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert attrs["attributes"] == [{"key": "ok", "value": {"intValue": "1"}}]


# --- files -------------------------------------------------------------------------------------


def test_driven_by_a_real_tracer_provider(tmp_path):
    exporter = OtlpJsonLinesExporter(tmp_path / "out.jsonl")
    provider = TracerProvider(resource=RES_A, shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent", "1.0")
    with tracer.start_as_current_span("root", start_time=10) as root:
        root.set_attribute("app.case_id", "KYC-2026-0001")
        tracer.start_span("child", start_time=20).end(end_time=30)
    provider.shutdown()
    lines = lines_of(tmp_path / "out.jsonl")
    assert len(lines) == 2  # SimpleSpanProcessor: one export (one line) per span
    child = lines[0]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    root_json = lines[1]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert child["parentSpanId"] == root_json["spanId"]
    assert len(child["traceId"]) == 32 and child["traceId"] == child["traceId"].lower()
    assert int(child["traceId"], 16) and int(child["spanId"], 16)
    assert child["startTimeUnixNano"] == "20" and child["endTimeUnixNano"] == "30"
    assert root_json["attributes"] == [
        {"key": "app.case_id", "value": {"stringValue": "KYC-2026-0001"}}
    ]
    assert exporter.export([span(1)]) is SpanExportResult.FAILURE  # after shutdown


def test_rotation_starts_numbered_files_and_never_splits_a_line(tmp_path):
    batches = [[span(i + 1, name=f"s{i}")] for i in range(5)]
    size = len(spans_to_otlp_json(batches[0])) + 1  # every line has this length (same shape)
    assert all(len(spans_to_otlp_json(b)) + 1 == size for b in batches)
    exporter = OtlpJsonLinesExporter(tmp_path, prefix="kyc", max_bytes=2 * size)
    for batch in batches:
        assert exporter.export(batch) is SpanExportResult.SUCCESS
    exporter.shutdown()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["kyc-0001.jsonl", "kyc-0002.jsonl", "kyc.jsonl"]
    got = [
        [s["name"] for line in lines_of(tmp_path / n) for s in spans_in(line)]
        for n in ("kyc.jsonl", "kyc-0001.jsonl", "kyc-0002.jsonl")
    ]
    assert got == [["s0", "s1"], ["s2", "s3"], ["s4"]]
    assert (tmp_path / "kyc.jsonl").stat().st_size == 2 * size  # exactly full is allowed


def test_a_line_longer_than_max_bytes_gets_a_file_of_its_own(tmp_path):
    small = [span(1)]
    big = [span(2, attributes={"blob": "x" * 500})]
    exporter = OtlpJsonLinesExporter(tmp_path / "t.jsonl", max_bytes=300)
    for batch in (small, big, small):
        exporter.export(batch)
    exporter.shutdown()
    sizes = {p.name: len(lines_of(p)) for p in tmp_path.iterdir()}
    assert sizes == {"t.jsonl": 1, "t-0001.jsonl": 1, "t-0002.jsonl": 1}
    assert (tmp_path / "t-0001.jsonl").stat().st_size > 300


def test_directory_path_and_file_path_naming(tmp_path):
    exporter = OtlpJsonLinesExporter(str(tmp_path) + "/")
    exporter.export([span(1)])
    exporter.shutdown()
    assert [p.name for p in tmp_path.iterdir()] == ["traces.jsonl"]
    nested = tmp_path / "a" / "b" / "spans.otlp.jsonl"
    exporter = OtlpJsonLinesExporter(nested, max_bytes=1)
    exporter.export([span(1)])
    exporter.export([span(2)])
    assert exporter.current_path == nested.parent / "spans-0001.otlp.jsonl"
    exporter.shutdown()
    assert sorted(p.name for p in nested.parent.iterdir()) == [
        "spans-0001.otlp.jsonl",
        "spans.otlp.jsonl",
    ]


def test_files_are_truncated_unless_append(tmp_path):
    path = tmp_path / "t.jsonl"
    for _ in range(2):
        exporter = OtlpJsonLinesExporter(path)
        exporter.export([span(1)])
        exporter.shutdown()
    assert len(lines_of(path)) == 1
    exporter = OtlpJsonLinesExporter(path, append=True)
    exporter.export([span(2)])
    exporter.shutdown()
    assert len(lines_of(path)) == 2


def test_empty_batch_writes_nothing(tmp_path):
    exporter = OtlpJsonLinesExporter(tmp_path / "t.jsonl")
    assert exporter.export([]) is SpanExportResult.SUCCESS
    assert exporter.force_flush() is True
    exporter.shutdown()
    assert not (tmp_path / "t.jsonl").exists()


def test_gzip_output_is_the_same_lines_with_a_timeless_header(tmp_path):
    batches = [[span(1), span(2, parent=ctx(1))], [span(3, attributes={"k": "v"})]]
    plain = OtlpJsonLinesExporter(tmp_path / "plain", prefix="traces")
    packed = OtlpJsonLinesExporter(f"{tmp_path}/packed/", gzip=True, compresslevel=9)
    for batch in batches:
        plain.export(batch)
        packed.export(batch)
    assert packed.force_flush() is True  # a sync point: what is written so far is readable
    partial = gzip.GzipFile(fileobj=open(tmp_path / "packed" / "traces.jsonl.gz", "rb"))  # noqa: SIM115
    with partial:
        assert len(partial.read1(1 << 20).splitlines()) == 2
    plain.shutdown()
    packed.shutdown()
    raw = (tmp_path / "packed" / "traces.jsonl.gz").read_bytes()
    assert raw[:2] == b"\x1f\x8b"
    assert raw[3] == 0  # FLG: no file name recorded
    assert raw[4:8] == b"\x00\x00\x00\x00"  # MTIME = 0
    assert gzip.decompress(raw) == (tmp_path / "plain" / "traces.jsonl").read_bytes()


def test_same_spans_same_bytes(tmp_path):
    def write(folder: Path, **options) -> bytes:
        exporter = OtlpJsonLinesExporter(folder, prefix="t", **options)
        for i in range(3):
            exporter.export([span(10 * i + 1, attributes={"i": i, "f": i / 3})])
        exporter.shutdown()
        return b"".join(p.read_bytes() for p in sorted(folder.iterdir()))

    assert write(tmp_path / "a") == write(tmp_path / "b")
    assert write(tmp_path / "c", gzip=True) == write(tmp_path / "d", gzip=True)


def test_concurrent_exports_lose_and_mix_nothing(tmp_path):
    exporter = OtlpJsonLinesExporter(tmp_path, max_bytes=20_000)
    threads, per_thread = 8, 40
    start = threading.Barrier(threads)

    def work(t: int) -> None:
        start.wait()
        for i in range(per_thread):
            batch = [span(t * 1000 + i * 2 + 1), span(t * 1000 + i * 2 + 2, attributes={"t": t})]
            assert exporter.export(batch) is SpanExportResult.SUCCESS

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    exporter.shutdown()
    files = sorted(tmp_path.iterdir())
    assert len(files) > 1
    seen = []
    for path in files:
        assert path.stat().st_size <= 20_000
        for line in lines_of(path):  # every line parses: no interleaved writes
            got = line["resourceSpans"][0]["scopeSpans"][0]["spans"]
            assert len(got) == 2 and int(got[0]["spanId"], 16) + 1 == int(got[1]["spanId"], 16)
            seen.extend(int(s["spanId"], 16) for s in got)
    expected = {t * 1000 + k for t in range(threads) for k in range(1, 2 * per_thread + 1)}
    assert len(seen) == threads * per_thread * 2 and set(seen) == expected


def test_rejects_a_non_positive_max_bytes(tmp_path):
    with pytest.raises(ValueError, match="max_bytes"):
        OtlpJsonLinesExporter(tmp_path, max_bytes=0)
