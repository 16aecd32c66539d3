"""The run model: run keys, step order, requested calls, answers, sources, totals."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from factories import TRACE, call, msg, tables

from analyzer.runs import build_runs, sources_before

T2 = "1" * 32


def kyc_rows(**overrides):
    rows = [
        dict(
            span_id="a" * 16,
            role="agent",
            start_ns=0,
            end_ns=100,
            agent_name="kyc",
            input_tokens=999,
            output_tokens=999,
            attrs={"app.case_id": "K-1"},
        ),
        dict(
            span_id="b" * 16,
            parent_span_id="a" * 16,
            role="model_call",
            start_ns=10,
            end_ns=20,
            model="gpt-4.1",
            input_tokens=100,
            output_tokens=10,
            cached_input_tokens=40,
            temperature=0.0,
            input_messages=[msg("system", "You review files."), msg("user", "Review ACC-1")],
            requested_calls=[call("fetch_documents", '{"id": "ACC-1"}', "c1")],
        ),
        dict(
            span_id="c" * 16,
            parent_span_id="a" * 16,
            role="tool_call",
            start_ns=21,
            end_ns=30,
            tool_name="fetch_documents",
            tool_call_id="c1",
            result="passport of ACC-778821",
        ),
        dict(
            span_id="d" * 16,
            parent_span_id="a" * 16,
            role="model_call",
            start_ns=31,
            end_ns=40,
            model="gpt-4.1",
            input_tokens=200,
            output_tokens=20,
            temperature=0.0,
            input_messages=[msg("assistant", "I invent ACC-999"), msg("tool", "passport", "c1")],
            output_text='{"decision": "approve"}',
            finish_reasons=["stop"],
        ),
    ]
    for span_id, fields in overrides.items():
        for row in rows:
            if row["span_id"] == span_id * 16:
                row.update(fields)
    return rows


def test_one_trace_is_one_run_with_ordered_steps_and_model_only_tokens():
    rs = build_runs(*tables(kyc_rows()))
    assert rs.runs.height == 1
    run = rs.runs.row(0, named=True)
    assert run["run_id"] == TRACE
    assert run["case_id"] == "K-1"
    assert run["agent"] == "kyc"
    assert (run["model_calls"], run["tool_calls"]) == (2, 1)
    # 100 + 200 and 10 + 20: the agent span's 999 aggregate is never added.
    assert (run["input_tokens"], run["output_tokens"], run["cached_input_tokens"]) == (300, 30, 40)
    assert run["models"] == ["gpt-4.1"]
    assert run["temperature"] == 0.0
    assert run["duration_s"] == 100 / 1e9
    steps = rs.steps
    assert steps.get_column("span_id").to_list() == ["b" * 16, "c" * 16, "d" * 16]
    assert steps.get_column("index").to_list() == [0, 1, 2]
    assert steps.get_column("kind").to_list() == ["model_call", "tool_call", "model_call"]
    assert steps.get_column("name").to_list() == ["gpt-4.1", "fetch_documents", "gpt-4.1"]
    tool = steps.row(1, named=True)
    assert tool["requested_by"] == "b" * 16
    # The execution span recorded no arguments: those the model requested fill in.
    assert tool["arguments"] == '{"id": "ACC-1"}'


def test_answer_is_last_tool_free_model_output_at_its_end():
    run = build_runs(*tables(kyc_rows())).runs.row(0, named=True)
    assert run["has_answer"] is True
    assert run["answer"] == '{"decision": "approve"}'
    assert run["answer_ns"] == 40
    assert run["answer_span_id"] == "d" * 16


def test_agent_output_is_the_answer_text_when_recorded():
    run = build_runs(*tables(kyc_rows(a={"output_text": "final verdict"}))).runs.row(0, named=True)
    assert (run["answer"], run["answer_ns"]) == ("final verdict", 40)


def test_an_agent_output_of_a_serialized_none_is_no_answer_text():
    # CrewAI writes a flow that returned None as the text "null" on its span: the model's
    # last reply is the answer, not the word "null"
    for recorded in ("null", " null\n", ""):
        run = build_runs(*tables(kyc_rows(a={"output_text": recorded}))).runs.row(0, named=True)
        assert (run["has_answer"], run["answer"]) == (True, '{"decision": "approve"}')
    # near miss: a model call's own reply "null" is its answer, as recorded
    run = build_runs(*tables(kyc_rows(d={"output_text": "null"}))).runs.row(0, named=True)
    assert run["answer"] == "null"
    # an agent whose run has no model call and whose output is "null" has no answer
    rows = [dict(span_id="a" * 16, role="agent", start_ns=0, end_ns=10, output_text="null")]
    run = build_runs(*tables(rows)).runs.row(0, named=True)
    assert (run["has_answer"], run["answer"]) == (False, None)


def test_no_answer_when_last_model_call_requested_tools():
    rows = kyc_rows(
        d={"requested_calls": [call("screen_sanctions", "{}", "c2")], "output_text": None}
    )
    run = build_runs(*tables(rows)).runs.row(0, named=True)
    assert run["has_answer"] is False
    assert run["answer"] is None and run["answer_ns"] is None


def test_finish_reason_alone_marks_a_tool_request():
    rows = kyc_rows(d={"finish_reasons": ["tool_calls"], "output_text": None})
    assert build_runs(*tables(rows)).runs.row(0, named=True)["has_answer"] is False


def test_failed_last_call_falls_back_to_earlier_answer_and_error_only_run_has_none():
    rows = kyc_rows(b={"requested_calls": [], "output_text": "first answer"})
    rows[3].update(status="error", output_text=None)
    run = build_runs(*tables(rows)).runs.row(0, named=True)
    assert (run["has_answer"], run["answer"], run["answer_ns"]) == (True, "first answer", 20)
    rows = kyc_rows()
    rows[3].update(status="error", output_text=None)
    assert build_runs(*tables(rows)).runs.row(0, named=True)["has_answer"] is False


def output_tool_rows(name: str = "final_result", executed: bool = True, status: str = "ok"):
    """kyc_rows whose last model call answers through an output tool instead of text."""
    rows = kyc_rows(
        d={
            "requested_calls": [call(name, '{"decision": "approve"}', "c9")],
            "output_text": None,
            "finish_reasons": ["tool_calls"],
        }
    )
    if executed:
        rows.append(
            dict(
                span_id="e" * 16,
                parent_span_id="a" * 16,
                role="tool_call",
                start_ns=41,
                end_ns=45,
                tool_name=name,
                tool_call_id="c9",
                status=status,
            )
        )
    return rows


def test_output_tool_called_last_is_the_answer():
    # pydantic-ai / any-agent: the structured answer is the output tool's arguments.
    run = build_runs(*tables(output_tool_rows())).runs.row(0, named=True)
    assert (run["has_answer"], run["answer"]) == (True, '{"decision": "approve"}')
    assert (run["answer_ns"], run["answer_span_id"]) == (45, "e" * 16)
    # No execution span (pydantic-ai v1/v2 plain output types): the request, at the call's end.
    run = build_runs(*tables(output_tool_rows(executed=False))).runs.row(0, named=True)
    assert (run["has_answer"], run["answer_ns"], run["answer_span_id"]) == (True, 40, "d" * 16)
    # Several output types: final_result_<Type>; the agent span output is the text if recorded.
    rows = output_tool_rows("final_result_Decision")
    rows[0]["output_text"] = "approve"
    run = build_runs(*tables(rows)).runs.row(0, named=True)
    assert (run["has_answer"], run["answer"], run["answer_ns"]) == (True, "approve", 45)


def test_output_tool_near_misses_give_no_answer():
    # An ordinary tool name, a failed output tool, and an output tool a model call came after.
    for rows in (
        output_tool_rows("final_results"),
        output_tool_rows("get_final_output"),
        output_tool_rows(status="error"),
    ):
        run = build_runs(*tables(rows)).runs.row(0, named=True)
        assert (run["has_answer"], run["answer"], run["answer_ns"]) == (False, None, None)
    rows = output_tool_rows()
    rows.append(
        dict(span_id="f" * 16, parent_span_id="a" * 16, role="model_call", start_ns=50, end_ns=60)
    )
    rows[-1]["requested_calls"] = [call("fetch_documents", "{}", "c10")]
    run = build_runs(*tables(rows)).runs.row(0, named=True)
    assert run["has_answer"] is False


def test_content_off_model_call_followed_by_a_tool_counts_as_asking_for_tools():
    rows = kyc_rows(b={"requested_calls": [], "has_content": False, "input_messages": []})
    rows = rows[:3]  # the run stops after the tool: its last model call asked for tools
    run = build_runs(*tables(rows)).runs.row(0, named=True)
    assert run["has_answer"] is False
    # Near miss: a content-off call with nothing after it is an answer.
    only = [rows[0], {**rows[1], "span_id": "e" * 16}]
    assert build_runs(*tables(only)).runs.row(0, named=True)["has_answer"] is True


def test_requested_call_without_execution_is_a_step():
    rows = kyc_rows(
        b={
            "requested_calls": [
                call("fetch_documents", '{"id": "ACC-1"}', "c1"),
                call("screen_sanctions", '{"name": "X"}', "c9"),
            ]
        }
    )
    rs = build_runs(*tables(rows))
    steps = rs.steps
    assert steps.height == 4
    ghost = steps.filter(~steps["executed"]).row(0, named=True)
    assert ghost["name"] == "screen_sanctions"
    assert ghost["span_id"] is None and ghost["requested_by"] == "b" * 16
    assert ghost["start_ns"] == 20  # requested at the end of the model call
    assert ghost["index"] == 1  # after the model call, before the execution at 21
    run = rs.runs.row(0, named=True)
    assert (run["tool_calls"], run["unexecuted_tool_calls"]) == (2, 1)


def test_tool_spans_without_ids_join_the_request_of_their_arguments_first():
    # a real Claude Agent SDK export (Langfuse) splits one response's two calls over two model
    # spans; a framework may refuse a request and run the next: in name order alone, a span
    # takes another call's request
    def step(span_id, start, role, **fields):
        return dict(
            span_id=span_id * 16,
            parent_span_id="a" * 16,
            role=role,
            start_ns=start,
            end_ns=start + 1,
            **fields,
        )

    def model(span_id, start, arguments):
        return step(span_id, start, "model_call", requested_calls=[call("send", arguments)])

    def tool(span_id, start, arguments):
        return step(span_id, start, "tool_call", tool_name="send", arguments=arguments)

    rows = [
        dict(span_id="a" * 16, role="agent", start_ns=0, end_ns=100),
        model("b", 1, '{"to": "ops", "n": 1}'),  # refused: no span
        model("c", 10, '{"n": 2, "to": "ops"}'),
        tool("d", 20, '{"to":"ops","n":2}'),  # the same arguments, written otherwise
    ]
    tools = build_runs(*tables(rows)).steps.filter(pl.col("kind") == "tool_call")
    assert tools.select("span_id", "requested_by", "executed").rows() == [
        (None, "b" * 16, False),
        ("d" * 16, "c" * 16, True),
    ]
    # near misses: other arguments, or none recorded, join in name order as before
    for arguments in ('{"to": "sales"}', None):
        tools = build_runs(*tables([*rows[:3], tool("d", 20, arguments)])).steps
        tools = tools.filter(pl.col("kind") == "tool_call")
        assert tools.select("span_id", "requested_by").rows() == [
            (None, "c" * 16),
            ("d" * 16, "b" * 16),
        ]


def test_requests_and_executions_join_by_name_in_order_without_ids():
    rows = [
        dict(span_id="a" * 16, role="agent", start_ns=0, end_ns=100),
        dict(
            span_id="b" * 16,
            parent_span_id="a" * 16,
            role="model_call",
            start_ns=1,
            end_ns=2,
            requested_calls=[call("lookup", '{"n": 1}'), call("lookup", '{"n": 2}')],
        ),
        dict(
            span_id="c" * 16,
            parent_span_id="a" * 16,
            role="tool_call",
            start_ns=3,
            end_ns=4,
            tool_name="lookup",
        ),
        dict(
            span_id="e" * 16,
            parent_span_id="a" * 16,
            role="tool_call",
            start_ns=5,
            end_ns=6,
            tool_name="lookup",
        ),
    ]
    steps = build_runs(*tables(rows)).steps
    tools = steps.filter(steps["kind"] == "tool_call")
    assert tools.get_column("arguments").to_list() == ['{"n": 1}', '{"n": 2}']
    assert tools.get_column("executed").to_list() == [True, True]


def test_agents_under_a_span_of_their_own_instrumentation_are_one_run():
    # A LangGraph graph (a CHAIN span) whose nodes OpenInference marks as agents, one per
    # turn; Google ADK's `invocation` over the agents of one request: one framework call.
    def rows(root_scope, agents_scope="openinference.instrumentation.langchain", n=2):
        out = [dict(span_id="1" * 16, role="other", start_ns=0, end_ns=100, scope=root_scope)]
        for k in range(n):
            agent, model = f"{2 * k + 2:016x}", f"{2 * k + 3:016x}"
            start = 10 + 20 * k
            out += [
                dict(
                    span_id=agent,
                    parent_span_id="1" * 16,
                    role="agent",
                    start_ns=start,
                    end_ns=start + 10,
                    scope=agents_scope,
                ),
                dict(
                    span_id=model,
                    parent_span_id=agent,
                    role="model_call",
                    start_ns=start + 1,
                    end_ns=start + 2,
                    scope=agents_scope,
                ),
            ]
        return out

    graph = build_runs(*tables(rows("openinference.instrumentation.langchain"))).runs
    assert graph.select("run_id", "model_calls").rows() == [(TRACE, 2)]
    # near misses: the application's own span (another scope), or no scope recorded, holding
    # two agent runs (a paused run and its resume) keeps one run per agent
    for root_scope, agents_scope in (("kyc-app", "pydantic-ai"), (None, None), ("", "")):
        runs = build_runs(*tables(rows(root_scope, agents_scope))).runs
        assert runs.height == 2, (root_scope, agents_scope)


def test_two_top_level_agents_in_a_trace_are_two_runs_and_nested_agents_are_not():
    rows = [
        dict(span_id="1" * 16, role="other", start_ns=0, end_ns=100),
        dict(span_id="2" * 16, parent_span_id="1" * 16, role="agent", start_ns=1, end_ns=50),
        dict(span_id="3" * 16, parent_span_id="2" * 16, role="agent", start_ns=2, end_ns=40),
        dict(span_id="4" * 16, parent_span_id="3" * 16, role="model_call", start_ns=3, end_ns=4),
        dict(span_id="5" * 16, parent_span_id="1" * 16, role="agent", start_ns=60, end_ns=90),
        dict(span_id="6" * 16, parent_span_id="5" * 16, role="model_call", start_ns=61, end_ns=62),
    ]
    rs = build_runs(*tables(rows))
    assert rs.runs.get_column("run_id").to_list() == [f"{TRACE}:{'2' * 16}", f"{TRACE}:{'5' * 16}"]
    assert rs.runs.get_column("model_calls").to_list() == [1, 1]
    # Each run lasts as long as its agent, not as the span above both.
    assert rs.runs.get_column("duration_s").to_list() == [49 / 1e9, 30 / 1e9]
    # A single outer agent with a nested one: one run keyed by the trace id.
    nested = build_runs(*tables(rows[:4]))
    assert nested.runs.get_column("run_id").to_list() == [TRACE]


def test_run_key_groups_traces_into_one_run():
    rows = [
        dict(
            span_id="a" * 16,
            role="agent",
            start_ns=0,
            end_ns=10,
            attrs={"gen_ai.conversation.id": "conv-9"},
            output_text="first turn",
        ),
        dict(span_id="b" * 16, parent_span_id="a" * 16, role="model_call", start_ns=1, end_ns=2),
        dict(
            trace_id=T2,
            span_id="c" * 16,
            role="agent",
            start_ns=20,
            end_ns=30,
            attrs={"gen_ai.conversation.id": "conv-9"},
            output_text="last turn",
        ),
        dict(
            trace_id=T2,
            span_id="d" * 16,
            parent_span_id="c" * 16,
            role="model_call",
            start_ns=21,
            end_ns=22,
        ),
    ]
    per_trace = build_runs(*tables(rows)).runs
    assert per_trace.get_column("duration_s").to_list() == [10 / 1e9, 10 / 1e9]
    rs = build_runs(*tables(rows), run_key="gen_ai.conversation.id")
    assert rs.runs.get_column("run_id").to_list() == ["conv-9"]
    run = rs.runs.row(0, named=True)
    assert (run["model_calls"], run["traces"]) == (2, 2)
    # From the first turn's start to the last turn's end, not the first turn alone.
    assert (run["started_ns"], run["duration_s"]) == (0, 30 / 1e9)
    assert run["agent_span_id"] == "a" * 16
    # the answer is the last turn's, at its last model call (not the first turn's text)
    assert (run["answer"], run["answer_span_id"]) == ("last turn", "d" * 16)
    # near miss: a last turn that recorded no output answers with its model call's text
    silent = [{**r, "output_text": None} if r["span_id"] == "c" * 16 else r for r in rows]
    silent[3] = {**silent[3], "output_text": "model's words"}
    rs = build_runs(*tables(silent), run_key="gen_ai.conversation.id")
    assert rs.runs.row(0, named=True)["answer"] == "model's words"


def test_orphan_span_becomes_a_root_and_parent_cycles_terminate():
    rows = [
        dict(
            span_id="b" * 16,
            parent_span_id="f" * 16,
            role="model_call",
            start_ns=1,
            end_ns=2,
            output_text="hi",
        ),
    ]
    rs = build_runs(*tables(rows))
    assert rs.runs.row(0, named=True)["has_answer"] is True
    cycle = [
        dict(span_id="a" * 16, parent_span_id="b" * 16, role="agent", start_ns=0, end_ns=10),
        dict(span_id="b" * 16, parent_span_id="a" * 16, role="model_call", start_ns=1, end_ns=2),
    ]
    assert build_runs(*tables(cycle)).runs.height == 1


def test_trace_without_agent_model_or_tool_spans_is_no_run():
    rows = [dict(span_id="a" * 16, role="other", start_ns=0, end_ns=10)]
    assert build_runs(*tables(rows)).runs.height == 0


def test_sources_hold_inputs_from_call_start_and_results_from_tool_end_never_assistant_text():
    rs = build_runs(*tables(kyc_rows()))
    at_tool = sources_before(rs.sources, TRACE, 21)
    assert "Review ACC-1" in at_tool and "You review files." in at_tool
    assert "passport of ACC-778821" not in at_tool  # the result ends at 30
    at_answer = sources_before(rs.sources, TRACE, 40)
    assert "passport of ACC-778821" in at_answer
    assert not any("ACC-999" in s for s in at_answer)


def test_case_key_option_and_config_hash():
    spans, calls = tables(kyc_rows(a={"attrs": {"app.case_id": "K-1", "ticket": 42}}))
    assert build_runs(spans, calls, case_key="ticket").runs.row(0, named=True)["case_id"] == "42"
    base = build_runs(*tables(kyc_rows())).runs.row(0, named=True)["config_hash"]
    same = build_runs(*tables(kyc_rows(a={"attrs": {"app.case_id": "K-2"}}))).runs.row(
        0, named=True
    )
    warmer = build_runs(*tables(kyc_rows(b={"temperature": 0.7}))).runs.row(0, named=True)
    assert same["config_hash"] == base
    assert warmer["config_hash"] != base
    # a new release of the agent's service is a configuration change too
    newer = build_runs(
        *tables(kyc_rows(a={"resource": {"service.name": "svc", "service.version": "2.0"}}))
    ).runs.row(0, named=True)
    assert newer["service_version"] == "2.0" and newer["config_hash"] != base
    assert warmer["temperature"] is None and warmer["temperatures"] == [0.0, 0.7]


def test_config_hash_covers_the_system_prompt_or_the_managed_prompt_identity():
    def run(system=None, **attrs):
        rows = kyc_rows(a={"attrs": {"app.case_id": "K-1"}})
        messages = [msg("user", "Review ACC-1")]
        if system is not None:
            messages.insert(0, msg("system", system))
        rows[1]["input_messages"] = messages
        rows[1]["prompt_id"] = attrs.get("prompt_id")
        return build_runs(*tables(rows)).runs.row(0, named=True)["config_hash"]

    base = run("You review files. Policy: refund.")
    assert run("You review files. Policy: refund.") == base
    # another instruction is another configuration, even one character of it
    assert run("You review files. Policy: refund!") != base
    # a run without a recorded system prompt (content off) hashes without one
    assert run() != base
    # a managed prompt counts by its identity (name@version, template), not by the text
    # rendered from it for each case
    managed = run("Policy: refund.", prompt_id="kyc-review@3\nPolicy: {policy}.")
    assert run("Policy: escalate.", prompt_id="kyc-review@3\nPolicy: {policy}.") == managed
    assert run("Policy: refund.", prompt_id="kyc-review@4\nPolicy: {policy}.") != managed


def test_case_id_reads_only_top_level_keys_whatever_the_text_around_them():
    """`_case_id` parses only the objects naming a key: it must read what a JSON path reads."""
    import json

    from analyzer.runs import DEFAULT_CASE_KEYS, _case_id

    objects = [
        {"app.case_id": "K-1"},
        {"case_id": 7, "app.case_id": None},  # null: the next key
        {"note": 'says "app.case_id": "fake"', "case.id": "C-3"},  # in a value: not a key
        {"nested": {"app.case_id": "inner"}},  # not at the top level
        {"app.case_id": {"k": [1, 2]}, "case_id": "second"},  # JSON text of the object
        {"clé": "é", "case_id": True},
        {},
    ]
    texts = pl.Series([json.dumps(o, sort_keys=True, ensure_ascii=False) for o in objects])
    by_path = pl.select(
        pl.coalesce([pl.lit(texts).str.json_path_match(f"$['{k}']") for k in DEFAULT_CASE_KEYS])
    ).to_series()
    got = _case_id(texts, None)
    assert got.to_list() == by_path.to_list()
    assert got.to_list() == ["K-1", "7", "C-3", None, '{"k":[1,2]}', "true", None]
    assert _case_id(texts, "clé").to_list() == ["é" if "clé" in o else None for o in objects]


def test_runs_sharing_span_ids_under_other_trace_ids_stay_apart():
    """Span ids are unique within a trace only: a copy of a run under new trace ids (a replayed
    export, a load test) must give the same steps, not steps crossed between the copies."""
    import pyarrow.compute as pc

    from analyzer.conventions import normalize
    from analyzer.ingest import read_traces

    root = Path(__file__).resolve().parent.parent / "sample_traces" / "kyc"
    spans = read_traces([root]).spans
    copy = spans.set_column(
        0,
        "trace_id",
        pc.binary_join_element_wise(
            "ffffffff", pc.utf8_slice_codeunits(spans.column("trace_id"), 8), ""
        ),
    )
    both = pa.concat_tables([spans, copy])
    alone = build_runs(spans, normalize(spans)).steps
    together = build_runs(both, normalize(both)).steps
    assert together.height == 2 * alone.height
    columns = ["span_id", "tool_name", "requested_by", "arguments", "executed"]
    first = together.filter(~pl.col("run_id").str.starts_with("ffffffff")).sort("run_id", "index")
    assert first.select(columns).equals(alone.sort("run_id", "index").select(columns))


def test_run_attributes_json_columnar_equals_the_python_reference():
    # every row kind: plain (written by polars) and odd (doubles, JSON values, escapes: the
    # Python reference writes those), with the span's attributes overriding its resource's
    from analyzer.runs import _attributes_json, _python_attributes
    from analyzer.spans import ATTRS, attrs_from_mapping

    rows = [
        ({"service.name": "svc", "b": True, "n": 3}, {"a": "x", "n": 4, "é": "ü", "z": False}),
        ({"service.name": 7, "service.version": "1.0"}, {}),
        ({}, {"service.name": True, "service.version": 2}),
        ({"k": "v"}, {"k": 'say "hi"'}),  # an escape: the Python reference
        ({"t": 0.25}, {"u": 1}),  # a double
        ({"t": float("nan"), "inf": float("inf")}, {}),
        ({"list": ["a", "b"], "map": {"y": 1, "x": [1.5]}}, {"s": "line\nbreak"}),
        ({"ctl": "a\u0001b", "back": "c:\\dir"}, {"tab": "a\tb"}),
        ({}, {}),
        ({"service.name": "resource"}, {"service.name": "span", "\u2028": "sep"}),
        # a key given twice in one list (OTLP allows it): the last one
        ({"d": "r"}, [*attrs_from_mapping({"d": "first"}), *attrs_from_mapping({"d": "2nd"})]),
    ]

    def attrs(given):
        return given if isinstance(given, list) else attrs_from_mapping(given)

    # each column overlaid by the next: the resource's, then the span's
    picked = pa.table(
        {
            "resource_attributes": pa.array([attrs(r) for r, _ in rows], ATTRS),
            "attributes": pa.array([attrs(a) for _, a in rows], ATTRS),
        }
    )
    texts, names, versions = _attributes_json(picked)
    assert (texts.to_list(), names.to_list(), versions.to_list()) == tuple(
        map(list, _python_attributes(picked))
    )
    assert texts[0] == '{"a": "x", "b": true, "n": 4, "service.name": "svc", "z": false, "é": "ü"}'
    assert texts[-1] == '{"d": "2nd"}'
    assert (names.to_list()[:3], versions.to_list()[:3]) == (
        ["svc", "7", "True"],
        [None, "1.0", "2"],
    )
    assert names[9] == "span" and texts[8] == "{}"


def test_run_attributes_json_overlays_every_column_in_order():
    # a run split per agent span: its resource, its trace's root span, then the agent span
    from analyzer.runs import _attributes_json, _python_attributes
    from analyzer.spans import ATTRS, attrs_from_mapping

    resource = [{"service.name": "kyc"}, {"service.name": "kyc"}]
    outer = [{"app.case_id": "K-1", "who": "app"}, None]  # no root above the second
    own = [{"who": "agent", "gen_ai.agent.name": "a"}, {"who": "agent"}]
    picked = pa.table(
        {
            "resource_attributes": pa.array([attrs_from_mapping(r) for r in resource], ATTRS),
            "outer_attributes": pa.array(
                [attrs_from_mapping(o) if o else None for o in outer], ATTRS
            ),
            "attributes": pa.array([attrs_from_mapping(a) for a in own], ATTRS),
        }
    )
    texts, _, _ = _attributes_json(picked)
    assert texts.to_list() == [
        '{"app.case_id": "K-1", "gen_ai.agent.name": "a", "service.name": "kyc", "who": "agent"}',
        '{"service.name": "kyc", "who": "agent"}',
    ]
    assert texts.to_list() == _python_attributes(picked)[0]


def _spans_as_read() -> tuple[pa.Table, pa.Table]:
    """The sample KYC spans as `finalize_spans` gives them, and the same spans as a partition
    holds them before: shuffled, with a copy of every tenth span exported again by a later file
    (its attributes and conversation id changed: the first copy must win)."""
    import numpy as np
    import pyarrow.compute as pc

    from analyzer.ingest.accounting import IngestLog
    from analyzer.ingest.reader import finalize_spans, read_traces

    root = Path(__file__).resolve().parents[1] / "sample_traces" / "kyc"
    spans = read_traces([root / "traces-0001.jsonl"]).spans
    again = spans.take(pa.array(range(0, spans.num_rows, 10)))
    changed = pa.array([[{"key": "gen_ai.conversation.id", "str": "later"}]] * again.num_rows)
    again = again.set_column(
        again.schema.get_field_index("attributes"),
        "attributes",
        changed.cast(spans.schema.field("attributes").type),
    ).set_column(
        again.schema.get_field_index("source_file"),
        "source_file",
        pc.binary_join_element_wise(again.column("source_file"), "-again", ""),
    )
    raw = pa.concat_tables([spans, again])
    raw = raw.take(pa.array(np.random.default_rng(7).permutation(raw.num_rows)))
    return finalize_spans(raw, IngestLog()).spans, raw


def test_runs_from_spans_as_read_through_their_rows_are_the_runs_of_the_final_spans():
    from analyzer.conventions import normalize
    from analyzer.ingest.accounting import IngestLog
    from analyzer.ingest.reader import kept_order

    final, raw = _spans_as_read()
    order, parents = kept_order(raw, IngestLog())
    for run_key in (None, "gen_ai.conversation.id"):
        expected = build_runs(final, normalize(final), run_key=run_key, case_key="case.id")
        got = build_runs(
            raw,
            normalize(raw).gather(pl.Series(order)),
            run_key=run_key,
            case_key="case.id",
            parents=parents,
            span_rows=order,
        )
        assert got.runs.height > 0
        for name in ("runs", "steps", "sources", "span_runs"):
            assert getattr(got, name).equals(getattr(expected, name)), (run_key, name)


def test_primary_model_is_the_one_of_most_tokens():
    rows = kyc_rows()
    # b: gpt-4.1 with 110 tokens; d: a second model with more
    rows[3].update(model="gpt-4.1-mini", input_tokens=500, output_tokens=20)
    run = build_runs(*tables(rows)).runs.row(0, named=True)
    assert run["models"] == ["gpt-4.1", "gpt-4.1-mini"]
    assert run["primary_model"] == "gpt-4.1-mini"
    rows[3].update(input_tokens=50, output_tokens=5)
    assert build_runs(*tables(rows)).runs.row(0, named=True)["primary_model"] == "gpt-4.1"
    one = build_runs(*tables(kyc_rows())).runs.row(0, named=True)
    assert one["primary_model"] == "gpt-4.1"


def test_seconds_of_a_duration_do_not_depend_on_how_polars_divides():
    """Polars divides by 1e9 as a multiplication by 1e-9 in some batch shapes: a run's
    duration must come out the same either way, also past 2^53 ns (a span stamped at the
    epoch), where a float no longer holds the nanoseconds."""
    from analyzer.runs import _seconds

    for ns in [0, 1, 1_500_000_000, 123_456_789_012, 2**53 - 1, 2**53, 1_758_026_593_449_611_237]:
        got = pl.select(_seconds(pl.lit(ns, pl.Int64))).item()
        whole, rest = divmod(ns, 1_000_000_000)
        if ns < 2**53:
            assert got == round(ns / 1e9, 9) == round(ns * 1e-9, 9)
        else:
            assert got == whole + round(rest / 1e9, 9) == whole + round(rest * 1e-9, 9)
        assert got == pytest.approx(ns / 1e9, rel=1e-15, abs=1e-9)
    epoch = 1_758_026_593_449_611_237  # a run from 1970 to 2025
    assert round(epoch / 1e9, 9) != round(epoch * 1e-9, 9)  # the quotient alone would differ
    assert pl.select(_seconds(pl.lit(None, pl.Int64))).item() is None


@pytest.mark.parametrize(
    ("recorded", "requested", "kept"),
    [
        # OpenInference writes a one-argument tool's input as the bare value: the model's
        # object is what the call was given
        ("ACME SA", '{"company": "ACME SA"}', '{"company": "ACME SA"}'),
        (" 7", '{"n": 7}', '{"n": 7}'),
        # near misses: a span that recorded an object keeps it, even when the request differs;
        # with no object on either side, the span's record stays
        ('{"company": "ACME"}', '{"company": "ACME SA"}', '{"company": "ACME"}'),
        ("ACME SA", "ACME SA", "ACME SA"),
        ("ACME SA", None, "ACME SA"),
    ],
)
def test_a_tool_span_s_bare_value_gives_way_to_the_model_s_arguments(recorded, requested, kept):
    requests = [] if requested is None else [call("lookup_owner", requested)]
    rows = [
        dict(span_id="a" * 16, role="agent", start_ns=0, end_ns=100),
        dict(
            span_id="b" * 16,
            parent_span_id="a" * 16,
            role="model_call",
            start_ns=1,
            end_ns=2,
            requested_calls=requests,
        ),
        dict(
            span_id="c" * 16,
            parent_span_id="a" * 16,
            role="tool_call",
            start_ns=3,
            end_ns=4,
            tool_name="lookup_owner",
            arguments=recorded,
        ),
    ]
    steps = build_runs(*tables(rows)).steps.filter(pl.col("kind") == "tool_call")
    assert steps.select("arguments", "executed").rows() == [(kept, True)]
