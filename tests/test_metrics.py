"""Run metrics against values computed by hand (the computation is in the comments)."""

from __future__ import annotations

import json
import math
import random

import polars as pl
import pytest

from analyzer.checks import COVERAGE_SCHEMA, FINDING_SCHEMA
from analyzer.metrics.stats import (
    TAIL_METRICS,
    breakdown,
    breakdown_runs,
    content_coverage,
    kind_rates,
    omission_rates,
    ordered_mean,
    ordered_sum,
    pass_hat_k,
    quantile,
    quantile_interval,
    rule_coverage,
    rule_rates,
    run_groups,
    run_outcomes,
    run_scores,
    tails,
    wilson,
)

Z2 = 1.959963984540054**2  # 3.8414588206941254


def _wilson_by_hand(k: int, n: int) -> tuple[float, float]:
    p = k / n
    center = (p + Z2 / (2 * n)) / (1 + Z2 / n)
    half = math.sqrt(Z2) * math.sqrt(p * (1 - p) / n + Z2 / (4 * n * n)) / (1 + Z2 / n)
    return center - half, center + half


def _findings(rows: list[tuple]) -> pl.DataFrame:
    """Rows of (run_id, pack, rule_id, kind, severity, tool)."""
    frame = pl.DataFrame(
        rows,
        schema={
            "run_id": pl.String,
            "pack": pl.String,
            "rule_id": pl.String,
            "kind": pl.String,
            "severity": pl.String,
            "tool": pl.String,
        },
        orient="row",
    )
    return frame.with_columns(
        argument=pl.lit(None, pl.String),
        detail=pl.lit("x"),
        span_ids=pl.lit([], pl.List(pl.String)),
        case_id=pl.lit(None, pl.String),
    ).select(list(FINDING_SCHEMA))


def _coverage(rows: list[tuple]) -> pl.DataFrame:
    """Rows of (run_id, pack, rule_id, status)."""
    frame = pl.DataFrame(
        rows,
        schema={"run_id": pl.String, "pack": pl.String, "rule_id": pl.String, "status": pl.String},
        orient="row",
    )
    return frame.with_columns(reason=pl.lit(None, pl.String)).select(list(COVERAGE_SCHEMA))


# --- scalar statistics ------------------------------------------------------------------------


def test_quantile_type_7():
    xs = [4.0, 1.0, None, 3.0, 2.0]  # sorted non-null: 1 2 3 4, n = 4
    assert quantile(xs, 0.5) == 2.5  # h = 3 * 0.5 = 1.5 -> x[1] + 0.5 (x[2] - x[1])
    assert quantile(xs, 0.95) == pytest.approx(3.85)  # h = 2.85 -> 3 + 0.85 * 1
    assert quantile(xs, 0.25) == 1.75  # h = 0.75 -> 1 + 0.75 * 1 (nearest rank would say 1)
    assert quantile(xs, 0.0) == 1.0
    assert quantile(xs, 1.0) == 4.0
    assert quantile([7.0], 0.99) == 7.0
    assert quantile([None], 0.5) is None
    with pytest.raises(ValueError):
        quantile(xs, 1.5)


def test_quantile_of_a_series_is_that_of_its_values():
    """A polars Series is read by polars (linear interpolation), with the same results."""
    xs = [4.0, 1.0, None, 3.0, 2.0]
    for q in (0.0, 0.25, 0.5, 0.95, 1.0):
        assert quantile(pl.Series(xs), q) == quantile(xs, q)
    assert quantile(pl.Series([3, 9], dtype=pl.Int64), 0.5) == 6.0
    assert quantile(pl.Series([None], dtype=pl.Float64), 0.5) is None
    assert quantile(pl.Series([], dtype=pl.Float64), 0.5) is None
    with pytest.raises(ValueError):
        quantile(pl.Series(xs), -0.1)


@pytest.mark.parametrize(
    ("n", "q", "ranks"),
    [
        # Binomial(10, 1/2): P(B <= 1) = 11/1024 = 0.0107 <= 0.025 < P(B <= 2) = 56/1024 -> l = 2;
        # by symmetry P(B >= 9) = 11/1024 -> u = 9 (coverage 1 - 22/1024 = 0.979).
        (10, 0.5, (2, 9)),
        # n = 5: P(B <= 0) = 1/32 = 0.031 > 0.025: no lower rank -> too small.
        (5, 0.5, None),
        # n = 6: P(B <= 0) = 1/64 = 0.0156 <= 0.025 < P(B <= 1) = 7/64 -> (1, 6).
        (6, 0.5, (1, 6)),
        # n = 20: P(B <= 5) = 21700/2^20 = 0.0207 <= 0.025 < P(B <= 6) = 0.0577 -> (6, 15).
        (20, 0.5, (6, 15)),
        # The classic table value for the median of 100: x_(40) .. x_(61) (P(B <= 39) = 0.0176).
        (100, 0.5, (40, 61)),
        # p95 needs 0.95^n <= 0.025: n >= 72 (0.95^71 = 0.0262, 0.95^72 = 0.0249).
        (71, 0.95, None),
        # n = 72: P(B <= 63) = 0.0096 <= 0.025 < P(B <= 64); P(B >= 72) = 0.0249 -> (64, 72).
        (72, 0.95, (64, 72)),
        # p99 needs 0.99^n <= 0.025: n >= 368 (0.99^367 = 0.0250 is just above).
        (367, 0.99, None),
        (368, 0.99, (360, 368)),
        # n = 200, p95: P(B <= 183) = 0.0238, P(B >= 197) = 0.0090 < 0.025 < P(B >= 196).
        (200, 0.95, (184, 197)),
        (0, 0.5, None),
    ],
)
def test_quantile_interval_ranks(n, q, ranks):
    assert quantile_interval(n, q) == ranks


def test_quantile_interval_other_confidence_and_bad_arguments():
    # 90 %: tails of 0.05. n = 10, q = 1/2: P(B <= 1) = 0.0107, P(B <= 2) = 0.0547 > 0.05 -> l = 2.
    assert quantile_interval(10, 0.5, 0.90) == (2, 9)
    # n = 5 at 90 %: P(B <= 0) = 0.03125 <= 0.05 < P(B <= 1) = 0.1875 -> (1, 5).
    assert quantile_interval(5, 0.5, 0.90) == (1, 5)
    with pytest.raises(ValueError):
        quantile_interval(10, 1.0)
    with pytest.raises(ValueError):
        quantile_interval(10, 0.5, 1.0)


def test_quantile_interval_large_n_is_fast_and_centered():
    lo, hi = quantile_interval(1_000_000, 0.5)  # +- 1.96 * 500 around 500000
    assert 499_000 < lo < 500_000 < hi < 501_000
    assert lo + hi == 1_000_001  # symmetric for q = 1/2


def test_wilson():
    # k = 0: lower 0, upper z^2 / (n + z^2) = 3.8415 / 13.8415 = 0.277533.
    assert wilson(0, 10) == (0.0, pytest.approx(0.2775327998628892))
    # k = 5, n = 10: centre 0.5, half-width 1.96 sqrt(0.025 + 0.0096) / 1.3841 = 0.263407.
    assert wilson(5, 10) == (pytest.approx(0.236593090512564), pytest.approx(0.763406909487436))
    assert wilson(10, 10) == (pytest.approx(0.7224672001371107), 1.0)
    assert wilson(3, 4) == pytest.approx(_wilson_by_hand(3, 4))
    assert wilson(3, 4) == (pytest.approx(0.300642, abs=1e-6), pytest.approx(0.954413, abs=1e-6))
    assert wilson(0, 0) is None
    with pytest.raises(ValueError):
        wilson(5, 4)


# --- tails ------------------------------------------------------------------------------------


def _runs() -> pl.DataFrame:
    """Ten runs of agent a (values 1..10) and three of agent b."""
    n = 13
    return pl.DataFrame(
        {
            "run_id": [f"r{i:02d}" for i in range(1, n + 1)],
            "agent": ["a"] * 10 + ["b"] * 3,
            "cost_usd": [float(i) for i in range(1, 11)] + [0.5, None, 1.5],
            "input_tokens": [*range(10, 110, 10), None, None, 7],
            "output_tokens": [1] * 10 + [None, 3, None],
            "model_calls": [1] * 10 + [2, 2, 5],
            "tool_calls": [0] * 13,
            "duration_s": [1.0] * 13,
            "models": [["m1"]] * 10 + [["m1", "m2"], [], ["m2"]],
            "temperature": [0.0] * 10 + [0.7, 0.7, None],
            "case_id": [None] * 13,
            "service_version": ["1.0"] * 13,
            "has_content": [True] * 9 + [False, None, True, True],
            "attributes": [json.dumps({"app.case_type": "kyc"})] * 12 + ["{}"],
        }
    )


def test_tails_per_group_hand_computed():
    out = tails(_runs(), by="agent", metrics=["cost_usd", "tokens"])
    assert out.columns == [
        "agent", "metric", "runs", "n", "missing", "max",
        "p50", "p50_lo", "p50_hi", "p95", "p95_lo", "p95_hi", "p99", "p99_lo", "p99_hi",
    ]  # fmt: skip
    rows = {(r["agent"], r["metric"]): r for r in out.iter_rows(named=True)}
    assert [k for k in rows] == [
        ("a", "cost_usd"),
        ("a", "tokens"),
        ("b", "cost_usd"),
        ("b", "tokens"),
    ]
    a = rows[("a", "cost_usd")]  # 1..10
    assert (a["runs"], a["n"], a["missing"], a["max"]) == (10, 10, 0, 10.0)
    assert a["p50"] == 5.5  # h = 9 * 0.5 = 4.5 -> 5 + 0.5
    assert (a["p50_lo"], a["p50_hi"]) == (2.0, 9.0)  # ranks (2, 9) for n = 10
    assert a["p95"] == pytest.approx(9.55)  # h = 8.55 -> 9 + 0.55
    assert a["p99"] == pytest.approx(9.91)  # h = 8.91
    assert (a["p95_lo"], a["p95_hi"], a["p99_lo"], a["p99_hi"]) == (None, None, None, None)
    b = rows[("b", "cost_usd")]  # 0.5, null, 1.5
    assert (b["runs"], b["n"], b["missing"], b["p50"]) == (3, 2, 1, 1.0)
    assert (b["p50_lo"], b["p50_hi"]) == (None, None)  # n = 2 < 6
    # tokens = input + output; a run with neither is null, one missing counts 0.
    # a: 11, 21, ..., 101 -> p50 = 56; b: null, 3, 7 -> n = 2, p50 = 5.
    assert rows[("a", "tokens")]["p50"] == 56.0
    assert (rows[("b", "tokens")]["n"], rows[("b", "tokens")]["p50"]) == (2, 5.0)


def test_tails_without_groups_keeps_metric_order_and_absent_metrics_are_null():
    runs = _runs().drop("duration_s")
    out = tails(runs)
    assert out.get_column("metric").to_list() == [
        "cost_usd", "tokens", "model_calls", "tool_calls", "duration_s",
    ]  # fmt: skip
    duration = out.filter(pl.col("metric") == "duration_s").row(0, named=True)
    assert (duration["runs"], duration["n"], duration["missing"], duration["p50"]) == (
        13, 0, 13, None,
    )  # fmt: skip
    # model_calls over all 13 runs: ten 1s, then 2, 2, 5 -> p50 = x[6] = 1;
    # p95: h = 12 * 0.95 = 11.4 -> x[11] + 0.4 (x[12] - x[11]) = 2 + 0.4 * 3
    calls = out.filter(pl.col("metric") == "model_calls").row(0, named=True)
    assert (calls["p50"], calls["p95"]) == (1.0, pytest.approx(3.2))
    # n = 13 for p50: P(B <= 2) = 0.0112 <= 0.025 < P(B <= 3) = 0.0461 -> ranks (3, 11): 1 and 2
    assert (calls["p50_lo"], calls["p50_hi"]) == (1.0, 2.0)


def test_tails_of_no_runs():
    out = tails(_runs().clear())
    assert out.height == 0
    assert "p99_hi" in out.columns


# --- groups -----------------------------------------------------------------------------------


def test_run_groups_aliases_lists_and_attributes():
    runs = _runs()
    groups, names = run_groups(runs, ["model", "service.version"])
    assert names == ["model", "service.version"]
    # r11 used m1 and m2 (counted in both), r12 none (null group), r13 m2.
    assert groups.filter(pl.col("run_id").is_in(["r11", "r12", "r13"])).rows() == [
        ("r11", "m1", "1.0"),
        ("r11", "m2", "1.0"),
        ("r12", None, "1.0"),
        ("r13", "m2", "1.0"),
    ]
    twice = pl.DataFrame({"run_id": ["a", "b", "c"], "models": [["m2", "m1", "m2"], [], ["m1"]]})
    assert run_groups(twice, "model")[0].rows() == [
        ("a", "m2"),
        ("a", "m1"),
        ("b", None),
        ("c", "m1"),
    ]
    case_type, _ = run_groups(runs, "app.case_type")
    assert case_type.get_column("app.case_type").to_list() == ["kyc"] * 12 + [None]
    with pytest.raises(ValueError, match="no column or attribute"):
        run_groups(runs.drop("attributes"), "app.case_type")


# --- rates ------------------------------------------------------------------------------------

# Rule A applied to r1..r5: r1 checked (2 findings), r2 checked (none), r3 unverifiable but with a
# finding (so judged), r4 partial with a finding, r5 error. Rule B (pack q) applied to r1, r2.
COVERAGE = _coverage(
    [
        ("r1", "p", "A", "checked"),
        ("r2", "p", "A", "checked"),
        ("r3", "p", "A", "unverifiable"),
        ("r4", "p", "A", "partial"),
        ("r5", "p", "A", "error"),
        ("r1", "q", "B", "checked"),
        ("r2", "q", "B", "not_applicable"),
    ]
)
FINDINGS = _findings(
    [
        ("r1", "p", "A", "omission", "high", "t1"),
        ("r1", "p", "A", "premature_answer", "high", None),
        ("r3", "p", "A", "omission", "high", "t2"),
        ("r4", "p", "A", "omission", "high", "t1"),
        ("r1", "q", "B", "budget", "low", None),
    ]
)


def test_rule_rates():
    out = rule_rates(FINDINGS, COVERAGE)
    assert out.select("pack", "rule_id", "applied", "judged", "failed", "rate").rows() == [
        # judged: r1, r2, r3 (has a finding), r4 (partial); r5 (error) is not -> 3 / 4
        ("p", "A", 5, 4, 3, 0.75),
        # judged: r1 only (r2 not_applicable) -> 1 / 1
        ("q", "B", 2, 1, 1, 1.0),
    ]
    a = out.row(0, named=True)
    assert (a["rate_lo"], a["rate_hi"]) == pytest.approx(_wilson_by_hand(3, 4))
    assert out.row(1, named=True)["rate_hi"] == 1.0


def test_rule_rates_by_group_and_without_findings():
    runs = pl.DataFrame(
        {"run_id": ["r1", "r2", "r3", "r4", "r5"], "agent": ["x", "x", "y", "y", None]}
    )
    out = rule_rates(FINDINGS, COVERAGE, runs=runs, by="agent")
    assert out.select("agent", "pack", "rule_id", "judged", "failed").rows() == [
        ("x", "p", "A", 2, 1),
        ("x", "q", "B", 1, 1),
        ("y", "p", "A", 2, 2),
        (None, "p", "A", 0, 0),  # r5 errored: applied, never judged; null group last
    ]
    assert out.row(3, named=True)["rate"] is None  # 0 / 0
    empty = rule_rates(None, COVERAGE)
    assert empty.get_column("failed").to_list() == [0, 0]
    with pytest.raises(ValueError, match="needs the runs"):
        rule_rates(FINDINGS, COVERAGE, by="agent")


def test_kind_rates_with_declared_kinds():
    kinds = {("p", "A"): ("omission", "premature_answer", "no_answer"), ("q", "B"): ("budget",)}
    out = kind_rates(FINDINGS, COVERAGE, rule_kinds=kinds)
    assert out.select("kind", "judged", "failed", "rate").rows() == [
        ("budget", 1, 1, 1.0),
        ("no_answer", 4, 0, 0.0),  # declared, never found: a rate of 0 over A's judged runs
        ("omission", 4, 3, 0.75),  # r1, r3, r4
        ("premature_answer", 4, 1, 0.25),
    ]
    # Without the declaration only kinds found appear.
    assert kind_rates(FINDINGS, COVERAGE).get_column("kind").to_list() == [
        "budget", "omission", "premature_answer",
    ]  # fmt: skip


def test_omission_rates():
    coverage = _coverage(
        [
            ("r1", "p", "R", "checked"),
            ("r2", "p", "R", "checked"),
            ("r3", "p", "R", "checked"),  # no answer: not judged for omissions
            ("r4", "p", "R", "not_applicable"),
            ("r5", "p", "S", "checked"),  # another rule requiring t2 only
        ]
    )
    findings = _findings(
        [
            ("r1", "p", "R", "omission", "critical", "t1"),
            ("r3", "p", "R", "no_answer", "critical", None),
            ("r5", "p", "S", "omission", "critical", "t2"),
        ]
    )
    required = {("p", "R"): ["t1", "t2"], ("p", "S"): ["t2"]}
    out = omission_rates(findings, coverage, required=required)
    assert out.select("tool", "required_runs", "omitted_runs", "rate").rows() == [
        ("t1", 2, 1, 0.5),  # required in r1, r2; omitted in r1
        ("t2", 3, 1, pytest.approx(1 / 3)),  # required in r1, r2 (R) and r5 (S); omitted in r5
    ]
    t2 = out.row(1, named=True)
    assert (t2["rate_lo"], t2["rate_hi"]) == pytest.approx(_wilson_by_hand(1, 3))
    # Without the rule list only tools omitted at least once, over their rules' judged runs.
    inferred = omission_rates(findings, coverage)
    assert inferred.select("tool", "required_runs", "omitted_runs").rows() == [
        ("t1", 2, 1),
        ("t2", 1, 1),
    ]


def test_rule_coverage_and_content_coverage():
    out = rule_coverage(COVERAGE)
    assert out.drop("judged_rate_lo", "judged_rate_hi").rows() == [
        # pack, rule, applied, checked, partial, n/a, unverifiable, error, judged, rate
        ("p", "A", 5, 2, 1, 0, 1, 1, 3, 0.6),
        ("q", "B", 2, 1, 0, 1, 0, 0, 1, 0.5),
    ]
    content = content_coverage(_runs())
    # 13 runs: content recorded in r01..r09, r12, r13; not in r10 (False), r11 (null) -> 11 / 13.
    assert content.select("runs", "with_content").row(0) == (13, 11)
    assert content.row(0, named=True)["rate"] == pytest.approx(11 / 13)
    by_agent = content_coverage(_runs(), by="agent")
    assert by_agent.select("agent", "runs", "with_content").rows() == [("a", 10, 9), ("b", 3, 2)]
    assert content_coverage(_runs().clear()).select("runs", "with_content", "rate").row(0) == (
        0, 0, None,
    )  # fmt: skip


# --- outcomes, cost per correct run, scores ---------------------------------------------------

SCORE_FINDINGS = _findings(
    [
        ("r1", "p", "A", "omission", "high", "t1"),
        ("r1", "p", "A", "omission", "high", "t2"),
        ("r1", "p", "A", "omission", "high", "t3"),
        ("r1", "p", "B", "budget", "high", None),
        ("r2", "p", "A", "omission", "high", "t1"),
        ("r2", "p", "B", "budget", "high", None),
        ("r2", "p", "C", "forbidden_text", "critical", None),
        ("r3", "p", "A", "omission", "high", "t1"),
        ("r3", "p", "B", "budget", "high", None),
        ("r3", "p", "C", "forbidden_text", "critical", None),
        ("r3", "p", "D", "wrong_tool", "critical", None),
        ("r4", "p", "E", "retry", "low", None),
    ]
)


def test_run_scores():
    runs = pl.DataFrame({"run_id": ["r5", "r4", "r3", "r2", "r1"]})
    out = run_scores(runs, SCORE_FINDINGS, weights={("p", "A"): 30.0})
    assert out.rows() == [
        ("r1", 50.0, ["A", "B"]),  # A (3 findings, weight 30, once) + B (high: 20)
        ("r2", 10.0, ["A", "B", "C"]),  # 30 + 20 + 40 (critical)
        ("r3", 0.0, ["A", "B", "C", "D"]),  # 30 + 20 + 40 + 40 = 130 -> floor 0
        ("r4", 95.0, ["E"]),  # low: 5
        ("r5", 100.0, []),
    ]
    defaults = run_scores(runs, SCORE_FINDINGS)  # A weighs 20 as a high-severity rule
    assert defaults.get_column("score").to_list() == [60.0, 20.0, 0.0, 95.0, 100.0]


def test_run_outcomes():
    runs = pl.DataFrame(
        {
            "run_id": ["r1", "r2", "r3", "r4", "r5"],
            "cost_usd": [0.1, 0.2, 0.3, 0.4, None],
            "agent": ["x", "x", "x", "x", "y"],
        }
    )
    findings = SCORE_FINDINGS.filter(pl.col("run_id") != "r1")  # r2, r3 fail (high+), r4 low
    outcome = run_outcomes(runs, findings)
    assert outcome.rows() == [
        ("r1", 0, 0, True),
        ("r2", 3, 3, False),
        ("r3", 4, 4, False),
        ("r4", 1, 0, True),  # a low finding does not fail the run
        ("r5", 0, 0, True),
    ]
    # at_least="low": r4 fails too.
    assert run_outcomes(runs, findings, at_least="low").get_column("passed").to_list() == [
        True, False, False, False, True,
    ]  # fmt: skip
    with pytest.raises(ValueError, match="unknown severity"):
        run_outcomes(runs, findings, at_least="severe")


# --- pass^k -----------------------------------------------------------------------------------


def test_pass_hat_k_tau_bench():
    runs = pl.DataFrame(
        {
            "run_id": [f"r{i}" for i in range(1, 9)],
            "case_id": ["X", "X", "X", "X", "Y", "Y", "Z", None],
        }
    )
    # X: 4 trials, r2 fails -> c = 3. Y: 2 trials, both pass. Z: 1 trial that fails.
    # r8 has no case id: left out even though it fails.
    findings = _findings(
        [
            ("r2", "p", "A", "omission", "critical", "t"),
            ("r7", "p", "A", "omission", "high", "t"),
            ("r8", "p", "A", "omission", "high", "t"),
        ]
    )
    out = pass_hat_k(runs, findings, ks=[1, 2, 4, 8])
    assert out.columns == ["k", "cases", "trials", "pass_hat_k"]
    rows = out.rows()
    # k = 1: mean(3/4, 2/2, 0/1) = 0.583333
    assert rows[0] == (1, 3, 7, pytest.approx((0.75 + 1 + 0) / 3))
    # k = 2: X: C(3,2)/C(4,2) = 3/6; Y: C(2,2)/C(2,2) = 1; Z has 1 trial < 2 -> mean 0.75
    assert rows[1] == (2, 2, 6, pytest.approx(0.75))
    # k = 4: X only: C(3,4)/C(4,4) = 0
    assert rows[2] == (4, 1, 4, 0.0)
    assert rows[3] == (8, 0, 0, None)  # no case has 8 trials


def test_pass_hat_k_with_labels_and_groups():
    runs = pl.DataFrame(
        {
            "run_id": ["a1", "a2", "b1", "b2"],
            "case_id": ["X", "X", "X", "X"],
            "temperature": [0.0, 0.0, 0.7, 0.7],
        }
    )
    labels = pl.DataFrame({"run_id": ["a1", "a2", "b1", "b2"], "passed": [True, True, True, False]})
    out = pass_hat_k(runs, passed=labels, ks=[1, 2], by="temperature")
    assert out.rows() == [
        (0.0, 1, 1, 2, 1.0),
        (0.0, 2, 1, 2, 1.0),
        (0.7, 1, 1, 2, 0.5),  # C(1,1)/C(2,1)
        (0.7, 2, 1, 2, 0.0),  # C(1,2)/C(2,2) = 0
    ]
    with pytest.raises(ValueError):
        pass_hat_k(runs, passed=labels, ks=[0])


# --- breakdown --------------------------------------------------------------------------------


def test_breakdown_by_model_counts_a_multi_model_run_in_each_group():
    runs = _runs()
    findings = _findings(
        [
            ("r01", "p", "A", "omission", "critical", "t"),
            ("r11", "p", "B", "budget", "medium", None),
        ]
    )
    out = breakdown(runs, "model", findings=findings, metrics=["cost_usd"])
    assert out.columns == [
        "model", "runs", "passed_runs", "pass_rate", "pass_rate_lo", "pass_rate_hi",
        "runs_with_findings", "mean_score", "unpriced_runs", "total_cost_usd",
        "cost_per_correct_run", "cost_usd_p50", "cost_usd_p95",
    ]  # fmt: skip
    rows = {r["model"]: r for r in out.iter_rows(named=True)}
    assert list(rows) == ["m1", "m2", None]
    m1 = rows["m1"]  # r01..r10 and r11
    assert (m1["runs"], m1["passed_runs"], m1["runs_with_findings"]) == (11, 10, 2)
    # scores: r01 loses 40 (critical), r11 loses 10 (medium): (60 + 90 + 9 * 100) / 11
    assert m1["mean_score"] == pytest.approx(1050 / 11)
    # costs 1..10 and 0.5 -> total 55.5 over 10 correct runs
    assert (m1["unpriced_runs"], m1["total_cost_usd"]) == (0, 55.5)
    assert m1["cost_per_correct_run"] == pytest.approx(5.55)
    # p50 of 0.5, 1..10: sorted 0.5 1 2 ... 10, h = 5 -> 5.0
    assert m1["cost_usd_p50"] == 5.0
    assert (m1["pass_rate_lo"], m1["pass_rate_hi"]) == pytest.approx(_wilson_by_hand(10, 11))
    m2 = rows["m2"]  # r11 (0.5) and r13 (1.5)
    assert (m2["runs"], m2["total_cost_usd"], m2["cost_usd_p50"]) == (2, 2.0, 1.0)
    none = rows[None]  # r12: no model, no cost
    assert (none["runs"], none["unpriced_runs"], none["total_cost_usd"]) == (1, 1, None)


def test_breakdown_quantiles_are_those_of_tails():
    """breakdown's {metric}_p50/_p95 are the p50/p95 of `tails` for the same groups, for every
    default metric (tokens summed from its parts, a metric the runs lack all null)."""
    for runs, by in [
        (_runs(), "model"),
        (_runs(), ["temperature"]),
        (_runs().drop("duration_s"), "agent"),
    ]:
        out = breakdown(runs, by, findings=FINDINGS)
        keys = [by] if isinstance(by, str) else by
        tail = tails(runs, by=by, quantiles=(0.5, 0.95))
        for metric in TAIL_METRICS:
            want = tail.filter(pl.col("metric") == metric).select(
                *keys, pl.col("p50").alias(f"{metric}_p50"), pl.col("p95").alias(f"{metric}_p95")
            )
            got = out.select(*keys, f"{metric}_p50", f"{metric}_p95")
            assert got.sort(keys, nulls_last=True).equals(want.sort(keys, nulls_last=True))


def test_breakdowns_from_the_per_run_figures_computed_once():
    """What the summary does (`breakdown_runs` once, then every breakdown from it) gives the
    rows each breakdown computes on its own: list groups exploded, weights and threshold
    applied."""
    runs = _runs()
    findings = _findings(
        [
            ("r01", "p", "A", "omission", "critical", "t"),
            ("r11", "p", "B", "budget", "medium", None),
            ("r03", "p", "C", "budget", "low", None),
        ]
    )
    weights = {("p", "B"): 25.0}
    per_run = breakdown_runs(runs, findings=findings, weights=weights, at_least="medium")
    assert per_run.height == runs.height
    for by in ("model", ["temperature"], "agent", ["agent", "model"]):
        alone = breakdown(runs, by, findings=findings, weights=weights, at_least="medium")
        assert breakdown(runs, by, per_run=per_run).equals(alone)
        # per_run in the order of the runs is put beside them; in another order, joined
        assert breakdown(runs, by, per_run=per_run.reverse()).equals(alone)
        assert not alone.equals(breakdown(runs, by, findings=findings))  # the options count


def test_outputs_are_deterministic():
    runs = _runs()
    shuffled = runs.sample(fraction=1.0, shuffle=True, seed=7)
    assert tails(runs, by="agent").equals(tails(shuffled, by="agent"))
    assert breakdown(runs, ["temperature"], findings=FINDINGS).equals(
        breakdown(shuffled, ["temperature"], findings=FINDINGS)
    )
    assert rule_rates(FINDINGS, COVERAGE).equals(rule_rates(FINDINGS.reverse(), COVERAGE.reverse()))


def test_ordered_sums_and_means_do_not_depend_on_row_order():
    """The float totals and means of the figures (cost per group, mean score, pass^k, lost
    points) are `ordered_sum` and `ordered_mean`: the same bits for any order of the rows. A
    plain group-by sum of these costs (spread over nine orders of magnitude, so that every
    order of addition rounds differently) changes with the order of the rows."""
    draw = random.Random(0)
    n = 50_000
    frame = pl.DataFrame(
        {
            "g": [f"a{i % 5}" for i in range(n)],
            "c": [draw.random() * 10.0 ** draw.randrange(-6, 3) for _ in range(n)],
        }
    )

    def figures(rows: pl.DataFrame) -> list:
        out = rows.group_by("g").agg(s=ordered_sum("c"), m=ordered_mean("c")).sort("g")
        return [*out.get_column("s"), *out.get_column("m")]

    reference = figures(frame)
    assert reference[0] == pytest.approx(frame.filter(pl.col("g") == "a0")["c"].sum())
    for seed in range(4):
        assert figures(frame.sample(fraction=1.0, shuffle=True, seed=seed)) == reference


# --- routing pick -----------------------------------------------------------------------------


def family_row(group, runs, passed, cost, lo=0.5, hi=1.0, **labels):
    return {
        "group": group,
        "runs": runs,
        "passed_runs": passed,
        "pass_rate": passed / runs,
        "pass_rate_lo": lo,
        "pass_rate_hi": hi,
        "total_cost_usd": None if cost is None else cost * runs,
        **labels,
    }


def test_routing_says_why_it_picks_nothing():
    from analyzer.metrics.stats import routing

    few = [family_row("gpt-4.1", 9, 9, 0.01), family_row("gpt-4.1-mini", 4, 4, 0.001)]
    none = routing(few, by_labels=False)
    assert none["pick"] is None
    assert none["reason"] == "no model family has 10 judged runs or more with a known cost"
    assert [f["not_eligible_because"] for f in none["families"]] == [
        "9 judged runs, fewer than 10",
        "4 judged runs, fewer than 10",
    ]
    one = routing([*few, family_row("o3", 30, 20, 0.1)], by_labels=False)
    assert one["pick"] is None and one["reason"].startswith("only o3 has 10 judged runs")
    # the minimum is a setting: with 4, the cheap family is picked (its interval reaches 1.0)
    assert routing(few, min_runs=4, by_labels=False)["pick"] == "gpt-4.1-mini"
    unpriced = routing(
        [family_row("a", 20, 20, None), family_row(None, 20, 20, 0.1)], by_labels=False
    )
    assert [f["not_eligible_because"] for f in unpriced["families"]] == [
        "cost unknown (unpriced runs)",
        "no model recorded",
    ]


def test_routing_judges_by_labels_when_given():
    from analyzer.metrics.stats import routing

    rows = [
        # by findings the cheap family is perfect; by its labels it is mostly wrong
        family_row(
            "cheap", 20, 20, 0.001, label_runs=20, label_correct_runs=5,
            label_correct_rate=0.25, label_correct_rate_lo=0.11, label_correct_rate_hi=0.47,
        ),
        family_row(
            "dear", 20, 15, 0.01, label_runs=12, label_correct_runs=12,
            label_correct_rate=1.0, label_correct_rate_lo=0.76, label_correct_rate_hi=1.0,
        ),
    ]  # fmt: skip
    assert routing(rows, by_labels=False)["pick"] == "cheap"
    by_labels = routing(rows, by_labels=True)
    assert by_labels["pick"] == "dear" and by_labels["correct_by"] == "labels"
    assert [(f["judged_runs"], f["correct_runs"]) for f in by_labels["families"]] == [
        (20, 5),
        (12, 12),
    ]


def test_model_family_groups_snapshots():
    from analyzer.pricing import model_family

    names = {
        "gpt-4.1-2025-04-14": "gpt-4.1",
        "gpt-4.1": "gpt-4.1",
        "gpt-4o-mini-2024-07-18": "gpt-4o-mini",
        "anthropic.claude-3-5-sonnet-20241022-v2:0": "anthropic.claude-3-5-sonnet",
        "claude-3-opus@20240229": "claude-3-opus",
        "gpt-4-0613": "gpt-4",
        "gemini-1.5-pro-002": "gemini-1.5-pro",
        "gpt-3.5-turbo-latest": "gpt-3.5-turbo",
        # near misses: sizes and versions that are part of the family's name
        "llama-3.1-405b": "llama-3.1-405b",
        "gpt-4.1-mini": "gpt-4.1-mini",
        "o1": "o1",
    }
    got = pl.DataFrame({"n": list(names)}).select(model_family(pl.col("n"))).to_series()
    assert got.to_list() == list(names.values())
