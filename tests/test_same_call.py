"""Spans that record one call count once (analyzer.calls), and run boundaries across agents.

Each case is a small trace written as normalized rows (tests.factories.tables); the near misses
are the shapes that must NOT merge.
"""

from __future__ import annotations

import polars as pl
from factories import call, tables

from analyzer.runs import build_runs

MS = 1_000_000


def agent(span_id: str, start: int = 0, end: int = 1000, parent: str | None = None, **kw):
    return {
        "span_id": span_id,
        "parent_span_id": parent,
        "role": "agent",
        "agent_name": kw.pop("name", "a"),
        "start_ns": start * MS,
        "end_ns": end * MS,
        **kw,
    }


def model(span_id: str, parent: str, start: int, end: int, **kw):
    return {
        "span_id": span_id,
        "parent_span_id": parent,
        "role": "model_call",
        "start_ns": start * MS,
        "end_ns": end * MS,
        **kw,
    }


def tool(span_id: str, parent: str, start: int, end: int, name: str, **kw):
    return {
        "span_id": span_id,
        "parent_span_id": parent,
        "role": "tool_call",
        "tool_name": name,
        "named_tool": name,
        "start_ns": start * MS,
        "end_ns": end * MS,
        **kw,
    }


def rebuild(rows):
    spans, normalized = tables(rows)
    return build_runs(spans, normalized)


def calls(rs) -> list[tuple[str, str, str | None]]:
    return [
        (s["kind"], s["span_id"], s["name"])
        for s in rs.steps.sort("run_id", "index").iter_rows(named=True)
    ]


def test_a_model_span_nested_in_another_is_one_call_with_the_richest_fields():
    # ADK call_llm (request model, no usage) > OpenLLMetry openai.chat (snapshot, usage, calls)
    rs = rebuild(
        [
            agent("a0"),
            model("m1", "a0", 10, 100, model="gpt-4o-mini"),
            model(
                "m2",
                "m1",
                12,
                98,
                model="gpt-4o-mini-2024-07-18",
                input_tokens=100,
                output_tokens=20,
                requested_calls=[call("lookup", '{"id": "1"}', id="c1")],
            ),
            tool("t1", "a0", 110, 120, "lookup", tool_call_id="c1"),
        ]
    )
    run = rs.runs.row(0, named=True)
    assert (run["model_calls"], run["tool_calls"], run["unexecuted_tool_calls"]) == (1, 1, 0)
    assert (run["input_tokens"], run["output_tokens"]) == (100, 20)
    step = rs.steps.row(0, named=True)
    assert (step["span_id"], step["model"], step["start_ns"], step["end_ns"]) == (
        "m1",
        "gpt-4o-mini-2024-07-18",
        10 * MS,
        100 * MS,
    )
    assert (step["merged_span_ids"], step["merge_reason"]) == (["m2"], "nested")
    assert rs.steps.row(1, named=True)["requested_by"] == "m1"
    # every span stays in the run
    assert sorted(rs.span_runs["span_id"]) == ["a0", "m1", "m2", "t1"]


def test_of_two_records_of_a_call_the_one_that_set_its_reasoning_apart_gives_the_text():
    # ADK 2.x: call_llm's llm_response flags the thought parts ("thought": true); the
    # generate_content span under it writes the same parts as plain text parts
    thought = "The user wants a verdict. The brief names 21 C, so it is grounded.\n"
    rs = rebuild(
        [
            agent("a0"),
            model("m1", "a0", 10, 100, output_text="PASS", output_reasoning_apart=True),
            model(
                "m2", "m1", 12, 98, input_tokens=7, output_tokens=3, output_text=thought + "PASS"
            ),
        ]
    )
    assert rs.steps["output_text"].to_list() == ["PASS"]
    assert rs.runs["answer"].to_list() == ["PASS"]
    # a call whose marked record holds no text (its reasoning, then tool requests) has none
    asks = call("get_weather", '{"city": "Lisbon"}', id="c1")
    rs = rebuild(
        [
            agent("a0"),
            model("m1", "a0", 10, 100, output_reasoning_apart=True, requested_calls=[asks]),
            model("m2", "m1", 12, 98, output_text=thought, requested_calls=[asks]),
        ]
    )
    assert rs.steps.filter(pl.col("kind") == "model_call")["output_text"].to_list() == [None]
    # near miss: no record marks reasoning: the innermost text, as for every other field
    rs = rebuild(
        [
            agent("a0"),
            model("m1", "a0", 10, 100, output_text="PASS"),
            model(
                "m2", "m1", 12, 98, input_tokens=7, output_tokens=3, output_text=thought + "PASS"
            ),
        ]
    )
    assert rs.steps["output_text"].to_list() == [thought + "PASS"]


def test_three_deep_is_one_call():
    rs = rebuild(
        [
            agent("a0"),
            model("m1", "a0", 10, 100, model="models/gemini-2.0-flash"),
            model("m2", "m1", 11, 99, model="gemini-2.0-flash", input_tokens=7, output_tokens=3),
            model(
                "m3", "m2", 12, 98, model="gemini-2.0-flash-001", input_tokens=7, output_tokens=3
            ),
        ]
    )
    assert calls(rs) == [("model_call", "m1", "gemini-2.0-flash-001")]
    step = rs.steps.row(0, named=True)
    assert step["merged_span_ids"] == ["m2", "m3"]
    assert (rs.runs["input_tokens"][0], rs.runs["output_tokens"][0]) == (7, 3)


def test_nested_calls_with_different_usage_are_two_calls():
    rs = rebuild(
        [
            agent("a0"),
            model("m1", "a0", 10, 100, model="gpt-4o", input_tokens=50, output_tokens=5),
            model("m2", "m1", 12, 98, model="gpt-4o", input_tokens=40, output_tokens=5),
        ]
    )
    assert [c[1] for c in calls(rs)] == ["m1", "m2"]
    assert rs.steps["merge_reason"].null_count() == 2


def test_nested_calls_of_other_models_are_two_calls():
    rs = rebuild(
        [
            agent("a0"),
            model("m1", "a0", 10, 100, model="gpt-4o"),
            model("m2", "m1", 12, 98, model="claude-3-5-sonnet", input_tokens=4, output_tokens=1),
        ]
    )
    assert [c[1] for c in calls(rs)] == ["m1", "m2"]


def test_a_model_span_over_two_nested_calls_is_left_as_it_is():
    # two attempts inside one framework call: which one the wrapper repeats is unknown
    rs = rebuild(
        [
            agent("a0"),
            model("m1", "a0", 10, 100, model="gpt-4o"),
            model("m2", "m1", 12, 40, model="gpt-4o", status="error"),
            model("m3", "m1", 50, 98, model="gpt-4o", input_tokens=4, output_tokens=1),
        ]
    )
    assert [c[1] for c in calls(rs)] == ["m1", "m2", "m3"]


def test_a_model_span_under_a_tool_is_its_own_call():
    # an agent used as a tool: the tool's model call is not the tool
    rs = rebuild(
        [
            agent("a0"),
            tool("t1", "a0", 10, 100, "research"),
            model("m1", "t1", 12, 98, model="gpt-4o", input_tokens=4, output_tokens=1),
        ]
    )
    assert calls(rs) == [("tool_call", "t1", "research"), ("model_call", "m1", "gpt-4o")]


def test_a_wrapper_tool_span_over_the_instrumented_one_is_one_tool_call():
    rs = rebuild(
        [
            agent("a0"),
            tool("t1", "a0", 10, 100, "lookup", tool_call_id="c1"),
            tool("t2", "t1", 11, 99, "lookup", result="found", arguments='{"id": "1"}'),
        ]
    )
    assert calls(rs) == [("tool_call", "t1", "lookup")]
    step = rs.steps.row(0, named=True)
    assert (step["tool_call_id"], step["result"], step["arguments"]) == (
        "c1",
        "found",
        '{"id": "1"}',
    )
    assert rs.runs["tool_sequence"][0].to_list() == ["lookup"]


def test_a_tool_that_runs_another_tool_is_two_tool_calls():
    rs = rebuild(
        [
            agent("a0"),
            tool("t1", "a0", 10, 100, "plan_trip"),
            tool("t2", "t1", 11, 99, "search_flights"),
        ]
    )
    assert rs.runs["tool_sequence"][0].to_list() == ["plan_trip", "search_flights"]


def test_event_spans_of_one_call_are_one_call():
    # BeeAI: one span per event; start-14 alone, start/success/finish-16 one call
    rows = [
        agent("a0"),
        model(
            "e14",
            "a0",
            10,
            100,
            span_name="backend.openai.chat.start-14",
            event_call="backend.openai.chat#14",
            model="gpt-4o-mini",
            input_tokens=11,
        ),
        {
            **agent(
                "u1", 110, 300, "a0", named_tool="Wikipedia", span_name="agent.react.update-13"
            ),
            "agent_name": None,
        },
        tool(
            "w1",
            "u1",
            120,
            200,
            "tool.search.wikipedia",
            named_tool=None,
            event_call="tool.search.wikipedia#12",
        ),
        tool(
            "w2",
            "u1",
            200,
            210,
            "tool.search.wikipedia",
            named_tool=None,
            event_call="tool.search.wikipedia#12",
            result="Barcelona is a city",
        ),
        model("e16a", "a0", 400, 900, event_call="backend.openai.chat#16", input_tokens=22),
        model("e16b", "a0", 890, 905, event_call="backend.openai.chat#16", output_text="Done."),
        model("e16c", "a0", 891, 906, event_call="backend.openai.chat#16"),
    ]
    rs = rebuild(rows)
    assert calls(rs) == [
        ("model_call", "e14", "gpt-4o-mini"),
        ("tool_call", "w1", "Wikipedia"),
        ("model_call", "e16a", None),
    ]
    last = rs.steps.row(2, named=True)
    assert (last["merged_span_ids"], last["merge_reason"]) == (["e16b", "e16c"], "events")
    assert (last["start_ns"], last["end_ns"], last["output_text"]) == (400 * MS, 906 * MS, "Done.")
    assert rs.steps.row(1, named=True)["result"] == "Barcelona is a city"
    run = rs.runs.row(0, named=True)
    assert (run["model_calls"], run["input_tokens"], run["answer"]) == (2, 33, "Done.")


def test_event_spans_with_other_numbers_are_other_calls():
    rows = [
        agent("a0"),
        model("e1", "a0", 10, 20, event_call="backend.openai.chat#1"),
        model("e2", "a0", 30, 40, event_call="backend.openai.chat#2"),
    ]
    assert [c[1] for c in calls(rebuild(rows))] == ["e1", "e2"]


def test_an_orphan_agent_inside_another_agent_joins_its_run():
    # A2A: the caller's invoke_agent, and the remote agent whose client span was not exported
    rows = [
        agent("a0", 0, 1000, name="caller"),
        model("m1", "a0", 10, 20, model="gpt-4o"),
        agent("r0", 100, 500, parent="ffffffffffffffff", name="remote"),
        model("m2", "r0", 110, 120, model="gpt-4o"),
        agent("b0", 2000, 3000, name="caller"),  # a second top-level run of the trace
    ]
    rs = rebuild(rows)
    runs = rs.runs.sort("started_ns")
    assert runs["run_id"].to_list() == [
        "0af7651916cd43dd8448eb211c80319c:a0",
        "0af7651916cd43dd8448eb211c80319c:b0",
    ]
    assert runs["model_calls"].to_list() == [2, 0]
    assert runs["agent"].to_list() == ["caller", "caller"]


def test_an_orphan_agent_outside_every_agent_is_a_run_of_its_own():
    rows = [
        agent("a0", 0, 1000, name="caller"),
        agent("r0", 1100, 1500, parent="ffffffffffffffff", name="remote"),
    ]
    rs = rebuild(rows)
    assert rs.runs.height == 2


def test_an_orphan_agent_of_another_conversation_is_not_joined():
    rows = [
        agent("a0", 0, 1000, conversation_id="c1"),
        agent("r0", 100, 500, parent="ffffffffffffffff", conversation_id="c2"),
    ]
    assert rebuild(rows).runs.height == 2


def test_output_tools_are_the_answer_not_tool_calls():
    rows = [
        agent("a0"),
        model("m1", "a0", 10, 20, requested_calls=[call("lookup", "{}", id="c1")]),
        tool("t1", "a0", 21, 30, "lookup", tool_call_id="c1"),
        model("m2", "a0", 31, 40, requested_calls=[call("final_result", '{"ok": true}', id="c2")]),
    ]
    rs = rebuild(rows)
    run = rs.runs.row(0, named=True)
    assert (run["tool_calls"], run["unexecuted_tool_calls"], run["tool_sequence"]) == (
        1,
        0,
        ["lookup"],
    )
    assert (run["has_answer"], run["answer"], run["answer_span_id"]) == (True, '{"ok": true}', "m2")
    assert rs.steps.filter(pl.col("kind") == "output")["name"].to_list() == ["final_result"]


def test_an_agent_under_a_broken_chain_inside_another_agent_joins_its_run():
    # the remote agent's server span names a client span that was not exported
    rows = [
        agent("a0", 0, 1000, name="controller"),
        {
            "span_id": "h0",
            "parent_span_id": "ffffffffffffffff",
            "start_ns": 50 * MS,
            "end_ns": 600 * MS,
        },
        agent("r0", 100, 500, parent="h0", name="helm_agent"),
        model("m1", "r0", 110, 120, model="gpt-4o"),
    ]
    rs = rebuild(rows)
    assert rs.runs["run_id"].to_list() == ["0af7651916cd43dd8448eb211c80319c"]
    assert rs.runs["model_calls"].to_list() == [1]


def test_a_call_another_instrumentation_recorded_detached_within_it_is_one_call():
    # LangChain's ChatOpenAI under the chain, the OpenAI client's ChatCompletion under the root
    rows = [
        {"span_id": "root", "start_ns": 0, "end_ns": 1000 * MS},
        agent("a0", 1, 900, parent="root"),
        model("lc", "a0", 10, 100, model="gpt-4o", scope="openinference.langchain"),
        model(
            "oa",
            "root",
            12,
            99,
            model="gpt-4o-2024-08-06",
            input_tokens=9,
            output_tokens=2,
            scope="openinference.openai",
        ),
    ]
    rs = rebuild(rows)
    assert calls(rs) == [("model_call", "lc", "gpt-4o-2024-08-06")]
    step = rs.steps.row(0, named=True)
    assert (step["merged_span_ids"], step["merge_reason"]) == (["oa"], "overlap")
    assert rs.runs["instrumentations"][0].to_list() == [
        "openinference.langchain",
        "openinference.openai",
    ]


def test_parallel_calls_of_one_instrumentation_are_not_merged():
    rows = [
        agent("a0"),
        model("m1", "a0", 10, 100, model="gpt-4o", scope="s"),
        model("m2", "a0", 12, 99, model="gpt-4o", scope="s"),
    ]
    assert [c[1] for c in calls(rebuild(rows))] == ["m1", "m2"]


def test_a_detached_call_outside_the_other_in_time_is_its_own_call():
    rows = [
        agent("a0"),
        model("m1", "a0", 10, 100, model="gpt-4o", scope="lc"),
        model("m2", "a0", 90, 190, model="gpt-4o", scope="openai"),  # overlaps, not within
    ]
    assert [c[1] for c in calls(rebuild(rows))] == ["m1", "m2"]


def test_a_broken_chain_is_found_however_deep():
    chain = [
        {
            "span_id": f"h{i:03d}",
            "parent_span_id": "ffffffffffffffff" if i == 0 else f"h{i - 1:03d}",
            "start_ns": (50 + i) * MS,
            "end_ns": 600 * MS,
        }
        for i in range(70)
    ]
    rows = [
        agent("a0", 0, 1000, name="controller"),
        *chain,
        agent("r0", 200, 500, parent="h069", name="remote"),
    ]
    assert rebuild(rows).runs.height == 1


def test_an_apps_root_that_only_langfuse_calls_a_generation_is_no_model_call():
    # agent-prism langfuse-3: the app's root typed GENERATION, no model or usage, over the
    # Vercel AI SDK's agent and its two calls: two calls, the first at its own time
    def trace(root_model=None, root_tokens=None, below=True):
        rows = [
            model(
                "root",
                None,
                0,
                1000,
                convention="langfuse",
                model=root_model,
                input_tokens=root_tokens,
                scope="langfuse",
            ),
            agent("a0", 5, 990, parent="root", scope="ai"),
        ]
        if below:
            rows += [
                model("m1", "a0", 10, 100, model="gpt-5", input_tokens=9, scope="ai"),
                model("m2", "a0", 110, 900, model="gpt-5", input_tokens=90, scope="ai"),
            ]
        return rebuild(rows)

    assert [c[1] for c in calls(trace())] == ["m1", "m2"]
    assert trace().steps.row(0, named=True)["start_ns"] == 10 * MS
    # near misses: a root that records a model or usage is a call of its own; so is a
    # model-less generation that holds no other call
    assert [c[1] for c in calls(trace(root_model="gpt-5"))] == ["root", "m1", "m2"]
    assert [c[1] for c in calls(trace(root_tokens=5))] == ["root", "m1", "m2"]
    assert [c[1] for c in calls(trace(below=False))] == ["root"]
