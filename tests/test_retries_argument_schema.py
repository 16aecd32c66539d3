"""retry_steps and argument_schema beyond the case files: rows, coverage reasons, schemas
recorded in traces (through the normalizer), no network, the pure-Python fallback."""

from __future__ import annotations

import json
import socket
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from factories import tables

import analyzer.checks.argument_schema as argument_schema
from analyzer.checks import evaluate
from analyzer.checks.retries import RETRY_STEPS_SCHEMA, retry_steps
from analyzer.conventions import normalize
from analyzer.pack import pack_from_mapping
from analyzer.runs import build_runs
from analyzer.spans import SpanBatchBuilder, attrs_from_mapping

T1, T2 = f"{1:032x}", f"{2:032x}"


def sid(trace: int, n: int) -> str:
    return f"{trace:08x}{n:08x}"


def agent(trace: int, end: int = 1000, **kw: Any) -> dict[str, Any]:
    return dict(
        trace_id=f"{trace:032x}", span_id=sid(trace, 0), role="agent", start_ns=0, end_ns=end, **kw
    )


def step(trace: int, n: int, role: str, start: int, **kw: Any) -> dict[str, Any]:
    kw.setdefault("parent_span_id", sid(trace, 0))
    return dict(
        trace_id=f"{trace:032x}",
        span_id=sid(trace, n),
        role=role,
        start_ns=start,
        end_ns=start + 9,
        **kw,
    )


def model(trace: int, n: int, start: int, *, answer: str | None = None, **kw: Any):
    if answer is None:
        kw.setdefault("finish_reasons", ["tool_calls"])
    else:
        kw.update(output_text=answer, finish_reasons=["stop"])
    return step(trace, n, "model_call", start, model="m", **kw)


def tool(trace: int, n: int, start: int, name: str, arguments: str | None, **kw: Any):
    return step(trace, n, "tool_call", start, tool_name=name, arguments=arguments, **kw)


def rules(*raw: dict[str, Any], tools: dict[str, Any] | None = None):
    return pack_from_mapping({"pack": "p", "tools": tools or {}, "rules": list(raw)})


# --- retry_steps --------------------------------------------------------------------------------


def test_retry_steps_lists_each_superseded_attempt_with_its_pattern():
    rs = build_runs(
        *tables(
            [
                agent(1),
                model(1, 1, 10, status="error"),
                model(1, 2, 20),
                tool(1, 3, 30, "lookup", '{"a": 1, "b": [1, 2]}', status="error"),
                tool(1, 4, 40, "lookup", '{"b":[1,2],"a":1}', http_resend_count=3),
                model(1, 5, 50, answer="draft"),
                model(1, 6, 60, answer="final"),
            ]
        )
    )
    found = retry_steps(rs)
    assert found.schema == pl.Schema(RETRY_STEPS_SCHEMA)
    assert found.rows() == [
        (T1, 1, sid(1, 1), "model_after_failure", 1, sid(1, 2), None),
        (T1, 3, sid(1, 3), "tool_repeat", 1, sid(1, 4), "lookup"),
        (T1, 3, None, "http_resend", 3, sid(1, 4), None),
        (T1, 5, sid(1, 5), "model_after_answer", 1, sid(1, 6), None),
    ]
    # what the report reads: retries = sum of count; retry cost = cost of the superseded spans
    assert found.get_column("count").sum() == 6
    assert found.get_column("span_id").drop_nulls().to_list() == [sid(1, 1), sid(1, 3), sid(1, 5)]


def test_no_retry_across_the_traces_of_a_conversation():
    conv = {"gen_ai.conversation.id": "c-1"}
    rows = [
        agent(1, attrs=conv),
        model(1, 1, 10),
        tool(1, 2, 20, "lookup", '{"a": 1}', status="error"),
        model(1, 3, 30, answer="sorry, lookup failed"),
        agent(2, end=2000, attrs=conv),
        tool(2, 1, 1100, "lookup", '{"a": 1}'),
        model(2, 2, 1200, answer="found it"),
    ]
    keyed = build_runs(*tables(rows), run_key="gen_ai.conversation.id")
    assert keyed.runs.get_column("run_id").to_list() == ["c-1"]
    assert keyed.steps.height == 5
    assert retry_steps(keyed).is_empty()
    # near miss: the same calls within one trace are a retry of the failed lookup
    one_trace = [*rows[:4], tool(1, 4, 40, "lookup", '{"a": 1}'), model(1, 5, 50, answer="ok")]
    assert retry_steps(build_runs(*tables(one_trace))).select(
        "run_id", "span_id", "pattern", "retry_span_id"
    ).rows() == [(T1, sid(1, 2), "tool_repeat", sid(1, 4))]


def test_no_retry_when_the_answer_was_a_sub_agent_s_and_the_next_call_its_caller_s():
    # the supervisor asks, its detector (an agent span inside it) answers, the supervisor
    # answers in turn: two agents, each answering once (tests/data/real_corpus/NOTES.md,
    # the AGNTCY trace)
    detector = dict(step(1, 2, "agent", 15), end_ns=65, agent_name="detector")
    inner = {"parent_span_id": sid(1, 2)}
    rows = [
        agent(1, agent_name="supervisor"),
        model(1, 1, 10),
        detector,
        model(1, 3, 20, **inner),
        tool(1, 4, 30, "list_devices", "{}", **inner),
        model(1, 5, 35, answer="4 devices", **inner),
        model(1, 6, 70, answer="You have 4 devices."),
    ]
    rs = build_runs(*tables(rows))
    assert rs.runs.height == 1
    agents = rs.steps.select("index", "agent_span_id").rows()
    assert agents == [
        (0, sid(1, 0)),
        (1, sid(1, 2)),
        (2, sid(1, 2)),
        (3, sid(1, 2)),
        (4, sid(1, 0)),
    ]
    assert retry_steps(rs).is_empty()
    # near miss: the detector answering twice is a retry, its caller's call after it is not
    again = [*rows[:6], model(1, 7, 50, answer="4 devices, sure", **inner), rows[6]]
    assert retry_steps(build_runs(*tables(again))).select("span_id", "retry_span_id").rows() == [
        (sid(1, 5), sid(1, 7))
    ]


def test_no_retry_when_the_answer_was_that_of_a_subagent_run_as_a_tool():
    # Claude Code has no agent span for a subagent: its calls run inside the Agent tool's
    # execution. The subagent's last call answered, the coordinator's next call was taken
    # for the same agent asking again (a false retry on a real Claude Agent SDK capture)
    inner = {"parent_span_id": sid(1, 2)}
    rows = [
        agent(1),
        model(1, 1, 10),
        dict(tool(1, 2, 15, "Agent", None), end_ns=60),
        model(1, 3, 20, **inner),
        tool(1, 4, 30, "get_weather", '{"city": "Lisbon"}', **inner),
        model(1, 5, 40, answer="21 C, clear", **inner),
        model(1, 6, 70, answer="Lisbon: 21 C, clear sky."),
    ]
    rs = build_runs(*tables(rows))
    by_index = dict(rs.steps.select("index", "agent_span_id").rows())
    assert [by_index[i] for i in range(6)] == [sid(1, 0), sid(1, 0), *[sid(1, 2)] * 3, sid(1, 0)]
    assert retry_steps(rs).is_empty()
    # near miss: the subagent answering twice inside its tool is a retry
    again = [*rows[:6], model(1, 7, 50, answer="21 C", **inner), rows[6]]
    assert retry_steps(build_runs(*tables(again))).select("span_id", "retry_span_id").rows() == [
        (sid(1, 5), sid(1, 7))
    ]


def test_unrecorded_outcome_of_a_model_call_makes_the_run_partial():
    rows = [
        agent(1),
        model(1, 1, 10, has_content=False, finish_reasons=[]),
        model(1, 2, 20, answer="done"),
        agent(2),
        model(2, 1, 10, has_content=False, finish_reasons=["stop"]),
        model(2, 2, 20, answer="done"),
    ]
    result = evaluate([rules({"id": "r", "type": "retries"})], build_runs(*tables(rows)))
    assert result.coverage.select("run_id", "status", "reason").rows() == [
        (T1, "partial", "a model call's outcome was not recorded"),
        (T2, "checked", None),
    ]
    # a finish reason recorded without content is enough to know the call answered
    assert result.findings.select("run_id", "detail").rows() == [
        (T2, "1 retry > max 0: 1 model call after an answer")
    ]


# --- schemas recorded in traces -------------------------------------------------------------------

LOOKUP_SCHEMA = {
    "type": "object",
    "required": ["account_id"],
    "properties": {"account_id": {"type": "string"}},
}


def span_table(*spans: tuple[str, str, dict[str, Any]]):
    """(span name, OpenInference kind, attributes) spans under one AGENT span, in order."""
    builder = SpanBatchBuilder()
    for i, (name, kind, attrs) in enumerate([("agent", "AGENT", {}), *spans]):
        builder.add(
            trace_id=T1,
            span_id=sid(1, i),
            parent_span_id=None if i == 0 else sid(1, 0),
            name=name,
            kind="internal",
            start_ns=0 if i == 0 else 100 * i,
            end_ns=10_000 if i == 0 else 100 * i + 50,
            status_code="unset",
            attributes=attrs_from_mapping({"openinference.span.kind": kind, **attrs}),
            resource_attributes=attrs_from_mapping({"service.name": "svc"}),
            source_file="mem",
            source_pos=i,
        )
    return pa.Table.from_batches([builder.flush()])


def test_tool_spans_record_their_own_schema_when_it_looks_like_one():
    definition = {
        "type": "function",
        "function": {"name": "screen", "parameters": {"type": "object"}},
    }
    table = span_table(
        (
            "lookup_account",
            "TOOL",
            {"tool.name": "lookup_account", "tool.parameters": json.dumps(LOOKUP_SCHEMA)},
        ),
        # Dify writes the call's arguments in tool.parameters: not a schema
        ("search", "TOOL", {"tool.name": "search", "tool.parameters": '{"query": "ada"}'}),
        ("screen", "TOOL", {"tool.name": "screen", "tool.json_schema": json.dumps(definition)}),
        ("chat", "LLM", {"tool.parameters": json.dumps(LOOKUP_SCHEMA)}),  # not a tool span
    )
    defs = normalize(table).get_column("tool_definitions").to_list()
    assert defs == [
        None,
        '[{"description":null,"name":"lookup_account","parameters":{"properties":{"account_id":'
        '{"type":"string"}},"required":["account_id"],"type":"object"}}]',
        None,
        '[{"description":null,"name":"screen","parameters":{"type":"object"}}]',
        None,
    ]


def test_schemas_offered_to_the_model_judge_the_calls_end_to_end():
    offered = {
        "type": "function",
        "function": {"name": "lookup_account", "parameters": LOOKUP_SCHEMA},
    }
    table = span_table(
        ("response", "LLM", {"llm.tools.0.tool.json_schema": json.dumps(offered)}),
        ("lookup_account", "TOOL", {"tool.name": "lookup_account", "input.value": '{"id": "A-1"}'}),
        ("response", "LLM", {"output.value": "done"}),
    )
    rs = build_runs(table, normalize(table))
    (defs,) = rs.runs.get_column("tool_definitions").to_list()
    assert [json.loads(d)[0]["name"] for d in defs] == ["lookup_account"]
    result = evaluate([rules({"id": "a", "type": "argument_schema"})], rs)
    assert result.findings.select("tool", "argument", "detail", "span_ids").rows() == [
        (
            "lookup_account",
            "account_id",
            "lookup_account arguments fail schema: 'account_id' is a required property",
            [sid(1, 2)],
        )
    ]
    assert result.coverage.get_column("status").to_list() == ["checked"]


# --- coverage, network, fallback ------------------------------------------------------------------


def _calls_run(*calls: tuple[str, str | None], defs: list[dict[str, Any]] | None = None):
    rows = [agent(1), model(1, 1, 10, tool_definitions=json.dumps(defs) if defs else None)]
    for i, (name, args) in enumerate(calls, start=2):
        rows.append(tool(1, i, 10 * i, name, args))
    rows.append(model(1, 99, 500, answer="done"))
    return build_runs(*tables(rows))


def test_every_reason_a_run_is_unverifiable_is_given():
    rs = _calls_run(
        ("notify", '{"to": "ops"}'),
        ("lookup_account", None),
        ("screen", '{"name": "Ada"}'),
        defs=[{"name": "screen", "parameters": {"type": 12}}],
    )
    result = evaluate(
        [rules({"id": "a", "type": "argument_schema"}, tools={"lookup_account": LOOKUP_SCHEMA})], rs
    )
    assert result.findings.is_empty()
    assert result.coverage.select("status", "reason").rows() == [
        (
            "unverifiable",
            "no JSON Schema known for notify; the JSON Schema of screen recorded in the trace is "
            "not valid; tool call arguments not recorded",
        )
    ]


def test_remote_references_are_never_fetched(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("network used")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    remote = {"$ref": "https://schemas.example.com/lookup.json"}
    rs = _calls_run(("lookup_account", '{"account_id": "A-1"}'))
    result = evaluate(
        [rules({"id": "a", "type": "argument_schema"}, tools={"lookup_account": remote})], rs
    )
    assert result.findings.is_empty()
    assert result.coverage.select("status", "reason").rows() == [
        (
            "unverifiable",
            "the JSON Schema of lookup_account could not be applied (Unresolvable: "
            "https://schemas.example.com/lookup.json)",
        )
    ]


@pytest.mark.parametrize("fast", [True, False], ids=["jsonschema-rs", "jsonschema-only"])
def test_both_validators_give_the_same_findings(monkeypatch, fast):
    if not fast:
        monkeypatch.setattr(argument_schema, "jsonschema_rs", None)
    schema = {**LOOKUP_SCHEMA, "properties": {"account_id": {"type": "string", "maxLength": 3}}}
    rs = _calls_run(
        ("lookup_account", '{"account_id": "A-1"}'),
        ("lookup_account", '{"account_id": "A-1234"}'),
        ("lookup_account", '{"account_id": 7, "x": NaN}'),
        ("lookup_account", "[1, 2]"),
    )
    result = evaluate(
        [rules({"id": "a", "type": "argument_schema"}, tools={"lookup_account": schema})], rs
    )
    assert result.findings.select("argument", "detail").rows() == [
        (
            "account_id",
            "lookup_account arguments fail schema at $.account_id: 'A-1234' is too long",
        ),
        (None, "lookup_account arguments are not valid JSON (NaN is not a JSON value)"),
        (None, "lookup_account arguments fail schema: [1, 2] is not of type 'object'"),
    ]
