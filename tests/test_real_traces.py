"""The seven real traces of shared/real-traces, each rebuilt as one run through the pipeline.

Every expected value was worked out by hand from the file itself (see each entry's comments):
span ids, tool names and call ids as recorded, tokens summed over the model-call spans only.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest

from analyzer.conventions import normalize
from analyzer.ingest import Ingested
from analyzer.ingest.reader import read_traces
from analyzer.runs import RunSet, build_runs

REAL = Path(os.environ.get("AGENTTRACE_REAL_TRACES", "/work/shared/real-traces"))
pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason="real traces folder not available")

MODEL = "model_call"
TOOL = "tool_call"
OUTPUT = "output"  # an output tool: the answer, not a tool the agent ran
#: The structured answer of both any-agent runs (last call_llm output in OPENAI, the `answer`
#: argument of the final_output tool in GOOGLE; also the dumps' top-level final_output).
STEPS_JSON = (
    '{"steps": [{"number": 1, "description": "Get current time in the America/New_York '
    'timezone."}, {"number": 2, "description": "Write the year to a file."}]}'
)


@dataclass(frozen=True)
class Expected:
    """What one file must rebuild into."""

    run_id: str  # the trace id as lowercase hex
    spans: int  # spans in the file = spans read = spans kept
    orphans: int  # kept spans whose parent is in no file
    # (kind, span_id, name, tool_call_id, requested_by), in step order
    steps: list[tuple[str, str, str, str | None, str | None]]
    models: list[str]
    tokens: tuple[int, int, int | None]  # input, output, cached: model-call spans only
    answer: str | None
    answer_span_id: str | None
    answer_ns: int | None


EXPECTED: dict[str, Expected] = {
    # any-agent AgentTrace, decimal ids. 3 call_llm + 2 execute_tool under invoke_agent.
    # Tokens 269+359+392 / 16+14+46. No call ids anywhere: tools joined by name in order.
    # Answer: the last call_llm's gen_ai.output (it requested no tool), at its end_time.
    "any-agent__OPENAI_trace.json": Expected(
        run_id="4bedea77bb33b9c5f280371eae21ea97",  # 100927429609276267646756448943279827607
        spans=6,
        orphans=0,
        steps=[
            (MODEL, "8100d9dbee1f3e47", "mistral/mistral-small-latest", None, None),
            (TOOL, "bdf28428cc0e8eb5", "get_current_time", None, "8100d9dbee1f3e47"),
            (MODEL, "1b1e636a0d314482", "mistral/mistral-small-latest", None, None),
            (TOOL, "2f36d63682b5ff70", "write_file", None, "1b1e636a0d314482"),
            (MODEL, "975e0660433b7a8b", "mistral/mistral-small-latest", None, None),
        ],
        models=["mistral/mistral-small-latest"],
        tokens=(1020, 76, None),
        answer=STEPS_JSON,
        answer_span_id="975e0660433b7a8b",
        answer_ns=1758026594435103000,
    ),
    # Same, via Google ADK: the 6 non-root spans have parents that were not exported (orphans).
    # final_output is any-agent's output tool: a step of kind output, not one of the tool calls.
    # Tokens 672+770+809 / 16+14+56. Tool spans carry gen_ai.tool.call.id, call_llm outputs
    # carry none: joined by name. The last call requests final_output: its arguments are the
    # answer, at the end of the execute_tool final_output span.
    "any-agent__GOOGLE_trace.json": Expected(
        run_id="cdbd7b99cef221c28dd6d03c27d09b4c",  # 273475590164507581703505203264503192396
        spans=7,
        orphans=6,
        steps=[
            (MODEL, "28b3922a9d89a4ac", "mistral/mistral-small-latest", None, None),
            (TOOL, "cfa478aff011e825", "get_current_time", "jbUWqgIUr", "28b3922a9d89a4ac"),
            (MODEL, "4dfb98a87c017887", "mistral/mistral-small-latest", None, None),
            (TOOL, "65fd4833c24a2fc0", "write_file", "j5pzf0TaM", "4dfb98a87c017887"),
            (MODEL, "5d77d7d20d0b5d84", "mistral/mistral-small-latest", None, None),
            (OUTPUT, "6fa6b13adfb42a2e", "final_output", "Je755BQAS", "5d77d7d20d0b5d84"),
        ],
        models=["mistral/mistral-small-latest"],
        tokens=(2251, 86, None),
        answer=json.dumps({"answer": STEPS_JSON}),
        answer_span_id="6fa6b13adfb42a2e",
        answer_ns=1758026587928967000,
    ),
    # LangSmith OTel via Langfuse: chain claude.conversation (role other), 4 llm turns, 2 tools.
    # No token attributes: Langfuse usageDetails 19+5+5+5 / 29+53+56+94. The tool spans record
    # no call id (the turns' tool_use ids are toolu_...): Berlin then New York, joined by name in
    # order to the turns that requested them. Answer: the last turn's text, at its end.
    "langfuse__claude-agent-2025-12-22.trace.json": Expected(
        run_id="097f1d8982fa909b8cffb14a166ec272",
        spans=7,
        orphans=0,
        steps=[
            (MODEL, "e9aac170e5d48125", "claude-sonnet-4-5-20250929", None, None),
            (MODEL, "2cc13e77781787fd", "claude-sonnet-4-5-20250929", None, None),
            (MODEL, "f8e8f040dc94e67e", "claude-sonnet-4-5-20250929", None, None),
            (TOOL, "f411dab686a064b1", "mcp__weather__get_weather", None, "2cc13e77781787fd"),
            (TOOL, "edbd987c5f361fdf", "mcp__weather__get_weather", None, "f8e8f040dc94e67e"),
            (MODEL, "371496f71d82baed", "claude-sonnet-4-5-20250929", None, None),
        ],
        models=["claude-sonnet-4-5-20250929"],
        tokens=(34, 232, None),
        answer=(
            "Great! Here's the current weather for both cities:\n\n"
            "**Berlin**: Cloudy, 59°F (15°C)\n**New York**: Sunny, 75°F (24°C)\n\n"
            "New York is enjoying warmer, sunny weather while Berlin is a bit cooler with cloudy "
            "skies. Is there anything else you'd like to know about these destinations?"
        ),
        answer_span_id="371496f71d82baed",
        answer_ns=1766400382888000000,  # 2025-12-22T10:46:22.888Z
    ),
    # OpenInference over ADK: CHAIN invocation > AGENT agent_run > 2 LLM call_llm; the TOOL span
    # is a child of the first call. Tokens 28+39 / 3+6. The request records no call id
    # (function_call has none): joined by name. Answer: the second call's text.
    "langfuse__google-adk-2025-08-28.trace.json": Expected(
        run_id="b82a0bdc1994fc5d1c8576ca032543f7",
        spans=5,
        orphans=0,
        steps=[
            (MODEL, "f6e4c65297e40c96", "gemini-2.0-flash", None, None),
            (
                TOOL,
                "04290e4d82aba1bc",
                "say_hello",
                "adk-8bd8dc65-717d-4102-858b-3a1dd6b75a00",
                "f6e4c65297e40c96",
            ),
            (MODEL, "bded677884f031ce", "gemini-2.0-flash", None, None),
        ],
        models=["gemini-2.0-flash"],
        tokens=(67, 9, None),
        answer="Hello Langfuse 👋!\n",
        answer_span_id="bded677884f031ce",
        answer_ns=1756366352146000000,  # 2025-08-28T07:32:32.146Z
    ),
    # OTel GenAI (agent_framework): invoke_agent carries aggregated usage 44/180, never added;
    # the two chat spans give 77+216 / 86+20. The call id is on both sides: joined by id.
    "langfuse__microsoft-agent-2025-12-17.trace.json": Expected(
        run_id="8e419d3288419b5d944270505640e183",
        spans=4,
        orphans=0,
        steps=[
            (MODEL, "2406e8343fd49c0e", "gpt-5-mini-2025-08-07", None, None),
            (
                TOOL,
                "a2de97aac476c036",
                "get_weather",
                "call_CwaJHuXTm9dmHFQPlVbqyzJ0",
                "2406e8343fd49c0e",
            ),
            (MODEL, "b0913e7cd82d72b8", "gpt-5-mini-2025-08-07", None, None),
        ],
        models=["gpt-5-mini-2025-08-07"],
        tokens=(293, 106, None),
        answer="Current conditions in Tokyo, Japan: stormy, high around 23°C.",
        answer_span_id="b0913e7cd82d72b8",
        answer_ns=1765964261620000000,  # 2025-12-17T09:37:41.620Z
    ),
    # OpenInference (openai_agents): AGENT Agent workflow > AGENT Hello world (nested: one run).
    # Tokens 55+85 / 15+29, cache_read 0+0. The TOOL span records no tool.id: joined by name.
    "langfuse__openai-agents-2025-09-30.trace.json": Expected(
        run_id="fee618f96dc31e0ca38b2f7b26eb8b29",
        spans=5,
        orphans=0,
        steps=[
            (MODEL, "98870087af69bf06", "gpt-4.1-2025-04-14", None, None),
            (TOOL, "5b99c3e3411ed17b", "get_weather", None, "98870087af69bf06"),
            (MODEL, "90d94774e8e3724d", "gpt-4.1-2025-04-14", None, None),
        ],
        models=["gpt-4.1-2025-04-14"],
        tokens=(140, 44, 0),
        answer=(
            "The weather in Tokyo is currently sunny. If you need more details like temperature "
            "or forecast for the upcoming days, just let me know!"
        ),
        answer_span_id="90d94774e8e3724d",
        answer_ns=1759223042151000000,  # 2025-09-30T09:04:02.151Z
    ),
    # Vercel AI SDK: ai.generateText is the agent span (its 62/85 repeats the model call's),
    # ai.generateText.doGenerate the one model call (62/85, response model gpt-5-2025-08-07).
    # Call id on both sides. finishReason tool-calls and nothing after the tool: no answer.
    "langfuse__vercel-aisdk-2025-11-17.trace.json": Expected(
        run_id="df41e597d0a85e0d7a6ae8ebfaa70aa0",
        spans=3,
        orphans=0,
        steps=[
            (MODEL, "91a17a2274bfd23f", "gpt-5-2025-08-07", None, None),
            (
                TOOL,
                "e9bb8c191e1e4706",
                "getWeather",
                "call_DgKARp7a7IhJPDczfifMp6Ra",
                "91a17a2274bfd23f",
            ),
        ],
        models=["gpt-5-2025-08-07"],
        tokens=(62, 85, None),
        answer=None,
        answer_span_id=None,
        answer_ns=None,
    ),
}
FILES = sorted(EXPECTED)


def rebuild(names: list[str]) -> tuple[Ingested, pl.DataFrame, RunSet]:
    """What analyze_partition does, step by step: read, normalize, build runs."""
    ingested = read_traces([REAL / name for name in names])
    normalized = normalize(ingested.spans)
    return ingested, normalized, build_runs(ingested.spans, normalized)


def test_every_real_trace_has_expectations():
    on_disk = sorted(p.name for p in REAL.glob("*.json"))
    assert on_disk == FILES


@pytest.mark.parametrize("name", FILES)
def test_ingest_accounting(name: str):
    exp = EXPECTED[name]
    ingested, normalized, _ = rebuild([name])
    log = ingested.log
    assert (log.spans_read, log.spans_kept, log.duplicates, log.spans_quarantined) == (
        exp.spans,
        exp.spans,
        0,
        0,
    )
    assert log.records_quarantined == 0 and log.quarantine == []
    assert log.balanced()
    assert log.spans_read == log.spans_kept + log.duplicates + log.spans_quarantined
    assert log.orphans == exp.orphans
    assert normalized.height == ingested.spans.num_rows == exp.spans


@pytest.mark.parametrize("name", FILES)
def test_one_run_with_its_totals(name: str):
    exp = EXPECTED[name]
    _, _, rs = rebuild([name])
    assert rs.runs.height == 1
    run = rs.runs.row(0, named=True)
    assert (run["run_id"], run["trace_id"]) == (exp.run_id, exp.run_id)
    model_steps = [s for s in exp.steps if s[0] == MODEL]
    tool_steps = [s for s in exp.steps if s[0] == TOOL]
    assert (run["model_calls"], run["tool_calls"]) == (len(model_steps), len(tool_steps))
    assert run["tool_sequence"] == [s[2] for s in tool_steps]
    assert (run["unexecuted_tool_calls"], run["failed_model_calls"], run["failed_tool_calls"]) == (
        0,
        0,
        0,
    )
    assert run["models"] == exp.models
    assert (run["input_tokens"], run["output_tokens"], run["cached_input_tokens"]) == exp.tokens


@pytest.mark.parametrize("name", FILES)
def test_steps_in_order_with_requesting_call(name: str):
    exp = EXPECTED[name]
    _, _, rs = rebuild([name])
    steps = rs.steps.filter(rs.steps["run_id"] == exp.run_id)
    got = [
        (s["kind"], s["span_id"], s["name"], s["tool_call_id"], s["requested_by"])
        for s in steps.iter_rows(named=True)
    ]
    assert got == exp.steps
    assert steps["index"].to_list() == list(range(len(exp.steps)))
    # every tool call ran (an execution span exists) and a model call asked for it
    tools = steps.filter(steps["kind"] == TOOL)
    assert tools["executed"].to_list() == [True] * tools.height
    assert tools["requested_by"].null_count() == 0
    # the requesting call comes before the tool call it asked for
    position = {s[1]: i for i, s in enumerate(exp.steps)}
    for i, step in enumerate(exp.steps):
        if step[0] == TOOL:
            assert position[step[4]] < i


@pytest.mark.parametrize("name", FILES)
def test_answer(name: str):
    exp = EXPECTED[name]
    _, _, rs = rebuild([name])
    run = rs.runs.row(0, named=True)
    assert run["has_answer"] is (exp.answer is not None)
    assert (run["answer"], run["answer_span_id"], run["answer_ns"]) == (
        exp.answer,
        exp.answer_span_id,
        exp.answer_ns,
    )


def test_google_output_tool_answer_is_the_dump_final_output():
    # The final_output tool's `answer` argument is the structured output any-agent returned.
    _, _, rs = rebuild(["any-agent__GOOGLE_trace.json"])
    answer = json.loads(rs.runs.row(0, named=True)["answer"])
    final_output = json.loads((REAL / "any-agent__GOOGLE_trace.json").read_text())["final_output"]
    assert json.loads(answer["answer"]) == final_output


def test_all_files_together_rebuild_the_same_runs():
    _, _, together = rebuild(FILES)
    assert together.runs["run_id"].to_list() == sorted(e.run_id for e in EXPECTED.values())
    for name in FILES:
        _, _, alone = rebuild([name])
        run_id = EXPECTED[name].run_id
        one = together.runs.filter(together.runs["run_id"] == run_id)
        # exact, duration_s included (rounded to the ns whatever the batch shape)
        assert one.equals(alone.runs)
        assert together.steps.filter(together.steps["run_id"] == run_id).equals(alone.steps)


def test_output_is_deterministic_across_runs_and_file_order():
    first_in, first_norm, first = rebuild(FILES)
    again_in, again_norm, again = rebuild(FILES)
    back_in, back_norm, back = rebuild(list(reversed(FILES)))
    for ingested, normalized, rs in ((again_in, again_norm, again), (back_in, back_norm, back)):
        assert ingested.spans.equals(first_in.spans)
        assert normalized.equals(first_norm)
        assert rs.runs.equals(first.runs)
        assert rs.steps.equals(first.steps)
        assert rs.sources.equals(first.sources)
        assert rs.span_runs.equals(first.span_runs)
