"""summary.json: the versioned figures of a report (``schemas/summary.schema.json``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import polars as pl

from analyzer.checks.base import SEVERITIES
from analyzer.metrics import stats as m
from analyzer.metrics.facts import TOTALS, facts_of
from analyzer.metrics.steps import STEP_CAP, step_rows

if TYPE_CHECKING:
    from analyzer.metrics.facts import SummaryFacts
    from analyzer.metrics.labels import LabelScores, LabelSet

__all__ = [
    "BREAKDOWNS",
    "CORRECT_THRESHOLD",
    "DEFAULT_CASE_CLASS",
    "SEVERITIES",
    "SUMMARY_TAILS",
    "SUMMARY_VERSION",
    "build_summary",
    "findings_summary",
]

#: Bumped whenever a key changes meaning or disappears (2: metrics, labels).
SUMMARY_VERSION = 3
#: The rate tables listed under ``metrics`` (the rules' reach and reasons are in ``checks``).
METRIC_RATES = ("rule_rates", "kind_rates", "omission_rates", "rule_coverage")
#: Per-run quantities whose tails summary.json reports, in this order.
SUMMARY_TAILS = (
    "cost_usd",
    "input_tokens",
    "output_tokens",
    "tokens",
    "model_calls",
    "tool_calls",
    "duration_s",
    "retries",
    "score",
)
#: The run attribute read as the case class unless ``--case-class`` names another.
DEFAULT_CASE_CLASS = "app.case_type"
#: Summary key of each breakdown -> what `metrics.breakdown` groups by (case_class: the option).
BREAKDOWNS = (
    "model",
    "model_family",
    "temperature",
    "agent",
    "case_class",
    "config_hash",
    "service.version",
)
#: Without labels, a run is correct when it has no finding at or above this severity (the
#: default; `build_summary` takes another, the CLI gives --fail-on's).
CORRECT_THRESHOLD = "high"
#: Floats are rounded to this many decimals, so the file is the same on every machine.
_DECIMALS = 9

_METHODS = {
    "quantiles": "linear interpolation between order statistics (Hyndman & Fan type 7); "
    "null values (unknown cost) left out and counted as missing",
    "quantile_intervals": "distribution-free 95% interval from order statistics (binomial ranks, "
    "equal tails); null when n is too small (n < 6 for p50, < 72 for p95, < 368 for p99)",
    "rates": "Wilson score interval at 95% (z = 1.96); null when the denominator is 0; a rule's "
    "rate counts the runs it judged (checked or partial, or with a finding)",
    "cost": "total_usd sums the priced runs; cost_per_correct_run_usd = total cost of the judged "
    "runs / correct runs, null when one of them is unpriced or none is correct",
    "trials": "runs sharing a case id are trials; pass^k = C(c,k)/C(n,k) averaged over cases "
    "with n >= k (tau-bench); disagreement = share of cases with 2+ trials whose answers "
    "(whitespace- and case-folded) or tool sequences differ",
    "temperature": "a run's temperature is that of its model calls (null: none recorded, or "
    "several); per temperature: omission rate per required tool over the runs at that "
    "temperature, and disagreement over the trials of a case at that temperature (cases with "
    "2+ runs at it); correct rate and cost per temperature are in breakdowns.temperature",
    "steps": "a step is a model call's position among its run's model calls (1 = first; "
    f"{STEP_CAP} = the {STEP_CAP}th and later), grouped with the run's agent and the call's "
    "model; cost of a call: mean and p95 (type 7) over its priced calls; runs: those with a "
    "call in the group, correct as metrics.methods.correct says (Wilson interval over the "
    "judged runs)",
}


def build_summary(
    analysis,
    labels: LabelSet | LabelScores | None = None,
    *,
    case_class: str = DEFAULT_CASE_CLASS,
    correct_at: str = CORRECT_THRESHOLD,
    routing_min_runs: int = m.ROUTING_MIN_RUNS,
) -> dict[str, Any]:
    """The summary of an analysis: accounting, run totals, findings, metrics and labels.

    "Correct" has one meaning throughout (``metrics.methods.correct`` says it): with
    ``labels`` (from `analyzer.metrics.labels.load_labels`, or already scored: `LabelScores`, as
    `--redact` does before redacting), a labelled run whose label fields are all
    right; without them, a run with no finding at or above ``correct_at``.
    ``case_class`` is the run attribute the ``case_class`` breakdown groups by;
    ``routing_min_runs`` the judged runs a model family needs for the routing pick
    (`metrics.routing`).
    """
    from analyzer import __version__

    facts = facts_of(analysis, case_class)
    log = analysis.ingested.log
    scored = None
    if labels is not None:
        from analyzer.metrics.labels import scored as scored_labels

        scored = scored_labels(labels, analysis.runs)
    passed = scored.passed() if scored is not None else None
    runs = facts.runs()
    run_totals, metrics = _metrics(analysis, facts, runs, passed, correct_at)
    by_labels = scored is not None
    metrics["methods"]["correct"] = (
        "a labelled run whose label fields are all right (runs without a label are not judged)"
        if by_labels
        else f"a run with no finding at or above {correct_at}"
    )
    metrics["routing"] = m.routing(
        metrics["breakdowns"]["model_family"], min_runs=routing_min_runs, by_labels=by_labels
    )
    summary = {
        "summary_version": SUMMARY_VERSION,
        "agenttrace_version": __version__,
        "ingest": {**log.as_dict(), "files_skipped": analysis.ingested.skipped},
        "runs": run_totals,
        "packs": [
            {"name": pack.name, "rules": len(pack.rules), "sha256": pack.sha256}
            for pack in analysis.packs
        ],
        "findings": findings_summary(analysis, facts),
        "checks": checks_summary(analysis, facts),
        "metrics": metrics,
        "labels": scored.summary() if scored is not None else None,
    }
    return _clean(summary)


def _runs_section(runs: pl.DataFrame) -> dict[str, Any]:
    """Run counts, and the sums of the run columns `facts.TOTALS`: calls 0 when no run has a
    value, tokens null."""

    def total(col: str) -> int | None:
        series = runs.get_column(col)
        if series.null_count() == len(series):
            return 0 if col.endswith("_calls") else None
        return int(series.sum())

    by_agent = runs.group_by(pl.col("agent").fill_null("-")).len().sort("agent").iter_rows()
    return {
        "count": runs.height,
        "with_answer": int(runs.get_column("has_answer").sum()),
        "without_answer": int((~runs.get_column("has_answer")).sum()),
        "with_content": int(runs.get_column("has_content").sum()),
        **{col: total(col) for col in TOTALS},
        "agents": {name: n for name, n in by_agent},
        "models": runs.get_column("models").explode().drop_nulls().unique().sort().to_list(),
    }


def findings_summary(analysis, facts: SummaryFacts) -> dict[str, Any]:
    """Finding counts: total, by severity, and per rule and kind with the runs involved."""
    evaluation = analysis.evaluation
    empty = {"total": 0, "by_severity": dict.fromkeys(SEVERITIES, 0), "by_rule": []}
    if evaluation is None or facts.rates is None:
        return {**empty, "check_errors": []}
    found = evaluation.findings
    by_severity = dict(found.group_by("severity").len().iter_rows())
    applied = facts.rates["rule_coverage"].select(
        "pack",
        "rule_id",
        pl.col("applied").alias("runs_applied"),
        pl.col("checked").alias("runs_checked"),
        pl.col("unverifiable").alias("runs_unverifiable"),
    )
    per_kind = found.group_by("pack", "rule_id", "kind", "severity").agg(
        pl.len().alias("findings"), pl.col("run_id").n_unique().alias("runs")
    )
    rows = (
        applied.join(per_kind, on=["pack", "rule_id"], how="left")
        .with_columns(pl.col("findings", "runs").fill_null(0))
        .sort("pack", "rule_id", "kind", nulls_last=True)
    )
    return {
        "total": found.height,
        "by_severity": {s: int(by_severity.get(s, 0)) for s in SEVERITIES},
        "by_rule": rows.to_dicts(),
        "check_errors": [
            {"run_id": e.run_id, "rule_id": e.rule_id, "pack": e.pack, "error": e.error}
            for e in evaluation.errors
        ],
    }


def checks_summary(analysis, facts: SummaryFacts) -> dict[str, Any]:
    """What each rule judged (`metrics.rule_checks`) and what makes a clean result unreadable
    as clean (`metrics.unchecked_rules`)."""
    rates = facts.rates
    if analysis.evaluation is None or rates is None:
        return {"rules": [], "unchecked": []}
    rules = m.rule_checks(
        analysis.packs, rates["rule_coverage"], rates["rule_reach"], rates["rule_reasons"]
    )
    return {"rules": rules, "unchecked": m.unchecked_rules(rules, rates["rule_reach"])}


# --- metrics -------------------------------------------------------------------------------------


def _cost_section(
    analysis, passed: pl.DataFrame | None, correct_at: str, figures: dict[str, Any]
) -> dict[str, Any]:
    """The cost section from its figures: with the unpriced models, the cost per correct run
    and how runs were judged correct."""
    from analyzer.pricing import unpriced_models

    judged_cost, correct = figures["judged_cost_usd"], figures["correct_runs"]
    unpriced = analysis.unpriced
    if unpriced is None:
        unpriced = unpriced_models(analysis.runs.steps, analysis.runs.runs)
    return {
        **figures,
        "unpriced_models": unpriced.to_dicts(),
        "cost_per_correct_run_usd": judged_cost / correct
        if judged_cost is not None and correct
        else None,
        "correct_by": "findings" if passed is None else "labels",
        "correct_threshold": correct_at if passed is None else None,
    }


def _metrics(
    analysis, facts: SummaryFacts, runs: pl.DataFrame, passed: pl.DataFrame | None, correct_at: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The runs section (`_runs_section`) and the metrics; `passed`: the labels' verdicts."""
    evaluation = analysis.evaluation
    findings = evaluation.findings if evaluation is not None else None
    weights = m.rule_weights(analysis.packs)
    rates = facts.rates or {}
    case_class = facts.case_class
    # what every breakdown adds up, computed once
    per_run = m.breakdown_runs(runs, findings=findings, weights=weights, at_least=correct_at)
    # the runs judged and whether they passed: by the labels, else by their findings
    judged = passed if passed is not None else per_run.select("run_id", "passed")
    return _runs_section(runs), {
        "methods": {**_METHODS, "case_class": f"run attribute {case_class}"},
        "tails": m.tails(runs, metrics=SUMMARY_TAILS).to_dicts(),
        "cost": _cost(analysis, runs, judged, passed, correct_at),
        **{name: rates[name].to_dicts() if name in rates else [] for name in METRIC_RATES},
        "content_coverage": m.content_coverage(runs).to_dicts()[0],
        "scores": _scores(runs),
        "trials": _trials(runs, findings, judged, correct_at),
        "breakdowns": {
            key: _breakdown(runs, case_class if key == "case_class" else key, per_run, passed)
            for key in BREAKDOWNS
        },
        "temperature": _temperature(rates, runs),
        "steps": _steps(runs, judged),
    }


def _cost(
    analysis,
    runs: pl.DataFrame,
    judged: pl.DataFrame,
    passed: pl.DataFrame | None,
    correct_at: str,
) -> dict[str, Any]:
    """The cost section; `judged`: each judged run and whether it passed (by the labels when
    `passed`, else by its findings)."""
    cost = runs.get_column("cost_usd")
    priced = runs.height - cost.null_count()
    retry = runs.get_column("retry_cost_usd")
    recorded = runs.get_column("recorded_cost_usd")
    rows = judged.join(runs.select("run_id", "cost_usd"), on="run_id", how="left")
    correct = int(rows.get_column("passed").sum())
    judged_cost = None
    if rows.height and rows.get_column("cost_usd").null_count() == 0:
        judged_cost = _total(rows.get_column("cost_usd"))
    return _cost_section(
        analysis,
        passed,
        correct_at,
        {
            "total_usd": _total(cost) if priced else None,
            "recorded_total_usd": _total(recorded)
            if recorded.null_count() < len(recorded)
            else None,
            "priced_runs": priced,
            "unpriced_runs": cost.null_count(),
            "retry_cost_usd": _total(retry) if retry.null_count() < len(retry) else None,
            "retry_cost_unknown_runs": retry.null_count(),
            "judged_runs": rows.height,
            "judged_cost_usd": judged_cost,
            "correct_runs": correct,
        },
    )


def _total(values: pl.Series) -> float:
    """The sum of float values in ascending order (`metrics.ordered_sum`): the same whatever
    the order of the runs."""
    return float(values.sort().sum())


def _scores(runs: pl.DataFrame) -> dict[str, Any]:
    if "score" not in runs.columns:
        return {"mean": None, "p50": None, "min": None, "runs": 0}
    score = runs.get_column("score").drop_nulls()
    return {
        "mean": float(score.sort().mean()) if len(score) else None,  # type: ignore[arg-type]
        "p50": m.quantile(score, 0.5),
        "min": float(score.min()) if len(score) else None,  # type: ignore[arg-type]
        "runs": len(score),
    }


def _trials(runs: pl.DataFrame, findings, judged: pl.DataFrame, correct_at: str) -> dict[str, Any]:
    """Trials: runs sharing a case id; `judged`: each run and whether it passed."""
    per_case = _per_case(runs)
    multi = per_case.filter(pl.col("k") >= 2)
    max_k = int(per_case.get_column("k").max() or 1)  # type: ignore[arg-type]
    hat = m.pass_hat_k(
        runs,
        findings,
        ks=range(1, max_k + 1),
        at_least=correct_at,
        passed=judged,
    )
    spread = per_case.group_by("k").len("cases").sort("k")

    def disagreement(col: str) -> dict[str, Any]:
        n = multi.height
        k = int((multi.get_column(col) > 1).sum())
        return m.rate(k, n)

    return {
        "cases": per_case.height,
        "cases_with_trials": multi.height,
        "runs": int(multi.get_column("k").sum()),
        "trials_per_case": spread.to_dicts(),
        "pass_hat_k": hat.rename({"pass_hat_k": "value"}).to_dicts(),
        "disagreement": {
            "answers": disagreement("_answers"),
            "trajectories": disagreement("_paths"),
        },
    }


def _steps(runs: pl.DataFrame, judged: pl.DataFrame) -> list[dict[str, Any]]:
    """Cost versus quality per step (`steps.step_rows`) of the runs, `judged`: each judged
    run and whether it passed."""
    if "call_models" not in runs.columns:
        return []
    frame = runs.select("run_id", "agent", "call_models", "call_costs").join(
        judged.select("run_id", pl.col("passed").alias("correct")),
        on="run_id",
        how="left",
        maintain_order="left",
    )
    return step_rows(frame)


def _temperature(rates: dict[str, pl.DataFrame], runs: pl.DataFrame) -> dict[str, Any]:
    """The temperature axis: omission rates per temperature and tool (from the facts' rate
    tables), and trial disagreement per temperature (`runs`: at least those with a case id)."""
    omissions = rates.get("omission_rates_by_temperature")
    return {
        "omission_rates": omissions.to_dicts() if omissions is not None else [],
        "disagreement": _disagreement_by_temperature(runs),
    }


def _disagreement_by_temperature(runs: pl.DataFrame) -> list[dict[str, Any]]:
    """Per temperature (a run's ``temperature``; null last): the cases with 2+ trials at that
    temperature, and the share of them whose answers, or tool sequences, differ."""
    if "temperature" not in runs.columns:
        return []
    per_case = _per_case(runs, "temperature").filter(pl.col("k") >= 2)
    per_temperature = (
        per_case.group_by("temperature")
        .agg(
            pl.len().alias("cases_with_trials"),
            pl.col("k").sum().alias("runs"),
            (pl.col("_answers") > 1).sum().alias("_answers"),
            (pl.col("_paths") > 1).sum().alias("_paths"),
        )
        .sort("temperature", nulls_last=True)
    )
    return [
        {
            "temperature": row["temperature"],
            "cases_with_trials": int(row["cases_with_trials"]),
            "runs": int(row["runs"]),
            "answers": m.rate(int(row["_answers"]), int(row["cases_with_trials"])),
            "trajectories": m.rate(int(row["_paths"]), int(row["cases_with_trials"])),
        }
        for row in per_temperature.iter_rows(named=True)
    ]


def _per_case(runs: pl.DataFrame, *keys: str) -> pl.DataFrame:
    """Per case id (and ``keys``) of the runs with one: its runs ``k``, and how many distinct
    answers (whitespace- and case-folded; a missing answer is a value too) and tool sequences
    they have (``_answers``, ``_paths``)."""
    answer = pl.col("answer").str.replace_all(r"\s+", " ").str.strip_chars().str.to_lowercase()
    return (
        runs.filter(pl.col("case_id").is_not_null())
        .group_by(*keys, "case_id")
        .agg(
            pl.len().alias("k"),
            answer.fill_null("\x00no answer").n_unique().alias("_answers"),
            pl.col("tool_sequence").list.join("\x1f").n_unique().alias("_paths"),
        )
    )


def _breakdown(
    runs: pl.DataFrame, by: str, per_run: pl.DataFrame, passed: pl.DataFrame | None
) -> list[dict[str, Any]]:
    """Rows of `metrics.breakdown` (group under ``group``) from the runs' `per_run` figures
    (`metrics.breakdown_runs`); with labels, also per group: ``label_runs``,
    ``label_correct_runs``, ``label_correct_rate`` (+ ``_lo``, ``_hi``) and
    ``label_cost_per_correct_run`` (cost of its labelled runs / those all right)."""
    rows = m.breakdown(runs, by, per_run=per_run)
    if passed is not None:
        groups, _ = m.run_groups(runs, by)
        judged = groups.join(passed, on="run_id", how="inner").join(
            runs.select("run_id", "cost_usd"), on="run_id", how="left"
        )
        per_group = judged.group_by(by).agg(
            pl.len().cast(pl.Int64).alias("label_runs"),
            pl.col("passed").sum().cast(pl.Int64).alias("label_correct_runs"),
            pl.when(pl.col("cost_usd").null_count() == 0)
            .then(m.ordered_sum("cost_usd"))
            .alias("_cost"),
        )
        rows = rows.join(per_group, on=by, how="left", nulls_equal=True).with_columns(
            pl.col("label_runs", "label_correct_runs").fill_null(0)
        )
        rows = _with_label_rates(rows)
    return rows.rename({by: "group"}).to_dicts()


def _with_label_rates(rows: pl.DataFrame) -> pl.DataFrame:
    """Breakdown rows with ``label_runs``, ``label_correct_runs`` and ``_cost`` (the cost of
    their labelled runs, null when one is unpriced): their labelled correct rate with its
    Wilson interval and cost per correct run, ``_cost`` dropped."""
    return rows.with_columns(
        *m.wilson_columns("label_correct_runs", "label_runs", "label_correct_rate"),
        label_cost_per_correct_run=pl.when(pl.col("label_correct_runs") > 0).then(
            pl.col("_cost") / pl.col("label_correct_runs")
        ),
    ).drop("_cost")


def _clean(value: Any) -> Any:
    """Round floats (NaN and infinities become null) so output is the same everywhere."""
    if isinstance(value, float):
        return round(value, _DECIMALS) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value
