"""summary.json for the sample traces: every figure pinned against a value worked out by hand.

Inputs of the hand computation: `sample_traces/README.md` (which runs carry which planted
problem, hence which findings) and, per run, the token counts, call counts and durations the
traces record (table `RUNS`, checked against the reconstructed runs first, so a change in how
runs are rebuilt shows up there and not as a mystery in a percentile).

Methods (analyzer/metrics/stats.py): quantiles are type 7,
``Q(q) = x[h] + (h - floor h)(x[h+1] - x[h])`` with ``h = (n - 1) q`` on the sorted values
(0-based); the 95 % interval of a quantile is ``[x_(l), x_(u)]`` (1-based ranks) with l the
largest rank with P(B <= l - 1) <= 0.025 and u the
smallest with P(B >= u) <= 0.025, B ~ Binomial(n, q). For p50: n = 40 gives P(B <= 13) = 0.0192,
P(B <= 14) = 0.0403, so (l, u) = (14, 27); n = 16 gives P(B <= 3) = 0.0106, P(B <= 4) = 0.0384,
so (l, u) = (4, 13). p95 needs n >= 72 and p99 n >= 368: null intervals here.
Wilson at 95 %: centre (p + z²/2n)/(1 + z²/n), half-width z sqrt(p(1-p)/n + z²/4n²)/(1 + z²/n),
z = 1.959964; k = 0 gives lo 0 exactly, k = n gives hi 1 exactly.

Prices (rules/prices.yaml, USD per million tokens): gpt-4.1 input 2.00, cached input 0.50,
output 8.00; gpt-4.1-mini 0.40 / 0.10 / 1.60; gpt-4o-mini 0.15 / 0.075 / 0.60. Cost of a call =
((input - cached) x input price + cached x cached price + output x output price) / 1e6.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from jsonschema import Draft202012Validator

from analyzer.cli import main
from analyzer.engine import analyze_paths
from analyzer.metrics.summary import SUMMARY_VERSION, build_summary
from analyzer.pack import load_default_pack, load_packs
from analyzer.render.terminal import terminal_summary
from analyzer.resources import schema

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
KYC_PACK = ROOT / "rules" / "kyc.yaml"


@pytest.fixture(scope="module")
def default_analysis():
    return analyze_paths([SAMPLES], packs=(load_default_pack(),))


@pytest.fixture(scope="module")
def default_summary(default_analysis):
    return build_summary(default_analysis)


@pytest.fixture(scope="module")
def kyc_analysis():
    return analyze_paths([SAMPLES / "kyc"], packs=tuple(load_packs([KYC_PACK])))


@pytest.fixture(scope="module")
def kyc_summary(kyc_analysis):
    return build_summary(kyc_analysis)


# (case, input tokens, output tokens, cached input tokens, model calls, tool calls, duration s,
#  temperature, retries, config hash). Case = app.case_id (KYC), session.id (support),
# traceloop...question_id (real estate). Tokens: the KYC invoke_agent span's gen_ai.usage.*
# (= the sum over its chat spans), the LLM spans' llm.token_count.* (support), the
# gen_ai.usage.prompt/completion_tokens of the LLM spans (real estate). Calls and durations as
# listed in the README ("The standard KYC run": 4 chat + 4 tool spans, ...).
RUNS = [
    ("KYC-2026-0001", 2274, 127, 384, 4, 4, 5.179, 0.0, 0, "d0fb6e64ab9b"),
    ("KYC-2026-0002", 2253, 127, 384, 4, 4, 5.252, 0.7, 0, "4a12332d65b5"),
    ("KYC-2026-0003", 2303, 115, 384, 4, 4, 5.041, 0.0, 0, "d0fb6e64ab9b"),
    ("KYC-2026-0004", 2153, 100, 384, 4, 3, 4.145, 0.0, 0, "d0fb6e64ab9b"),
    ("KYC-2026-0005", 2277, 127, 384, 4, 4, 5.116, 0.0, 0, "9745ee00e2c8"),
    ("KYC-2026-0006", 2179, 100, 384, 4, 4, 4.844, 0.0, 0, "d0fb6e64ab9b"),
    ("KYC-2026-0007", 2146, 106, 384, 4, 3, 4.492, 0.0, 0, "d0fb6e64ab9b"),
    ("KYC-2026-0008", 2242, 116, 384, 4, 4, 5.046, 0.7, 0, "4a12332d65b5"),
    ("KYC-2026-0009", 1506, 65, 256, 3, 2, 2.846, 0.0, 0, "d0fb6e64ab9b"),
    ("KYC-2026-0010", 2237, 126, 384, 4, 4, 5.138, 0.0, 0, "d0fb6e64ab9b"),
    ("KYC-2026-0011", 3011, 152, 512, 5, 5, 6.595, 0.0, 0, "d0fb6e64ab9b"),
    ("KYC-2026-0012", 2242, 127, 384, 5, 4, 5.304, 0.0, 1, "2dbcf4a3a512"),
    ("KYC-2026-0013", 1562, 83, 256, 3, 4, 4.138, 0.0, 0, "d0fb6e64ab9b"),
    ("KYC-2026-0014", 2278, 126, 384, 4, 4, 5.183, 0.7, 1, "4a12332d65b5"),
    ("KYC-2026-0015", 2240, 111, 384, 4, 4, 4.975, 0.0, 0, "d0fb6e64ab9b"),
    ("KYC-2026-0016", 2259, 126, 384, 4, 4, 5.286, 0.7, 0, "4a12332d65b5"),
    ("RE-01", 522, 35, 0, 2, 1, 1.47, 0.7, 0, "d4f08c59b5aa"),
    ("RE-02", 559, 48, 0, 2, 1, 1.823, 0.7, 0, "d4f08c59b5aa"),
    ("RE-03", 515, 33, 0, 2, 1, 1.565, 0.7, 0, "d4f08c59b5aa"),
    ("RE-04", 534, 32, 0, 2, 1, 1.372, 0.7, 0, "d4f08c59b5aa"),
    ("RE-05", 530, 35, 0, 2, 1, 1.444, 0.7, 0, "d4f08c59b5aa"),
    ("RE-06", 505, 42, 0, 2, 1, 1.73, 0.7, 0, "d4f08c59b5aa"),
    ("RE-07", 520, 30, 0, 2, 1, 1.344, 0.0, 0, "1e3c90a34178"),
    ("RE-08", 974, 58, 0, 3, 2, 2.502, 0.0, 0, "6a46057ea7af"),
    ("RE-09", 524, 35, 0, 2, 1, 1.449, 0.0, 0, "1e3c90a34178"),
    ("RE-10", 924, 61, 0, 3, 2, 2.484, 0.0, 0, "1e3c90a34178"),
    ("RE-11", 528, 30, 0, 2, 1, 1.371, 0.7, 0, "d4f08c59b5aa"),
    ("RE-12", 489, 36, 0, 2, 1, 1.701, 0.0, 0, "1e3c90a34178"),
    ("TCK-1001", 1130, 73, 0, 3, 2, 2.619, 0.0, 0, "435e2c11943c"),
    ("TCK-1002", 1124, 60, 0, 3, 2, 2.506, 0.0, 0, "f2f1fa42af45"),
    ("TCK-1003", 1112, 54, 0, 3, 2, 2.466, 0.0, 0, "435e2c11943c"),
    ("TCK-1004", 1124, 73, 0, 3, 2, 2.545, 0.0, 0, "435e2c11943c"),
    ("TCK-1005", 1264, 106, 0, 3, 4, 3.318, 0.0, 0, "435e2c11943c"),
    ("TCK-1006", 1573, 90, 0, 4, 3, 3.367, 0.0, 0, "435e2c11943c"),
    ("TCK-1007", 1572, 90, 0, 4, 3, 3.41, 0.0, 1, "435e2c11943c"),
    ("TCK-1008", 1638, 90, 0, 4, 3, 3.339, 0.0, 0, "435e2c11943c"),
    ("TCK-1009", 1114, 60, 0, 3, 2, 2.474, 0.7, 0, "a7e4166f735a"),
    ("TCK-1010", 1118, 73, 0, 3, 2, 2.524, 0.0, 0, "435e2c11943c"),
    ("TCK-1011", 1119, 73, 0, 3, 2, 2.547, 0.7, 0, "5fab0d26eddd"),
    ("TCK-1012", 1121, 60, 0, 3, 2, 2.522, 0.0, 0, "f2f1fa42af45"),
]

PRICE = {  # USD per million tokens: (input, cached input, output)
    "KYC": (2.00, 0.50, 8.00),  # gpt-4.1 (the runs' response model gpt-4.1-2025-04-14)
    "TCK": (0.40, 0.10, 1.60),  # gpt-4.1-mini
    "RE-": (0.15, 0.075, 0.60),  # gpt-4o-mini
}


def hand_cost(case: str, inp: int, out: int, cached: int) -> float:
    """Cost of a run from its token totals (one model per run)."""
    if case == "KYC-2026-0005":
        # first chat call on gpt-4.1-mini (386 in, 19 out, 0 cached): 386 x 0.4 + 19 x 1.6
        # = 184.8; the three gpt-4.1 calls (1891 in, 384 cached, 108 out): 1507 x 2 + 384 x 0.5
        # + 108 x 8 = 4070; total 4254.8e-6
        return 0.0042548
    p_in, p_cached, p_out = PRICE[case[:3]]
    return round(((inp - cached) * p_in + cached * p_cached + out * p_out) / 1e6, 12)


def test_runs_are_the_ones_the_traces_record(default_analysis):
    runs = default_analysis.runs.runs
    attr = lambda k: pl.col("attributes").str.json_path_match(f"$['{k}']")  # noqa: E731
    frame = runs.with_columns(
        case=pl.coalesce(
            "case_id", attr("session.id"), attr("traceloop.association.properties.question_id")
        )
    ).sort("case")
    got = [
        (
            r["case"],
            r["input_tokens"],
            r["output_tokens"],
            r["cached_input_tokens"] or 0,
            r["model_calls"],
            r["tool_calls"],
            r["duration_s"],
            r["temperature"],
            r["retries"],
            r["config_hash"],
        )
        for r in frame.iter_rows(named=True)
    ]
    assert got == RUNS
    costs = dict(zip(frame.get_column("case"), frame.get_column("cost_usd"), strict=True))
    for case, inp, out, cached, *_ in RUNS:
        assert costs[case] == pytest.approx(hand_cost(case, inp, out, cached), abs=1e-12), case


# --- sample_traces with the default pack --------------------------------------------------------
#
# Findings (README "Planted problems", default pack rules/default.yaml):
#   answered (high, weight 30): no_answer in KYC-2026-0013
#   grounded-ids (high, 25): hallucinated_argument in KYC-2026-0008 (ACC-55120) and TCK-1006
#       (CMD-127754: in no source); RE-08 recorded no content: unverifiable
#   tool-arguments (medium, 15): malformed_arguments in KYC-2026-0011; RE-08 unverifiable
#   retries (low, 5, max 0): KYC-2026-0012, KYC-2026-0014, TCK-1007
# Scores: 70 (0013), 75 (0008, TCK-1006), 85 (0011), 95 (0012, 0014, TCK-1007), 100 x 33.
# Correct runs (no finding at or above high): 40 - 3 = 37.


def test_default_summary_has_every_block(default_summary):
    assert SUMMARY_VERSION == 3
    assert default_summary["summary_version"] == 3
    assert set(default_summary) == {
        "summary_version",
        "agenttrace_version",
        "ingest",
        "runs",
        "packs",
        "findings",
        "checks",
        "metrics",
        "labels",
    }
    # the default pack's 6 rules all judged runs on the samples: nothing unchecked
    assert default_summary["checks"]["unchecked"] == []
    assert [r["rule_id"] for r in default_summary["checks"]["rules"]] == [
        "answered",
        "tool-arguments",
        "grounded-ids",
        "ignored-tool-errors",
        "retries",
        "requested-calls",
    ]
    assert default_summary["labels"] is None
    assert set(default_summary["metrics"]) == {
        "methods",
        "tails",
        "cost",
        "rule_rates",
        "kind_rates",
        "omission_rates",
        "rule_coverage",
        "content_coverage",
        "scores",
        "trials",
        "breakdowns",
        "routing",
        "temperature",
        "steps",
    }
    assert default_summary["metrics"]["methods"]["case_class"] == "run attribute app.case_type"
    assert set(default_summary["metrics"]["methods"]) == {
        "quantiles",
        "quantile_intervals",
        "rates",
        "cost",
        "trials",
        "temperature",
        "steps",
        "case_class",
        "correct",
    }


def test_default_ingest_runs_packs_and_findings(default_summary):
    # README "Files and accounting": 324 read, 290 kept, 34 duplicates, 1 orphan, 40 runs;
    # 116 records = 2+2+2+3+2 (kyc) + 7 (realestate) + 80 + 18 (support); 8 files.
    assert default_summary["ingest"] == {
        "files": 8,
        "records_read": 116,
        "spans_read": 324,
        "spans_kept": 290,
        "duplicate_spans": 34,
        "spans_quarantined": 0,
        "records_quarantined": 0,
        "orphan_spans": 1,
        "spans_outside_runs": 0,  # the orphan is an agent's child: in its run
        "runs": 40,
        "quarantine": [],
        "warnings": [],
        "files_skipped": [str(SAMPLES / "README.md"), str(SAMPLES / "generate.py")],
    }
    # Sums of RUNS: input 32885 + 2277 (0005) + 15009 + 7124 = 57295; output 1707 + 127 + 902
    # + 475 = 3211; cached: 15 x 384 + 2 x 256 = 6016 (KYC only); model calls 64 + 39 + 26.
    assert default_summary["runs"] == {
        "count": 40,
        "with_answer": 39,
        "without_answer": 1,
        "with_content": 39,
        "model_calls": 129,
        "tool_calls": 104,
        "unexecuted_tool_calls": 0,
        "input_tokens": 57295,
        "output_tokens": 3211,
        "cached_input_tokens": 6016,
        "agents": {"kyc-reviewer": 16, "realestate_qa": 12, "support-remboursements": 12},
        # KYC-2026-0012's failed call records only its request model, gpt-4.1
        "models": [
            "gpt-4.1",
            "gpt-4.1-2025-04-14",
            "gpt-4.1-mini-2025-04-14",
            "gpt-4o-mini-2024-07-18",
        ],
    }
    (pack,) = default_summary["packs"]
    assert (pack["name"], pack["rules"]) == ("default", 6)
    found = default_summary["findings"]
    assert found["total"] == 7
    assert found["by_severity"] == {"critical": 0, "high": 3, "medium": 1, "low": 3}
    assert found["check_errors"] == []
    assert [
        (
            r["rule_id"],
            r["kind"],
            r["severity"],
            r["findings"],
            r["runs"],
            r["runs_applied"],
            r["runs_checked"],
            r["runs_unverifiable"],
        )
        for r in found["by_rule"]
    ] == [
        ("answered", "no_answer", "high", 1, 1, 40, 40, 0),
        ("grounded-ids", "hallucinated_argument", "high", 2, 2, 40, 38, 1),
        ("ignored-tool-errors", None, None, 0, 0, 40, 40, 0),
        ("requested-calls", None, None, 0, 0, 40, 28, 0),
        ("retries", "retry", "low", 3, 3, 40, 40, 0),
        ("tool-arguments", "malformed_arguments", "medium", 1, 1, 40, 39, 1),
    ]


def test_default_tails(default_summary):
    # Sorted costs (x 1e-6; hand_cost of each run), 0-based: x[0..11] real estate 94.95 96
    # 97.05 97.2 99.3 99.3 99.6 100.5 100.95 112.65 175.2 180.9; x[12..23] support 531.2 541.6
    # 544.4 545.6 564 564.4 566.4 568.8 675.2 772.8 773.2 799.2; x[24..39] KYC 3148 3404 4254.8
    # 4530 4564 4582 4792 4836 4906 4924 4946 4950 4950 4988 4988 6470.
    # p50: h = 19.5 -> (x[19] + x[20]) / 2 = (568.8 + 675.2) / 2 = 622; ranks (14, 27) ->
    # x[13] = 541.6, x[26] = 4254.8. p95: h = 37.05 -> x[37] + 0.05 (x[38] - x[37]) = 4988.
    # p99: h = 38.61 -> 4988 + 0.61 x (6470 - 4988) = 5892.02.
    cols = ["metric", "runs", "n", "missing", "max", "p50", "p50_lo", "p50_hi", "p95", "p99"]
    tails = default_summary["metrics"]["tails"]
    assert [[t[c] for c in cols] for t in tails] == [
        ["cost_usd", 40, 40, 0, 0.00647, 0.000622, 0.0005416, 0.0042548, 0.004988, 0.00589202],
        # input tokens sorted: x[13] 1114, x[19] 1130, x[20] 1264, x[26] 2146, x[37] 2278,
        # x[38] 2303, x[39] 3011: p50 = (1130 + 1264) / 2 = 1197; p95 = 2278 + 0.05 x 25
        # = 2279.25; p99 = 2303 + 0.61 x 708 = 2734.88
        ["input_tokens", 40, 40, 0, 3011.0, 1197.0, 1114.0, 2146.0, 2279.25, 2734.88],
        # output sorted: x[13] 60, x[19] 73, x[20] 73, x[26] 100, x[37] 127, x[38] 127, 152
        ["output_tokens", 40, 40, 0, 152.0, 73.0, 60.0, 100.0, 127.0, 142.25],
        # input + output sorted: x[13] 1174, x[19] 1203, x[20] 1370 -> 1286.5; x[26] 2252;
        # x[37] 2404, x[38] 2418 -> 2404.7; x[39] 3163 -> 2418 + 0.61 x 745 = 2872.45
        ["tokens", 40, 40, 0, 3163.0, 1286.5, 1174.0, 2252.0, 2404.7, 2872.45],
        # model calls: ten 2s, thirteen 3s, fifteen 4s, two 5s: x[19] = x[20] = 3;
        # p95 x[37] = 4, x[38] = 5 -> 4.05; p99 x[38] 5
        ["model_calls", 40, 40, 0, 5.0, 3.0, 3.0, 4.0, 4.05, 5.0],
        # tool calls: ten 1s, eleven 2s, five 3s, thirteen 4s, one 5: x[19] = x[20] = 2; x[13]
        # = 2; x[26] = 4; p99 = 4 + 0.61 x 1 = 4.61
        ["tool_calls", 40, 40, 0, 5.0, 2.0, 2.0, 4.0, 4.0, 4.61],
        # durations: x[13] 2.502, x[19] 2.619, x[20] 2.846 -> 2.7325; x[26] 4.145;
        # x[37] 5.286, x[38] 5.304 -> 5.2869; 5.304 + 0.61 x 1.291 = 6.09151
        ["duration_s", 40, 40, 0, 6.595, 2.7325, 2.502, 4.145, 5.2869, 6.09151],
        # retries: 37 zeros, three 1s (x[37..39]): p95 = p99 = 1
        ["retries", 40, 40, 0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0],
        # scores: 7 runs below 100, 33 at 100: every quantile from x[7] on is 100
        ["score", 40, 40, 0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0],
    ]
    for t in tails:  # n = 40 < 72: no interval for p95 and p99
        assert (t["p95_lo"], t["p95_hi"], t["p99_lo"], t["p99_hi"]) == (None, None, None, None)


def test_default_cost(default_summary):
    # KYC: 15 one-model runs: (2 x 32885 - 1.5 x 5632 + 8 x 1707) = 70978, + 4254.8 (0005)
    # = 75232.8; support 0.4 x 15009 + 1.6 x 902 = 7446.8; real estate 0.15 x 7124 + 0.6 x 475
    # = 1353.6; total 84033.2e-6. Retry cost: KYC-2026-0012's failed call recorded no tokens
    # (0), KYC-2026-0014's HTTP resend has no span (0), TCK-1007's superseded call is a tool
    # call (0): 0. Per correct run: 0.0840332 / 37 = 0.002271168.
    assert default_summary["metrics"]["cost"] == {
        "total_usd": 0.0840332,
        "recorded_total_usd": None,
        "priced_runs": 40,
        "unpriced_runs": 0,
        "unpriced_models": [],
        "retry_cost_usd": 0.0,
        "retry_cost_unknown_runs": 0,
        "judged_runs": 40,
        "judged_cost_usd": 0.0840332,
        "correct_runs": 37,
        "cost_per_correct_run_usd": 0.002271168,
        "correct_by": "findings",
        "correct_threshold": "high",
    }


def test_default_rates_and_coverage(default_summary):
    metrics = default_summary["metrics"]
    # failed / judged with Wilson: 1/40 -> [0.004426832, 0.12881369]; 2/39 -> [0.014177955,
    # 0.1688564]; 0/40 -> [0, 0.087621601]; 3/40 -> [0.025836026, 0.198642335];
    # 1/39 -> [0.004540703, 0.131809902]; 0/28 -> [0, 3.8416 / 28 / (1 + 3.8416 / 28)
    # = 0.120643305]. grounded-ids and tool-arguments could not judge RE-08 (no content): 39
    # judged; requested-calls judged the 28 runs whose tool calls carry a call id (not the
    # real-estate ones).
    assert metrics["rule_rates"] == [
        {
            "pack": "default",
            "rule_id": "answered",
            "applied": 40,
            "judged": 40,
            "failed": 1,
            "rate": 0.025,
            "rate_lo": 0.004426832,
            "rate_hi": 0.12881369,
        },
        {
            "pack": "default",
            "rule_id": "grounded-ids",
            "applied": 40,
            "judged": 39,
            "failed": 2,
            "rate": 0.051282051,
            "rate_lo": 0.014177955,
            "rate_hi": 0.1688564,
        },
        {
            "pack": "default",
            "rule_id": "ignored-tool-errors",
            "applied": 40,
            "judged": 40,
            "failed": 0,
            "rate": 0.0,
            "rate_lo": 0.0,
            "rate_hi": 0.087621601,
        },
        {
            "pack": "default",
            "rule_id": "requested-calls",
            "applied": 40,
            "judged": 28,
            "failed": 0,
            "rate": 0.0,
            "rate_lo": 0.0,
            "rate_hi": 0.120643305,
        },
        {
            "pack": "default",
            "rule_id": "retries",
            "applied": 40,
            "judged": 40,
            "failed": 3,
            "rate": 0.075,
            "rate_lo": 0.025836026,
            "rate_hi": 0.198642335,
        },
        {
            "pack": "default",
            "rule_id": "tool-arguments",
            "applied": 40,
            "judged": 39,
            "failed": 1,
            "rate": 0.025641026,
            "rate_lo": 0.004540703,
            "rate_hi": 0.131809902,
        },
    ]
    # Kinds each rule can yield (answered is required_tools: omission, premature_answer,
    # no_answer), judged by that rule's judged runs.
    assert metrics["kind_rates"] == [
        {
            "kind": "hallucinated_argument",
            "judged": 39,
            "failed": 2,
            "rate": 0.051282051,
            "rate_lo": 0.014177955,
            "rate_hi": 0.1688564,
        },
        {
            "kind": "ignored_tool_error",
            "judged": 40,
            "failed": 0,
            "rate": 0.0,
            "rate_lo": 0.0,
            "rate_hi": 0.087621601,
        },
        {
            "kind": "malformed_arguments",
            "judged": 39,
            "failed": 1,
            "rate": 0.025641026,
            "rate_lo": 0.004540703,
            "rate_hi": 0.131809902,
        },
        {
            "kind": "no_answer",
            "judged": 40,
            "failed": 1,
            "rate": 0.025,
            "rate_lo": 0.004426832,
            "rate_hi": 0.12881369,
        },
        {
            "kind": "omission",
            "judged": 40,
            "failed": 0,
            "rate": 0.0,
            "rate_lo": 0.0,
            "rate_hi": 0.087621601,
        },
        {
            "kind": "premature_answer",
            "judged": 40,
            "failed": 0,
            "rate": 0.0,
            "rate_lo": 0.0,
            "rate_hi": 0.087621601,
        },
        {
            "kind": "retry",
            "judged": 40,
            "failed": 3,
            "rate": 0.075,
            "rate_lo": 0.025836026,
            "rate_hi": 0.198642335,
        },
        {
            "kind": "unrequested_tool_call",
            "judged": 28,
            "failed": 0,
            "rate": 0.0,
            "rate_lo": 0.0,
            "rate_hi": 0.120643305,
        },
    ]
    # the default pack requires no tool (answered has tools: [])
    assert metrics["omission_rates"] == []
    full = {"error": 0, "judged_rate_hi": 1.0}
    assert metrics["rule_coverage"] == [
        {
            "pack": "default",
            "rule_id": "answered",
            "applied": 40,
            "checked": 40,
            "partial": 0,
            "not_applicable": 0,
            "unverifiable": 0,
            "judged": 40,
            "judged_rate": 1.0,
            "judged_rate_lo": 0.912378399,
            **full,
        },
        # RE-08 unverifiable; one run only partly checkable (KYC-2026-0011's malformed call)
        {
            "pack": "default",
            "rule_id": "grounded-ids",
            "applied": 40,
            "checked": 38,
            "partial": 1,
            "not_applicable": 0,
            "unverifiable": 1,
            "judged": 39,
            "judged_rate": 0.975,
            "judged_rate_lo": 0.87118631,
            "judged_rate_hi": 0.995573168,
            "error": 0,
        },
        {
            "pack": "default",
            "rule_id": "ignored-tool-errors",
            "applied": 40,
            "checked": 40,
            "partial": 0,
            "not_applicable": 0,
            "unverifiable": 0,
            "judged": 40,
            "judged_rate": 1.0,
            "judged_rate_lo": 0.912378399,
            **full,
        },
        {
            "pack": "default",
            "rule_id": "requested-calls",
            "applied": 40,
            "checked": 28,
            "partial": 0,
            "not_applicable": 12,
            "unverifiable": 0,
            "error": 0,
            "judged": 28,
            "judged_rate": 0.7,
            # Wilson 28/40
            "judged_rate_lo": 0.545699812,
            "judged_rate_hi": 0.819251548,
        },
        {
            "pack": "default",
            "rule_id": "retries",
            "applied": 40,
            "checked": 40,
            "partial": 0,
            "not_applicable": 0,
            "unverifiable": 0,
            "judged": 40,
            "judged_rate": 1.0,
            "judged_rate_lo": 0.912378399,
            **full,
        },
        {
            "pack": "default",
            "rule_id": "tool-arguments",
            "applied": 40,
            "checked": 39,
            "partial": 0,
            "not_applicable": 0,
            "unverifiable": 1,
            "judged": 39,
            "judged_rate": 0.975,
            "judged_rate_lo": 0.87118631,
            "judged_rate_hi": 0.995573168,
            "error": 0,
        },
    ]
    # 39 of 40 runs recorded content (not RE-08)
    assert metrics["content_coverage"] == {
        "runs": 40,
        "with_content": 39,
        "rate": 0.975,
        "rate_lo": 0.87118631,
        "rate_hi": 0.995573168,
    }
    # mean (70 + 2 x 75 + 85 + 3 x 95 + 33 x 100) / 40 = 3890 / 40 = 97.25
    assert metrics["scores"] == {"mean": 97.25, "p50": 100.0, "min": 70.0, "runs": 40}


def test_default_trials_without_repeated_cases(default_summary):
    # Only the 16 KYC runs have a case id (app.case_id), one run each: pass^1 = 14/16 (0008 and
    # 0013 have a high finding), no disagreement to measure.
    no_rate = {"k": 0, "n": 0, "rate": None, "lo": None, "hi": None}
    assert default_summary["metrics"]["trials"] == {
        "cases": 16,
        "cases_with_trials": 0,
        "runs": 0,
        "trials_per_case": [{"k": 1, "cases": 16}],
        "pass_hat_k": [{"k": 1, "cases": 16, "trials": 16, "value": 0.875}],
        "disagreement": {"answers": no_rate, "trajectories": no_rate},
    }


BREAKDOWN_COLS = (
    "group",
    "runs",
    "passed_runs",
    "pass_rate",
    "pass_rate_lo",
    "pass_rate_hi",
    "runs_with_findings",
    "mean_score",
    "unpriced_runs",
    "total_cost_usd",
    "cost_per_correct_run",
    "cost_usd_p50",
    "cost_usd_p95",
    "tokens_p50",
    "tokens_p95",
    "model_calls_p50",
    "model_calls_p95",
    "tool_calls_p50",
    "tool_calls_p95",
    "duration_s_p50",
    "duration_s_p95",
)


def rows(summary, key):
    return [tuple(r[c] for c in BREAKDOWN_COLS) for r in summary["metrics"]["breakdowns"][key]]


def test_default_breakdowns(default_summary):
    # Per agent: kyc-reviewer 16 runs, 2 with a high finding (0008, 0013) -> 14 passed; 5 with
    # findings; mean score (70 + 75 + 85 + 95 + 95 + 11 x 100) / 16 = 95; cost 0.0752328 / 14
    # = 0.005373771; cost p50 of 16: (x[7] + x[8]) / 2 = (4836 + 4906) / 2 = 4871e-6;
    # p95: h = 14.25 -> 4988 + 0.25 x 1482 = 5358.5e-6.
    # support: 11 passed (TCK-1006), 2 with findings, mean (75 + 95 + 1000) / 12 = 97.5,
    # 0.0074468 / 11; real estate: 12 passed, 0.0013536 / 12 = 0.0001128.
    assert rows(default_summary, "agent") == [
        (
            "kyc-reviewer",
            16,
            14,
            0.875,
            0.639771727,
            0.965022512,
            5,
            95.0,
            0,
            0.0752328,
            0.005373771,
            0.004871,
            0.0053585,
            2366.0,
            2604.25,
            4.0,
            5.0,
            4.0,
            4.25,
            5.081,
            5.62675,
        ),
        (
            "realestate_qa",
            12,
            12,
            1.0,
            0.757505993,
            1.0,
            0,
            100.0,
            0,
            0.0013536,
            0.0001128,
            9.945e-05,
            0.000177765,
            558.5,
            1006.15,
            2.0,
            3.0,
            1.0,
            2.0,
            1.5175,
            2.4921,
        ),
        (
            "support-remboursements",
            12,
            11,
            0.916666667,
            0.646120089,
            0.985134906,
            2,
            97.5,
            0,
            0.0074468,
            0.000676982,
            0.0005654,
            0.0007849,
            1194.5,
            1692.25,
            3.0,
            4.0,
            2.0,
            3.45,
            2.546,
            3.38635,
        ),
    ]
    # service.version is one per agent: the same figures
    by_agent = rows(default_summary, "agent")
    assert rows(default_summary, "service.version") == [
        ("0.9.4", *by_agent[1][1:]),
        ("1.8.1", *by_agent[2][1:]),
        ("2.3.0", *by_agent[0][1:]),
    ]
    # Case class = app.case_type: renewals 0002, 0005, 0009, 0014 (4 runs, one retry finding:
    # mean (95 + 300) / 4 = 98.75); kyc: 12 runs, 10 passed; support and real estate: null.
    assert rows(default_summary, "case_class") == [
        (
            "kyc",
            12,
            10,
            0.833333333,
            0.551969138,
            0.953034858,
            4,
            93.75,
            0,
            0.057896,
            0.0057896,
            0.004871,
            0.0056549,
            2360.5,
            2753.25,
            4.0,
            5.0,
            4.0,
            4.45,
            5.0435,
            5.88495,
        ),
        (
            "kyc_renewal",
            4,
            4,
            1.0,
            0.510109164,
            1.0,
            1,
            98.75,
            0,
            0.0173368,
            0.0043342,
            0.0046004,
            0.0049817,
            2392.0,
            2404.0,
            4.0,
            4.0,
            4.0,
            4.0,
            5.1495,
            5.24165,
        ),
        (
            None,
            24,
            23,
            0.958333333,
            0.797581935,
            0.992606544,
            2,
            98.75,
            0,
            0.0088004,
            0.000382626,
            0.00035605,
            0.00077314,
            1099.0,
            1662.85,
            3.0,
            4.0,
            2.0,
            3.0,
            2.479,
            3.3628,
        ),
    ]
    # Models exploded: KYC-2026-0005 counts for gpt-4.1-2025-04-14 and the mini; KYC-2026-0012
    # for gpt-4.1 (its failed call) and gpt-4.1-2025-04-14. Mini: 12 support runs + 0005.
    assert rows(default_summary, "model") == [
        (
            "gpt-4.1",
            1,
            1,
            1.0,
            0.206549314,
            1.0,
            1,
            95.0,
            0,
            0.004924,
            0.004924,
            0.004924,
            0.004924,
            2369.0,
            2369.0,
            5.0,
            5.0,
            4.0,
            4.0,
            5.304,
            5.304,
        ),
        ("gpt-4.1-2025-04-14", *by_agent[0][1:]),
        (
            "gpt-4.1-mini-2025-04-14",
            13,
            12,
            0.923076923,
            0.666860491,
            0.986289579,
            2,
            97.692307692,
            0,
            0.0117016,
            0.000975133,
            0.0005664,
            0.00218144,
            1197.0,
            1998.4,
            3.0,
            4.0,
            2.0,
            4.0,
            2.547,
            4.0924,
        ),
        ("gpt-4o-mini-2024-07-18", *by_agent[1][1:]),
    ]
    # Model families (the run's primary model, snapshots grouped): each agent uses one family,
    # KYC gpt-4.1 (0005's second model, gpt-4.1-mini, has fewer tokens; 0012's dated snapshot
    # is grouped), support gpt-4.1-mini, real estate gpt-4o-mini: the agents' rows, renamed.
    families = {r[0]: r[1:] for r in rows(default_summary, "model_family")}
    agents = {r[0]: r[1:] for r in rows(default_summary, "agent")}
    assert families == {
        "gpt-4.1": agents["kyc-reviewer"],
        "gpt-4.1-mini": agents["support-remboursements"],
        "gpt-4o-mini": agents["realestate_qa"],
    }
    # Temperatures (README table): 0.7 for KYC 0002, 0008, 0014, 0016, TCK-1009, -1011 and
    # RE-01..06, RE-11 (13 runs; findings: 0008 high, 0014 low); 0 for the 27 others.
    assert rows(default_summary, "temperature") == [
        (
            0.0,
            27,
            25,
            0.925925926,
            0.766304073,
            0.979445346,
            5,
            97.037037037,
            0,
            0.06250025,
            0.00250001,
            0.0007732,
            0.0049766,
            1645.0,
            2413.8,
            3.0,
            4.7,
            3.0,
            4.0,
            3.339,
            5.2665,
        ),
        (
            0.7,
            13,
            12,
            0.923076923,
            0.666860491,
            0.986289579,
            2,
            97.692307692,
            0,
            0.02153295,
            0.001794412,
            0.00011265,
            0.0049652,
            607.0,
            2392.6,
            2.0,
            4.0,
            1.0,
            4.0,
            1.823,
            5.2656,
        ),
    ]
    # Config hashes (RUNS): KYC at temperature 0 with one model (10 runs), at 0.7 (4), 0005
    # (two models), 0012 (models gpt-4.1 + dated); real estate at 0.7 (RE-01..06, RE-11) and
    # at 0 (RE-07, 09, 10, 12), RE-08 apart: it records no system prompt (content off). The
    # support prompt ends with the ticket's policy, so support splits by temperature and
    # policy: escalate at 0 (8: all but 1002, 1012), refund at 0 (1002, 1012), 1009 (refund,
    # 0.7), 1011 (escalate, 0.7). Split groups from RUNS: e.g. RE-07/09/10/12 tokens 525, 550,
    # 559, 985 -> p50 554.5, p95 h = 2.85 -> 559 + 0.85 x 426 = 921.1;
    # escalate at 0: 7 of 8 passed (1006), mean (75 + 95 + 6 x 100) / 8 = 96.25, cost
    # 0.0063408 - 0.00109 (1002, 1012) = 0.0052508, / 7 = 0.000750114.
    assert rows(default_summary, "config_hash") == [
        (
            "1e3c90a34178",
            4,
            4,
            1.0,
            0.510109164,
            1.0,
            0,
            100.0,
            0,
            0.00046575,
            0.000116438,
            9.78e-05,
            0.00016386,
            554.5,
            921.1,
            2.0,
            2.85,
            1.0,
            1.85,
            1.575,
            2.36655,
        ),
        (
            "2dbcf4a3a512",
            1,
            1,
            1.0,
            0.206549314,
            1.0,
            1,
            95.0,
            0,
            0.004924,
            0.004924,
            0.004924,
            0.004924,
            2369.0,
            2369.0,
            5.0,
            5.0,
            4.0,
            4.0,
            5.304,
            5.304,
        ),
        (
            "435e2c11943c",
            8,
            7,
            0.875,
            0.529111818,
            0.977582509,
            2,
            96.25,
            0,
            0.0052508,
            0.000750114,
            0.000622,
            0.0007901,
            1286.5,
            1705.25,
            3.0,
            4.0,
            2.5,
            3.65,
            2.9685,
            3.39495,
        ),
        (
            "4a12332d65b5",
            4,
            3,
            0.75,
            0.300641843,
            0.954412739,
            2,
            92.5,
            0,
            0.01972,
            0.006573333,
            0.004948,
            0.0049823,
            2382.5,
            2401.15,
            4.0,
            4.0,
            4.0,
            4.0,
            5.2175,
            5.2809,
        ),
        (
            "5fab0d26eddd",
            1,
            1,
            1.0,
            0.206549314,
            1.0,
            0,
            100.0,
            0,
            0.0005644,
            0.0005644,
            0.0005644,
            0.0005644,
            1192.0,
            1192.0,
            3.0,
            3.0,
            2.0,
            2.0,
            2.547,
            2.547,
        ),
        (
            "6a46057ea7af",
            1,
            1,
            1.0,
            0.206549314,
            1.0,
            0,
            100.0,
            0,
            0.0001809,
            0.0001809,
            0.0001809,
            0.0001809,
            1032.0,
            1032.0,
            3.0,
            3.0,
            2.0,
            2.0,
            2.502,
            2.502,
        ),
        (
            "9745ee00e2c8",
            1,
            1,
            1.0,
            0.206549314,
            1.0,
            0,
            100.0,
            0,
            0.0042548,
            0.0042548,
            0.0042548,
            0.0042548,
            2404.0,
            2404.0,
            4.0,
            4.0,
            4.0,
            4.0,
            5.116,
            5.116,
        ),
        (
            "a7e4166f735a",
            1,
            1,
            1.0,
            0.206549314,
            1.0,
            0,
            100.0,
            0,
            0.0005416,
            0.0005416,
            0.0005416,
            0.0005416,
            1174.0,
            1174.0,
            3.0,
            3.0,
            2.0,
            2.0,
            2.474,
            2.474,
        ),
        (
            "d0fb6e64ab9b",
            10,
            9,
            0.9,
            0.595849973,
            0.982123787,
            2,
            95.5,
            0,
            0.046334,
            0.005148222,
            0.004687,
            0.0058031,
            2315.0,
            2827.75,
            4.0,
            4.55,
            4.0,
            4.55,
            4.9095,
            5.9578,
        ),
        (
            "d4f08c59b5aa",
            7,
            7,
            1.0,
            0.645669565,
            1.0,
            0,
            100.0,
            0,
            0.00070695,
            0.000100993,
            9.93e-05,
            0.00010914,
            558.0,
            594.7,
            2.0,
            2.0,
            1.0,
            1.0,
            1.47,
            1.7951,
        ),
        (
            "f2f1fa42af45",
            2,
            2,
            1.0,
            0.342380228,
            1.0,
            0,
            100.0,
            0,
            0.00109,
            0.000545,
            0.000545,
            0.00054554,
            1182.5,
            1183.85,
            3.0,
            3.0,
            2.0,
            2.0,
            2.514,
            2.5212,
        ),
    ]


# --- sample_traces/kyc with rules/kyc.yaml ------------------------------------------------------
#
# Findings (README "Planted problems"; kyc.yaml weights: kyc-required-checks critical 40,
# grounded-account-ids high 25, tool-arguments medium 10, no-retries low 5):
#   kyc-required-checks: omission + premature_answer in 0004, 0006, 0007; two omissions in 0009;
#       no_answer in 0013 -> 5 omissions in 4 runs, 3 premature answers, 1 no_answer
#   grounded-account-ids: 0008; tool-arguments: 0011; no-retries: 0012 and 0014
# Scores: 60 x 5 (0004, 0006, 0007, 0009, 0013), 75 (0008), 90 (0011), 95 x 2, 100 x 7.
# Correct (no finding at or above high): 16 - 6 = 10.


def test_kyc_findings_and_runs(kyc_summary):
    assert kyc_summary["findings"]["by_severity"] == {
        "critical": 9,
        "high": 1,
        "medium": 1,
        "low": 2,
    }
    assert kyc_summary["findings"]["total"] == 13
    assert [
        (r["rule_id"], r["kind"], r["findings"], r["runs"])
        for r in kyc_summary["findings"]["by_rule"]
    ] == [
        ("grounded-account-ids", "hallucinated_argument", 1, 1),
        ("kyc-required-checks", "no_answer", 1, 1),
        ("kyc-required-checks", "omission", 5, 4),
        ("kyc-required-checks", "premature_answer", 3, 3),
        ("no-retries", "retry", 2, 2),
        ("tool-arguments", "malformed_arguments", 1, 1),
    ]
    runs = kyc_summary["runs"]
    # input 32885 + 2277 = 35162, output 1707 + 127 = 1834, cached 15 x 384 + 2 x 256 = 6016;
    # chat spans: 3 in 0009 and 0013, 5 in 0011 and 0012, 4 in the 12 others: 64; tool calls:
    # 4 x 12 + 3 (0004) + 3 (0007) + 2 (0009) + 5 (0011) = 61 (RUNS column 6)
    assert (runs["count"], runs["input_tokens"], runs["output_tokens"]) == (16, 35162, 1834)
    assert (runs["cached_input_tokens"], runs["model_calls"], runs["tool_calls"]) == (6016, 64, 61)
    assert kyc_summary["ingest"]["spans_read"] == 162 and kyc_summary["ingest"]["runs"] == 16


def test_kyc_tails(kyc_summary):
    # 16 costs sorted (x 1e-6): 3148 3404 4254.8 4530 4564 4582 4792 4836 4906 4924 4946 4950
    # 4950 4988 4988 6470. p50: h = 7.5 -> (4836 + 4906) / 2 = 4871; ranks (4, 13) -> x[3] =
    # 4530, x[12] = 4950. p95: h = 14.25 -> 4988 + 0.25 x 1482 = 5358.5; p99: h = 14.85 ->
    # 4988 + 0.85 x 1482 = 6247.7.
    cols = ["metric", "n", "max", "p50", "p50_lo", "p50_hi", "p95", "p99"]
    assert [[t[c] for c in cols] for t in kyc_summary["metrics"]["tails"]] == [
        ["cost_usd", 16, 0.00647, 0.004871, 0.00453, 0.00495, 0.0053585, 0.0062477],
        # 1506 1562 2146 2153 2179 2237 2240 2242 2242 2253 2259 2274 2277 2278 2303 3011:
        # p50 (x[7] + x[8]) / 2 = 2242; ranks (4, 13) -> x[3] = 2153, x[12] = 2277;
        # p95 = x[14] + 0.25 (x[15] - x[14]) = 2303 + 0.25 x 708 = 2480
        ["input_tokens", 16, 3011.0, 2242.0, 2153.0, 2277.0, 2480.0, 2904.8],
        # 65 83 100 100 106 111 115 116 126 126 126 127 127 127 127 152
        ["output_tokens", 16, 152.0, 121.0, 100.0, 127.0, 133.25, 148.25],
        # 1571 1645 2252 2253 2279 2351 2358 2363 2369 2380 2385 2401 2404 2404 2418 3163
        ["tokens", 16, 3163.0, 2366.0, 2253.0, 2404.0, 2604.25, 3051.25],
        # 3 3 4 (x 12) 5 5; 2 3 3 4 (x 12) 5
        ["model_calls", 16, 5.0, 4.0, 4.0, 4.0, 5.0, 5.0],
        ["tool_calls", 16, 5.0, 4.0, 4.0, 4.0, 4.25, 4.85],
        # 2.846 4.138 4.145 4.492 4.844 4.975 5.041 5.046 5.116 5.138 5.179 5.183 5.252 5.286
        # 5.304 6.595
        ["duration_s", 16, 6.595, 5.081, 4.492, 5.252, 5.62675, 6.40135],
        ["retries", 16, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0],
        # scores sorted: 60 x 5, 75, 90, 95, 95, 100 x 7: p50 = x[7] = x[8] = 95; ranks 4, 13
        # -> 60, 100; p95 = p99 = 100
        ["score", 16, 100.0, 95.0, 60.0, 100.0, 100.0, 100.0],
    ]


def test_kyc_cost_rates_omissions(kyc_summary):
    metrics = kyc_summary["metrics"]
    # 0.0752328 (see test_default_cost) / 10 correct runs
    assert metrics["cost"] == {
        "total_usd": 0.0752328,
        "recorded_total_usd": None,
        "priced_runs": 16,
        "unpriced_runs": 0,
        "unpriced_models": [],
        "retry_cost_usd": 0.0,
        "retry_cost_unknown_runs": 0,
        "judged_runs": 16,
        "judged_cost_usd": 0.0752328,
        "correct_runs": 10,
        "cost_per_correct_run_usd": 0.00752328,
        "correct_by": "findings",
        "correct_threshold": "high",
    }
    # Wilson: 1/16 -> [0.011119345, 0.283287376]; 5/16 -> [0.141646439, 0.555956442];
    # 2/16 -> [0.034977488, 0.360228273]; 4/16 -> [0.101820675, 0.494983165];
    # 3/16 -> [0.065915991, 0.43008881]
    one = {"rate": 0.0625, "rate_lo": 0.011119345, "rate_hi": 0.283287376}
    two = {"rate": 0.125, "rate_lo": 0.034977488, "rate_hi": 0.360228273}
    assert metrics["rule_rates"] == [
        {
            "pack": "kyc-review",
            "rule_id": "grounded-account-ids",
            "applied": 16,
            "judged": 16,
            "failed": 1,
            **one,
        },
        {
            "pack": "kyc-review",
            "rule_id": "kyc-required-checks",
            "applied": 16,
            "judged": 16,
            "failed": 5,
            "rate": 0.3125,
            "rate_lo": 0.141646439,
            "rate_hi": 0.555956442,
        },
        {
            "pack": "kyc-review",
            "rule_id": "no-retries",
            "applied": 16,
            "judged": 16,
            "failed": 2,
            **two,
        },
        {
            "pack": "kyc-review",
            "rule_id": "tool-arguments",
            "applied": 16,
            "judged": 16,
            "failed": 1,
            **one,
        },
    ]
    assert metrics["kind_rates"] == [
        {"kind": "hallucinated_argument", "judged": 16, "failed": 1, **one},
        {"kind": "malformed_arguments", "judged": 16, "failed": 1, **one},
        {"kind": "no_answer", "judged": 16, "failed": 1, **one},
        {
            "kind": "omission",
            "judged": 16,
            "failed": 4,
            "rate": 0.25,
            "rate_lo": 0.101820675,
            "rate_hi": 0.494983165,
        },
        {
            "kind": "premature_answer",
            "judged": 16,
            "failed": 3,
            "rate": 0.1875,
            "rate_lo": 0.065915991,
            "rate_hi": 0.43008881,
        },
        {"kind": "retry", "judged": 16, "failed": 2, **two},
    ]
    # KYC-2026-0013 got no_answer: not judged for omissions, so 15 runs required each tool.
    # screen_sanctions omitted in 0004, 0006 (after the answer), 0009: 3/15 -> Wilson
    # [0.070475493, 0.451854487]; owners in 0007, 0009: 2/15 -> [0.037361259, 0.378819828].
    assert metrics["omission_rates"] == [
        {
            "tool": "lookup_beneficial_owners",
            "required_runs": 15,
            "omitted_runs": 2,
            "rate": 0.133333333,
            "rate_lo": 0.037361259,
            "rate_hi": 0.378819828,
        },
        {
            "tool": "screen_sanctions",
            "required_runs": 15,
            "omitted_runs": 3,
            "rate": 0.2,
            "rate_lo": 0.070475493,
            "rate_hi": 0.451854487,
        },
    ]
    # every rule judged all 16 runs: 16/16 -> [0.806392319, 1]
    assert metrics["rule_coverage"] == [
        {
            "pack": "kyc-review",
            "rule_id": rule,
            "applied": 16,
            "checked": 16,
            "partial": 0,
            "not_applicable": 0,
            "unverifiable": 0,
            "error": 0,
            "judged": 16,
            "judged_rate": 1.0,
            "judged_rate_lo": 0.806392319,
            "judged_rate_hi": 1.0,
        }
        for rule in ("grounded-account-ids", "kyc-required-checks", "no-retries", "tool-arguments")
    ]
    assert metrics["content_coverage"] == {
        "runs": 16,
        "with_content": 16,
        "rate": 1.0,
        "rate_lo": 0.806392319,
        "rate_hi": 1.0,
    }
    # mean (5 x 60 + 75 + 90 + 2 x 95 + 7 x 100) / 16 = 1355 / 16
    assert metrics["scores"] == {"mean": 84.6875, "p50": 95.0, "min": 60.0, "runs": 16}
    # one run per case: pass^1 = 10/16
    assert metrics["trials"]["pass_hat_k"] == [{"k": 1, "cases": 16, "trials": 16, "value": 0.625}]
    assert metrics["trials"]["cases_with_trials"] == 0


def test_kyc_breakdowns(kyc_summary):
    # kyc-reviewer: 10 passed of 16 -> Wilson [0.386410405, 0.815187674]; 9 runs with findings;
    # 0.0752328 / 10. Tails as in test_kyc_tails (p50 and p95 of the same 16 runs).
    assert rows(kyc_summary, "agent") == [
        (
            "kyc-reviewer",
            16,
            10,
            0.625,
            0.386410405,
            0.815187674,
            9,
            84.6875,
            0,
            0.0752328,
            0.00752328,
            0.004871,
            0.0053585,
            2366.0,
            2604.25,
            4.0,
            5.0,
            4.0,
            4.25,
            5.081,
            5.62675,
        ),
    ]
    # renewals (0002, 0005, 0009, 0014): 0009 fails (critical), 0014 has a low finding:
    # 3/4 passed, mean (100 + 100 + 60 + 95) / 4 = 88.75, 0.0173368 / 3 = 0.005778933;
    # kyc: 12 runs, 5 fail at >= high (0004, 0006, 0007, 0008, 0013), mean (4 x 60 + 75 + 90
    # + 95 + 5 x 100) / 12 = 1000 / 12 = 83.333333333, 0.057896 / 7 = 0.008270857
    assert rows(kyc_summary, "case_class") == [
        (
            "kyc",
            12,
            7,
            0.583333333,
            0.319511313,
            0.806739686,
            7,
            83.333333333,
            0,
            0.057896,
            0.008270857,
            0.004871,
            0.0056549,
            2360.5,
            2753.25,
            4.0,
            5.0,
            4.0,
            4.45,
            5.0435,
            5.88495,
        ),
        (
            "kyc_renewal",
            4,
            3,
            0.75,
            0.300641843,
            0.954412739,
            2,
            88.75,
            0,
            0.0173368,
            0.005778933,
            0.0046004,
            0.0049817,
            2392.0,
            2404.0,
            4.0,
            4.0,
            4.0,
            4.0,
            5.1495,
            5.24165,
        ),
    ]
    # temperature 0.7: 0002, 0008 (high), 0014 (low), 0016 -> 3/4 passed, the same runs as
    # config 4a12332d65b5; temperature 0: the 12 others, 7 passed, mean (5 x 60 + 90 + 95
    # + 5 x 100) / 12 = 985 / 12, cost 0.0752328 - 0.01972 = 0.0555128, / 7 = 0.0079304
    by_hash = {r[0]: r for r in rows(kyc_summary, "config_hash")}
    assert rows(kyc_summary, "temperature") == [
        (
            0.0,
            12,
            7,
            0.583333333,
            0.319511313,
            0.806739686,
            7,
            82.083333333,
            0,
            0.0555128,
            0.0079304,
            0.004687,
            0.0056549,
            2357.0,
            2753.25,
            4.0,
            5.0,
            4.0,
            4.45,
            5.008,
            5.88495,
        ),
        (0.7, *by_hash["4a12332d65b5"][1:]),
    ]
    # config d0fb6e64ab9b: the 10 one-model runs at temperature 0 (all but 0005 and 0012):
    # 5 passed (0004, 0006, 0007, 0009 critical; 0013 critical; 0008 is at 0.7), mean
    # (5 x 60 + 90 + 4 x 100) / 10 = 79
    assert rows(kyc_summary, "config_hash") == [
        (
            "2dbcf4a3a512",
            1,
            1,
            1.0,
            0.206549314,
            1.0,
            1,
            95.0,
            0,
            0.004924,
            0.004924,
            0.004924,
            0.004924,
            2369.0,
            2369.0,
            5.0,
            5.0,
            4.0,
            4.0,
            5.304,
            5.304,
        ),
        (
            "4a12332d65b5",
            4,
            3,
            0.75,
            0.300641843,
            0.954412739,
            2,
            92.5,
            0,
            0.01972,
            0.006573333,
            0.004948,
            0.0049823,
            2382.5,
            2401.15,
            4.0,
            4.0,
            4.0,
            4.0,
            5.2175,
            5.2809,
        ),
        (
            "9745ee00e2c8",
            1,
            1,
            1.0,
            0.206549314,
            1.0,
            0,
            100.0,
            0,
            0.0042548,
            0.0042548,
            0.0042548,
            0.0042548,
            2404.0,
            2404.0,
            4.0,
            4.0,
            4.0,
            4.0,
            5.116,
            5.116,
        ),
        (
            "d0fb6e64ab9b",
            10,
            5,
            0.5,
            0.236593091,
            0.763406909,
            6,
            79.0,
            0,
            0.046334,
            0.0092668,
            0.004687,
            0.0058031,
            2315.0,
            2827.75,
            4.0,
            4.55,
            4.0,
            4.55,
            4.9095,
            5.9578,
        ),
    ]
    agent = rows(kyc_summary, "agent")[0]
    assert (
        rows(kyc_summary, "model")
        == [
            ("gpt-4.1", *by_hash["2dbcf4a3a512"][1:]),  # only KYC-2026-0012
            ("gpt-4.1-2025-04-14", *agent[1:]),  # every KYC run
            ("gpt-4.1-mini-2025-04-14", *by_hash["9745ee00e2c8"][1:]),  # only KYC-2026-0005
        ]
    )
    assert rows(kyc_summary, "service.version") == [("2.3.0", *rows(kyc_summary, "agent")[0][1:])]


# --- trials: --case-key app.refund_policy makes the support runs trials of two cases ------------


def test_trials_pass_hat_k_and_disagreement():
    analysis = analyze_paths(
        [SAMPLES / "support"], case_key="app.refund_policy", packs=(load_default_pack(),)
    )
    trials = build_summary(analysis)["metrics"]["trials"]
    # escalate: 9 runs, 8 passed (TCK-1006 has a high finding); refund (1002, 1009, 1012): 3
    # runs, 3 passed. pass^k = C(c, k) / C(n, k): escalate C(8,k)/C(9,k) = (9 - k) / 9,
    # refund 1 for k <= 3. k = 1: (8/9 + 1) / 2 = 17/18; k = 2: (7/9 + 1) / 2 = 8/9;
    # k = 3: (6/9 + 1) / 2 = 5/6; k >= 4: escalate only, (9 - k) / 9.
    assert trials["pass_hat_k"] == [
        {"k": 1, "cases": 2, "trials": 12, "value": 0.944444444},
        {"k": 2, "cases": 2, "trials": 12, "value": 0.888888889},
        {"k": 3, "cases": 2, "trials": 12, "value": 0.833333333},
        {"k": 4, "cases": 1, "trials": 9, "value": 0.555555556},
        {"k": 5, "cases": 1, "trials": 9, "value": 0.444444444},
        {"k": 6, "cases": 1, "trials": 9, "value": 0.333333333},
        {"k": 7, "cases": 1, "trials": 9, "value": 0.222222222},
        {"k": 8, "cases": 1, "trials": 9, "value": 0.111111111},
        {"k": 9, "cases": 1, "trials": 9, "value": 0.0},
    ]
    assert trials["cases"] == 2 and trials["cases_with_trials"] == 2 and trials["runs"] == 12
    assert trials["trials_per_case"] == [{"k": 3, "cases": 1}, {"k": 9, "cases": 1}]
    # Answers differ in both cases (each ticket is answered about its own order); tool
    # sequences: the three refunds all chercher_commande, creer_remboursement (same), the
    # escalations differ (TCK-1003 refunds, TCK-1005 makes 4 calls): 1 of 2.
    # Wilson 2/2 -> [0.342380228, 1]; 1/2 -> [0.094531206, 0.905468794]
    assert trials["disagreement"] == {
        "answers": {"k": 2, "n": 2, "rate": 1.0, "lo": 0.342380228, "hi": 1.0},
        "trajectories": {"k": 1, "n": 2, "rate": 0.5, "lo": 0.094531206, "hi": 0.905468794},
    }


def test_an_unknown_correct_threshold_is_named(default_analysis):
    with pytest.raises(ValueError, match="unknown severity 'bogus'; expected one of critical"):
        build_summary(default_analysis, correct_at="bogus")


def test_case_class_option_names_another_attribute():
    analysis = analyze_paths([SAMPLES / "support"], packs=(load_default_pack(),))
    summary = build_summary(analysis, case_class="app.refund_policy")
    assert summary["metrics"]["methods"]["case_class"] == "run attribute app.refund_policy"
    assert [
        (r["group"], r["runs"], r["passed_runs"])
        for r in summary["metrics"]["breakdowns"]["case_class"]
    ] == [("escalate", 9, 8), ("refund", 3, 3)]


# --- schema -------------------------------------------------------------------------------------


def validator():
    return Draft202012Validator(schema("summary.schema.json"))


def test_summary_schema_is_valid_and_shipped():
    Draft202012Validator.check_schema(schema("summary.schema.json"))
    assert schema("summary.schema.json")["properties"]["summary_version"] == {
        "title": "summary version",
        "description": "Layout version of this file; bumped when a key changes meaning or "
        "disappears.",
        "const": SUMMARY_VERSION,
    }


def test_sample_summaries_validate(default_summary, kyc_summary):
    for summary in (default_summary, kyc_summary):
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator().iter_errors(summary)]
        assert errors == []


def test_schema_rejects_unknown_keys_and_wrong_types(default_summary):
    bad = json.loads(json.dumps(default_summary))
    bad["metrics"]["cost"]["total"] = 1.0  # not a key of the layout
    bad["metrics"]["tails"][0]["p50"] = "cheap"
    bad["metrics"]["trials"]["disagreement"]["answers"]["rate"] = 1.5
    messages = sorted(e.message for e in validator().iter_errors(bad))
    assert len(messages) == 3
    assert any("'total' was unexpected" in m for m in messages)
    assert any("'cheap' is not of type" in m for m in messages)
    assert any("1.5 is greater than the maximum of 1" in m for m in messages)


def test_json_output_is_the_summary(tmp_path):
    result = CliRunner().invoke(
        main, ["report", str(SAMPLES / "kyc"), "--rules", str(KYC_PACK), "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert list(validator().iter_errors(summary)) == []
    assert summary["metrics"]["cost"]["cost_per_correct_run_usd"] == 0.00752328


# --- terminal -----------------------------------------------------------------------------------


def test_terminal_headline_figures(kyc_summary):
    lines = terminal_summary(kyc_summary)
    assert all(len(line) <= 100 for line in lines)
    assert not any("\x1b" in line for line in lines)
    start = lines.index(next(line for line in lines if line.startswith("cost ")))
    assert lines[start:] == [
        "cost     $0.0752 over 16 priced runs (0 unpriced); retries $0",
        "  per run p50 $0.004871 [$0.004530, $0.004950] (n = 16)",
        "  per run p95 $0.005359 (n too small for an interval) (n = 16)",
        "  per correct run $0.007523 (10 of 16 runs: no finding at or above high)",
        "routing  no pick by model family (correct: no finding at or above high; 10+ judged runs)",
        "  only gpt-4.1 has 10 judged runs or more with a known cost: no alternative to compare",
        "  gpt-4.1                         10/16 correct  mean $0.004702/run",
        "",
        "omission per required tool: runs without it before the answer / runs judged",
        "  TOOL                                       OMITTED    RATE  95% INTERVAL",
        "  lookup_beneficial_owners                      2/15   13.3%  [3.7%, 37.9%]",
        "  screen_sanctions                              3/15   20.0%  [7.0%, 45.2%]",
    ]


def test_terminal_shows_trials_only_when_cases_repeat(default_summary):
    lines = terminal_summary(default_summary)
    assert not any(line.startswith("trials") for line in lines)
    analysis = analyze_paths(
        [SAMPLES / "support"], case_key="app.refund_policy", packs=(load_default_pack(),)
    )
    lines = terminal_summary(build_summary(analysis))
    trials = [line for line in lines if line.startswith("trials") or "disagree" in line]
    assert trials == [
        "trials   2 cases with 2+ runs (12 runs); pass^1 0.944 (2 cases), pass^2 0.889 (2 cases), "
        "pass^3 0.8…",
        "  trials disagree: answers 2/2 100.0% [34.2%, 100.0%]; tool sequences 1/2 50.0% "
        "[9.5%, 90.5%]",
    ]
    assert all(len(line) <= 100 for line in lines)


def test_terminal_colour_only_on_request(kyc_summary):
    plain = terminal_summary(kyc_summary)
    coloured = terminal_summary(kyc_summary, color=True)
    assert any("\x1b[" in line for line in coloured)
    strip = [
        line.replace("\x1b[1m", "")
        .replace("\x1b[31m", "")
        .replace("\x1b[33m", "")
        .replace("\x1b[0m", "")
        for line in coloured
    ]
    assert strip == plain
    # CliRunner's stdout is not a terminal: no escape codes
    result = CliRunner().invoke(main, ["report", str(SAMPLES / "kyc"), "--rules", str(KYC_PACK)])
    assert result.exit_code == 0 and "\x1b" not in result.output


def test_unpriced_model_is_listed_and_its_cost_is_never_zero(tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text(
        'currency: USD\nas_of: "2026-11-01"\nmodels:\n'
        "  - {model: gpt-4.1-mini, match: '^gpt-4\\.1-mini(-\\d{4}-\\d{2}-\\d{2})?$', "
        "input: 0.40, output: 1.60, cached_input: 0.10}\n",
        encoding="utf-8",
    )
    from analyzer.pricing import load_prices

    analysis = analyze_paths(
        [SAMPLES / "support", SAMPLES / "realestate"],
        packs=(load_default_pack(),),
        prices=load_prices(prices),
    )
    summary = build_summary(analysis)
    # support priced as before: 0.0074468; the 12 real-estate runs (gpt-4o-mini) unpriced: their
    # 26 calls, 7124 input and 475 output tokens listed; the judged total is unknown, so is the
    # cost per correct run (23 of 24 correct: TCK-1006 has a high finding)
    assert summary["metrics"]["cost"] == {
        "total_usd": 0.0074468,
        "recorded_total_usd": None,
        "priced_runs": 12,
        "unpriced_runs": 12,
        "unpriced_models": [
            {
                "model": "gpt-4o-mini-2024-07-18",
                "reason": "no price",
                "model_calls": 26,
                "runs": 12,
                "input_tokens": 7124,
                "output_tokens": 475,
                "cached_input_tokens": 0,
            }
        ],
        "retry_cost_usd": 0.0,
        "retry_cost_unknown_runs": 0,
        "judged_runs": 24,
        "judged_cost_usd": None,
        "correct_runs": 23,
        "cost_per_correct_run_usd": None,
        "correct_by": "findings",
        "correct_threshold": "high",
    }
    # cost tail over the 12 priced runs (x 1e-6): 531.2 541.6 544.4 545.6 564 564.4 566.4 568.8
    # 675.2 772.8 773.2 799.2; p50 h = 5.5 -> 565.4; n = 12: P(B <= 2) = 0.0193, P(B <= 3) =
    # 0.073 -> ranks (3, 10) -> 544.4, 772.8; p95 h = 10.45 -> 773.2 + 0.45 x 26 = 784.9;
    # p99 h = 10.89 -> 796.34
    tail = summary["metrics"]["tails"][0]
    assert tail == {
        "metric": "cost_usd", "runs": 24, "n": 12, "missing": 12, "max": 0.0007992,
        "p50": 0.0005654, "p50_lo": 0.0005444, "p50_hi": 0.0007728,
        "p95": 0.0007849, "p95_lo": None, "p95_hi": None,
        "p99": 0.00079634, "p99_lo": None, "p99_hi": None,
    }  # fmt: skip
    lines = terminal_summary(summary)
    assert (
        "  unpriced gpt-4o-mini-2024-07-18: no price, 26 calls, 7,124 in / 475 out tokens" in lines
    )
    assert "  per correct run unknown (23 of 24 runs: no finding at or above high)" in lines
    assert list(validator().iter_errors(summary)) == []


@pytest.mark.parametrize("pack", ["default", "kyc", "none"])
def test_summary_of_a_partitioned_analysis_is_the_one_of_one_partition(pack):
    """The runs' facts of four partitions, read side by side, give every figure of one
    partition; another case class is read from the runs themselves."""
    from analyzer.engine import analyze_paths

    packs = {
        "default": (load_default_pack(),),
        "kyc": tuple(load_packs([KYC_PACK])),
        "none": (),
    }[pack]
    reference = build_summary(analyze_paths([SAMPLES], packs=packs))
    analysis = analyze_paths([SAMPLES], partitions=4, jobs=1, packs=packs)
    assert analysis.facts is None or len(analysis.facts.parts) == 4
    assert build_summary(analysis) == reference
    assert build_summary(analysis, case_class="service.name") == build_summary(
        analyze_paths([SAMPLES], packs=packs), case_class="service.name"
    )


def test_sections_computed_side_by_side_are_those_computed_one_by_one(monkeypatch):
    """The summary's facts' parts are read side by side: the same summary on one thread, and
    with more threads than parts."""
    from analyzer import workers
    from analyzer.engine import analyze_paths

    analysis = analyze_paths([SAMPLES], partitions=4, jobs=1, packs=(load_default_pack(),))
    summaries, asked = [], []

    for threads in (1, 2, 32):

        def cpus(threads: int = threads) -> int:
            asked.append(threads)
            return threads

        monkeypatch.setattr(workers, "default_jobs", cpus)
        summaries.append(json.dumps(build_summary(analysis), sort_keys=True))
    assert asked == [1, 2, 32]  # the facts' reading
    assert summaries[0] == summaries[1] == summaries[2]
    assert summaries[0] == json.dumps(
        build_summary(analyze_paths([SAMPLES], packs=(load_default_pack(),))), sort_keys=True
    )
