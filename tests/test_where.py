"""Where: `report` names the runs and cases behind its findings, and `show` takes a case id and
puts findings and label verdicts on the trajectory.

Expected values from sample_traces/README.md: KYC-2026-0004 never screened sanctions (omission +
premature_answer on its last model call, span c2e603f530439850) and answered approve/low where
the labels say escalate/high.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

import analyzer.cli as cli
from analyzer.cli import main

ROOT = Path(__file__).resolve().parents[1]
KYC = ROOT / "sample_traces" / "kyc"
PACK = ROOT / "rules" / "kyc.yaml"
LABELS = ROOT / "rules" / "kyc-labels.jsonl"


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_report_ends_with_the_runs_behind_the_findings_worst_first(monkeypatch):
    out = run("report", KYC, "--rules", PACK).output.splitlines()
    start = out.index("runs with findings 9 (worst first):")
    rows = [line.split() for line in out[start + 2 : start + 11]]
    # score 60 (critical omission, weight 40) first; ties: most findings, then run id
    assert [r[0] for r in rows[:4]] == [
        "KYC-2026-0009",
        "KYC-2026-0006",
        "KYC-2026-0004",
        "KYC-2026-0007",
    ]
    assert [(r[2], r[3]) for r in rows[:5]] == [("60.0", "2")] * 4 + [("60.0", "1")]
    assert rows[0][4:] == ["kyc-required-checks"]
    assert out[start + 11] == (f"see the worst: agenttrace show KYC-2026-0009 {KYC} --rules {PACK}")
    monkeypatch.setattr(cli, "_WHERE_RUNS", 3)
    capped = run("report", KYC, "--rules", PACK).output
    assert "runs with findings 9 (worst first; the first 3, --verbose for all):" in capped
    every = run("report", KYC, "--rules", PACK, "--verbose").output
    assert "runs with findings 9 (worst first):" in every


def test_show_takes_a_case_id_and_marks_the_offending_step():
    out = run("show", "KYC-2026-0004", KYC, "--rules", PACK).output.splitlines()
    assert out[0] == "run      b69f68276a803963e314c735a25e0a03"
    marked = [line for line in out if line.startswith("!")]
    assert len(marked) == 1 and marked[0].split()[1:3] == ["6", "+3107.0"]
    assert "! kyc-required-checks (critical): screen_sanctions never called" in "\n".join(out)
    assert (
        "  kyc-required-checks (critical, omission): screen_sanctions never called "
        "[c2e603f530439850]" in out
    )
    assert "findings 2:" in out


def test_show_prints_each_labelled_field_expected_against_answered():
    out = run("show", "KYC-2026-0004", KYC, "--labels", LABELS).output.splitlines()
    start = out.index("labels   (expected -> answered)")
    assert [line.split() for line in out[start + 1 : start + 4]] == [
        ["decision", "wrong", "'escalate'", "->", "'approve'"],
        ["dossier_id", "correct", "'KYC-2026-0004'", "->", "'KYC-2026-0004'"],
        ["risk_level", "wrong", "'high'", "->", "'low'"],
    ]


def test_show_names_what_it_cannot_find():
    missing = CliRunner().invoke(main, ["show", "KYC-2099-0001", str(KYC)])
    assert missing.exit_code == 2
    assert "no run or case with id 'KYC-2099-0001'" in missing.output
    prefix = run("show", "b69f682", KYC).output
    assert prefix.startswith("run      b69f68276a803963e314c735a25e0a03")


def test_show_of_a_case_with_several_runs_lists_them():
    # every KYC run has service.name kyc-agent: taken as the case key, one case of 16 runs
    several = CliRunner().invoke(
        main, ["show", "kyc-agent", str(KYC), "--case-key", "service.name"]
    )
    assert several.exit_code == 2
    assert "case 'kyc-agent' has 16 runs: give one of " in several.output


def test_bundled_packs_compose_by_name(tmp_path):
    # default and kyc-review both have a rule tool-arguments: named pack/id where shown
    out = tmp_path / "out"
    result = run("report", KYC, "--rules", "default", "--rules", "kyc", "--out", out)
    assert result.exit_code == 0, result.output
    assert "rules    default, kyc-review" in result.output
    table = [line.split() for line in result.output.splitlines()]
    assert ["default/tool-arguments", "malformed_arguments", "medium", "1", "1/16"] in table
    assert ["kyc-review/tool-arguments", "malformed_arguments", "medium", "1", "1/16"] in table
    import json

    rows = [json.loads(line) for line in (out / "findings.jsonl").read_text().splitlines()]
    assert {(r["pack"], r["rule_id"]) for r in rows if r["rule_id"] == "tool-arguments"} == {
        ("default", "tool-arguments"),
        ("kyc-review", "tool-arguments"),
    }
    unknown = CliRunner().invoke(main, ["report", str(KYC), "--rules", "kyx"])
    assert unknown.exit_code == 2
    assert "built-in packs: default, kyc, realestate, support" in unknown.output
