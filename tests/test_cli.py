"""The command line: outputs and exit codes, error paths included."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from factories import otlp_attr, otlp_span

from analyzer.cli import main

pytest.importorskip("analyzer.ingest.otlp_json")
pytest.importorskip("analyzer.conventions.normalize")

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    spans = [
        otlp_span(
            TRACE,
            "00f067aa0ba902b7",
            "",
            "invoke_agent kyc",
            0,
            100,
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "kyc-reviewer",
                "app.case_id": "K-7",
            },
        ),
        otlp_span(
            TRACE,
            "00f067aa0ba902b8",
            "00f067aa0ba902b7",
            "chat gpt-4.1",
            1,
            10,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4.1",
                "gen_ai.usage.input_tokens": 120,
                "gen_ai.usage.output_tokens": 12,
                "gen_ai.response.finish_reasons": "tool_calls",
            },
        ),
        otlp_span(
            TRACE,
            "00f067aa0ba902b9",
            "00f067aa0ba902b7",
            "execute_tool screen_sanctions",
            11,
            20,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "screen_sanctions",
                "gen_ai.tool.call.arguments": '{"full_name": "\x1b[31mEve"}',
            },
        ),
        otlp_span(
            TRACE,
            "00f067aa0ba902ba",
            "00f067aa0ba902b7",
            "chat gpt-4.1",
            21,
            30,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4.1",
                "gen_ai.usage.input_tokens": 200,
                "gen_ai.usage.output_tokens": 30,
            },
        ),
    ]
    body = {
        "resourceSpans": [
            {
                "resource": {"attributes": [otlp_attr("service.name", "kyc")]},
                "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}],
            }
        ]
    }
    path = tmp_path / "trace.jsonl"
    path.write_text(json.dumps(body) + "\nnot json\n")
    return path


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_runs_lists_one_line_per_run(trace_file: Path):
    result = run("runs", str(trace_file))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "RUN",
        "AGENT",
        "CASE",
        "MODELS",
        "LLM",
        "TOOLS",
        "TOKENS",
        "ANSWER",
    ]
    assert lines[1].split() == [TRACE, "kyc-reviewer", "K-7", "gpt-4.1", "2", "1", "362", "yes"]
    assert "QUARANTINED: 0 spans, 1 records" in result.stderr


def test_runs_and_the_runs_with_findings_print_run_ids_whole():
    # three agent runs in one trace: TRACE:SPAN ids, longer than the column they were clipped
    # to ("…"), so that a run id copied from the list was not one `show` knew
    import polars as pl

    from analyzer.render.terminal import finding_runs_lines

    path = (
        Path(__file__).parent / "data/real_corpus/langfuse__pydantic-ai-tools-2025-12-04.trace.json"
    )
    lines = run("runs", str(path)).stdout.splitlines()
    run_ids = [line.split()[0] for line in lines[1:]]
    assert [len(r) for r in run_ids] == [49] * 3 and lines[0].index("AGENT") == 51
    shown = run("show", run_ids[2], str(path))
    assert shown.exit_code == 0 and shown.stdout.startswith(f"run      {run_ids[2]}\n")
    bad = pl.DataFrame(
        {"case_id": [None], "run_id": [run_ids[0]], "score": [80.0], "findings": [1]},
        schema_overrides={"case_id": pl.String},
    ).with_columns(failed_rules=pl.lit(["retries"]))
    assert finding_runs_lines(bad, None)[-1].split() == ["-", run_ids[0], "80.0", "1", "retries"]
    # near miss: a --run-key value of any length is cut at the table's widest run id
    long_id = bad.with_columns(run_id=pl.lit("k" * 200))
    assert finding_runs_lines(long_id, None)[-1].split()[1] == "k" * 63 + "…"


def test_runs_jsonl(trace_file: Path):
    result = run("runs", str(trace_file), "--format", "jsonl")
    row = json.loads(result.stdout.splitlines()[0])
    assert row == {
        "run_id": TRACE,
        "agent": "kyc-reviewer",
        "case_id": "K-7",
        "models": ["gpt-4.1"],
        "model_calls": 2,
        "tool_calls": 1,
        "input_tokens": 320,
        "output_tokens": 42,
        "has_answer": True,
    }


def test_show_prints_the_trajectory_without_terminal_escapes(trace_file: Path):
    result = run("show", TRACE[:8], str(trace_file))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "\x1b" not in out and "\\x1b[31mEve" in out
    steps = [ln for ln in out.splitlines() if ln[:3].strip().isdigit()]
    assert [s.split()[2:4] for s in steps] == [
        ["model", "gpt-4.1"],
        ["tool", "screen_sanctions"],
        ["model", "gpt-4.1"],
    ]
    assert "120/12" in steps[0] and "+1.0" in steps[0]
    assert "answer at T+30.0 ms" in out


def test_show_says_why_a_step_failed(trace_file: Path, tmp_path: Path):
    body = json.loads(trace_file.read_text().splitlines()[0])
    first_call = body["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    first_call["attributes"].append(otlp_attr("error.type", "RateLimitError"))
    first_call["status"] = {"code": 2, "message": "429"}
    path = tmp_path / "failed.json"
    path.write_text(json.dumps(body))
    result = run("show", TRACE[:8], str(path))
    assert result.exit_code == 0, result.output
    steps = [ln for ln in result.stdout.splitlines() if ln[:3].strip().isdigit()]
    assert steps[0].split()[-2:] == ["error", "(RateLimitError)"]
    assert "error" not in steps[1] and "(" not in steps[1]  # near miss: a call that went well


def test_show_of_a_run_without_model_call():
    # Vercel AI SDK v6 capture: the outer generateText span in a trace of its own, its model
    # call in another; a run with no model call has no temperature (was an internal error)
    corpus = (
        Path(__file__).parent / "data" / "real_corpus" / "Arize-ai__openinference__all-spans.json"
    )
    result = run("show", "700d5f98", str(corpus))
    assert result.exit_code == 0, result.output
    assert "models   -   temperature(s) -" in result.stdout
    assert "0 model calls, 0 tool calls, - in / - out tokens" in result.stdout


@pytest.mark.parametrize("partitions", ["0", "2"])
def test_report_hashes_the_input_only_for_the_manifest(
    trace_file: Path, tmp_path: Path, monkeypatch, partitions: str
):
    """The input files' SHA-256 is read by the manifest of ``--out`` alone: without it, no
    file is hashed (in process, or partitioned with ``-j 1``: the workers are threads here)."""
    from analyzer.ingest import reader

    hashed: list[Path] = []
    real = reader.sha256_of
    monkeypatch.setattr(reader, "sha256_of", lambda path: hashed.append(path) or real(path))
    options = ("--partitions", partitions, "-j", "1")
    for fmt in ("json", "table", "html"):
        result = run("report", str(trace_file), "--format", fmt, *options)
        assert result.exit_code == 0, result.output
    assert hashed == []
    out = tmp_path / "out"
    result = run("report", str(trace_file), "--out", str(out), *options)
    assert result.exit_code == 0, result.output
    assert hashed == [trace_file]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["inputs"][0]["sha256"] == real(trace_file)


def test_report_writes_outputs(trace_file: Path, tmp_path: Path):
    out = tmp_path / "out"
    result = run("report", str(trace_file), "--out", str(out))
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ingest"]["spans_kept"] == 4
    assert summary["ingest"]["records_quarantined"] == 1
    assert summary["runs"]["count"] == 1 and summary["runs"]["tool_calls"] == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["inputs"][0]["spans_kept"] == 4
    assert len(manifest["inputs"][0]["sha256"]) == 64
    quarantine = [json.loads(x) for x in (out / "quarantine.jsonl").read_text().splitlines()]
    assert quarantine[0]["position"] == "line 2"
    import polars as pl

    assert pl.read_parquet(out / "steps.parquet").height == 3
    assert pl.read_parquet(out / "runs.parquet").get_column("case_id").to_list() == ["K-7"]


def test_report_is_byte_deterministic(trace_file: Path, tmp_path: Path):
    for name in ("a", "b"):
        assert run("report", str(trace_file), "--out", str(tmp_path / name)).exit_code == 0
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir())
    assert {"findings.jsonl", "findings.parquet", "manifest.json", "summary.json"} <= set(names)
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_ingest_then_report_from_the_dataset(trace_file: Path, tmp_path: Path):
    ds = tmp_path / "ds"
    assert run("ingest", str(trace_file), "--out", str(ds)).exit_code == 0
    direct = run("runs", str(trace_file), "--format", "jsonl").stdout
    assert run("runs", str(ds), "--format", "jsonl").stdout == direct


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["runs", "/no/such/path"], "Error: /no/such/path: no such file or folder\n"),
        (["runs"], "Error: no input: give at least one trace file or folder\n"),
        (["ingest", "x"], None),  # --out missing: click's usage error
    ],
)
def test_error_paths_exit_2(args, message):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    if message is not None:
        assert result.stderr == message


def test_empty_folder_and_unknown_run(tmp_path: Path, trace_file: Path):
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(main, ["runs", str(tmp_path / "empty")])
    assert result.exit_code == 2 and "no input" in result.stderr
    result = CliRunner().invoke(main, ["show", "ffff", str(trace_file)])
    assert result.exit_code == 2 and "no run or case with id 'ffff'" in result.stderr


def test_show_takes_a_trace_id_as_a_backend_spells_it(trace_file: Path):
    run_id = json.loads(run("runs", str(trace_file), "--format", "jsonl").stdout.splitlines()[0])[
        "run_id"
    ]
    uuid = "-".join((run_id[:8], run_id[8:12], run_id[12:16], run_id[16:20], run_id[20:]))
    for spelled in (uuid.upper(), f"0x{run_id}", uuid[:13]):
        shown = run("show", spelled, str(trace_file))
        assert shown.exit_code == 0 and shown.stdout.startswith(f"run      {run_id}\n"), spelled
    near_miss = run("show", f"{uuid}-x", str(trace_file))  # not hex: taken as written
    assert near_miss.exit_code == 2 and f"no run or case with id '{uuid}-x'" in near_miss.stderr


PACK = """\
pack: kyc
rules:
  - {id: checks, type: required_tools, tools: [screen_sanctions, lookup_owners], severity: high}
  - {id: answered, type: required_tools, tools: [], severity: low}
"""


def test_report_applies_packs_and_writes_findings(trace_file: Path, tmp_path: Path):
    pack = tmp_path / "kyc.yaml"
    pack.write_text(PACK)
    out = tmp_path / "out"
    result = run("report", str(trace_file), "--rules", str(pack), "--out", str(out))
    assert result.exit_code == 0, result.output
    # screen_sanctions ran, lookup_owners never did: one omission + one premature answer
    found = [json.loads(x) for x in (out / "findings.jsonl").read_text().splitlines()]
    assert [(f["rule_id"], f["kind"], f["tool"]) for f in found] == [
        ("checks", "omission", "lookup_owners"),
        ("checks", "premature_answer", None),
    ]
    assert found[0]["span_ids"] == ["00f067aa0ba902ba"] and found[0]["case_id"] == "K-7"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["findings"]["total"] == 2
    assert summary["findings"]["by_severity"] == {"critical": 0, "high": 2, "medium": 0, "low": 0}
    assert [
        (r["rule_id"], r["kind"], r["findings"], r["runs"]) for r in summary["findings"]["by_rule"]
    ] == [
        ("answered", None, 0, 0),
        ("checks", "omission", 1, 1),
        ("checks", "premature_answer", 1, 1),
    ]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["packs"][0]["sha256"] == hashlib.sha256(PACK.encode()).hexdigest()
    assert "findings 2 (0 critical, 2 high, 0 medium, 0 low)" in result.output


@pytest.mark.parametrize(("fail_on", "code"), [("high", 1), ("critical", 0), ("low", 1)])
def test_fail_on_sets_the_exit_code(trace_file: Path, tmp_path: Path, fail_on: str, code: int):
    pack = tmp_path / "kyc.yaml"
    pack.write_text(PACK)
    result = CliRunner().invoke(
        main, ["report", str(trace_file), "--rules", str(pack), "--fail-on", fail_on]
    )
    assert result.exit_code == code, result.output


def test_bad_pack_is_exit_2_before_reading_traces(trace_file: Path, tmp_path: Path):
    pack = tmp_path / "bad.yaml"
    pack.write_text("pack: x\nrules:\n  - {id: a, type: required_tool, tools: [t]}\n")
    result = CliRunner().invoke(main, ["report", str(trace_file), "--rules", str(pack)])
    assert result.exit_code == 2
    assert "unknown rule type 'required_tool'; did you mean required_tools?" in result.stderr


def test_the_program_freezes_what_its_command_left_and_exits_with_its_code(monkeypatch, capsys):
    """`run` (the ``agenttrace`` console script) is `main` followed by ``gc.freeze``: the
    interpreter's collection at exit skips the command's objects; the exit code is the
    command's."""
    import gc

    from analyzer.cli import run

    frozen = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    for argv, code in ((["agenttrace", "--version"], 0), (["agenttrace", "nonsense"], 2)):
        monkeypatch.setattr("sys.argv", argv)
        with pytest.raises(SystemExit) as exited:
            run()
        assert exited.value.code == code
    assert frozen == [True, True]
    assert "agenttrace, version" in capsys.readouterr().out
    from importlib.metadata import entry_points

    (script,) = entry_points(group="console_scripts", name="agenttrace")
    assert script.value == "analyzer.cli:run"


def test_the_fail_on_choices_are_the_severities_of_the_checks() -> None:
    from analyzer.checks.base import SEVERITIES
    from analyzer.cli import _SEVERITIES

    assert _SEVERITIES == SEVERITIES
