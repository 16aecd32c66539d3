"""CI outputs of `report` (issue 35): `--junit FILE` is valid JUnit XML, one suite per rule and
one case per run, its outcome the rule's verdict on the run; `--annotations github` prints the
most severe findings as workflow commands. Hostile trace text stays text in both."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import polars as pl
import pytest
import xmlschema
from click.testing import CliRunner
from factories import otlp_span

from analyzer.cli import main

ROOT = Path(__file__).resolve().parents[1]
KYC = str(ROOT / "sample_traces" / "kyc")
SCHEMA = xmlschema.XMLSchema(str(ROOT / "tests" / "data" / "junit" / "junit-10.xsd"))


def _report(*args: str) -> None:
    result = CliRunner().invoke(main, ["report", *args])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def kyc(tmp_path_factory) -> tuple[ET.Element, Path]:
    folder = tmp_path_factory.mktemp("junit")
    # Crashy raises on the answers holding "escalate": check errors, reported as errors
    (folder / "crash.yaml").write_text(
        "pack: crash\nrules:\n  - {id: boom, type: 'plugin_example:Crashy', trigger: escalate}\n"
    )
    _report(
        KYC,
        "--rules",
        "kyc",
        "--rules",
        str(folder / "crash.yaml"),
        "--allow-plugins",
        "--junit",
        str(folder / "kyc.xml"),
        "--out",
        str(folder / "out"),
    )
    SCHEMA.validate(str(folder / "kyc.xml"))
    return ET.parse(folder / "kyc.xml").getroot(), folder / "out"


def test_one_suite_per_rule_one_case_per_judged_run(kyc):
    root, out = kyc
    findings = [json.loads(line) for line in (out / "findings.jsonl").read_text().splitlines()]
    coverage_rows = pl.read_parquet(out / "coverage.parquet")
    suites = root.findall("testsuite")
    assert sorted(s.get("name") for s in suites) == sorted(
        {f"{r['pack']}/{r['rule_id']}" for r in coverage_rows.iter_rows(named=True)}
    )
    assert int(root.get("tests")) == coverage_rows.height == len(list(root.iter("testcase")))
    failing = {(f["pack"], f["rule_id"], f["run_id"]) for f in findings}
    assert int(root.get("failures")) == len(failing) == len(root.findall(".//failure"))
    for suite in suites:
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases)
        assert int(suite.get("failures")) == sum(c.find("failure") is not None for c in cases)
        assert int(suite.get("skipped")) == sum(c.find("skipped") is not None for c in cases)
        names = [c.get("name") for c in cases]
        assert names == sorted(names)  # by case id, then run id: stable bytes


def test_a_failing_run_lists_every_finding_with_its_evidence(kyc):
    root, _ = kyc
    (case,) = [
        c
        for c in root.iter("testcase")
        if c.get("classname") == "kyc-review.kyc-required-checks"
        and c.get("name").startswith("KYC-2026-0004 ")
    ]
    failure = case.find("failure")
    assert (failure.get("type"), failure.get("message")) == (
        "omission",
        "screen_sanctions never called",
    )
    assert failure.text.splitlines() == [
        "[critical] omission: screen_sanctions never called (tool screen_sanctions) "
        "[spans c2e603f530439850]",
        "[critical] premature_answer: answered after 1 of 2 required tools; not called before "
        "the answer: screen_sanctions [spans c2e603f530439850]",
    ]
    passing = [c for c in root.iter("testcase") if c.get("name").startswith("KYC-2026-0001 ")]
    assert passing and all(len(c) == 0 for c in passing if c.get("classname").startswith("kyc"))


def test_a_check_that_crashed_is_an_error_not_a_pass(kyc):
    root, _ = kyc
    (suite,) = [s for s in root.findall("testsuite") if s.get("name") == "crash/boom"]
    errors = [c for c in suite.findall("testcase") if c.find("error") is not None]
    # the KYC answers deciding "escalate": 0003 and the others the sample lists
    assert errors and int(suite.get("errors")) == len(errors) == int(root.get("errors"))
    for case in errors:
        assert case.find("error").get("message") == "RuntimeError: escalate in the answer"


def test_runs_a_rule_could_not_judge_are_skipped_with_the_reason(tmp_path: Path):
    _report(str(ROOT / "sample_traces"), "--junit", str(tmp_path / "all.xml"))
    SCHEMA.validate(str(tmp_path / "all.xml"))
    root = ET.parse(tmp_path / "all.xml").getroot()
    skipped = [s.get("message") for s in root.iter("skipped")]
    assert int(root.find("testsuite").get("skipped")) >= 0 and len(skipped) == 14
    # 12 runs without a tool call id, 2 whose call arguments were not recorded (the samples)
    assert sum(m.startswith("not_applicable: ") for m in skipped) == 12
    assert sum(m.startswith("unverifiable: ") for m in skipped) == 2


HOSTILE = "\x00\x1b[31m]]></failure><script>alert(1)</script>&amp;\"'\ufffe"


def test_hostile_trace_text_stays_text(tmp_path: Path):
    trace, root_span = "5b8efff798038103d269b633813fc60c", "00000000000000a0"
    spans = [
        otlp_span(trace, root_span, "", "invoke_agent", 0, 30, {
            "gen_ai.operation.name": "invoke_agent", "app.case_id": "C" + HOSTILE,
        }),
        otlp_span(trace, "00000000000000a1", root_span, "chat", 1, 10, {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1",
        }),
        otlp_span(trace, "00000000000000a2", root_span, "execute_tool", 11, 20, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "wire" + HOSTILE,
        }),
    ]  # fmt: skip
    line = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
    (tmp_path / "t.jsonl").write_text(line + "\n")
    (tmp_path / "p.yaml").write_text(
        "pack: p\nrules:\n  - {id: only, type: allowed_tools, tools: [lookup]}\n"
    )
    _report(
        str(tmp_path / "t.jsonl"),
        "--rules",
        str(tmp_path / "p.yaml"),
        "--junit",
        str(tmp_path / "h.xml"),
    )
    SCHEMA.validate(str(tmp_path / "h.xml"))
    root = ET.parse(tmp_path / "h.xml").getroot()
    (case,) = root.iter("testcase")
    assert [e.tag for e in case] == ["failure"]  # one element: nothing injected
    assert "<script>alert(1)</script>" in case.find("failure").text  # as text
    assert "\\x1b" in case.get("name") and "\\x00" in case.get("name")


def _finding(i: int, severity: str, detail: str = "d") -> dict:
    return {
        "run_id": f"r{i:03d}",
        "rule_id": "rule",
        "kind": "omission",
        "severity": severity,
        "tool": None,
        "argument": None,
        "detail": detail,
        "span_ids": [],
        "case_id": f"C-{i:03d}",
        "pack": "p",
    }


def test_annotations_most_severe_ten_per_level_then_a_count():
    from analyzer.checks import FINDING_SCHEMA
    from analyzer.render.annotations import github_annotations

    rows = [_finding(i, ("low", "medium", "critical", "high")[i % 4]) for i in range(60)]
    lines = github_annotations(pl.DataFrame(rows, schema=FINDING_SCHEMA))
    levels = [line.split(" ", 1)[0] for line in lines[:-1]]
    assert levels == ["::error"] * 10 + ["::warning"] * 10 + ["::notice"] * 10
    # the critical ones first (case ids 002, 006, ...), then high
    assert [line.split("::")[2][:10] for line in lines[:10]] == [
        f"case C-{i:03d}" for i in range(2, 40, 4)
    ]
    assert lines[-1] == "agenttrace: 30 more findings not annotated (GitHub shows ten per level)"
    assert lines[0].startswith("::error title=agenttrace p/rule%3A omission::case C-002: d")


def test_annotations_cannot_end_their_line_or_start_a_command():
    from analyzer.checks import FINDING_SCHEMA
    from analyzer.render.annotations import github_annotations

    detail = "50%\n::set-env name=X::y\r\x1b[2J::error::forged"
    (line,) = github_annotations(pl.DataFrame([_finding(1, "high", detail)], schema=FINDING_SCHEMA))
    assert "\n" not in line and "\r" not in line and "\x1b" not in line
    assert line.startswith("::error title=") and line.count("%25") == 1
    assert not any(part.startswith("::") for part in line.split("\n")[1:])


def test_annotations_on_the_samples_and_not_with_json(tmp_path: Path):
    result = CliRunner().invoke(main, ["report", KYC, "--annotations", "github"])
    assert result.exit_code == 0
    commands = [ln for ln in result.stdout.splitlines() if ln.startswith("::")]
    findings = CliRunner().invoke(main, ["report", KYC, "--format", "json"])
    by_severity = json.loads(findings.stdout)["findings"]["by_severity"]
    assert len(commands) == sum(by_severity.values())  # fewer than ten per level here
    refused = CliRunner().invoke(
        main, ["report", KYC, "--annotations", "github", "--format", "json"]
    )
    assert refused.exit_code == 2


def _markdown_tokens(text: str):
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": True, "linkify": False}).enable("table")
    return md.parse(text)


def _inline_types(tokens) -> set[str]:
    return {child.type for t in tokens for child in (t.children or [])}


def test_markdown_summary_figures_and_no_raw_html():
    result = CliRunner().invoke(
        main, ["report", str(ROOT / "sample_traces"), "--format", "markdown"]
    )
    assert result.exit_code == 0
    text = result.stdout
    lines = text.splitlines()
    assert lines[2] == (
        "**7 findings** (0 critical, 3 high, 1 medium, 3 low) over **40 runs** (39 answered)"
    )
    # 1 of 40 runs failed: Wilson 95% interval 0.44%-12.88%
    assert "| default/answered | 1 high | 1 / 40 | 2.5% (0.4%–12.9%) |" in lines
    assert "| default/requested-calls | 0 | 0 / 28 | 0.0% (0.0%–12.1%) |" in lines
    assert "| KYC-2026-0013 | ae064840adad5d190ef6e3f71cf44b53 | 70.0 | 1 | answered |" in lines
    tokens = _markdown_tokens(text)
    types = {t.type for t in tokens} | _inline_types(tokens)
    assert "table_open" in types
    assert not types & {"html_block", "html_inline", "link_open"}


def test_markdown_summary_of_hostile_ids_stays_inert_and_tabular():
    from analyzer.render.markdown import markdown_summary

    summary = json.loads(CliRunner().invoke(main, ["report", KYC, "--format", "json"]).stdout)
    hostile = (
        "@octocat https://evil.example/x <img src=x onerror=alert(1)> | `code` www.evil.example"
    )
    bad = pl.DataFrame(
        {
            "run_id": ["r1"],
            "case_id": [hostile],
            "score": [10.0],
            "findings": [1],
            "failed_rules": [["rule|x"]],
        }
    )
    text = markdown_summary(summary, bad)
    tokens = _markdown_tokens(text)
    types = {t.type for t in tokens} | _inline_types(tokens)
    assert not types & {"html_block", "html_inline", "link_open"}
    assert "@octocat" not in text  # a mention would notify
    rows = [t for t in tokens if t.type == "tr_open"]
    cells = [t for t in tokens if t.type == "td_open"]
    assert (cells and len(cells) % 5 == 0) or len(rows)  # the pipes did not add cells
    last = [t.content for t in tokens if t.type == "inline"][-5:]
    assert last[0].startswith("@") and "octocat" in last[0]


def test_markdown_summary_clipped_under_64_kb_with_a_count():
    from analyzer.render.markdown import markdown_summary

    summary = json.loads(CliRunner().invoke(main, ["report", KYC, "--format", "json"]).stdout)
    n = 5000
    bad = pl.DataFrame(
        {
            "run_id": [f"{i:032x}" for i in range(n)],
            "case_id": [f"CASE-{i:05d}" for i in range(n)],
            "score": [50.0] * n,
            "findings": [2] * n,
            "failed_rules": [["kyc-required-checks", "grounded-account-ids"]] * n,
        }
    )
    text = markdown_summary(summary, bad)
    assert len(text.encode("utf-8")) <= 65_536
    last = text.rstrip("\n").splitlines()[-1]
    assert last.startswith("**Clipped**: ") and "more lines" in last
    shown = sum(line.startswith("| CASE-") for line in text.splitlines())
    assert 0 < shown < n and f"{n - shown:,} more lines" in last
