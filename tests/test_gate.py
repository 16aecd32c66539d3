"""Gate files: schema errors with file, line and path; limits judged on the deltas; exit codes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner

from analyzer.cli import main
from analyzer.errors import GateError
from analyzer.metrics.compare import Diff, MetricDelta
from analyzer.metrics.gate import gate_from_mapping, judge, load_gate


def _diff(*rows: MetricDelta) -> Diff:
    side = {
        "source": "x",
        "kind": "traces",
        "runs": 1,
        "runs_compared": 1,
        "config_hashes": [],
        "agents": [],
        "models": [],
        "temperatures": [],
        "tools": [],
        "packs": [],
        "prices": None,
    }
    return Diff(side, dict(side), [], {"mode": "two samples"}, list(rows))


def _row(metric, key, base, cand):
    delta = None if base is None or cand is None else round(cand - base, 12)
    return MetricDelta(metric, key, base, cand, delta, None, None, "test", 10, 10)


def _gate(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gate.yaml"
    path.write_text(text, encoding="utf-8")
    return path


# --- loading -------------------------------------------------------------------------------------


def test_valid_gate_keeps_file_order(tmp_path):
    gate = load_gate(_gate(tmp_path, "score: {min_gain: 8}\nomission_rate: {max_increase: 0}\n"))
    assert list(gate.limits) == ["score", "omission_rate"]
    assert gate.limits["score"] == {"min_gain": 8}
    assert gate.sha256 is not None and len(gate.sha256) == 64


def test_every_problem_is_named_with_file_line_and_path(tmp_path):
    path = _gate(
        tmp_path,
        "omision_rate: {max_increase: 0}\n"  # line 1: typo of a metric
        "score:\n"
        "  min_gain: eight\n"  # line 3: not a number
        "  no_regresion_on: [automatic]\n"  # line 4: typo of a limit
        "cost_p95_usd: {max_increase_pct: -5}\n"  # line 5: negative percentage
        "tokens: {}\n",  # line 6: an empty limit
    )
    with pytest.raises(GateError) as err:
        load_gate(path)
    lines = str(err.value).splitlines()
    assert lines[0] == f"5 problems in gate file {path}:"
    assert lines[1].startswith(
        f"  {path}:1: omision_rate: unknown metric 'omision_rate' (did you mean 'omission_rate'?)"
    )
    assert lines[2] == f'  {path}:3: score.min_gain: expected a number, got "eight"'
    assert lines[3].startswith(
        f"  {path}:4: score.no_regresion_on: unknown limit "
        "'no_regresion_on' (did you mean 'no_regression_on'?)"
    )
    assert (
        lines[4] == f"  {path}:5: cost_p95_usd.max_increase_pct: -5 is negative; give a value >= 0"
    )
    assert lines[5] == f"  {path}:6: tokens: an empty limit judges nothing; give at least one limit"


def test_only_takes_texts_or_k_values(tmp_path):
    with pytest.raises(
        GateError, match=r"pass_hat_k.only\[0\]: expected a text or an integer, got"
    ):
        load_gate(_gate(tmp_path, "pass_hat_k: {min: 0.5, only: [1.5]}\n"))


def test_no_regression_on_only_under_score(tmp_path):
    with pytest.raises(GateError, match=r"omission_rate.no_regression_on: unknown limit"):
        load_gate(_gate(tmp_path, "omission_rate: {no_regression_on: [automatic]}\n"))


def test_unreadable_and_broken_yaml(tmp_path):
    with pytest.raises(GateError, match="cannot read the gate file"):
        load_gate(tmp_path / "missing.yaml")
    with pytest.raises(GateError, match=r"gate.yaml:2: not valid YAML"):
        load_gate(_gate(tmp_path, "score: {min_gain: 8}\n  - oops: [\n"))
    with pytest.raises(GateError, match="a gate is a mapping"):
        load_gate(_gate(tmp_path, "- score\n"))


# --- judging -------------------------------------------------------------------------------------


def test_max_increase_at_the_limit_passes_and_just_above_breaks():
    diff = _diff(_row("omission_rate", "a", 0.2, 0.25), _row("omission_rate", "b", 0.2, 0.2501))
    checks = judge(gate_from_mapping({"omission_rate": {"max_increase": 0.05}}), diff)
    assert [(c.key, c.passed) for c in checks] == [("b", False), ("a", True)]  # broken first
    assert checks[0].message == (
        "omission_rate[b] changed by +5.01 pp; may increase by at most 5 pp"
    )


def test_min_gain_eight_points():
    for cand, ok in ((83.0, True), (82.99, False), (60.0, False)):
        checks = judge(
            gate_from_mapping({"score": {"min_gain": 8}}), _diff(_row("score", None, 75.0, cand))
        )
        assert [c.passed for c in checks] == [ok], cand
    checks = judge(
        gate_from_mapping({"score": {"min_gain": 8}}), _diff(_row("score", None, 75.0, 82.99))
    )
    assert checks[0].message == "score changed by +7.99; must change by at least +8"


def test_percentage_limits():
    gate = gate_from_mapping({"cost_p95_usd": {"max_increase_pct": 10}})
    # 0.010 -> 0.011 is +10 %: allowed; 0.010 -> 0.0111 is +11 %: broken
    assert judge(gate, _diff(_row("cost_p95_usd", None, 0.010, 0.011)))[0].passed
    broken = judge(gate, _diff(_row("cost_p95_usd", None, 0.010, 0.0111)))[0]
    assert not broken.passed and broken.observed == pytest.approx(11.0)
    # from a baseline of 0 any increase is infinitely many percent
    zero = judge(gate, _diff(_row("cost_p95_usd", None, 0.0, 0.001)))[0]
    assert not zero.passed and zero.message.startswith("cost_p95_usd went from $0 to $0.00100")
    down = gate_from_mapping({"tokens": {"max_decrease_pct": 50}})
    assert judge(down, _diff(_row("tokens", None, 1000.0, 500.0)))[0].passed
    assert not judge(down, _diff(_row("tokens", None, 1000.0, 499.0)))[0].passed


def test_absolute_bounds_and_decrease():
    gate = gate_from_mapping({"pass_hat_k": {"min": 0.5, "max_decrease": 0.1, "only": [1]}})
    diff = _diff(_row("pass_hat_k", "1", 0.7, 0.55), _row("pass_hat_k", "2", 0.1, 0.0))
    checks = judge(gate, diff)
    # only k=1 is judged: down 15 points (broken), still at 55 % (ok)
    assert [(c.limit, c.key, c.passed) for c in checks] == [
        ("max_decrease", "1", False),
        ("min", "1", True),
    ]


def test_unmeasured_or_missing_metrics_break_the_gate():
    gate = gate_from_mapping(
        {"cost_p50_usd": {"max_increase": 0}, "all_fields_correct": {"min": 0.9}}
    )
    checks = judge(gate, _diff(_row("cost_p50_usd", None, None, 0.01)))
    assert [c.passed for c in checks] == [False, False]
    assert checks[0].message == "cost_p50_usd is not measured on both sides: cannot be judged"
    assert checks[1].message == "all_fields_correct: nothing to judge in this diff"


def test_no_regression_on_automatic_means_every_rule():
    diff = _diff(
        _row("score", None, 70.0, 80.0),
        _row("rule_rate", "forbidden-markers", 0.10, 0.15),
        _row("rule_rate", "structure", 0.30, 0.20),
    )
    gate = gate_from_mapping({"score": {"min_gain": 8, "no_regression_on": ["automatic"]}})
    checks = judge(gate, diff)
    assert [(c.limit, c.key, c.passed) for c in checks] == [
        ("no_regression_on", "forbidden-markers", False),
        ("min_gain", None, True),
        ("no_regression_on", "structure", True),
    ]
    assert checks[0].message == (
        "rule forbidden-markers failure rate went from 10.0% to 15.0%; must not increase"
    )
    # naming one rule judges only that one
    named = gate_from_mapping({"score": {"no_regression_on": ["structure"]}})
    assert [(c.key, c.passed, c.threshold) for c in judge(named, diff)] == [
        ("structure", True, "structure")
    ]


def test_unknown_rule_or_key_in_the_gate_is_a_user_error(tmp_path):
    path = _gate(tmp_path, "score:\n  no_regression_on: [automatic, no-such-rule]\n")
    diff = _diff(_row("rule_rate", "structure", 0.3, 0.2))
    with pytest.raises(GateError) as err:
        judge(load_gate(path), diff)
    assert str(err.value).splitlines()[1] == (
        f"  {path}:2: score.no_regression_on[1]: 'no-such-rule' is neither 'automatic' nor a "
        "rule of this diff (rules: structure)"
    )
    with pytest.raises(GateError, match=r"omission_rate.only\[0\]: omission_rate has no key 'x'"):
        judge(gate_from_mapping({"omission_rate": {"max_increase": 0, "only": ["x"]}}), diff)


def test_bad_gate_file_exits_2_before_reading_traces(tmp_path):
    gate = _gate(tmp_path, "scor: {min_gain: 8}\n")
    result = CliRunner().invoke(
        main, ["diff", str(tmp_path / "a"), str(tmp_path / "b"), "--gate", str(gate)]
    )
    assert result.exit_code == 2
    assert f"{gate}:1: scor: unknown metric 'scor' (did you mean 'score'?)" in result.output


# --- significance and minimum n ------------------------------------------------------------------


def _rate_row(key, base, cand, lo, hi, n=(15, 15)):
    delta = round(cand - base, 12)
    return MetricDelta("kind_rate", key, base, cand, delta, lo, hi, "newcombe", *n)


def test_significant_breaks_only_when_the_interval_excludes_no_change():
    # the case: a 0 -> 13.3 % rate over 15 runs, interval [-0.6, +29.7] points
    noisy = _rate_row("omission", 0.0, 2 / 15, -0.006, 0.297)
    clear = _rate_row("hallucinated_argument", 0.0, 0.40, 0.15, 0.62)
    plain = gate_from_mapping({"kind_rate": {"max_increase": 0}})
    assert [(c.key, c.passed) for c in judge(plain, _diff(noisy, clear))] == [
        ("omission", False),
        ("hallucinated_argument", False),
    ]
    gate = gate_from_mapping({"kind_rate": {"max_increase": 0, "significant": True}})
    checks = judge(gate, _diff(noisy, clear))
    assert [(c.key, c.passed) for c in checks] == [
        ("hallucinated_argument", False),
        ("omission", True),
    ]
    assert checks[1].message == (
        "kind_rate[omission] changed by +13.33 pp; may increase by at most 0 pp "
        "(not significant: 95 % interval [-0.6 pp, +29.7 pp] includes no change)"
    )
    assert checks[0].message.endswith("(significant: 95 % interval [+15.0 pp, +62.0 pp])")


def test_significant_without_an_interval_keeps_the_breach():
    row = _row("cost_p95_usd", None, 0.010, 0.020)  # no interval
    gate = gate_from_mapping({"cost_p95_usd": {"max_increase_pct": 10, "significant": True}})
    (check,) = judge(gate, _diff(row))
    assert not check.passed and check.message.endswith("(no interval to judge its significance)")


def test_min_gain_significant_needs_a_significant_gain():
    gate = gate_from_mapping({"score": {"min_gain": 8, "significant": True}})
    for lo, ok in ((-1.0, False), (2.0, True)):
        row = MetricDelta("score", None, 70.0, 80.0, 10.0, lo, 20.0, "t", 30, 30)
        assert [c.passed for c in judge(gate, _diff(row))] == [ok], lo


def test_no_regression_on_with_significant():
    diff = _diff(
        _row("score", None, 70.0, 80.0),
        _rate_row("noisy-rule", 0.0, 2 / 15, -0.006, 0.297),
        _rate_row("real-rule", 0.0, 0.40, 0.15, 0.62),
    )
    diff.metrics[1:] = [dataclasses.replace(r, metric="rule_rate") for r in diff.metrics[1:]]
    gate = gate_from_mapping({"score": {"no_regression_on": ["automatic"], "significant": True}})
    assert [(c.key, c.passed) for c in judge(gate, diff)] == [
        ("real-rule", False),
        ("noisy-rule", True),
    ]


def test_min_n_judges_only_the_keys_with_enough_runs():
    small = _rate_row("rare", 0.0, 0.5, 0.1, 0.9, n=(4, 2))
    big = _rate_row("common", 0.10, 0.30, 0.05, 0.35, n=(40, 50))
    gate = gate_from_mapping({"kind_rate": {"max_increase": 0.05, "min_n": 10}})
    checks = judge(gate, _diff(small, big))
    assert [(c.key, c.passed, c.observed) for c in checks] == [
        ("common", False, 0.2),
        ("rare", True, None),
    ]
    assert checks[1].message == (
        "kind_rate[rare] not judged: n = 4 / 2 (baseline / candidate), fewer than min_n 10"
    )
    # every key below min_n: nothing judged, and a gate never passes by checking nothing
    (only,) = [c for c in judge(gate, _diff(small)) if not c.passed]
    assert only.message == "kind_rate: nothing to judge in this diff with n >= 10 on both sides"


def test_significant_or_min_n_alone_is_a_user_error(tmp_path):
    path = _gate(tmp_path, "kind_rate: {significant: true, min_n: 5}\n")
    with pytest.raises(GateError) as err:
        load_gate(path)
    assert str(err.value) == (
        f"1 problem in gate file {path}:\n  {path}:1: kind_rate: no limit to apply: min_n, "
        "significant only qualify the limits beside them"
    )
