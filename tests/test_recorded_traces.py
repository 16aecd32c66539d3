"""Runs recorded from real frameworks by the scripts in `tests/data/recorded/`.

`record_approvals.py`: a tool call that waits for a person's approval, then the conversation
resumed in a second agent run. The paused call's span is no tool call that ran: the model's
request stays a call that never ran, and the resumed run's span runs it.

`record_haystack.py`, `record_llamaindex.py`: several agents in one trace, with no agent span
to tell their model calls apart. Expectations read from each script's story.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from analyzer.cli import main
from analyzer.conventions import normalize
from analyzer.ingest.reader import read_traces
from analyzer.runs import build_runs

RECORDED = Path(__file__).parent / "data" / "recorded"
PYDANTIC_AI = RECORDED / "pydantic_ai_approval.jsonl"
STRANDS = RECORDED / "strands_interrupt.jsonl"
PAUSED = ["screen_sanctions", "lookup_owner"]  # the request that never ran comes at its end


def _runs(path: Path, run_key: str | None = None, last: str = "has_answer") -> list[tuple]:
    ingested = read_traces([path])
    assert ingested.log.balanced() and ingested.log.spans_quarantined == 0
    runs = build_runs(
        ingested.spans, normalize(ingested.spans), parents=ingested.parents, run_key=run_key
    ).runs
    columns = ["model_calls", "tool_sequence", "unexecuted_tool_calls", "failed_tool_calls"]
    return runs.sort("case_id", "started_ns").select("case_id", *columns, last).rows()


def test_pydantic_ai_paused_calls_never_ran_and_each_agent_run_keeps_the_case():
    # one run per agent span (the default); the application's root span holds the case id
    paused = (1, PAUSED, 1, 0, False)  # ApprovalRequired: no failure (version 2 says ERROR)
    resumed = (1, ["screen_sanctions"], 0, 0, True)
    assert _runs(PYDANTIC_AI) == [
        ("PAI-1", *paused),
        ("PAI-1", *resumed),
        ("PAI-2", *paused),
        ("PAI-2", *resumed),
        ("PAI-3", *paused),
    ]


def test_pydantic_ai_conversation_as_one_run_counts_the_screening_once():
    whole = (2, ["lookup_owner", "screen_sanctions"], 0, 0, True)
    assert _runs(PYDANTIC_AI, run_key="gen_ai.conversation.id") == [
        ("PAI-1", *whole),
        ("PAI-2", *whole),
        ("PAI-3", 1, PAUSED, 1, 0, False),
    ]


def test_pydantic_ai_conversation_report_finds_only_the_unanswered_case(tmp_path: Path):
    out = tmp_path / "out"
    args = ["report", str(PYDANTIC_AI), "--run-key", "gen_ai.conversation.id", "--out", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    findings = pl.read_parquet(out / "findings.parquet")
    assert findings.select("case_id", "kind").rows() == [("PAI-3", "no_answer")]
    steps = pl.read_parquet(out / "steps.parquet").filter(pl.col("tool_name") == "screen_sanctions")
    assert steps.select("executed", "status").rows() == [(True, "unset")] * 2 + [(False, "unset")]


def test_a_resumed_run_s_first_call_was_requested_by_its_conversation(tmp_path: Path):
    # one run per agent span: the resumed run starts by running the approved screening, which
    # its own model calls never asked for; the conversation it was given had (the tool
    # message answering its id). The paused runs have no answer.
    for path, paused in ((PYDANTIC_AI, ["PAI-1", "PAI-2", "PAI-3"]), (STRANDS, ["STR-1", "STR-2"])):
        out = tmp_path / path.stem
        result = CliRunner().invoke(main, ["report", str(path), "--out", str(out)])
        assert result.exit_code == 0, result.output
        findings = pl.read_parquet(out / "findings.parquet").sort("case_id")
        assert findings.select("case_id", "kind").rows() == [(c, "no_answer") for c in paused]


def test_strands_interrupted_calls_never_ran():
    assert _runs(STRANDS) == [
        ("STR-1", 1, PAUSED, 1, 0, False),
        ("STR-1", 1, ["screen_sanctions"], 0, 0, True),
        ("STR-2", 1, PAUSED, 1, 0, False),
    ]


@pytest.mark.parametrize(
    ("file", "cases"), [("haystack_agents.jsonl", "HS"), ("llamaindex_agents.jsonl", "LI")]
)
def test_agents_first_calls_are_no_retries_of_the_answer_before(
    tmp_path: Path, file: str, cases: str
):
    # -1: the planner answers, then each agent's first call starts a conversation of its own
    # (no retry; by the rule's letter alone, two "model calls after an answer"). -2: the
    # planner's conversation sent again with a correction is one retry, of its first call.
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["report", str(RECORDED / file), "--out", str(out)])
    assert result.exit_code == 0, result.output
    runs = pl.read_parquet(out / "runs.parquet").sort("case_id")
    assert runs.select("case_id", "model_calls", "retries").rows() == [
        (f"{cases}-1", 5, 0),
        (f"{cases}-2", 4, 1),
    ]
    findings = pl.read_parquet(out / "findings.parquet")
    assert findings.select("case_id", "kind", "detail").rows() == [
        (f"{cases}-2", "retry", "1 retry > max 0: 1 model call after an answer")
    ]
    steps = pl.read_parquet(out / "steps.parquet")
    resent = steps.filter(pl.col("output_text") == '["owner"]').get_column("span_id")
    assert findings.get_column("span_ids").to_list() == [resent.to_list()]


VERDICT = '{"verdict": "clear", "owner": "Jean Dupont"}'
BOTH = ["lookup_owner", "screen_sanctions"]


def test_langgraph_graphs_are_one_run_each_and_answer_the_last_message():
    # A graph is a CHAIN span whose `agent` node OpenInference marks as an agent at every turn:
    # one run per graph, not per turn; the answer is the state's last assistant message.
    assert _runs(RECORDED / "langgraph_kyc.jsonl", last="answer") == [
        ("LG-1", 3, BOTH, 0, 0, VERDICT),
        ("LG-2", 4, BOTH, 0, 0, VERDICT),
        ("LG-3", 4, [*BOTH, "screen_sanctions"], 0, 1, VERDICT),
        ("LG-4", 2, BOTH, 0, 0, VERDICT),
        # known: structured output is a forced call of the `Verdict` tool that LangChain
        # parses and never runs: read as a request with no tool span, and no answer
        ("LG-5", 4, [*BOTH, "Verdict"], 1, 0, None),
        ("LG-6", 3, ["lookup_owner"] * 3, 1, 0, None),  # stopped by the recursion limit
    ]


def test_langgraph_one_argument_tools_are_judged_on_the_model_s_arguments(tmp_path: Path):
    # OpenInference records a one-argument tool's input as the bare value ("ACME SA"): the
    # arguments are the model's object, and the tool-arguments rule finds nothing malformed
    out = tmp_path / "out"
    path = RECORDED / "langgraph_kyc.jsonl"
    result = CliRunner().invoke(main, ["report", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    findings = pl.read_parquet(out / "findings.parquet").sort("case_id")
    assert findings.select("case_id", "kind").rows() == [
        ("LG-3", "retry"),
        ("LG-5", "no_answer"),
        ("LG-6", "no_answer"),
    ]
    steps = pl.read_parquet(out / "steps.parquet").filter(pl.col("tool_name") == "lookup_owner")
    assert set(steps.get_column("arguments")) == {'{"company": "ACME SA"}'}
    # its output, the serialized ToolMessage, gives the result and the id of the call it answers
    ran = steps.filter("executed")
    assert set(ran.get_column("result")) == {"Jean Dupont"}
    assert ran.get_column("tool_call_id").null_count() == 0


def test_google_adk_runs_in_both_telemetry_schemas():
    # schema 1 (`invocation` over the agents of one request, a transfer between them) and
    # schema 2 (`invoke_workflow`): one run per request, each with its answer
    expected = [
        ("1", 3, BOTH, 0, 0, VERDICT),
        ("2", 4, ["lookup_owner", "transfer_to_agent", "screen_sanctions"], 0, 0, VERDICT),
        # ADK's ReflectAndRetryToolPlugin turns the exception into a result saying so: failed
        ("3", 4, [*BOTH, "screen_sanctions"], 0, 1, VERDICT),
        ("4", 2, BOTH, 0, 0, VERDICT),
        ("5", 5, ["lookup_owner", "sanctions_screener", "screen_sanctions"], 0, 0, VERDICT),
    ]
    assert _runs(RECORDED / "adk_kyc.jsonl", last="answer") == [
        (f"{prefix}-{case}", *rest) for prefix in ("ADK", "ADK-V1") for case, *rest in expected
    ]
