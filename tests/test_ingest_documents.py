"""JSON trace documents (not OTLP JSON lines): dispatch, real dumps, SDK output, Jaeger, Zipkin.

Expected values are worked out by hand from the files (ids converted from decimal, ISO times
converted with calendar arithmetic), never by running the reader; each test says where its
numbers come from.
"""

from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path

import pyarrow as pa
import pytest

from analyzer.errors import TraceFormatError
from analyzer.ingest.accounting import FileLog, excerpt
from analyzer.ingest.documents import document_kind, parse_json_values, read_json_document
from analyzer.ingest.dumps import FINAL_OUTPUT_ATTR, span_shape
from analyzer.ingest.sdk_json import iso_to_ns, kind_name, status_name, time_ns
from analyzer.spans import SPAN_SCHEMA

DOCS = Path(__file__).parent / "data" / "documents"
REAL = Path(os.environ.get("AGENTTRACE_REAL_TRACES", "/work/shared/real-traces"))

needs_real = pytest.mark.skipif(not REAL.is_dir(), reason="real traces folder not available")


def read(path: Path | None = None, data: bytes | None = None) -> tuple[list[dict], FileLog]:
    """Read a document; return its rows as dicts and the file's log."""
    if data is None:
        assert path is not None
        data = path.read_bytes()
    log = FileLog(path=str(path) if path else "mem.json")
    batches = list(read_json_document(data, log))
    for batch in batches:
        assert batch.schema == SPAN_SCHEMA
    table = pa.Table.from_batches(batches, schema=SPAN_SCHEMA)
    return table.to_pylist(), log


def attrs(row: dict, column: str = "attributes") -> dict[str, tuple[str, object]]:
    """{key: (typed column, value)}; asserts exactly one typed column is set per attribute."""
    out = {}
    for item in row[column]:
        typed = [(k, v) for k, v in item.items() if k != "key" and v is not None]
        assert len(typed) == 1, item
        out[item["key"]] = typed[0]
    return out


def by_id(rows: list[dict]) -> dict[str, dict]:
    return {r["span_id"]: r for r in rows}


def assert_accounting(
    log: FileLog, *, records: int, read_: int, span_q: int, record_q: int
) -> None:
    assert (log.records, log.spans_read) == (records, read_)
    assert (log.spans_quarantined, log.records_quarantined) == (span_q, record_q)
    assert len(log.quarantine) == span_q + record_q


# ---------------------------------------------------------------------------------------------
# The seven real traces


@needs_real
def test_any_agent_openai_trace():
    rows, log = read(REAL / "any-agent__OPENAI_trace.json")
    # 6 span objects under "spans"; none is bad.
    assert_accounting(log, records=6, read_=6, span_q=0, record_q=0)
    assert len(rows) == 6
    # trace_id 100927429609276267646756448943279827607 (decimal in the file) in hex:
    assert {r["trace_id"] for r in rows} == {"4bedea77bb33b9c5f280371eae21ea97"}
    # Root: span_id 12324293800750531911 = 0xab08afea3548c547, parent {span_id: null}.
    roots = [r for r in rows if r["parent_span_id"] is None]
    assert [(r["span_id"], r["name"]) for r in roots] == [
        ("ab08afea3548c547", "invoke_agent [any_agent]")
    ]
    # Every other span names the root as parent (parent.span_id 12324293800750531911).
    assert [r["parent_span_id"] for r in rows[:5]] == ["ab08afea3548c547"] * 5
    assert [r["name"] for r in rows] == [
        "call_llm mistral/mistral-small-latest",
        "execute_tool get_current_time",
        "call_llm mistral/mistral-small-latest",
        "execute_tool write_file",
        "call_llm mistral/mistral-small-latest",
        "invoke_agent [any_agent]",
    ]
    # Document order, ordinal source positions.
    assert [r["source_pos"] for r in rows] == [1, 2, 3, 4, 5, 6]
    tool = rows[1]
    assert tool["span_id"] == "bdf28428cc0e8eb5"  # 13687147528289423029
    assert (tool["start_ns"], tool["end_ns"]) == (1758026593450406000, 1758026593452926000)
    assert (tool["kind"], tool["status_code"]) == ("internal", "ok")
    assert rows[5]["status_code"] == "unset"
    a = attrs(rows[0])
    assert a["gen_ai.usage.input_tokens"] == ("int", 269)
    assert a["gen_ai.usage.input_cost"] == ("float", 0.0000269)
    assert a["gen_ai.request.model"] == ("str", "mistral/mistral-small-latest")
    assert attrs(tool)["gen_ai.tool.args"] == ("str", '{"timezone": "America/New_York"}')
    assert attrs(rows[0], "resource_attributes")["telemetry.sdk.version"] == ("str", "1.36.0")
    # final_output {"steps": [...]} is the last call_llm's gen_ai.output: not added again.
    assert all(FINAL_OUTPUT_ATTR not in attrs(r) for r in rows)


@needs_real
def test_any_agent_google_trace():
    rows, log = read(REAL / "any-agent__GOOGLE_trace.json")
    assert_accounting(log, records=7, read_=7, span_q=0, record_q=0)
    # trace_id 273475590164507581703505203264503192396 in hex:
    assert {r["trace_id"] for r in rows} == {"cdbd7b99cef221c28dd6d03c27d09b4c"}
    roots = [r for r in rows if r["parent_span_id"] is None]
    # 8588495004904668441 = 0x773076b4028f3d19
    assert [(r["span_id"], r["name"]) for r in roots] == [
        ("773076b4028f3d19", "invoke_agent [any_agent]")
    ]
    # The ADK run's intermediate spans are not in the dump: the parents below are in no
    # span of the file (17348474965005769013, 16887867178883245156, 10221318138555217448,
    # 7027657387019838282 in hex). They are kept as read; orphans are counted downstream.
    assert [r["parent_span_id"] for r in rows[:6]] == [
        "f0c22a1083ed1935",
        "ea5dc1b933506464",
        "f0c22a1083ed1935",
        "8dd96ab130d73628",
        "f0c22a1083ed1935",
        "61874128cc77a34a",
    ]
    assert {r["span_id"] for r in rows}.isdisjoint({r["parent_span_id"] for r in rows[:6]})
    assert [r["name"] for r in rows][5] == "execute_tool final_output"
    tool = rows[1]
    assert tool["span_id"] == "cfa478aff011e825"  # 14962216559073945637
    assert (tool["start_ns"], tool["end_ns"]) == (1758026586853654000, 1758026586857290000)
    assert attrs(tool)["gen_ai.tool.call.id"] == ("str", "jbUWqgIUr")
    assert attrs(rows[4])["gen_ai.usage.output_tokens"] == ("int", 56)
    assert attrs(rows[4])["gen_ai.usage.output_cost"] == ("float", 0.0000168)
    # final_output is the final_output tool's result: not added.
    assert all(FINAL_OUTPUT_ATTR not in attrs(r) for r in rows)


def langfuse_common(rows: list[dict], log: FileLog, n: int, trace_id: str, root: tuple[str, str]):
    assert_accounting(log, records=n, read_=n, span_q=0, record_q=0)
    assert len(rows) == n
    assert {r["trace_id"] for r in rows} == {trace_id}
    assert [(r["span_id"], r["name"]) for r in rows if r["parent_span_id"] is None] == [root]
    # Langfuse keeps no span kind; its observation type is an attribute.
    assert {r["kind"] for r in rows} == {"unspecified"}
    assert [r["source_pos"] for r in rows] == list(range(1, n + 1))


@needs_real
def test_langfuse_openai_agents():
    rows, log = read(REAL / "langfuse__openai-agents-2025-09-30.trace.json")
    langfuse_common(
        rows, log, 5, "fee618f96dc31e0ca38b2f7b26eb8b29", ("e5a76f27f51ad40e", "Agent workflow")
    )
    spans = by_id(rows)
    assert {sid: r["parent_span_id"] for sid, r in spans.items()} == {
        "e5a76f27f51ad40e": None,
        "d950b668796240b5": "e5a76f27f51ad40e",
        "90d94774e8e3724d": "d950b668796240b5",
        "98870087af69bf06": "d950b668796240b5",
        "5b99c3e3411ed17b": "d950b668796240b5",
    }
    assert [r["name"] for r in rows] == [
        "Agent workflow",
        "Hello world",
        "response",
        "response",
        "get_weather",
    ]
    # startTime 2025-09-30T09:03:59.962Z = 1759223039 s + 962 ms; endTime 09:04:02.152Z.
    root = spans["e5a76f27f51ad40e"]
    assert (root["start_ns"], root["end_ns"]) == (1759223039962000000, 1759223042152000000)
    assert (root["scope_name"], root["scope_version"]) == (
        "openinference.instrumentation.openai_agents",
        "1.3.0",
    )
    tool = attrs(spans["5b99c3e3411ed17b"])
    # Original attributes, kept as the strings Langfuse stored.
    assert tool["tool.name"] == ("str", "get_weather")
    assert tool["input.value"] == ("str", '{"city":"Tokyo"}')
    assert tool["openinference.span.kind"] == ("str", "TOOL")
    assert tool["langfuse.observation.type"] == ("str", "TOOL")
    assert tool["langfuse.observation.output"] == ("str", "The weather in Tokyo is sunny.")
    llm = attrs(spans["90d94774e8e3724d"])
    assert llm["llm.token_count.prompt"] == ("str", "85")  # a string, as Langfuse stored it
    assert llm["langfuse.observation.model"] == ("str", "gpt-4.1-2025-04-14")
    assert llm["langfuse.observation.usage_details"] == (
        "json",
        '{"output":29,"input":85,"total":114,'
        '"prompt_details.cache_read":0,"completion_details.reasoning":0}',
    )
    # AGENT root: 1 original attribute + type + name recovered.
    assert sorted(attrs(root)) == [
        "langfuse.observation.name",
        "langfuse.observation.type",
        "openinference.span.kind",
    ]
    res = attrs(root, "resource_attributes")
    assert res["telemetry.sdk.version"] == ("str", "1.37.0")


@needs_real
def test_langfuse_google_adk():
    rows, log = read(REAL / "langfuse__google-adk-2025-08-28.trace.json")
    langfuse_common(
        rows,
        log,
        5,
        "b82a0bdc1994fc5d1c8576ca032543f7",
        ("86cd4912944ddc41", "invocation [hello_app]"),
    )
    spans = by_id(rows)
    assert {sid: r["parent_span_id"] for sid, r in spans.items()} == {
        "bded677884f031ce": "6d8beb2e6a36b133",
        "f6e4c65297e40c96": "6d8beb2e6a36b133",
        "86cd4912944ddc41": None,
        "6d8beb2e6a36b133": "86cd4912944ddc41",
        "04290e4d82aba1bc": "f6e4c65297e40c96",  # the tool ran under the model call
    }
    # 2025-08-28T07:32:31.216Z .. 07:32:31.217Z
    tool = spans["04290e4d82aba1bc"]
    assert tool["name"] == "execute_tool say_hello"
    assert (tool["start_ns"], tool["end_ns"]) == (1756366351216000000, 1756366351217000000)
    a = attrs(tool)
    assert a["gen_ai.tool.call.id"] == ("str", "adk-8bd8dc65-717d-4102-858b-3a1dd6b75a00")
    assert a["gcp.vertex.agent.tool_call_args"] == ("str", "{}")
    llm = attrs(spans["bded677884f031ce"])
    assert llm["gen_ai.usage.input_tokens"] == ("str", "39")
    assert llm["langfuse.observation.model"] == ("str", "gemini-2.0-flash")
    assert llm["langfuse.observation.type"] == ("str", "GENERATION")
    assert tool["scope_version"] == "0.1.3"


@needs_real
def test_langfuse_microsoft_agent():
    rows, log = read(REAL / "langfuse__microsoft-agent-2025-12-17.trace.json")
    root_name = "invoke_agent 171105b7-59dd-49c0-9677-0b95395aa46a"
    langfuse_common(
        rows, log, 4, "8e419d3288419b5d944270505640e183", ("4cd6caa32861956a", root_name)
    )
    assert [r["parent_span_id"] for r in rows] == [None] + ["4cd6caa32861956a"] * 3
    assert [r["name"] for r in rows] == [
        root_name,
        "chat gpt-5-mini",
        "chat gpt-5-mini",
        "get_weather",
    ]
    root = attrs(rows[0])
    # The aggregated usage exists only in usageDetails (no gen_ai.usage.* attribute left).
    assert not [k for k in root if k.startswith("gen_ai.usage")]
    assert root["langfuse.observation.usage_details"] == (
        "json",
        '{"input":44,"output":180,"total":224}',
    )
    assert root["langfuse.observation.model_parameters"] == ("json", '{"choice.count":1}')
    chat = attrs(rows[1])
    # Langfuse moved gen_ai.input.messages into `input`; it is recovered under the prefix.
    assert "gen_ai.input.messages" not in chat
    assert chat["langfuse.observation.input"][1].startswith('[{"role": "user", "parts": [')
    assert chat["gen_ai.usage.input_tokens"] == ("str", "77")
    assert chat["gen_ai.response.model"] == ("str", "gpt-5-mini-2025-08-07")
    tool = rows[3]
    # startTime == endTime == 2025-12-17T09:37:40.551Z
    assert (tool["start_ns"], tool["end_ns"]) == (1765964260551000000, 1765964260551000000)
    assert attrs(tool)["gen_ai.tool.call.id"] == ("str", "call_CwaJHuXTm9dmHFQPlVbqyzJ0")
    assert attrs(tool)["langfuse.observation.input"] == ("str", '{"location":"Tokyo, Japan"}')


@needs_real
def test_langfuse_claude_agent():
    rows, log = read(REAL / "langfuse__claude-agent-2025-12-22.trace.json")
    langfuse_common(
        rows,
        log,
        7,
        "097f1d8982fa909b8cffb14a166ec272",
        ("805dc5dff9e33e32", "claude.conversation"),
    )
    assert [r["parent_span_id"] for r in rows] == [
        "805dc5dff9e33e32",
        "805dc5dff9e33e32",
        None,
        "805dc5dff9e33e32",
        "805dc5dff9e33e32",
        "805dc5dff9e33e32",
        "805dc5dff9e33e32",
    ]
    assert [r["name"] for r in rows].count("claude.assistant.turn") == 4
    assert [r["name"] for r in rows].count("mcp__weather__get_weather") == 2
    spans = by_id(rows)
    # 2025-12-22T10:46:15.528Z .. 10:46:18.725Z
    first = spans["e9aac170e5d48125"]
    assert (first["start_ns"], first["end_ns"]) == (1766400375528000000, 1766400378725000000)
    root = attrs(spans["805dc5dff9e33e32"])
    assert root["langsmith.metadata.num_turns"] == ("str", "3")
    assert root["langsmith.span.kind"] == ("str", "chain")
    # The tool's arguments survive only in the observation input.
    tool = attrs(spans["f411dab686a064b1"])
    assert tool["langfuse.observation.input"] == ("str", '{"input":{"city":"Berlin"}}')
    assert tool["gen_ai.operation.name"] == ("str", "execute_tool")
    turn = attrs(spans["f8e8f040dc94e67e"])
    assert turn["langfuse.observation.tool_call_names"] == ("json", '["mcp__weather__get_weather"]')
    assert turn["langfuse.observation.model"] == ("str", "claude-sonnet-4-5-20250929")
    assert spans["f8e8f040dc94e67e"]["scope_name"] == "langsmith"
    assert spans["f8e8f040dc94e67e"]["scope_version"] is None  # the scope has no version


@needs_real
def test_langfuse_vercel_aisdk():
    rows, log = read(REAL / "langfuse__vercel-aisdk-2025-11-17.trace.json")
    langfuse_common(
        rows, log, 3, "df41e597d0a85e0d7a6ae8ebfaa70aa0", ("1dc6768109615657", "ai.generateText")
    )
    assert [r["parent_span_id"] for r in rows] == [None, "1dc6768109615657", "1dc6768109615657"]
    assert [r["name"] for r in rows] == [
        "ai.generateText",
        "ai.generateText.doGenerate",
        "getWeather",
    ]
    # 2025-11-17T14:55:18.787Z .. 14:55:21.830Z
    assert (rows[1]["start_ns"], rows[1]["end_ns"]) == (1763391318787000000, 1763391321830000000)
    gen = attrs(rows[1])
    assert gen["gen_ai.usage.input_tokens"] == ("str", "62")
    # Langfuse copied the tools to metadata.tools: kept as langfuse.metadata.tools (a list).
    assert gen["langfuse.metadata.tools"][0] == "json"
    tool = attrs(rows[2])
    assert tool["ai.toolCall.name"] == ("str", "getWeather")
    assert tool["langfuse.observation.input"] == ("str", '{"location":"San Francisco"}')
    assert tool["langfuse.observation.output"] == (
        "str",
        '{"location":"San Francisco","temperature":64}',
    )
    # Resource attributes keep their JSON types (they were not stringified).
    res = attrs(rows[0], "resource_attributes")
    assert res["process.pid"] == ("int", 22217)
    assert res["process.command_args"][0] == "json"
    assert res["service.name"] == ("str", "unknown_service:/opt/homebrew/bin/deno")


@needs_real
def test_langfuse_trace_part_alone():
    """Only the "trace" object (its observations carry empty metadata): still 5 spans."""
    import json

    doc = json.loads((REAL / "langfuse__openai-agents-2025-09-30.trace.json").read_text())
    rows, log = read(data=json.dumps({"trace": doc["trace"]}).encode())
    assert_accounting(log, records=5, read_=5, span_q=0, record_q=0)
    assert {r["trace_id"] for r in rows} == {"fee618f96dc31e0ca38b2f7b26eb8b29"}
    assert sorted(attrs(rows[0])) == ["langfuse.observation.name", "langfuse.observation.type"]
    assert rows[0]["scope_name"] is None


def test_langfuse_never_overwrites_an_original_attribute():
    doc = {
        "observations": [
            {
                "id": "00000000000000a1",
                "traceId": "000000000000000000000000000000f1",
                "type": "GENERATION",
                "name": "chat",
                "startTime": "2025-01-01T00:00:00Z",
                "endTime": "2025-01-01T00:00:01Z",
                "model": "from-field",
                "metadata": '{"attributes": {"langfuse.observation.model": "original"}}',
            }
        ]
    }
    import json

    rows, _ = read(data=json.dumps(doc).encode())
    assert attrs(rows[0])["langfuse.observation.model"] == ("str", "original")
    assert attrs(rows[0])["langfuse.observation.type"] == ("str", "GENERATION")


# ---------------------------------------------------------------------------------------------
# Python SDK console output


def sdk_console_text() -> str:
    """Real ConsoleSpanExporter output: 3 spans with fixed ids and times (the fixture's source)."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode

    class Ids(IdGenerator):
        def __init__(self) -> None:
            self.n = 0

        def generate_span_id(self) -> int:
            self.n += 1
            return 0xA000 + self.n

        def generate_trace_id(self) -> int:
            return 0x0AF7651916CD43DD8448EB211C80319C

    out = io.StringIO()
    resource = Resource({"service.name": "weather-agent", "service.version": "0.3"})
    provider = TracerProvider(resource=resource, id_generator=Ids())
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=out)))
    tracer = provider.get_tracer("demo.agent", "1.2.0")
    t0 = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z
    root = tracer.start_span(
        "invoke_agent weather",
        start_time=t0,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather"},
    )
    ctx = trace.set_span_in_context(root)
    chat = tracer.start_span(
        "chat gpt-4o",
        context=ctx,
        kind=SpanKind.CLIENT,
        start_time=t0 + 1_000_000,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.usage.input_tokens": 31,
            "gen_ai.request.temperature": 0.2,
            "gen_ai.response.finish_reasons": ("tool_calls",),
        },
    )
    chat.add_event(
        "gen_ai.choice", {"index": 0, "finish_reason": "tool_calls"}, timestamp=t0 + 800_000_000
    )
    chat.end(end_time=t0 + 812_000_000)
    tool = tracer.start_span(
        "execute_tool get_weather",
        context=ctx,
        start_time=t0 + 813_123_789,
        links=[Link(chat.get_span_context(), {"link.reason": "requested"})],
        attributes={
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.arguments": '{"city":"Paris"}',
            "retry": False,
        },
    )
    tool.record_exception(ValueError("city not found"), timestamp=t0 + 814_000_000)
    tool.set_status(Status(StatusCode.ERROR, "city not found"))
    tool.end(end_time=t0 + 815_000_000)
    root.end(end_time=t0 + 2_000_000_000)
    provider.shutdown()
    return out.getvalue()


T0 = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z
SDK_TRACE = "0af7651916cd43dd8448eb211c80319c"


def check_sdk_console_rows(rows: list[dict]) -> None:
    # Spans are printed as they end: chat, tool, then the root.
    assert [r["name"] for r in rows] == [
        "chat gpt-4o",
        "execute_tool get_weather",
        "invoke_agent weather",
    ]
    assert {r["trace_id"] for r in rows} == {SDK_TRACE}
    assert [r["span_id"] for r in rows] == [
        "000000000000a002",
        "000000000000a003",
        "000000000000a001",
    ]
    assert [r["parent_span_id"] for r in rows] == ["000000000000a001", "000000000000a001", None]
    # Each object starts on its own line: 1, then after 41 and 52 lines.
    assert [r["source_pos"] for r in rows] == [1, 42, 94]
    chat, tool, root = rows
    assert [r["kind"] for r in rows] == ["client", "internal", "internal"]
    assert (chat["start_ns"], chat["end_ns"]) == (T0 + 1_000_000, T0 + 812_000_000)
    # 813_123_789 ns printed as .813124 (the SDK keeps microseconds, rounded).
    assert (tool["start_ns"], tool["end_ns"]) == (T0 + 813_124_000, T0 + 815_000_000)
    assert (root["start_ns"], root["end_ns"]) == (T0, T0 + 2_000_000_000)
    assert (tool["status_code"], tool["status_message"]) == ("error", "city not found")
    assert (chat["status_code"], chat["status_message"]) == ("unset", None)
    assert root["scope_name"] is None  # the console format has no scope
    a = attrs(chat)
    assert a["gen_ai.usage.input_tokens"] == ("int", 31)
    assert a["gen_ai.request.temperature"] == ("float", 0.2)
    assert a["gen_ai.response.finish_reasons"] == ("json", '["tool_calls"]')
    assert attrs(tool)["retry"] == ("bool", False)
    assert [k for k in attrs(chat)] == sorted(attrs(chat))  # sorted by key
    assert attrs(root, "resource_attributes") == {
        "service.name": ("str", "weather-agent"),
        "service.version": ("str", "0.3"),
    }
    [event] = chat["events"]
    assert (event["time_ns"], event["name"]) == (T0 + 800_000_000, "gen_ai.choice")
    assert [(x["key"], x["int"], x["str"]) for x in event["attributes"]] == [
        ("finish_reason", None, "tool_calls"),
        ("index", 0, None),
    ]
    [exc] = tool["events"]
    assert (exc["time_ns"], exc["name"]) == (T0 + 814_000_000, "exception")
    [link] = tool["links"]
    assert (link["trace_id"], link["span_id"]) == (SDK_TRACE, "000000000000a002")
    assert [(x["key"], x["str"]) for x in link["attributes"]] == [("link.reason", "requested")]


def test_sdk_console_fixture():
    rows, log = read(DOCS / "sdk_console.json")
    assert_accounting(log, records=3, read_=3, span_q=0, record_q=0)
    check_sdk_console_rows(rows)


def test_sdk_console_generated_live_matches_fixture():
    """The installed SDK's own output reads the same as the committed fixture."""
    live, log = read(data=sdk_console_text().encode())
    assert_accounting(log, records=3, read_=3, span_q=0, record_q=0)
    check_sdk_console_rows(live)
    fixture, _ = read(DOCS / "sdk_console.json")
    strip = [{k: v for k, v in r.items() if k != "source_file"} for r in live]
    assert strip == [{k: v for k, v in r.items() if k != "source_file"} for r in fixture]


def test_sdk_console_one_compact_object_per_line():
    text = sdk_console_text()
    import json

    lines = []
    decoder = json.JSONDecoder()
    i = 0
    while i < len(text.strip()):
        obj, end = decoder.raw_decode(text, i)
        lines.append(json.dumps(obj))
        i = end + 1
    rows, _ = read(data=("\n".join(lines) + "\n").encode())
    assert [r["source_pos"] for r in rows] == [1, 2, 3]
    assert [r["span_id"] for r in rows] == [
        "000000000000a002",
        "000000000000a003",
        "000000000000a001",
    ]


def test_sdk_truncated_concatenation_keeps_the_objects_before():
    # The fixture is sdk_console.json cut in line 102, inside the third object (line 94).
    rows, log = read(DOCS / "sdk_console_truncated.json")
    assert [r["span_id"] for r in rows] == ["000000000000a002", "000000000000a003"]
    assert [r["source_pos"] for r in rows] == [1, 42]
    # 2 spans + the unparseable tail as one record; the tail's spans cannot be counted.
    assert_accounting(log, records=3, read_=2, span_q=0, record_q=1)
    [entry] = log.quarantine
    assert entry.position == "line 94"
    assert "line 102" in entry.reason
    assert entry.excerpt.startswith("{")
    assert entry.spans == 0


def test_a_program_s_prints_around_and_between_console_objects_are_quarantined_not_the_spans():
    # A script's stdout redirected to a file: its own prints sit before, between and after
    # the exporter's span objects (as in Arize-ai__openinference__python-out.json).
    chat, tool, root = _console_objects()
    text = f"SYNC\n{chat}\nctx={{'session.id': 's'}}\n \n{tool}\n{root}\nDONE\n"
    rows, log = read(data=text.encode())
    assert [r["span_id"] for r in rows] == [
        "000000000000a002",
        "000000000000a003",
        "000000000000a001",
    ]
    assert_accounting(log, records=6, read_=3, span_q=0, record_q=3)
    where = [(q.position, q.excerpt) for q in log.quarantine]
    n_chat, n_tool = chat.count("\n") + 1, tool.count("\n") + 1
    assert where == [  # each excerpt is the stretch skipped, up to the next object
        ("line 1", excerpt("SYNC\n")),
        (f"line {2 + n_chat}", excerpt("ctx={'session.id': 's'}\n \n")),
        (f"line {4 + n_chat + n_tool + root.count(chr(10)) + 1}", excerpt("DONE\n")),
    ]
    assert [r["source_pos"] for r in rows] == [2, 4 + n_chat, 4 + n_chat + n_tool]


def test_a_cut_object_between_console_objects_loses_itself_only():
    chat, tool, root = _console_objects()
    cut = tool[: len(tool) // 2]
    rows, log = read(data=f"{chat}\n{cut}\n{root}\n".encode())
    assert [r["span_id"] for r in rows] == ["000000000000a002", "000000000000a001"]
    assert_accounting(log, records=3, read_=2, span_q=0, record_q=1)
    [entry] = log.quarantine
    assert entry.position == f"line {chat.count(chr(10)) + 2}"
    assert entry.excerpt == excerpt(cut + "\n")


def test_text_whose_first_object_line_is_no_trace_is_still_no_trace_file():
    from analyzer.ingest.detect import sniff_stream

    # near misses: the object after the prints is no span; no line opens an object
    for text in ('log line\n{\n  "level": "info"\n}\n', 'log line\n  {"a": 1}\n'):
        assert sniff_stream(io.BytesIO(text.encode()))[0] == "unknown"
    printed = "SYNC\n" + "\n".join(_console_objects())
    assert sniff_stream(io.BytesIO(printed.encode()))[0] == "json"


def _console_objects() -> list[str]:
    """The three span objects of `sdk_console_text`, as printed."""
    text, decoder, objects, i = sdk_console_text(), json.JSONDecoder(), [], 0
    while i < len(text.strip()):
        _, end = decoder.raw_decode(text, i)
        objects.append(text[i:end])
        i = end + 1
    return objects


def test_sdk_json_array():
    rows, log = read(DOCS / "sdk_array.json")
    assert_accounting(log, records=2, read_=2, span_q=0, record_q=0)
    run, tool = rows
    assert {r["trace_id"] for r in rows} == {"4bf92f3577b34da6a3ce929d0e0e4736"}
    # The older spelling parent_span_id.
    assert (run["parent_span_id"], tool["parent_span_id"]) == (None, "00f067aa0ba902b7")
    assert [r["source_pos"] for r in rows] == [1, 2]  # ordinals inside the array
    # 2025-03-04T05:06:07Z = 1741064767 s; ".000001" is 1000 ns, ".5" is 500 ms.
    assert (run["start_ns"], run["end_ns"]) == (1741064767000001000, 1741064769500000000)
    assert (run["kind"], run["status_code"]) == ("server", "ok")
    assert (run["scope_name"], run["scope_version"]) == ("pydantic-ai", "0.4.2")
    assert (tool["status_code"], tool["status_message"]) == ("error", "order not found")
    # A 30-digit integer is kept exactly (as text, it does not fit int64), not as a float.
    assert attrs(run)["big.count"] == ("str", "123456789012345678901234567890")
    kind, score = attrs(tool)["score"]  # NaN, as Python's json writes it
    assert kind == "float" and math.isnan(score)


def test_bad_ids_are_quarantined_and_the_rest_kept():
    rows, log = read(DOCS / "bad_ids.json")
    assert [r["name"] for r in rows] == ["good"]
    # 6 array items: 5 span objects (4 bad) and a number that is no span object.
    assert_accounting(log, records=6, read_=5, span_q=4, record_q=1)
    got = [(q.position, q.spans) for q in log.quarantine]
    assert got == [("span 2", 1), ("span 3", 1), ("span 4", 1), ("span 5", 1), ("span 6", 0)]
    reasons = [q.reason for q in log.quarantine]
    assert reasons[0].startswith("trace_id:")
    assert reasons[1] == "span_id missing"
    assert reasons[2].startswith("parent span id:")
    assert reasons[3].startswith("start_time:")
    assert reasons[4] == "not a span object: JSON number"
    assert '"name":"trace id not hex"' in log.quarantine[0].excerpt


@pytest.mark.parametrize("document", ["sdk_array.json", "any_agent_small.json"])
@pytest.mark.parametrize("first", [None, {"name": "no context"}, "text"])
def test_a_first_span_that_is_no_span_is_quarantined_and_the_others_read(document, first):
    """A span array is known by its first span of a known shape, not by its first item: one
    bad span at the head made the whole file "not a trace" and lost the others."""
    doc = json.loads((DOCS / document).read_bytes())
    spans = doc if isinstance(doc, list) else doc["spans"]
    expected, _ = read(DOCS / document)
    spans.insert(0, first)
    rows, log = read(data=json.dumps(doc).encode())
    assert [r["span_id"] for r in rows] == [r["span_id"] for r in expected]
    n = len(expected)
    assert_accounting(log, records=n + 1, read_=n, span_q=0, record_q=1)
    assert log.quarantine[0].position == "span 1"
    assert log.quarantine[0].reason.startswith("not a span object: JSON ")


def test_a_later_value_that_is_no_trace_is_quarantined():
    good = (DOCS / "sdk_console.json").read_bytes().split(b"\n}\n")[0] + b"\n}\n"
    data = good + b'{"hello": "world"}\n'
    rows, log = read(data=data)
    assert len(rows) == 1
    assert_accounting(log, records=2, read_=1, span_q=0, record_q=1)
    assert log.quarantine[0].position == "line 42"
    assert log.quarantine[0].reason.startswith("not a trace: JSON object with keys [hello]")


def test_not_a_trace_raises_naming_the_keys():
    log = FileLog(path="not_a_trace.json")
    with pytest.raises(
        TraceFormatError,
        match=r"not a trace: JSON object with keys "
        r"\[name, version, private, dependencies\]",
    ):
        list(read_json_document((DOCS / "not_a_trace.json").read_bytes(), log))
    assert log.records == 0
    for doc in (b"[]", b"[1, 2]", b'"text"', b"{}", b'{"spans": [1]}', b'{"data": []}'):
        with pytest.raises(TraceFormatError, match="not a trace"):
            list(read_json_document(doc, FileLog(path="x")))


def test_empty_and_unparseable_documents():
    rows, log = read(data=b"  \n")
    assert rows == [] and log.records == 0
    rows, log = read(data=b'{"resourceSpans": [')  # truncated from the first byte
    assert rows == []
    assert_accounting(log, records=1, read_=0, span_q=0, record_q=1)
    assert log.quarantine[0].position == "line 1"


def test_lone_surrogate_escapes_become_replacement_characters():
    data = (
        b'{"name": "a\\ud83d", "context": {"trace_id": "0x4bf92f3577b34da6a3ce929d0e0e4736",'
        b' "span_id": "0x00f067aa0ba902b7"}, "start_time": "2025-01-01T00:00:00Z",'
        b' "end_time": "2025-01-01T00:00:01Z", "attributes": {"emoji": "\\ud83d\\ude00"}}'
    )
    rows, _ = read(data=data)
    assert rows[0]["name"] == "a\ufffd"
    assert attrs(rows[0])["emoji"] == ("str", "\U0001f600")  # a whole pair is kept


def test_big_integers_are_exact():
    log = FileLog(path="x")
    [(value, line)] = parse_json_values(b'{"id": 100927429609276267646756448943279827607}', log)
    assert value["id"] == 100927429609276267646756448943279827607
    assert isinstance(value["id"], int) and line == 1


# ---------------------------------------------------------------------------------------------
# Other dumps


def test_any_agent_final_output_added_to_root_when_no_span_holds_it():
    rows, log = read(DOCS / "any_agent_small.json")
    assert_accounting(log, records=2, read_=2, span_q=0, record_q=0)
    # trace_id 14576827793038113322513871894673895836 = 0x0af7651916cd43dd8448eb211c80319c,
    # span ids 67667974448284344 / ...343 = 0xf067aa0ba902b8 / b7.
    assert [(r["trace_id"], r["span_id"], r["parent_span_id"]) for r in rows] == [
        (SDK_TRACE, "00f067aa0ba902b8", "00f067aa0ba902b7"),
        (SDK_TRACE, "00f067aa0ba902b7", None),
    ]
    assert attrs(rows[1])[FINAL_OUTPUT_ATTR] == ("str", '{"answer":42,"steps":["think","answer"]}')
    assert FINAL_OUTPUT_ATTR not in attrs(rows[0])


def test_any_agent_final_output_not_added_when_recorded():
    import json

    doc = json.loads((DOCS / "any_agent_small.json").read_text())
    doc["final_output"] = "The answer is 42."  # exactly the call_llm's gen_ai.output
    rows, _ = read(data=json.dumps(doc).encode())
    assert all(FINAL_OUTPUT_ATTR not in attrs(r) for r in rows)
    doc["final_output"] = "The answer is 43."  # near miss: not recorded anywhere
    rows, _ = read(data=json.dumps(doc).encode())
    assert attrs(rows[1])[FINAL_OUTPUT_ATTR] == ("str", "The answer is 43.")


def test_jaeger():
    rows, log = read(DOCS / "jaeger.json")
    # 4 spans, the last with spanID "not-a-span-id".
    assert_accounting(log, records=4, read_=4, span_q=1, record_q=0)
    assert log.quarantine[0].position == "span 4"
    assert "spanID" in log.quarantine[0].reason
    assert {r["trace_id"] for r in rows} == {"5b8efff798038103d269b633813fc60c"}
    root, chat, tool = rows
    assert (root["span_id"], root["parent_span_id"]) == ("eee19b7ec3c1b173", None)
    assert chat["parent_span_id"] == "eee19b7ec3c1b173"
    # The tool's first reference is FOLLOWS_FROM: the CHILD_OF one is the parent, the other a link.
    assert tool["parent_span_id"] == "eee19b7ec3c1b173"
    assert [(lk["span_id"], lk["attributes"][0]["str"]) for lk in tool["links"]] == [
        ("eee19b7ec3c1b174", "FOLLOWS_FROM")
    ]
    # startTime 1544712660100000 µs, duration 812000 µs.
    assert (chat["start_ns"], chat["end_ns"]) == (1544712660100000000, 1544712660912000000)
    assert (tool["start_ns"], tool["end_ns"]) == (1544712661000000000, 1544712661001500000)
    assert [r["kind"] for r in rows] == ["internal", "client", "internal"]
    assert [r["status_code"] for r in rows] == ["unset", "ok", "error"]
    assert tool["status_message"] == "timeout"
    assert (root["scope_name"], root["scope_version"]) == ("agent.sdk", "0.9")
    a = attrs(chat)
    assert a["gen_ai.usage.input_tokens"] == ("int", 31)
    assert a["gen_ai.request.temperature"] == ("float", 0.2)
    assert a["stream"] == ("bool", False)
    assert a["gen_ai.response.finish_reasons"] == ("str", '["tool_calls"]')
    # Tags used for columns are not attributes any more.
    assert not {"span.kind", "otel.status_code", "error"} & (set(a) | set(attrs(tool)))
    assert attrs(root, "resource_attributes") == {
        "host.name": ("str", "box1"),
        "service.name": ("str", "agent"),
    }
    assert attrs(tool, "resource_attributes") == {"service.name": ("str", "tools")}
    [log_event] = chat["events"]
    assert (log_event["time_ns"], log_event["name"]) == (1544712660900000000, "gen_ai.choice")
    assert [(x["key"], x["int"]) for x in log_event["attributes"]] == [("index", 0)]


def test_zipkin():
    rows, log = read(DOCS / "zipkin.json")
    assert_accounting(log, records=3, read_=3, span_q=0, record_q=0)
    # A 64-bit trace id (16 hex chars) is left-padded to 32.
    assert {r["trace_id"] for r in rows} == {"00000000000000008448eb211c80319c"}
    root, chat, tool = rows
    assert [r["parent_span_id"] for r in rows] == [None, "b7ad6b7169203331", "b7ad6b7169203331"]
    assert [r["kind"] for r in rows] == ["internal", "client", "internal"]
    assert (chat["start_ns"], chat["end_ns"]) == (1544712660100000000, 1544712660912000000)
    assert [r["status_code"] for r in rows] == ["unset", "ok", "error"]
    assert tool["status_message"] == "city not found"  # Zipkin's error tag holds the message
    assert root["scope_name"] == "agent.sdk"
    a = attrs(chat)
    assert a["gen_ai.usage.input_tokens"] == ("str", "31")  # Zipkin tags are strings
    assert a["peer.service"] == ("str", "openai")
    assert "otel.status_code" not in a
    assert attrs(chat, "resource_attributes") == {"service.name": ("str", "agent")}
    assert [(e["time_ns"], e["name"]) for e in chat["events"]] == [
        (1544712660900000000, "gen_ai.choice")
    ]


def test_zipkin_list_of_traces():
    import json

    spans = json.loads((DOCS / "zipkin.json").read_text())
    rows, log = read(data=json.dumps([spans[:1], spans[1:]]).encode())
    assert len(rows) == 3 and log.spans_read == 3
    assert [r["source_pos"] for r in rows] == [1, 2, 3]


def test_phoenix_span_json():
    rows, log = read(DOCS / "phoenix.json")
    assert_accounting(log, records=3, read_=3, span_q=0, record_q=0)
    turn, llm, lookup = rows
    assert [r["parent_span_id"] for r in rows] == [None, "1a2b3c4d5e6f7a8b", "1a2b3c4d5e6f7a8b"]
    # 2024-01-01T12:00:00Z = 1704110400 s; 13:00:01+01:00 is 12:00:01Z.
    assert (turn["start_ns"], turn["end_ns"]) == (1704110400000000000, 1704110403500000000)
    assert (llm["start_ns"], llm["end_ns"]) == (1704110401000000000, 1704110402250000000)
    assert [r["status_code"] for r in rows] == ["ok", "error", "unset"]
    assert llm["status_message"] == "rate limited"
    assert turn["status_message"] is None  # "" is no message
    a = attrs(llm)
    # span_kind put back as the OpenInference attribute; nested attributes flattened.
    assert a["openinference.span.kind"] == ("str", "LLM")
    assert a["llm.token_count.prompt"] == ("int", 100)
    assert a["llm.input_messages.0.message.role"] == ("str", "user")
    assert "openinference.span.kind" not in attrs(lookup)  # span_kind UNKNOWN
    assert [(e["time_ns"], e["name"]) for e in llm["events"]] == [
        (1704110402000000000, "exception")
    ]


def test_js_readable_spans():
    rows, log = read(DOCS / "js_readable_spans.json")
    assert_accounting(log, records=2, read_=2, span_q=0, record_q=0)
    outer, inner = rows
    assert {r["trace_id"] for r in rows} == {"b3e700af9eab81e19f72f964d62a35af"}
    assert (outer["parent_span_id"], inner["parent_span_id"]) == (None, "648be1dfd8e521b6")
    # hrtime [1770131994, 21415667] = 1770131994 s + 21415667 ns
    assert (inner["start_ns"], inner["end_ns"]) == (1770131992242000000, 1770131994021415667)
    # JS SpanKind numbers from INTERNAL=0: 2 is CLIENT.
    assert [r["kind"] for r in rows] == ["internal", "client"]
    assert (inner["status_code"], inner["status_message"]) == ("error", "overloaded")
    assert (outer["scope_name"], outer["scope_version"]) == ("ai", "6.0.68")
    assert attrs(inner)["gen_ai.response.finish_reasons"] == ("json", '["stop"]')
    assert attrs(inner, "resource_attributes") == {
        "process.pid": ("int", 4242),
        "service.name": ("str", "next-app"),
    }
    assert [(e["time_ns"], e["name"]) for e in inner["events"]] == [
        (1770131993025056459, "ai.stream.firstChunk")
    ]


#: A CloudWatch aws/spans record, as AgentCore's ADOT writes it (shape of the sideseat files in
#: tests/data/real_corpus; values made up for the test).
CLOUDWATCH_RECORD = {
    "resource": {"attributes": {"service.name": "agent.DEFAULT", "cloud.provider": "aws"}},
    "scope": {"name": "strands.telemetry.tracer", "version": ""},
    "traceId": "691c23a8636a7e4512dfd580708d030e",
    "spanId": "e4b33b81b25786c2",
    "parentSpanId": "681e3fecf93e4655",
    "flags": 768,
    "name": "execute_tool code_interpreter",
    "kind": "INTERNAL",
    "startTimeUnixNano": 1763451824927413111,
    "endTimeUnixNano": 1763451825075026467,
    "durationNano": 147613356,
    "attributes": {"gen_ai.tool.name": "code_interpreter", "n": 3, "ok": True, "xs": [1, 2]},
    "status": {"code": "ERROR", "message": "denied"},
    "events": [{"timeUnixNano": 1763451825000000000, "name": "exception", "attributes": {}}],
    "links": [{"traceId": "691b3bf85af1dfe32dc6b67e3a3144d1", "spanId": "bca8952d74e876a5"}],
}


def _check_cloudwatch_row(row: dict) -> None:
    assert (row["trace_id"], row["span_id"], row["parent_span_id"]) == (
        "691c23a8636a7e4512dfd580708d030e",
        "e4b33b81b25786c2",
        "681e3fecf93e4655",
    )
    assert (row["start_ns"], row["end_ns"]) == (1763451824927413111, 1763451825075026467)
    assert (row["kind"], row["status_code"], row["status_message"]) == (
        "internal",
        "error",
        "denied",
    )
    assert (row["scope_name"], row["scope_version"]) == ("strands.telemetry.tracer", None)
    assert attrs(row) == {
        "gen_ai.tool.name": ("str", "code_interpreter"),
        "n": ("int", 3),
        "ok": ("bool", True),
        "xs": ("json", "[1,2]"),
    }
    assert attrs(row, "resource_attributes") == {
        "cloud.provider": ("str", "aws"),
        "service.name": ("str", "agent.DEFAULT"),
    }
    assert [(e["time_ns"], e["name"]) for e in row["events"]] == [
        (1763451825000000000, "exception")
    ]
    assert [(k["trace_id"], k["span_id"]) for k in row["links"]] == [
        ("691b3bf85af1dfe32dc6b67e3a3144d1", "bca8952d74e876a5")
    ]


@pytest.mark.parametrize(
    "wrap",
    [
        lambda r: json.dumps(r),  # one record per line (CloudWatch Logs, exported)
        lambda r: json.dumps([r, r | {"spanId": "e4b33b81b25786c3"}]),  # an array of records
        lambda r: json.dumps({"timestamp": 1, "message": json.dumps(r)}),  # a log event
        lambda r: json.dumps([{"@timestamp": "t", "@message": json.dumps(r)}]),  # Logs Insights
        lambda r: json.dumps([{"timestamp": "t", "raw_otel_json": r}]),  # the record as an object
        lambda r: json.dumps({"events": [{"message": json.dumps(r)}]}),  # aws logs output
    ],
)
def test_cloudwatch_span_records_alone_in_arrays_or_in_log_events(wrap):
    rows, log = read(data=wrap(CLOUDWATCH_RECORD).encode())
    assert log.spans_quarantined == log.records_quarantined == 0
    _check_cloudwatch_row(rows[0])


def test_a_cloudwatch_record_that_cannot_be_read_is_quarantined_and_the_others_kept():
    bad = CLOUDWATCH_RECORD | {"spanId": "nothex!!", "endTimeUnixNano": "soon"}
    events = [{"message": json.dumps(r)} for r in (bad, CLOUDWATCH_RECORD)]
    events.append({"message": "{not json"})  # a log event that carries no span: not a span
    rows, log = read(data=json.dumps(events).encode())
    assert_accounting(log, records=3, read_=2, span_q=1, record_q=1)
    assert [r["span_id"] for r in rows] == ["e4b33b81b25786c2"]
    reasons = [q.reason for q in log.quarantine]
    assert reasons[0].startswith("spanId") and reasons[1].startswith("not a span object")


def test_an_agentcore_session_spans_body_is_read_and_its_log_records_set_aside():
    sdk = json.loads(_console_objects()[0])
    log_record = {
        "timeUnixNano": 1776196952000000000,
        "observedTimeUnixNano": 1776196952000000000,
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "000000000000a002",
        "body": {"content": "hello"},
        "attributes": {"event.name": "gen_ai.user.message"},
    }
    body = {"sessionSpans": [sdk, log_record, CLOUDWATCH_RECORD]}
    assert document_kind(body) == "span-list"
    rows, log = read(data=json.dumps(body).encode())
    assert [r["span_id"] for r in rows] == ["000000000000a002", "e4b33b81b25786c2"]
    assert_accounting(log, records=3, read_=2, span_q=0, record_q=1)  # the log record: no span
    assert log.quarantine[0].reason == (
        "an OpenTelemetry log record, not a span (log records are not read)"
    )
    # near miss: the key alone, holding no span, is no trace
    with pytest.raises(TraceFormatError):
        document_kind({"sessionSpans": [log_record]})


def test_the_events_of_an_sdk_span_are_not_taken_for_log_events():
    # near miss: an SDK span has "events" too; it stays one span, its events its own
    span = {"context": {"trace_id": "0x" + "1" * 32, "span_id": "0x" + "2" * 16}, "name": "x"}
    span |= {"start_time": "2026-01-01T00:00:00Z", "end_time": "2026-01-01T00:00:01Z"}
    span["events"] = [{"name": "e", "timestamp": "2026-01-01T00:00:00Z", "attributes": {}}]
    assert document_kind(span) == "span:sdk"
    rows, _ = read(data=json.dumps(span).encode())
    assert len(rows) == 1 and [e["name"] for e in rows[0]["events"]] == ["e"]


def test_a_bare_otlp_span_is_not_taken_for_a_cloudwatch_record():
    # near miss: OTLP's own span JSON has attributes as a key-value list and no resource
    bare = {"traceId": "a", "spanId": "b", "startTimeUnixNano": "1", "attributes": []}
    assert span_shape(bare) == "otlp"
    assert span_shape(bare | {"attributes": {}}) == span_shape(bare | {"resource": {}})
    assert span_shape(bare | {"resource": {}}) == "cloudwatch"


def test_js_console_exporter_objects():
    rows, log = read(DOCS / "js_console.json")
    assert_accounting(log, records=2, read_=2, span_q=0, record_q=0)
    chat, tool = rows
    assert [r["source_pos"] for r in rows] == [1, 17]  # two concatenated objects
    assert chat["parent_span_id"] == "948988dc3d719c69"  # parentSpanContext (SDK 2.x)
    assert tool["parent_span_id"] == "0fbdf6d70bb489de"  # parentId (SDK 1.x)
    # timestamp 1772582956532000 µs, duration 1500 µs
    assert (chat["start_ns"], chat["end_ns"]) == (1772582956532000000, 1772582956533500000)
    assert [(r["kind"], r["status_code"]) for r in rows] == [
        ("client", "ok"),
        ("internal", "unset"),
    ]
    assert chat["scope_name"] == "Agent365Sdk"
    assert [e["time_ns"] for e in tool["events"]] == [1772582956533100000]


def test_langfuse_api_observations_with_native_ids():
    rows, log = read(DOCS / "langfuse_api.json")
    # 4 observations, the last without an id.
    assert_accounting(log, records=4, read_=4, span_q=1, record_q=0)
    assert (log.quarantine[0].position, log.quarantine[0].reason) == ("span 4", "id missing")
    # The dashed UUID trace id fits 16 bytes once the dashes go.
    assert {r["trace_id"] for r in rows} == {"5e4c7e6a9f7b4c1e8d1a2b3c4d5e6f70"}
    # Free-form observation ids: first 8 bytes of sha256("obs-root") etc.; links still hold.
    assert [(r["span_id"], r["parent_span_id"]) for r in rows] == [
        ("662660a289301014", None),
        ("74e9076f052686f4", "662660a289301014"),
        ("dc87e4947252f7e4", "662660a289301014"),
    ]
    root, gen, event = rows
    assert attrs(root)["langfuse.observation.id"] == ("str", "obs-root")
    assert attrs(root)["langfuse.trace.id"] == ("str", "5e4c7e6a-9f7b-4c1e-8d1a-2b3c4d5e6f70")
    assert attrs(root)["langfuse.metadata.customer"] == ("str", "acme")
    assert attrs(root)["langfuse.observation.input"] == ("str", '{"question":"status of order 7?"}')
    assert (gen["status_code"], gen["status_message"]) == ("error", "upstream 500")
    assert attrs(gen)["langfuse.observation.level"] == ("str", "ERROR")
    assert "langfuse.observation.level" not in attrs(root)  # DEFAULT is not recorded
    assert attrs(gen, "resource_attributes") == {"service.name": ("str", "api")}
    # An EVENT has no end: it takes no time (2025-06-01T10:00:03Z = 1748772003 s).
    assert (event["start_ns"], event["end_ns"]) == (1748772003000000000, 1748772003000000000)
    assert attrs(event)["langfuse.metadata.attempt"] == ("int", 2)


def test_langfuse_observation_ids_that_are_objects_or_lists_are_quarantined():
    """An id that is an object or a list cannot say which observations repeat: each such
    observation is quarantined, the others read once (the trace's copy of "o1" left out)."""

    def observation(id_, name):
        return {
            "id": id_,
            "traceId": "t-1",
            "type": "SPAN",
            "name": name,
            "startTime": "2025-06-01T10:00:00.000Z",
            "endTime": "2025-06-01T10:00:01.000Z",
        }

    doc = {
        "trace": {
            "id": "t-1",
            "observations": [
                observation(["a"], "list id"),
                observation("o1", "again"),
                observation("o2", "trace only"),
            ],
        },
        "observations": [observation({"x": 1}, "object id"), observation("o1", "first")],
    }
    rows, log = read(data=json.dumps(doc).encode())
    assert [r["name"] for r in rows] == ["first", "trace only"]
    assert_accounting(log, records=4, read_=4, span_q=2, record_q=0)
    assert [(q.position, q.reason) for q in log.quarantine] == [
        ("span 1", "id: id has type dict"),
        ("span 3", "id: id has type list"),
    ]


# ---------------------------------------------------------------------------------------------
# OTLP documents go to otlp_objects.add_request


@pytest.fixture
def recorded_requests(monkeypatch):
    """A stand-in for otlp_objects that records each add_request call (name, kwargs)."""
    import sys
    import types

    calls: list[tuple[object, dict]] = []
    fake = types.ModuleType("analyzer.ingest.otlp_objects")

    def add_request(obj, builder, log, *, source_pos, position):
        calls.append((obj, {"source_pos": source_pos, "position": position}))

    fake.add_request = add_request  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "analyzer.ingest.otlp_objects", fake)
    return calls


def test_otlp_requests_are_handed_to_add_request(recorded_requests):
    import json

    _, log = read(DOCS / "otlp_document.json")
    [(obj, kwargs)] = recorded_requests
    assert obj["schema"].startswith("exported by hand")  # the whole request, as parsed
    assert kwargs == {"source_pos": 0, "position": "document"}
    assert log.records == 1

    recorded_requests.clear()
    _, log = read(DOCS / "oteltest.json")
    [(obj, kwargs)] = recorded_requests  # the one pbreq; metric_requests ignored
    assert obj["resourceSpans"][0]["resource"]["attributes"][0]["key"] == "service.name"
    assert kwargs == {"source_pos": 0, "position": "trace_requests[0]"}

    recorded_requests.clear()
    read(DOCS / "tempo_batches.json")
    [(obj, _kwargs)] = recorded_requests
    assert list(obj) == ["resourceSpans"] and len(obj["resourceSpans"]) == 1

    recorded_requests.clear()
    read(data=json.dumps({"result": {"resourceSpans": [{"x": 1}]}}).encode())
    assert recorded_requests[0][0] == {"resourceSpans": [{"x": 1}]}

    # Two pretty requests back to back: each with the line it starts on.
    recorded_requests.clear()
    one = json.dumps({"resourceSpans": []}, indent=2)  # 3 lines
    _, log = read(data=(one + "\n" + one + "\n").encode())
    assert [k for _, k in recorded_requests] == [
        {"source_pos": 1, "position": "line 1"},
        {"source_pos": 4, "position": "line 4"},
    ]
    assert log.records == 2

    # Bare OTLP spans (Phoenix's otlpv1 answer) become one request without a resource.
    recorded_requests.clear()
    span = {"trace_id": "a", "span_id": "b", "start_time_unix_nano": 1}
    read(data=json.dumps({"data": [span], "next_cursor": None}).encode())
    assert recorded_requests[0][0] == {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}


def test_oteltest_envelope():
    pytest.importorskip("analyzer.ingest.otlp_objects")
    rows, log = read(DOCS / "oteltest.json")
    assert log.records == 1  # one pbreq
    # base64 ids: AAECAwQFBgcICQoLDA0ODw== is bytes 00..0f; EBESExQVFhc= is 10..17.
    assert {r["trace_id"] for r in rows} == {"000102030405060708090a0b0c0d0e0f"}
    assert sorted((r["span_id"], r["parent_span_id"]) for r in rows) == [
        ("1011121314151617", "2021222324252627"),
        ("2021222324252627", None),
    ]
    assert log.spans_read == 2


def test_otlp_document_with_resource_spans_not_first():
    pytest.importorskip("analyzer.ingest.otlp_objects")
    rows, log = read(DOCS / "otlp_document.json")
    assert [(r["trace_id"], r["span_id"], r["name"]) for r in rows] == [
        ("5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b173", "invoke_agent planner")
    ]
    assert (rows[0]["start_ns"], rows[0]["end_ns"]) == (1544712660000000000, 1544712663000000000)
    assert log.records == 1 and log.spans_read == 1


def test_tempo_batches():
    pytest.importorskip("analyzer.ingest.otlp_objects")
    rows, log = read(DOCS / "tempo_batches.json")
    assert [(r["span_id"], r["parent_span_id"]) for r in rows] == [
        ("eee19b7ec3c1b173", None),
        ("eee19b7ec3c1b174", "eee19b7ec3c1b173"),
    ]
    assert log.spans_read == 2


AGENTOPS_SPAN = {
    "span_id": "27ef04df3fea3e34",
    "parent_span_id": "1935beaad741db0d",
    "span_name": "ollama/llama3:latest.llm",
    "span_kind": "Client",
    "span_type": "request",
    "service_name": "agentops",
    "start_time": "2025-08-04T15:12:27.411626+00:00",
    "end_time": "2025-08-04T15:12:39.463414+00:00",
    "status_code": "OK",
    "status_message": "",
    "attributes": {},
    "resource_attributes": {"service": {"name": "agentops"}},
    "span_attributes": {
        "agentops": {"span": {"kind": "llm"}},
        "gen_ai": {
            "prompt": [{"content": "Write a song.", "role": "user"}],
            "usage": {"prompt_tokens": 210, "completion_tokens": 83},
        },
        "agent": {"tools": []},
    },
    "event_timestamps": ["2025-08-04T15:12:28+00:00"],
    "event_names": ["retry"],
    "event_attributes": [{"attempt": 2}],
    "link_trace_ids": ["b520ab60214d54b570cf701c7ad28fa0"],
    "link_span_ids": ["3a5b01c520ec0172"],
    "link_trace_states": [""],
    "link_attributes": [{}],
}


def test_an_agentops_trace_export_is_read_with_its_trace_id_and_flat_attributes():
    root = AGENTOPS_SPAN | {
        "span_id": "3a5b01c520ec0171",
        "parent_span_id": "",  # a root
        "span_name": "crewai.workflow",
        "span_kind": "Internal",
        "span_attributes": {"agentops": {"span": {"kind": "workflow"}}},
        "event_timestamps": [],
        "event_names": [],
        "event_attributes": [],
        "link_trace_ids": [],
        "link_span_ids": [],
        "link_trace_states": [],
        "link_attributes": [],
    }
    uneven = AGENTOPS_SPAN | {"span_id": "4c25a4c6bfca0f5b", "event_names": []}
    trace = {"trace_id": "b520ab60214d54b570cf701c7ad28faf", "span_count": 3, "total_cost": 0}
    doc = {"trace": trace, "spans": [root, AGENTOPS_SPAN, uneven]}
    assert document_kind(doc) == "agentops"
    rows, log = read(data=json.dumps(doc).encode())
    assert_accounting(log, records=3, read_=3, span_q=1, record_q=0)
    assert log.quarantine[0].reason.startswith("event_timestamps, event_names, event_attributes")
    top, llm = rows
    assert {r["trace_id"] for r in rows} == {trace["trace_id"]}
    assert (top["parent_span_id"], top["kind"], top["status_code"]) == (None, "internal", "ok")
    assert (llm["parent_span_id"], llm["kind"], llm["name"]) == (
        "1935beaad741db0d",
        "client",
        "ollama/llama3:latest.llm",
    )
    assert llm["start_ns"] == 1754320347411626000
    got = {k: v for k, (_, v) in attrs(llm).items()}
    assert got["agentops.span.kind"] == "llm"
    assert got["gen_ai.prompt.0.content"] == "Write a song."  # a list of objects: indexed
    assert got["gen_ai.usage.prompt_tokens"] == 210
    assert attrs(llm, "resource_attributes")["service.name"] == ("str", "agentops")
    assert [(e["name"], e["time_ns"]) for e in llm["events"]] == [("retry", 1754320348000000000)]
    assert [(lk["trace_id"], lk["span_id"]) for lk in llm["links"]] == [
        ("b520ab60214d54b570cf701c7ad28fa0", "3a5b01c520ec0172")
    ]
    # outside its export an AgentOps span has no trace id: quarantined, saying so
    rows, log = read(data=json.dumps([AGENTOPS_SPAN]).encode())
    assert rows == [] and log.quarantine[0].reason == "trace_id missing"
    # near misses: a `trace` without its id gives no id to its spans (read one by one, then
    # quarantined as above); spans of no known shape make no trace
    assert document_kind({"trace": {"span_count": 1}, "spans": [AGENTOPS_SPAN]}) == "span-list"
    with pytest.raises(TraceFormatError):
        document_kind({"trace": trace, "spans": [{"name": "x"}]})


# ---------------------------------------------------------------------------------------------
# Dispatch and field readers


@pytest.mark.parametrize(
    ("doc", "kind"),
    [
        ({"resourceSpans": []}, "otlp"),
        ({"resource_spans": []}, "otlp"),
        ({"trace_requests": []}, "oteltest"),
        ({"result": {"resourceSpans": []}}, "otlp-wrapped"),
        ({"batches": []}, "otlp-wrapped"),
        ({"trace": {"resourceSpans": []}}, "otlp-wrapped"),
        ({"timestamp": "t", "project_id": "p", "data": {"resourceSpans": []}}, "otlp-wrapped"),
        ({"trace": {"id": "x", "observations": []}}, "langfuse"),
        ({"observations": []}, "langfuse"),
        ({"spans": [], "final_output": None}, "any-agent"),
        ({"data": [{"traceID": "a", "spans": [], "processes": {}}]}, "jaeger"),
        ({"traceID": "a", "spans": []}, "jaeger"),
        ([{"traceId": "a", "id": "b", "timestamp": 1}], "span-list"),
        ([[{"traceId": "a", "id": "b"}]], "zipkin-traces"),
        ([{"traceId": "a", "spanId": "b", "startTimeUnixNano": "1"}], "otlp-spans"),
        ({"context": {"trace_id": "a", "span_id": "b"}, "name": "x"}, "span:sdk"),
        ({"spanContext": {"traceId": "a"}}, "span:js"),
        (
            {"traceId": "a", "spanId": "b", "startTimeUnixNano": 1, "resource": {}},
            "span:cloudwatch",
        ),
        (
            {
                "message": json.dumps(
                    {"traceId": "a", "spanId": "b", "startTimeUnixNano": 1, "resource": {}}
                )
            },
            "span:cloudwatch",
        ),
    ],
)
def test_document_kind(doc, kind):
    assert document_kind(doc) == kind


@pytest.mark.parametrize(
    "doc",
    [
        {"data": {"spans": []}},  # near miss: `data` holding no OTLP request
        {"timestamp": "t", "data": "resourceSpans"},
        {"meta": {"resourceSpans": []}},  # a field not known to wrap one
    ],
)
def test_a_wrapper_without_an_otlp_request_is_no_trace(doc):
    with pytest.raises(TraceFormatError, match="not a trace"):
        document_kind(doc)


def test_span_shape_tells_zipkin_from_js_console_and_langfuse():
    assert span_shape({"traceId": "a", "id": "b", "tags": {}}) == "zipkin"
    assert span_shape({"traceId": "a", "id": "b", "attributes": {}}) == "js-console"
    assert span_shape({"traceId": "a", "id": "b", "startTime": "t", "type": "SPAN"}) == "langfuse"
    assert span_shape({"context": {"span_id": 1}, "span_kind": "LLM"}) == "phoenix"
    assert span_shape({"name": "x"}) is None


def test_iso_to_ns():
    # 2025-09-30T09:03:59Z = 1759223039 s (calendar.timegm by hand of the fields).
    assert iso_to_ns("2025-09-30T09:03:59.962Z") == 1759223039962000000
    assert iso_to_ns("2025-09-30T09:03:59.962000001Z") == 1759223039962000001
    assert iso_to_ns("2025-09-30T09:03:59.9620000019Z") == 1759223039962000001  # 10th digit cut
    assert iso_to_ns("2025-09-30T09:03:59Z") == 1759223039000000000
    assert iso_to_ns("2025-09-30T09:03:59") == 1759223039000000000  # no zone: UTC
    assert iso_to_ns("2025-09-30 11:03:59+02:00") == 1759223039000000000
    assert iso_to_ns("2025-09-30T04:33:59-0430") == 1759223039000000000
    assert iso_to_ns("1970-01-01T00:00:00.000001Z") == 1000
    for bad in ("2025-09-30", "yesterday", "2025-09-30T09:03:59.Z", "2025-09-30T09:03:59+2"):
        with pytest.raises(ValueError):
            iso_to_ns(bad)


def test_time_kind_and_status_spellings():
    assert time_ns([1770131994, 21415667]) == 1770131994021415667
    assert time_ns(1544712660000000, unit_ns=1000) == 1544712660000000000
    assert time_ns("1758026593210770000") == 1758026593210770000
    with pytest.raises(ValueError):
        time_ns(True)
    assert [kind_name(k) for k in ("SpanKind.CLIENT", "SPAN_KIND_SERVER", "internal", 3, None)] == [
        "client",
        "server",
        "internal",
        "client",
        "unspecified",
    ]
    assert [kind_name(k, js=True) for k in (0, 1, 2, 3, 4, 5)] == [
        "internal",
        "server",
        "client",
        "producer",
        "consumer",
        "unspecified",
    ]
    assert kind_name("SpanKind.BOGUS") == "unspecified"
    assert [status_name(s) for s in ("OK", "STATUS_CODE_ERROR", "StatusCode.UNSET", 2, "ok!")] == [
        "ok",
        "error",
        "unset",
        "error",
        "unset",
    ]


def test_batches_are_bounded_inside_one_document_and_across_values(monkeypatch):
    import analyzer.ingest.documents as documents

    monkeypatch.setattr(documents, "BATCH_SPANS", 2)
    for path in (DOCS / "sdk_console.json", DOCS / "phoenix.json"):  # 3 values / 1 value
        batches = list(read_json_document(path.read_bytes(), FileLog(path=str(path))))
        assert [b.num_rows for b in batches] == [2, 1]
