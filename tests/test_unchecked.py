"""Nothing unchecked looks clean: rules that judged nothing, or less than they name, are said
in the terminal, summary.json, report.html, and fail `--fail-on-unchecked` and a gate.

The cases are the sample KYC traces with rules/kyc.yaml as shipped and with one word changed:
a filter attribute misspelled, a tool misspelled, an agent that is not there; and a rule that
applies to every run but can judge none (no content recorded).
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from factories import otlp_attr, otlp_span

from analyzer.cli import main

ROOT = Path(__file__).resolve().parents[1]
KYC = ROOT / "sample_traces" / "kyc"
PACK = (ROOT / "rules" / "kyc.yaml").read_text(encoding="utf-8")
FILTER = "app.case_type: [kyc, kyc_renewal]"
TOOLS = "tools: [screen_sanctions, lookup_beneficial_owners]"


def pack(tmp_path: Path, old: str = "", new: str = "") -> Path:
    assert not old or old in PACK
    path = tmp_path / "pack.yaml"
    path.write_text(PACK.replace(old, new) if old else PACK, encoding="utf-8")
    return path


def report(*args: str):
    return CliRunner().invoke(main, ["report", *map(str, args)], catch_exceptions=False)


def checks_of(*args: str) -> dict:
    result = report(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    schema = json.loads((ROOT / "schemas" / "summary.schema.json").read_text())
    jsonschema.validate(summary, schema)
    return summary["checks"]


def problems(checks: dict) -> list[tuple[str, str]]:
    return [(u["rule_id"], u["problem"]) for u in checks["unchecked"]]


def test_the_shipped_pack_checks_everything(tmp_path):
    checks = checks_of(KYC, "--rules", pack(tmp_path))
    assert checks["unchecked"] == []
    required = checks["rules"][0]
    assert (required["rule_id"], required["runs_applied"], required["runs_judged"]) == (
        "kyc-required-checks",
        16,
        16,
    )
    assert report(KYC, "--rules", pack(tmp_path), "--fail-on-unchecked").exit_code == 0


def test_a_misspelled_filter_attribute_is_said_and_fails(tmp_path):
    typo = pack(tmp_path, FILTER, "app.case_typ: [kyc, kyc_renewal]")
    checks = checks_of(KYC, "--rules", typo)
    assert problems(checks) == [
        ("kyc-required-checks", "unknown_attribute"),
        ("kyc-required-checks", "applied_to_no_run"),
    ]
    assert checks["unchecked"][0]["detail"] == "no run records the attribute 'app.case_typ'"
    rule = checks["rules"][0]
    assert (rule["runs_applied"], rule["runs_judged"]) == (0, 0)
    table = report(KYC, "--rules", typo)
    assert table.exit_code == 0
    assert "UNCHECKED 2" in table.output
    assert "kyc-required-checks: no run records the attribute 'app.case_typ'" in table.output
    failed = CliRunner().invoke(
        main, ["report", str(KYC), "--rules", str(typo), "--fail-on-unchecked"]
    )
    assert failed.exit_code == 1
    assert "unchecked rules: kyc-review/kyc-required-checks" in failed.output


def test_a_filter_value_no_run_has_applies_to_no_run(tmp_path):
    # the key exists, no run has the value: not an unknown attribute, still nothing checked
    checks = checks_of(KYC, "--rules", pack(tmp_path, FILTER, "app.case_type: [kyc_typo]"))
    assert problems(checks) == [("kyc-required-checks", "applied_to_no_run")]


def test_a_misspelled_tool_is_said(tmp_path):
    typo = pack(tmp_path, TOOLS, "tools: [screen_sanction, lookup_beneficial_owners]")
    checks = checks_of(KYC, "--rules", typo)
    assert problems(checks) == [("kyc-required-checks", "unknown_tool")]
    assert "screen_sanction'" in checks["unchecked"][0]["detail"]
    assert report(KYC, "--rules", typo, "--fail-on-unchecked").exit_code == 1


def test_an_agent_no_run_has_is_said(tmp_path):
    when = f"when: {{attributes: {{{FILTER}}}}}"
    other = pack(tmp_path, when, f"when: {{attributes: {{{FILTER}}}, agent: kyc-reviewr}}")
    checks = checks_of(KYC, "--rules", other)
    assert problems(checks) == [
        ("kyc-required-checks", "unknown_agent"),
        ("kyc-required-checks", "applied_to_no_run"),
    ]


def _no_content_trace(tmp_path: Path) -> Path:
    trace, agent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    spans = [
        otlp_span(
            trace,
            agent,
            "",
            "invoke_agent a",
            0,
            9,
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"},
        ),
        otlp_span(
            trace, "00f067aa0ba902b8", agent, "chat", 1, 3, {"gen_ai.operation.name": "chat"}
        ),
        otlp_span(
            trace,
            "00f067aa0ba902b9",
            agent,
            "execute_tool lookup_account",
            4,
            5,
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_account"},
        ),
    ]
    body = {
        "resourceSpans": [
            {
                "resource": {"attributes": [otlp_attr("service.name", "a")]},
                "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}],
            }
        ]
    }
    path = tmp_path / "trace.jsonl"
    path.write_text(json.dumps(body) + "\n")
    return path


def test_a_rule_that_judged_none_of_its_runs_is_said(tmp_path):
    trace = _no_content_trace(tmp_path)
    rules = tmp_path / "grounded.yaml"
    rules.write_text(
        "pack: p\nrules:\n  - id: grounded\n    type: grounded_arguments\n"
        "    tools: [lookup_account]\n    arguments: [account_id]\n",
        encoding="utf-8",
    )
    checks = checks_of(trace, "--rules", rules)
    assert problems(checks) == [("grounded", "judged_no_run")]
    rule = checks["rules"][0]
    assert (rule["runs_applied"], rule["runs_judged"], rule["runs_unverifiable"]) == (1, 0, 1)
    assert rule["reasons"][0]["status"] == "unverifiable"
    assert checks["unchecked"][0]["detail"].startswith("judged none of the 1 runs it applied to")
    assert report(trace, "--rules", rules, "--fail-on-unchecked").exit_code == 1


@pytest.mark.parametrize("partitions", ["0", "3"])
def test_every_path_gives_the_same_checks(tmp_path, partitions):
    typo = pack(tmp_path, FILTER, "app.case_typ: [kyc, kyc_renewal]")
    one = checks_of(KYC, "--rules", typo, "--partitions", "0")
    assert checks_of(KYC, "--rules", typo, "--partitions", partitions, "--jobs", "2") == one


def test_the_page_says_it_first_and_shows_no_clean_coverage(tmp_path):
    typo = pack(tmp_path, FILTER, "app.case_typ: [kyc, kyc_renewal]")
    page = report(KYC, "--rules", typo, "--format", "html").output
    assert page.index('<section id="unchecked"') < page.index('<section id="headline"')
    assert "its filter (app.case_typ in (kyc, kyc_renewal)) selected none of the runs" in page
    assert '<div class="label">Rule coverage</div><div class="value">3 / 4</div>' in page
    assert "No omission was measured" in page and "No tool was required" not in page
    clean = report(KYC, "--rules", pack(tmp_path), "--format", "html").output
    assert '<section id="unchecked"' not in clean
    assert '<div class="value">4 / 4</div>' in clean


def test_a_gate_can_require_that_every_rule_checked(tmp_path):
    gate = tmp_path / "gate.yaml"
    gate.write_text("fail_on_unchecked: true\n", encoding="utf-8")
    typo = pack(tmp_path, FILTER, "app.case_typ: [kyc, kyc_renewal]")
    args = ["diff", str(KYC), str(KYC), "--gate", str(gate), "--rules"]
    broken = CliRunner().invoke(main, [*args, str(typo)])
    assert broken.exit_code == 1
    assert "BROKEN fail_on_unchecked: 2 problem(s) in the candidate's rules" in broken.output
    fine = CliRunner().invoke(main, [*args, str(pack(tmp_path))])
    assert fine.exit_code == 0, fine.output
