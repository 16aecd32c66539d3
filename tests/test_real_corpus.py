"""Every file of the real third-party corpus reconstructs exactly as read by hand.

The expectations are the table in tests/data/real_corpus/README.md (runs, model calls, the
executed tools in order, input and output tokens, per run in start order); the files are kept
unmodified, their sources listed in that README. Rows named ``shared:`` are the files of
shared/real-traces (tests/test_real_traces.py checks them step by step too).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from analyzer.conventions import normalize
from analyzer.ingest.reader import read_traces
from analyzer.runs import build_runs

CORPUS = Path(__file__).parent / "data" / "real_corpus"
SHARED = Path(os.environ.get("AGENTTRACE_REAL_TRACES", "/work/shared/real-traces"))
COLUMNS = ["file", "producer", "runs", "model calls", "tools", "input tokens", "output tokens"]
#: Records of these files that are no span, quarantined: a program's own prints around its
#: console spans, log records beside the span records of an AgentCore body.
NOT_SPANS = {
    "Arize-ai__openinference__python-out.json": 3,
    "aws__bedrock-agentcore-sdk-python__strands_qa_spans.json": 11,
    "aws__bedrock-agentcore-sdk-python__strands_rag_spans.json": 12,
    "aws__bedrock-agentcore-sdk-python__openinference_langchain_spans.json": 14,
    "aws__bedrock-agentcore-sdk-python__opentelemetry_langchain_spans.json": 18,
}


def _table() -> dict[str, dict[str, str]]:
    """The README's expectation table: file -> column -> cell."""
    lines = (CORPUS / "README.md").read_text(encoding="utf-8").splitlines()
    header = "| " + " | ".join(COLUMNS) + " |"
    start = lines.index(header)
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = dict(zip(COLUMNS, cells, strict=True))
    return rows


TABLE = _table()


def _path(name: str) -> Path:
    return SHARED / name.removeprefix("shared:") if name.startswith("shared:") else CORPUS / name


def _per_run(cell: str) -> list[str]:
    return [part.strip() for part in cell.split(" / ")]


def _tokens(cell: str) -> int | None:
    return None if cell == "-" else int(cell)


def test_the_corpus_is_large_and_listed_whole():
    on_disk = sorted(p.name for p in CORPUS.glob("*") if p.name not in ("README.md", "NOTES.md"))
    assert on_disk == sorted(n for n in TABLE if not n.startswith("shared:"))
    producers = {row["producer"] for row in TABLE.values()}
    assert len(TABLE) >= 20 and len(producers) >= 10


@pytest.mark.parametrize("name", sorted(TABLE))
def test_reconstructs_exactly(name: str):
    path = _path(name)
    if name.startswith("shared:") and not path.exists():
        pytest.skip("shared/real-traces not available")
    exp = TABLE[name]
    ingested = read_traces([path])
    log = ingested.log
    assert log.spans_quarantined == 0
    assert log.records_quarantined == NOT_SPANS.get(name, 0)
    assert log.balanced()
    runs = build_runs(ingested.spans, normalize(ingested.spans), parents=ingested.parents).runs
    runs = runs.sort("started_ns", "run_id")
    assert runs.height == int(exp["runs"])
    assert [str(n) for n in runs["model_calls"]] == _per_run(exp["model calls"])
    tools = [", ".join(seq) or "-" for seq in runs["tool_sequence"].to_list()]
    assert tools == _per_run(exp["tools"])
    assert runs["input_tokens"].to_list() == [_tokens(c) for c in _per_run(exp["input tokens"])]
    assert runs["output_tokens"].to_list() == [_tokens(c) for c in _per_run(exp["output tokens"])]


def test_the_table_cells_are_well_formed():
    for name, row in TABLE.items():
        n = int(row["runs"])
        for column in COLUMNS[3:]:
            assert len(_per_run(row[column])) == n, (name, column)
        for column in ("model calls", "input tokens", "output tokens"):
            assert all(re.fullmatch(r"\d+|-", c) for c in _per_run(row[column])), (name, column)


def test_merged_spans_are_shown_written_and_warned(tmp_path: Path):
    # kagent: each call_llm holds an openai.chat recording the same call
    import polars as pl
    from click.testing import CliRunner

    from analyzer.cli import main

    path = CORPUS / "agentevals-dev__agentevals__helm.json"
    shown = CliRunner().invoke(main, ["show", "", str(path)], catch_exceptions=False)
    merged = [line for line in shown.output.splitlines() if "merged with" in line]
    assert len(merged) == 2
    assert all("spans nested in one another record the same call" in line for line in merged)
    out = tmp_path / "out"
    report = CliRunner().invoke(main, ["report", str(path), "--out", str(out), "--format", "json"])
    assert report.exit_code == 0, report.output
    steps = pl.read_parquet(out / "steps.parquet")
    model = steps.filter(pl.col("kind") == "model_call")
    assert model["merge_reason"].to_list() == ["nested", "nested"]
    assert model["merged_span_ids"].list.len().to_list() == [1, 1]
    runs = pl.read_parquet(out / "runs.parquet")
    assert runs["conventions"].to_list() == [["adk", "genai", "openllmetry"]]
    summary = json.loads((out / "summary.json").read_text())
    reasons = [w["reason"] for w in summary["ingest"]["warnings"]]
    assert any(r.startswith("2 spans record a call another span already records") for r in reasons)


def test_cloudwatch_records_keep_the_failed_tool_and_the_agentcore_resource():
    # Strands on Bedrock AgentCore, read back from CloudWatch: the tool whose session was
    # refused failed (gen_ai.tool.status), its span status OK; the resource is the runtime's
    path = CORPUS / "sideseat__sideseat__raw_otel_strands_openai_spans.json"
    ingested = read_traces([path])
    runset = build_runs(ingested.spans, normalize(ingested.spans), parents=ingested.parents)
    tools = runset.steps.filter(runset.steps["kind"] == "tool_call")
    assert tools.select("tool_name", "status", "span_id").rows() == [
        ("code_interpreter", "error", "e4b33b81b25786c2")
    ]
    assert runset.runs["service_name"].to_list() == ["agent.DEFAULT", "agent.DEFAULT"]


def test_an_openllmetry_fork_names_its_model_agent_and_tool_arguments_as_read_by_hand():
    # AGNTCY ioa-observe (NOTES.md): the model only in LangChain's metadata, the agents under
    # the fork's own prefix, the tool arguments inside OpenLLMetry's record of on_tool_start
    from click.testing import CliRunner

    from analyzer.cli import main

    path = CORPUS / "ponchotitlan__packet-panic-agntcy__get-inventory.json"
    ingested = read_traces([path])
    runset = build_runs(ingested.spans, normalize(ingested.spans), parents=ingested.parents)
    run = runset.runs.row(0, named=True)
    assert (run["agent"], run["models"]) == (
        "supervisor_agent.execute_agent_with_llm",
        ["anthropic/claude-opus-4-5-20251101"],
    )
    tools = runset.steps.filter(runset.steps["kind"] == "tool_call")
    assert tools.select("tool_name", "executed").rows() == [
        ("query_detector", False),  # sent to the detector over A2A by the supervisor's code
        ("pyats_list_devices", True),
    ]
    assert list(json.loads(tools["arguments"][0])) == ["instruction"]
    assert tools["arguments"][1] == "{}"
    # its result: the text of the LangChain ToolMessage OpenLLMetry recorded
    assert tools["result"][1].startswith('{\n  "status": "completed",\n  "devices": {')
    report = CliRunner().invoke(main, ["report", str(path), "--format", "json"])
    summary = json.loads(report.stdout)
    # 9144 in x $5 + 780 out x $25 per million (rules/prices.yaml)
    assert summary["metrics"]["cost"]["total_usd"] == 0.06522
    by_rule = {r["rule_id"]: r for r in summary["findings"]["by_rule"]}
    # no argument invented: the tool call id of LangChain's record is not an argument
    assert (by_rule["grounded-ids"]["runs_checked"], by_rule["grounded-ids"]["findings"]) == (1, 0)
    # the detector's answer, then the supervisor's: two agents answering, no retry
    assert (by_rule["retries"]["runs_checked"], by_rule["retries"]["findings"]) == (1, 0)


def test_tool_arguments_an_instrumentation_wrote_as_a_python_repr_are_not_malformed():
    # OpenInference's LangChain tool spans record the input dict as its repr (NOTES.md,
    # quo_tav_agent); the model asked with JSON and the tools ran with it
    from click.testing import CliRunner

    from analyzer.cli import main

    path = CORPUS / "evilmartians__agent-prism__quo_tav_agent.json"
    ingested = read_traces([path])
    runset = build_runs(ingested.spans, normalize(ingested.spans), parents=ingested.parents)
    tools = runset.steps.filter(runset.steps["kind"] == "tool_call")
    search = json.loads(tools["arguments"][0])
    assert search == {"query": "latest AI trends 2024", "time_range": "year", "topic": "general"}
    assert len(json.loads(tools["arguments"][1])["urls"]) == 4
    report = CliRunner().invoke(main, ["report", str(path), "--format", "json"])
    by_rule = {r["rule_id"]: r for r in json.loads(report.stdout)["findings"]["by_rule"]}
    assert (by_rule["tool-arguments"]["runs_checked"], by_rule["tool-arguments"]["findings"]) == (
        1,
        0,
    )


def test_crewai_s_tool_input_under_monocle_is_the_model_s_action_input():
    # Monocle writes CrewAI's tool input as "input: <repr>" with CrewAI's fingerprints added
    # (NOTES.md, crewai_multi_agent): read as text, both tools that ran were "malformed"
    from click.testing import CliRunner

    from analyzer.cli import main

    path = CORPUS / "monocle2ai__monocle__test_crewai_multi_agent.json"
    ingested = read_traces([path])
    runset = build_runs(ingested.spans, normalize(ingested.spans), parents=ingested.parents)
    tools = runset.steps.filter(runset.steps["kind"] == "tool_call")
    # what the model wrote after "Action Input:", key for key
    assert [json.loads(a) for a in tools["arguments"]] == [
        {"hotel_name": "Marriott", "city": "New York", "nights": 2},
        {"departure": "Los Angeles", "arrival": "New York", "date": "next week"},
    ]
    report = CliRunner().invoke(main, ["report", str(path), "--format", "json"])
    by_rule = {r["rule_id"]: r for r in json.loads(report.stdout)["findings"]["by_rule"]}
    assert by_rule["tool-arguments"]["findings"] == 0
    assert (by_rule["grounded-ids"]["runs_checked"], by_rule["grounded-ids"]["findings"]) == (1, 0)


def test_an_agentops_export_s_crew_answers_with_its_result_and_its_usage_counts_once():
    # AgentOps (NOTES.md, agent_ops_traces): the crew's workflow span sums its two calls'
    # usage, and both calls record the first agent's completion; the answer is the crew's
    path = CORPUS / "IBM__ibmdotcom-tutorials__agent_ops_traces.md"
    ingested = read_traces([path])
    runset = build_runs(ingested.spans, normalize(ingested.spans), parents=ingested.parents)
    (run,) = runset.runs.to_dicts()
    assert (run["input_tokens"], run["output_tokens"]) == (481, 496)
    assert run["answer"].startswith("Verse 1:\nIn the digital realm, where agents roam")
    # the agent is one the crew named, not AgentOps' type name of the entity ("Crew")
    assert run["agent"] == "Website Researcher"


def test_a_run_whose_model_calls_were_not_exported_has_an_unknown_cost_not_zero(tmp_path: Path):
    # claude_adot (NOTES.md): the Claude Agent SDK's query span records llm.cost.total 0.0713
    # and the session's usage, but no model call span; its cost read $0 and passed budgets
    from click.testing import CliRunner
    from jsonschema import Draft202012Validator

    from analyzer.cli import main
    from analyzer.resources import schema

    path = CORPUS / "strands-agents__evals__claude_adot_spans.json"
    pack = tmp_path / "budget.yaml"
    pack.write_text(
        "pack: b\nrules:\n  - {id: cap, type: budget, max_cost_usd: 0.05, severity: high}\n"
    )
    report = CliRunner().invoke(main, ["report", str(path), "--format", "json", "--rules", pack])
    summary = json.loads(report.stdout)
    assert list(Draft202012Validator(schema("summary.schema.json")).iter_errors(summary)) == []
    cost = summary["metrics"]["cost"]
    assert (cost["total_usd"], cost["priced_runs"], cost["unpriced_runs"]) == (None, 0, 1)
    assert cost["unpriced_models"] == [
        {
            "model": None,
            "reason": "no model call recorded",
            "model_calls": 0,
            "runs": 1,
            "input_tokens": 0,
            "output_tokens": 0,
            "cached_input_tokens": 0,
        }
    ]
    # the budget judged nothing: unverifiable, not a pass
    (cap,) = summary["metrics"]["rule_coverage"]
    assert (cap["rule_id"], cap["checked"], cap["unverifiable"]) == ("cap", 0, 1)
    text = CliRunner().invoke(main, ["report", str(path)]).stdout
    assert "  unpriced: no model call recorded in 1 of the runs" in text.splitlines()


def test_koog_s_requests_written_as_tool_calls_json_are_the_calls_its_tools_answer():
    # Koog (NOTES.md): each completion's content is the JSON text of an OpenAI tool_calls
    # list; read as text, the two tools it asked for ran "unrequested"
    from click.testing import CliRunner

    from analyzer.cli import main

    path = CORPUS / "langfuse__koog-2025-08-26.trace.json"
    ingested = read_traces([path])
    runset = build_runs(ingested.spans, normalize(ingested.spans), parents=ingested.parents)
    first = runset.steps.row(0, named=True)
    assert [(c["id"], c["name"]) for c in first["requested_calls"]] == [
        ("call_n2HaWg9KFP0BZDqXv6G4b3nJ", "HelloTool"),
        ("call_dOeEHJDI0liHrCdFWTpkTsuO", "ByeTool"),
    ]
    assert first["output_text"] is None
    report = CliRunner().invoke(main, ["report", str(path), "--format", "json"])
    summary = json.loads(report.stdout)
    assert summary["findings"]["total"] == 0
    by_rule = {r["rule_id"]: r for r in summary["findings"]["by_rule"]}
    assert by_rule["requested-calls"]["runs_checked"] == 1


def test_adot_s_python_reprs_of_response_items_are_the_calls_they_record():
    # ADOT's OpenAI Agents chat spans write each requested call as the repr of a
    # ResponseFunctionToolCall (NOTES.md): the coordinator's two handoffs, the math call
    ingested = read_traces([CORPUS / "strands-agents__evals__openai_agents_genai_adot_spans.json"])
    runset = build_runs(ingested.spans, normalize(ingested.spans), parents=ingested.parents)
    steps = runset.steps
    assert steps.select("kind", "name", "executed", "requested_by").rows() == [
        ("model_call", "gpt-4o-2024-08-06", True, None),
        ("tool_call", "transfer_to_math_specialist", False, "e611bc87f477961f"),
        ("tool_call", "transfer_to_research_specialist", False, "e611bc87f477961f"),
        ("model_call", "gpt-4o-2024-08-06", True, None),
        ("tool_call", "multiply_numbers", True, "625e0da0e226cb40"),
        ("model_call", "gpt-4o-2024-08-06", True, None),
    ]
    assert steps["output_text"][0] is None


@pytest.mark.parametrize("name", ["openai_agents_genai_adot", "openai_agents_genai_live"])
def test_a_coordinator_s_call_after_its_specialist_s_answer_is_no_retry(name: str):
    # OpenAI Agents: the coordinator hands off to (adot) or calls as tools (live) specialist
    # agents, each an agent span of its own; their answers followed by the coordinator's next
    # call were counted as model calls redone
    from analyzer.checks.retries import retry_steps

    ingested = read_traces([CORPUS / f"strands-agents__evals__{name}_spans.json"])
    runset = build_runs(ingested.spans, normalize(ingested.spans), parents=ingested.parents)
    assert runset.steps.get_column("agent_span_id").n_unique() >= 2
    assert retry_steps(runset).is_empty()


def test_the_summary_does_not_depend_on_the_partitions():
    # each partition counts the spans it merged (one per trace here, 3 traces): the report
    # in 3 partitions on 2 processes adds them up into the one warning the report in memory
    # gives, and prints the same bytes
    from click.testing import CliRunner

    from analyzer.cli import main

    path = str(CORPUS / "sideseat__sideseat__raw_otel_strands_bedrock_spans.json")
    outputs = []
    for options in (["--partitions", "0"], ["--partitions", "3", "-j", "2"]):
        result = CliRunner().invoke(main, ["report", path, "--format", "json", *options])
        assert result.exit_code == 0, result.output
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1]
    warnings = json.loads(outputs[0])["ingest"]["warnings"]
    assert [(w["reason"][:45], w["spans"]) for w in warnings] == [
        ("3 spans record a call another span already re", 3)
    ]


def test_claude_code_tools_fail_with_their_execution_and_a_subagent_stays_in_the_run():
    # Claude Code's own traces (NOTES.md): a tool span and its execution span are one call,
    # failed when the execution did; the subagent's calls nest in the Agent tool's execution
    path = CORPUS / "agentevals-dev__agentevals__kagent-alpha9__claude_native_1turn_subagent.json"
    ingested = read_traces([path])
    runset = build_runs(ingested.spans, normalize(ingested.spans), parents=ingested.parents)
    tools = runset.steps.filter(runset.steps["kind"] == "tool_call")
    failed = tools.filter(tools["status"] == "error")["tool_name"].to_list()
    assert failed == ["Bash", "Bash", "Read", "Bash", "Read", "Bash"]
    assert set(tools["merge_reason"].to_list()) == {"nested"}
    models = runset.steps.filter(runset.steps["kind"] == "model_call")
    assert models["cached_input_tokens"].sum() == 549_867
    # the results are the tool.output events: 16 of the Bash calls and both MCP calls have one
    with_result = tools.filter(tools["result"].is_not_null())["tool_name"].value_counts()
    assert dict(with_result.iter_rows()) == {
        "Bash": 16,
        "mcp__kagent-tool-server__k8s_get_resources": 2,
    }


def test_usage_only_a_backend_stored_is_counted_and_said_and_list_call_ids_pair():
    # Microsoft Agent Framework on the Assistants API, through Langfuse (NOTES.md): the first
    # call's 25/70 is Langfuse's, the span recorded none; the tool's call id is a list, the
    # same list as its request's
    path = CORPUS / "langfuse__seeder__microsoft-agent-2025-10-14.json"
    ingested = read_traces([path])
    log = ingested.log
    runset = build_runs(
        ingested.spans, normalize(ingested.spans), parents=ingested.parents, log=log
    )
    steps = runset.steps.select("kind", "span_id", "requested_by", "input_tokens")
    assert steps.rows() == [
        ("model_call", "c6b8d4db5f0eac82", None, 25),
        ("tool_call", "7f845be8c0da22f3", "c6b8d4db5f0eac82", None),
        ("model_call", "3c2d6f2f26930c50", None, 631),
    ]
    reasons = [w.reason for f in log.files for w in f.warnings]
    assert [r for r in reasons if "usage" in r] == [
        "1 model calls record no usage of their own: their tokens are the usage the exporting "
        "backend stored (what an SDK sent it, or its own estimate)"
    ]


def test_a_script_s_prints_around_its_console_spans_are_set_aside_and_the_spans_read():
    ingested = read_traces([CORPUS / "Arize-ai__openinference__python-out.json"])
    quarantine = [(q.position, q.excerpt) for q in ingested.log.quarantine]
    assert [p for p, _ in quarantine] == ["line 2", "line 54", "line 109"]
    starts = ["SYNC", "ctx={'session.id': 'test-session'", "DONE"]
    assert all(e.startswith(w) for (_, e), w in zip(quarantine, starts, strict=True))
    assert not any('"name": "ChatCompletion"' in e for _, e in quarantine)
    assert ingested.log.spans_read == ingested.spans.num_rows == 2


def test_claude_code_runs_cost_their_cache_reads_and_writes(tmp_path: Path):
    # Anthropic's input_tokens leaves the cache out (NOTES.md): per run, (uncached + cache
    # writes) at $1.00, cache reads at $0.10 and output at $5.00 per million (claude-haiku-4-5)
    import polars as pl
    from click.testing import CliRunner

    from analyzer.cli import main

    path = CORPUS / "agentevals-dev__agentevals__kagent-alpha9__claude_native_2turn.json"
    result = CliRunner().invoke(main, ["report", str(path), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    runs = pl.read_parquet(tmp_path / "runs.parquet").sort("started_ns")
    first = ((60 + 3_071) * 1.00 + 168_084 * 0.10 + 1_655 * 5.00) * 1e-6
    second = ((18 + 1_007) * 1.00 + 52_862 * 0.10 + 285 * 5.00) * 1e-6
    assert runs["input_tokens"].to_list() == [60 + 168_084 + 3_071, 18 + 52_862 + 1_007]
    assert runs["cost_usd"].to_list() == pytest.approx([first, second], abs=1e-12)


def test_beeai_s_answer_is_the_text_of_the_message_its_agent_span_printed():
    # output.value is str() of a dict, {'role': 'assistant', 'text': "Barcelona is ..."}
    path = CORPUS / "langfuse__beeai-2025-08-01.trace.json"
    ingested = read_traces([path])
    runs = build_runs(ingested.spans, normalize(ingested.spans), parents=ingested.parents).runs
    [answer] = runs["answer"].to_list()
    assert answer.startswith("Barcelona is a vibrant city known for its rich cultural heritage")
    assert answer.endswith("the humidity is at 48%. It's a great time to explore the city!")


def test_strands_content_events_give_the_requested_calls_their_arguments_and_results():
    # Strands' events (NOTES.md): gen_ai.choice messages are Bedrock Converse blocks whose
    # toolUse blocks are the calls requested; a tool span's events hold its arguments and result
    path = CORPUS / "aws__bedrock-agentcore-sdk-python__strands_tool_call_spans.json"
    ingested = read_traces([path])
    runset = build_runs(ingested.spans, normalize(ingested.spans), parents=ingested.parents)
    steps = runset.steps.filter(runset.steps["run_id"].str.starts_with("e37cbd57"))
    models = steps.filter(steps["kind"] == "model_call")
    requested = [[c["id"] for c in calls] for calls in models["requested_calls"].to_list()]
    assert requested == [
        ["tooluse_BnlgwOf5eWzE4NBNAuctIf", "tooluse_sFQOGxHlK2MLKRAWeeryvh"],
        ["tooluse_tE3ANGWrqudhrUcLoATZk4", "tooluse_Ud0Fz45xDebAoG4RoHTe1S"],
        [],
    ]
    tools = steps.filter(steps["kind"] == "tool_call")
    assert (
        tools["requested_by"].to_list() == [models["span_id"][0]] * 2 + [models["span_id"][1]] * 2
    )
    assert tools["arguments"][2] == '{"flight_id":"DL420"}'
    assert (
        tools["result"][2]
        == "{'booking_id': 'FBDL420', 'flight_id': 'DL420', 'status': 'confirmed'}"
    )
    [answer] = runset.runs.filter(runset.runs["run_id"].str.starts_with("e37cbd57"))["answer"]
    assert answer.startswith("Great! I've successfully booked both for you:")


def test_strands_tool_spans_give_the_schema_their_calls_are_judged_against():
    # Strands writes each tool's input schema on its execute_tool span (gen_ai.tool.json_schema);
    # without it the run that books was unverifiable: "no JSON Schema known for book_flight"
    from click.testing import CliRunner

    from analyzer.cli import main

    path = CORPUS / "aws__bedrock-agentcore-sdk-python__strands_tool_call_spans.json"
    ingested = read_traces([path])
    runset = build_runs(ingested.spans, normalize(ingested.spans), parents=ingested.parents)
    offered = {
        json.loads(text)[0]["name"]: json.loads(text)[0]["parameters"]["required"]
        for defs in runset.runs["tool_definitions"].to_list()
        for text in defs
    }
    assert offered == {
        "book_flight": ["flight_id"],
        "book_hotel": ["hotel_id", "checkin", "checkout"],
        "search_flights": ["origin", "destination", "date"],
        "search_hotels": ["city", "checkin", "checkout"],
    }
    report = CliRunner().invoke(main, ["report", str(path), "--format", "json"])
    by_rule = {r["rule_id"]: r for r in json.loads(report.stdout)["findings"]["by_rule"]}
    assert (by_rule["tool-arguments"]["runs_checked"], by_rule["tool-arguments"]["findings"]) == (
        2,
        0,
    )


def test_an_openinference_handoff_span_is_no_tool_and_smolagents_kwargs_are_the_arguments():
    # NOTES.md: "handoff to math_specialist" is OpenAI Agents' handoff, not a tool's run;
    # smolagents records its Tool.__call__ parameters, whose kwargs are the arguments
    path = CORPUS / "strands-agents__evals__openai_agents_openinference_adot_spans.json"
    ingested = read_traces([path])
    runset = build_runs(ingested.spans, normalize(ingested.spans), parents=ingested.parents)
    tools = runset.steps.filter(runset.steps["kind"] == "tool_call")
    assert tools.select("tool_name", "executed").rows() == [
        ("transfer_to_math_specialist", False),
        ("transfer_to_research_specialist", False),
        ("multiply_numbers", True),
    ]
    path = CORPUS / "strands-agents__evals__smolagents_live_spans.json"
    ingested = read_traces([path])
    runset = build_runs(ingested.spans, normalize(ingested.spans), parents=ingested.parents)
    tools = runset.steps.filter(runset.steps["kind"] == "tool_call")
    assert tools["arguments"].to_list() == ['{"query":"population of Tokyo"}']
