"""agenttrace diff: intervals, pairing and every headline delta on before/after sample sets."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from diff_sets import cheaper_model, copy_baseline, drop_screening

from analyzer.cli import main
from analyzer.metrics.compare import compare
from analyzer.metrics.intervals import (
    bootstrap_intervals,
    excludes_zero,
    newcombe_independent,
    newcombe_paired,
    weighted_mean,
    weighted_quantile,
    weighted_ratio,
)
from analyzer.metrics.stats import quantile
from analyzer.pack import load_packs
from analyzer.render.diff import render_html, render_json, render_markdown, render_table
from analyzer.sides import load_side

ROOT = Path(__file__).resolve().parent.parent
KYC_PACK = ROOT / "rules" / "kyc.yaml"
GOLDEN = Path(__file__).resolve().parent / "data" / "diff"

# The four clean KYC runs whose screening the "after" prompt drops.
DROPPED = {
    "99d85dea74a2af2495957cd7c66339ae": "KYC-2026-0001",
    "0be5cd35bd6a796515e40d26493d98a1": "KYC-2026-0002",
    "7004a3dc334d12750f49de7eae785e46": "KYC-2026-0003",
    "7f6583b6a2a16a3d669154c43378b8d4": "KYC-2026-0005",
}

# A gate the cheaper model passes and the dropped screening breaks.
LENIENT_GATE = """\
omission_rate: {max_increase: 0.0}
cost_p95_usd: {max_increase_pct: 10}
score: {max_decrease: 0, no_regression_on: [automatic]}
"""
# The protocol: "+8 points or it does not count, and nothing automatic gets worse".
PROTOCOL_GATE = """\
omission_rate: {max_increase: 0.0}
cost_p95_usd: {max_increase_pct: 10}
score: {min_gain: 8, no_regression_on: [automatic]}
"""


@pytest.fixture(scope="module")
def sets(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("diffsets")
    copy_baseline(root / "base")
    drop_screening(root / "drop", set(DROPPED))
    cheaper_model(root / "cheap")
    (root / "lenient.yaml").write_text(LENIENT_GATE, encoding="utf-8")
    (root / "protocol.yaml").write_text(PROTOCOL_GATE, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def sides(sets):
    packs = load_packs([KYC_PACK])
    return {name: load_side(sets / name, packs=packs) for name in ("base", "drop", "cheap")}


def row(diff, metric, key=None):
    found = [m for m in diff.metrics if m.metric == metric and m.key == key]
    assert len(found) == 1, (metric, key, [(m.metric, m.key) for m in diff.metrics])
    return found[0]


# --- intervals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counts", "lo", "hi"),
    [
        # Newcombe (1998), independent proportions, Table II, method 10 (examples a to d).
        ((56, 70, 48, 80), 0.0524, 0.3339),
        ((9, 10, 3, 10), 0.1705, 0.8090),
        ((6, 7, 2, 7), 0.0582, 0.8062),
        ((5, 56, 0, 29), -0.0381, 0.1926),
    ],
)
def test_newcombe_independent_matches_the_paper(counts, lo, hi):
    k1, n1, k2, n2 = counts
    iv = newcombe_independent(k1, n1, k2, n2)
    assert iv.delta == pytest.approx(k1 / n1 - k2 / n2, abs=1e-12)
    assert iv.lo == pytest.approx(lo, abs=5e-5)
    assert iv.hi == pytest.approx(hi, abs=5e-5)


def test_newcombe_independent_worked_by_hand():
    # 56/70 vs 48/80: Wilson(56, 70) = [0.6895, 0.8769], Wilson(48, 80) = [0.4904, 0.7027];
    # L = 0.2 - sqrt((0.8 - 0.6895)^2 + (0.7027 - 0.6)^2) = 0.2 - 0.1476 = 0.0524,
    # U = 0.2 + sqrt((0.8769 - 0.8)^2 + (0.6 - 0.4904)^2) = 0.2 + 0.1339 = 0.3339.
    iv = newcombe_independent(56, 70, 48, 80)
    assert (round(iv.delta, 4), round(iv.lo, 4), round(iv.hi, 4)) == (0.2, 0.0524, 0.3339)
    assert newcombe_independent(1, 0, 1, 1).delta is None


@pytest.mark.parametrize(
    ("table", "delta", "lo", "hi"),
    [
        # Newcombe (1998), paired data, method 10 (examples a, b and d of the paper).
        ((36, 12, 2, 0), 0.2, 0.0569, 0.3404),
        ((263, 3, 1, 13), 0.0071, -0.0116, 0.0277),
        ((6, 0, 0, 0), 0.0, -0.3903, 0.3903),
    ],
)
def test_newcombe_paired_matches_the_paper(table, delta, lo, hi):
    iv = newcombe_paired(*table)
    assert (round(iv.delta, 4), round(iv.lo, 4), round(iv.hi, 4)) == (delta, lo, hi)


def test_newcombe_paired_phi_correction():
    # (3, 4, 0, 8): ad - bc = 24 > n/2 = 7.5, so phi = (24 - 7.5) / sqrt(7 * 8 * 3 * 12)
    # = 16.5 / 44.900 = 0.3675; the interval is narrower than with phi = 0.
    iv = newcombe_paired(3, 4, 0, 8)
    assert iv.delta == pytest.approx(4 / 15)
    assert iv.lo == pytest.approx(0.000686520, abs=1e-8)
    assert iv.hi == pytest.approx(0.487064866, abs=1e-8)
    # Near miss: (2, 0, 0, 13) has no discordant pair but is no proof of equality.
    same = newcombe_paired(2, 0, 0, 13)
    assert (same.delta, round(same.lo, 6), round(same.hi, 6)) == (0.0, -0.189596, 0.189596)
    assert newcombe_paired(0, 0, 0, 0).delta is None
    with pytest.raises(ValueError):
        newcombe_paired(1, -1, 0, 0)


def test_excludes_zero():
    assert excludes_zero(0.001, 0.2) is True
    assert excludes_zero(-0.3, -0.01) is True
    assert excludes_zero(0.0, 0.2) is False  # touching zero does not exclude it
    assert excludes_zero(-0.1, 0.1) is False
    assert excludes_zero(None, 0.1) is None


def test_weighted_statistics_equal_the_expanded_sample():
    values = np.array([3.0, 1.0, 10.0, 2.0])
    weights = np.array([[2.0, 1.0, 1.0, 0.0]])  # the sample 3, 3, 1, 10
    # sorted 1, 3, 3, 10: p50 at h = 1.5 -> 3; p95 at h = 2.85 -> 3 + 0.85 * 7 = 8.95
    assert weighted_quantile(0.5)(values, weights)[0] == pytest.approx(3.0)
    assert weighted_quantile(0.95)(values, weights)[0] == pytest.approx(8.95)
    assert weighted_quantile(0.95)(values, weights)[0] == pytest.approx(
        quantile([3, 3, 1, 10], 0.95)
    )
    assert weighted_mean(values, weights)[0] == pytest.approx(17 / 4)
    pairs = np.array([[1.0, 1.0], [2.0, 0.0], [np.nan, 1.0], [4.0, 1.0]])
    # cost 1 + 2 + 2 + ... over passed: weights pick rows 0, 0, 1 -> (1 + 1 + 2) / (1 + 1 + 0)
    assert weighted_ratio(pairs, np.array([[2.0, 1.0, 0.0, 0.0]]))[0] == pytest.approx(2.0)
    # an unknown cost drawn makes the total unknown; no passed run drawn: undefined
    assert math.isnan(weighted_ratio(pairs, np.array([[1.0, 0.0, 1.0, 0.0]]))[0])
    assert math.isnan(weighted_ratio(pairs, np.array([[0.0, 3.0, 0.0, 0.0]]))[0])


def test_weighted_quantile_agrees_with_metrics_quantile():
    # 300 random small samples with repeats and unknown values, every row a resample
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(1, 12))
        values = rng.integers(0, 20, size=n).astype(float)
        if rng.random() < 0.2:
            values[rng.integers(0, n)] = np.nan
        weights = rng.integers(0, 4, size=(5, n)).astype(float)
        for q in (0.0, 0.3, 0.5, 0.95, 1.0):
            got = weighted_quantile(q)(values, weights)
            for r in range(5):
                sample = [v for v, c in zip(values, weights[r], strict=True) for _ in range(int(c))]
                want = quantile([v for v in sample if not math.isnan(v)], q)
                if want is None:
                    assert math.isnan(got[r])
                else:
                    assert got[r] == pytest.approx(want, abs=1e-9)


def bootstrap_interval(stat, baseline, candidate, **options):
    return bootstrap_intervals([(stat, baseline, candidate)], **options)[0]


def test_bootstrap_of_a_constant_shift_is_exact():
    base = np.array([10.0, 20.0, 30.0, 40.0, 50.0])
    units = np.arange(5)
    # every pair gains exactly 7: every paired resample's delta is 7
    lo, hi = bootstrap_interval(
        weighted_mean, (base, units), (base + 7, units), units=(5, 5), paired=True
    )
    assert (lo, hi) == (7.0, 7.0)
    # the same values as two samples: resampled apart, the interval straddles the shift
    lo2, hi2 = bootstrap_interval(
        weighted_mean, (base, units), (base + 7, units), units=(5, 5), paired=False
    )
    assert lo2 < 7 < hi2
    again = bootstrap_interval(
        weighted_mean, (base, units), (base + 7, units), units=(5, 5), paired=False
    )
    assert again == (lo2, hi2)  # fixed seed


# --- before / after on the KYC sample ------------------------------------------------------------


def test_dropped_screening(sides):
    diff = compare(sides["base"], sides["drop"])
    assert diff.pairing["mode"] == "paired"
    assert diff.pairing["cases"] == 16 and diff.pairing["one_run_per_case"] is True
    assert diff.config_changes == ["config_hashes", "agents"]
    assert diff.baseline["agents"] == ["kyc-reviewer 2.3.0"]
    assert diff.candidate["agents"] == ["kyc-reviewer 2.4.0"]

    # screen_sanctions judged in 15 runs (KYC-2026-0013 has no answer): omitted in 0004, 0006,
    # 0009 before, plus the 4 dropped after. Pairs: 3 both, 4 after only, 0 before only, 8 none.
    screen = row(diff, "omission_rate", "screen_sanctions")
    assert screen.counts == (3, 15, 7, 15)
    assert (screen.baseline, screen.candidate) == (0.2, pytest.approx(7 / 15))
    assert screen.delta == pytest.approx(4 / 15)
    assert (screen.lo, screen.hi) == (
        pytest.approx(0.000686520, abs=1e-8),
        pytest.approx(0.487064866, abs=1e-8),
    )
    assert screen.excludes_zero and screen.change == "worse"
    assert screen.method.startswith("Newcombe paired")
    owners = row(diff, "omission_rate", "lookup_beneficial_owners")
    assert owners.counts == (2, 15, 2, 15) and owners.delta == 0.0
    assert owners.change == "no significant change"

    # kinds over the 16 runs the required-tools rule judged
    assert row(diff, "kind_rate", "omission").counts == (4, 16, 8, 16)
    assert row(diff, "kind_rate", "omission").lo == pytest.approx(0.001520255, abs=1e-8)
    premature = row(diff, "kind_rate", "premature_answer")
    assert premature.counts == (3, 16, 7, 16)
    # near miss: +25 points, yet the interval (3, 4, 0, 9) reaches below zero
    assert premature.lo == pytest.approx(-0.001179316, abs=1e-8)
    assert premature.change == "no significant change"
    assert row(diff, "rule_rate", "kyc-required-checks").counts == (5, 16, 9, 16)
    assert row(diff, "rule_rate", "no-retries").delta == 0.0

    # pass^1: 10 of 16 runs free of critical/high findings, then 6
    p1 = row(diff, "pass_hat_k", "1")
    assert (p1.baseline, p1.candidate, p1.delta) == (0.625, 0.375, -0.25)
    assert [m.key for m in diff.rows("pass_hat_k")] == ["1"]  # one run per case: no pass^2

    # score: weights 40 (required), 25 (grounded), 10 (arguments), 5 (retries); before, 5 runs
    # lose 40, one 25, one 10, two 5: (1600 - 245) / 16; after, 4 more lose 40.
    score = row(diff, "score")
    assert (score.baseline, score.candidate, score.delta) == (84.6875, 74.6875, -10.0)
    # Every paired resample's delta is -40 m / 16 with m ~ Binomial(16, 1/4) dropped runs drawn:
    # its 2.5 % and 97.5 % points are m = 8 and m = 1.
    assert (score.lo, score.hi) == (-20.0, -2.5)
    assert score.change == "worse"

    # same tokens, same cost per run; cost per correct run: same total over 6 passed, not 10
    for name in ("cost_p50_usd", "cost_p95_usd", "tokens", "model_calls"):
        r = row(diff, name)
        assert (r.delta, r.lo, r.hi, r.change) == (0.0, 0.0, 0.0, "no significant change")
    cpc = row(diff, "cost_per_correct_run_usd")
    assert cpc.candidate == pytest.approx(cpc.baseline * 10 / 6, rel=1e-9)
    assert cpc.baseline == pytest.approx(0.0752328 / 10, rel=1e-9)
    assert cpc.change == "worse"


def _mini_cost(inp: int, out: int, cached: int) -> float:
    return ((inp - cached) * 0.40 + cached * 0.10 + out * 1.60) / 1e6


def test_cheaper_model_same_answers(sides):
    diff = compare(sides["base"], sides["cheap"])
    assert diff.config_changes == ["config_hashes", "models"]
    assert "gpt-4.1-mini" in diff.candidate["models"]
    assert "gpt-4.1-2025-04-14" not in diff.candidate["models"]
    for r in diff.metrics:
        if r.metric.startswith("cost"):
            continue
        assert r.delta == 0.0 and r.change == "no significant change", r
    # every candidate run costs its tokens at gpt-4.1-mini prices (0.40 / 0.10 / 1.60 per M)
    runs = sides["cheap"].runs
    expected = sorted(
        _mini_cost(i, o, c)
        for i, o, c in runs.select("input_tokens", "output_tokens", "cached_input_tokens").rows()
    )
    p50, p95 = row(diff, "cost_p50_usd"), row(diff, "cost_p95_usd")
    # 16 runs: p50 = mean of the 8th and 9th; p95 at h = 14.25
    assert p50.candidate == pytest.approx((expected[7] + expected[8]) / 2, abs=1e-12)
    assert p95.candidate == pytest.approx(expected[14] + 0.25 * (expected[15] - expected[14]))
    assert (p50.baseline, p50.candidate) == (0.004871, 0.000983)
    assert (p95.baseline, p95.candidate) == (0.0053585, 0.0010726)
    for r in (p50, p95, row(diff, "cost_per_correct_run_usd")):
        assert r.delta < 0 and r.hi < 0 and r.change == "better"
    # pure gpt-4.1 runs cost exactly a fifth (2.00/0.50/8.00 -> 0.40/0.10/1.60)
    base_cost = dict(sides["base"].runs.select("case_id", "cost_usd").rows())
    cheap_cost = dict(runs.select("case_id", "cost_usd").rows())
    assert cheap_cost["KYC-2026-0001"] == pytest.approx(base_cost["KYC-2026-0001"] / 5)
    assert cheap_cost["KYC-2026-0005"] != pytest.approx(base_cost["KYC-2026-0005"] / 5)


def test_labels_all_fields_correct(sets):
    from analyzer.metrics.labels import load_labels

    packs = load_packs([KYC_PACK])
    labels = load_labels(ROOT / "rules" / "kyc-labels.jsonl")
    base = load_side(sets / "base", packs=packs, labels=labels)
    cheap = load_side(sets / "cheap", packs=packs, labels=labels)
    diff = compare(base, cheap)
    assert diff.correct_by == "labels"
    # 16 labelled runs; wrong: KYC-2026-0004 and -0008 (decision), -0013 (no answer); the
    # cheaper model gives the same answers: pairs (13 both, 0, 0, 3 neither)
    afc = row(diff, "all_fields_correct")
    assert afc.counts == (13, 16, 13, 16) and afc.delta == 0.0
    assert (round(afc.lo, 6), round(afc.hi, 6)) == (-0.163532, 0.163532)
    assert afc.change == "no significant change"
    # correct = all fields right: pass^1 13/16; cost per correct run over the 13
    assert row(diff, "pass_hat_k", "1").baseline == 13 / 16
    total = sum(base.runs.get_column("cost_usd").to_list())
    assert row(diff, "cost_per_correct_run_usd").baseline == pytest.approx(total / 13)


def test_tool_definition_change_is_named(sets, sides, tmp_path):
    from diff_sets import rewrite

    def edit(span):
        for attr in span["attributes"]:
            if attr["key"] == "gen_ai.tool.definitions":
                text = attr["value"]["stringValue"]
                attr["value"] = {"stringValue": text.replace("sanctions lists", "sanction lists")}
        return span

    packs = load_packs([KYC_PACK])
    changed = load_side(rewrite(tmp_path / "tooldefs", edit), packs=packs)
    diff = compare(sides["base"], changed)
    # same tool names, another description: the definitions' digest and the config hash move
    assert diff.config_changes == ["config_hashes", "tool_definitions_sha256"]
    assert diff.baseline["tools"] == diff.candidate["tools"]


def test_nothing_changed(sides, sets):
    diff = compare(sides["base"], sides["base"])
    assert diff.config_changes == []
    assert all(r.delta == 0.0 for r in diff.metrics)
    assert all(r.change == "no significant change" for r in diff.metrics)
    result = CliRunner().invoke(
        main, ["diff", str(sets / "base"), str(sets / "base"), "--rules", str(KYC_PACK)]
    )
    assert result.exit_code == 0, result.output
    table = result.output.split("CHANGE: ")[0]
    assert "WORSE" not in table and "better" not in table
    gated = CliRunner().invoke(
        main,
        [
            "diff",
            str(sets / "base"),
            str(sets / "base"),
            "--rules",
            str(KYC_PACK),
            "--gate",
            str(sets / "lenient.yaml"),
        ],
    )
    assert gated.exit_code == 0, gated.output
    assert "GATE PASSED: 0 of 8 limits broken" in gated.output


def test_two_samples_without_case_ids(sets):
    packs = load_packs([KYC_PACK])
    base = load_side(sets / "base", packs=packs, case_key="app.no_such_key")
    drop = load_side(sets / "drop", packs=packs, case_key="app.no_such_key")
    diff = compare(base, drop)
    assert diff.pairing["mode"] == "two samples"
    screen = row(diff, "omission_rate", "screen_sanctions")
    # independent: 7/15 vs 3/15 -> Newcombe method 10 = [-0.0668, 0.5325]: not significant
    assert screen.counts == (3, 15, 7, 15)
    assert (round(screen.lo, 4), round(screen.hi, 4)) == (-0.0668, 0.5325)
    assert screen.change == "no significant change"
    assert screen.method.startswith("Newcombe hybrid score")
    assert diff.rows("pass_hat_k") == []  # no case, no pass^k
    assert row(diff, "score").method == "bootstrap, two samples"


def test_several_runs_per_case_use_the_case_bootstrap(sides):
    base = sides["base"]
    # Two trials per case: the same 16 runs twice under other run ids.
    twice = pl.concat([base.runs, base.runs.with_columns(pl.col("run_id") + "-b")])
    findings = pl.concat([base.findings, base.findings.with_columns(pl.col("run_id") + "-b")])
    coverage = pl.concat([base.coverage, base.coverage.with_columns(pl.col("run_id") + "-b")])
    doubled = type(base)(
        **{**base.__dict__, "runs": twice, "findings": findings, "coverage": coverage}
    )
    diff = compare(doubled, base)
    assert diff.pairing["one_run_per_case"] is False
    screen = row(diff, "omission_rate", "screen_sanctions")
    assert screen.method == "paired bootstrap over cases"
    assert screen.counts == (6, 30, 3, 15)
    # each case's runs are identical, so every resample has the same rate on both sides
    assert (screen.delta, screen.lo, screen.hi) == (0.0, 0.0, 0.0)
    p2 = row(diff, "pass_hat_k", "2")  # only the doubled side has cases of 2 trials
    assert p2.baseline == 0.625 and p2.candidate is None and p2.delta is None


def _keep(side, runs):
    ids = runs.select("run_id")
    return type(side)(
        **{
            **side.__dict__,
            "runs": runs,
            "findings": side.findings.join(ids, on="run_id", how="semi"),
            "coverage": side.coverage.join(ids, on="run_id", how="semi"),
        }
    )


def test_cases_on_one_side_are_left_out_and_missing_case_ids_unpair(sides):
    base, drop = sides["base"], sides["drop"]
    # the candidate lost the last 4 dossiers (0013 to 0016): 12 cases paired, 4 runs left out
    fewer = _keep(drop, drop.runs.filter(pl.col("case_id") < "KYC-2026-0013"))
    diff = compare(base, fewer)
    assert diff.pairing["cases"] == 12
    assert diff.pairing["runs_left_out"] == {"baseline": 4, "candidate": 0}
    assert diff.pairing["runs_compared"] == {"baseline": 12, "candidate": 12}
    # without 0013 (no answer), screen_sanctions is judged in all 12 pairs: 3 -> 7 omitted
    assert row(diff, "omission_rate", "screen_sanctions").counts == (3, 12, 7, 12)
    assert "left out: 4 + 0 runs (case on one side)" in "\n".join(render_table(diff))
    # one run without a case id: both sides compared whole, as two samples
    blank = _keep(
        drop,
        drop.runs.with_columns(
            case_id=pl.when(pl.col("case_id") == "KYC-2026-0016").then(None).otherwise("case_id")
        ),
    )
    unpaired = compare(base, blank)
    assert unpaired.pairing["mode"] == "two samples"
    assert unpaired.pairing["runs_compared"] == {"baseline": 16, "candidate": 16}
    assert row(unpaired, "omission_rate", "screen_sanctions").counts == (3, 15, 7, 15)


def test_report_folders_keep_their_label_results(sets, tmp_path):
    """Two folders written by `report --labels --out` diff by their labels with no --labels;
    the same figures as scoring both sides again."""
    from analyzer.metrics.labels import load_labels

    labels_file = ROOT / "rules" / "kyc-labels.jsonl"
    folders = {}
    for name in ("base", "cheap"):
        out = tmp_path / name
        result = CliRunner().invoke(
            main,
            [
                "report",
                str(sets / name),
                "--rules",
                str(KYC_PACK),
                "--labels",
                str(labels_file),
                "--out",
                str(out),
            ],
        )
        assert result.exit_code == 0, result.output
        assert json.loads((out / "manifest.json").read_text())["labels"]["path"] == str(labels_file)
        folders[name] = out
    from_folders = compare(load_side(folders["base"]), load_side(folders["cheap"]))
    assert from_folders.correct_by == "labels"
    packs = load_packs([KYC_PACK])
    labels = load_labels(labels_file)
    rescored = compare(
        load_side(sets / "base", packs=packs, labels=labels),
        load_side(sets / "cheap", packs=packs, labels=labels),
    )
    assert [m.as_dict() for m in from_folders.metrics] == [m.as_dict() for m in rescored.metrics]
    # a folder with label results against one without: said, not silently judged by findings
    plain = tmp_path / "plain"
    CliRunner().invoke(
        main, ["report", str(sets / "cheap"), "--rules", str(KYC_PACK), "--out", str(plain)]
    )
    mixed = CliRunner().invoke(main, ["diff", str(folders["base"]), str(plain)])
    assert mixed.exit_code == 2
    assert f"labels on one side only: {plain} has no label results" in mixed.output
    # folders scored with different labels files are not compared by them
    other = tmp_path / "other-labels.jsonl"
    other.write_text(labels_file.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    relabelled = tmp_path / "relabelled"
    args = ["--rules", str(KYC_PACK), "--labels", str(other), "--out", str(relabelled)]
    CliRunner().invoke(main, ["report", str(sets / "cheap"), *args])
    differ = CliRunner().invoke(main, ["diff", str(folders["base"]), str(relabelled)])
    assert differ.exit_code == 2 and "scored with different labels files" in differ.output
    # --labels scores both again, whatever the folders hold
    again = CliRunner().invoke(
        main, ["diff", str(folders["base"]), str(relabelled), "--labels", str(labels_file)]
    )
    assert again.exit_code == 0, again.output


def test_report_folder_side(sets, sides, tmp_path):
    out = tmp_path / "rep"
    result = CliRunner().invoke(
        main, ["report", str(sets / "base"), "--rules", str(KYC_PACK), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert (out / "coverage.parquet").is_file()
    side = load_side(out)
    assert side.kind == "report"
    from_report = compare(side, sides["drop"])
    from_traces = compare(sides["base"], sides["drop"])
    strip = lambda d: [{k: v for k, v in m.as_dict().items()} for m in d.metrics]  # noqa: E731
    assert strip(from_report) == strip(from_traces)
    assert from_report.baseline["kind"] == "report"
    (out / "coverage.parquet").unlink()
    bad = CliRunner().invoke(main, ["diff", str(out), str(sets / "drop")])
    assert bad.exit_code == 2 and "coverage.parquet" in bad.output


# --- outputs -------------------------------------------------------------------------------------


def _cli_in(sets: Path, monkeypatch, *args: str):
    monkeypatch.chdir(sets)
    return CliRunner().invoke(main, ["diff", *args, "--rules", str(KYC_PACK)])


def test_markdown_golden(sets, monkeypatch):
    result = _cli_in(
        sets, monkeypatch, "base", "drop", "--gate", "protocol.yaml", "--format", "markdown"
    )
    assert result.exit_code == 1
    golden = GOLDEN / "drop_screening.md"
    if os.environ.get("AGENTTRACE_UPDATE_GOLDEN"):
        golden.write_text(result.output, encoding="utf-8")
    assert result.output == golden.read_text(encoding="utf-8")


def test_gate_verdicts_and_exit_codes(sets, monkeypatch):
    drop = _cli_in(sets, monkeypatch, "base", "drop", "--gate", "lenient.yaml")
    assert drop.exit_code == 1
    lines = drop.output.splitlines()
    gate_at = lines.index("GATE FAILED: 3 of 8 limits broken")
    # broken limits first
    assert [line.split()[0] for line in lines[gate_at + 1 : gate_at + 9]] == ["BROKEN"] * 3 + [
        "ok"
    ] * 5
    assert "omission_rate[screen_sanctions]" in lines[gate_at + 1]
    cheap = _cli_in(sets, monkeypatch, "base", "cheap", "--gate", "lenient.yaml")
    assert cheap.exit_code == 0, cheap.output
    assert "GATE PASSED" in cheap.output
    # under the +8 points protocol, an equal score does not count
    protocol = _cli_in(sets, monkeypatch, "base", "cheap", "--gate", "protocol.yaml")
    assert protocol.exit_code == 1
    assert "BROKEN score changed by +0; must change by at least +8" in protocol.output


def test_table_json_html(sets, monkeypatch, tmp_path):
    result = _cli_in(sets, monkeypatch, "base", "cheap", "--out", str(tmp_path / "o"))
    assert result.exit_code == 0
    assert all(len(line) <= 100 for line in result.output.splitlines())
    assert {p.name for p in (tmp_path / "o").iterdir()} == {"diff.json", "diff.md", "diff.html"}
    doc = json.loads((tmp_path / "o" / "diff.json").read_text(encoding="utf-8"))
    assert doc["diff_version"] == 1 and doc["gate"] is None
    assert doc["config_changes"] == ["config_hashes", "models"]
    p95 = next(m for m in doc["metrics"] if m["metric"] == "cost_p95_usd")
    assert p95["baseline"] == 0.0053585 and p95["excludes_zero"] is True
    assert p95["change"] == "better" and p95["method"] == "paired bootstrap over cases"
    html_out = _cli_in(sets, monkeypatch, "base", "cheap", "--format", "html").output
    assert html_out.startswith("<!DOCTYPE html>") and "<script" not in html_out


def test_hostile_text_is_escaped(sides):
    diff = compare(sides["base"], sides["cheap"])
    diff.baseline["source"] = "<script>alert(1)</script>\x1b[31m|x|"
    diff.candidate["agents"] = ["a|b`c*d"]
    page = render_html(diff)
    assert "<script>" not in page and "&lt;script&gt;" in page and "\x1b" not in page
    md = render_markdown(diff)
    assert "<script>" not in md and "\\|x\\|" in md and "a\\|b\\`c\\*d" in md
    assert all("\x1b" not in line and len(line) <= 100 for line in render_table(diff))
    assert json.loads(render_json(diff))["baseline"]["source"].startswith("<script>")


def test_json_escapes_control_and_bidi_characters(sides):
    diff = compare(sides["base"], sides["cheap"])
    hostile = "ok\u202eevil\u2066x\u2069\x85\x9b31m\u200f\u2028end"
    diff.baseline["source"] = hostile
    diff.candidate["agents"] = [hostile]
    text = render_json(diff)
    raw = [ch for ch in text if 0x80 <= ord(ch) <= 0x9F or 0x202A <= ord(ch) <= 0x202E]
    raw += [ch for ch in text if 0x2066 <= ord(ch) <= 0x2069 or ch in "\u200f\u2028"]
    assert raw == []
    assert "\\u202e" in text and "\\u0085" in text
    doc = json.loads(text)  # the same value, escaped
    assert doc["baseline"]["source"] == hostile and doc["candidate"]["agents"] == [hostile]


def test_markdown_is_clipped_to_64_kb_with_what_was_left_out(sides, monkeypatch):
    diff = compare(sides["base"], sides["cheap"])
    diff.metrics = diff.metrics * (8000 // len(diff.metrics) + 1)
    monkeypatch.setattr("analyzer.render.diff.clip_markdown", lambda text, **_: text, raising=False)
    whole = render_markdown(diff)
    monkeypatch.undo()
    assert len(whole.encode()) > 500_000
    md = render_markdown(diff)
    assert len(md.encode()) <= 65_536
    *kept, note = md.rstrip("\n").split("\n")
    found = re.fullmatch(
        r"\*\*Clipped\*\*: ([\d,]+) more lines \(([\d,]+) bytes\) left out to stay within 64 KB; "
        r"the whole diff: `--format json` or `--format html`\.",
        note,
    )
    assert found, note
    lines, size = (int(g.replace(",", "")) for g in found.groups())
    head = "\n".join(kept[:-1]) + "\n"  # the blank line before the note is not the diff's
    assert whole.startswith(head) and kept[-1] == ""
    assert lines == len(whole.splitlines()) - len(kept[:-1])
    assert size == len(whole.encode()) - len(head.encode())
    small = render_markdown(compare(sides["base"], sides["cheap"]))
    assert "Clipped" not in small and len(small.encode()) < 65_536


def test_markdown_leaves_no_live_mention_or_link(sides):
    diff = compare(sides["base"], sides["cheap"])
    diff.candidate["agents"] = ["@someone see https://evil.example/x, WWW.evil.example, a@b.io"]
    diff.baseline["source"] = "http://evil.example/y"
    md = render_markdown(diff)
    assert "@someone" not in md and "a@b.io" not in md
    assert "://" not in md and "www.evil" not in md.lower()
    # still reads the same: the marks are zero-width
    shown = md.replace("\u200d", "").replace("\u200b", "")
    assert "@someone see https://evil.example/x, WWW.evil.example, a@b.io" in shown
    assert "http://evil.example/y" in shown


def test_regressed_and_fixed_cases_are_listed(sides):
    """The four dossiers that stopped screening passed before and fail after: regressed one
    way, fixed the other; the cheaper model changes no verdict."""
    diff = compare(sides["base"], sides["drop"])
    assert [c["case_id"] for c in diff.cases["regressed"]] == sorted(DROPPED.values())
    assert diff.cases["fixed"] == []
    first = diff.cases["regressed"][0]
    assert first["baseline"] == {"passed": 1, "runs": 1, "findings": []}
    assert first["candidate"] == {
        "passed": 0,
        "runs": 1,
        "findings": ["kyc-required-checks: omission", "kyc-required-checks: premature_answer"],
    }
    back = compare(sides["drop"], sides["base"])
    swapped = [
        {"case_id": c["case_id"], "baseline": c["candidate"], "candidate": c["baseline"]}
        for c in diff.cases["regressed"]
    ]
    assert back.cases == {"regressed": [], "fixed": swapped}
    assert compare(sides["base"], sides["cheap"]).cases == {"regressed": [], "fixed": []}
    lines = render_table(diff)
    at = lines.index("REGRESSED CASES 4 (passed runs / judged runs):")
    assert lines[at + 1] == (  # clipped to the table's 100 columns
        "  KYC-2026-0001  1/1 -> 0/1  now: kyc-required-checks: omission, "
        "kyc-required-checks: premature_ans…"
    )
    assert json.loads(render_json(diff))["cases"] == diff.cases
