"""Runs to an Analysis: retries, prices and the rule packs applied to the runs of a span table."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from analyzer.ingest import Ingested
from analyzer.runs import RunSet

if TYPE_CHECKING:
    from analyzer.checks import Evaluation
    from analyzer.checks.retries import RetryScan
    from analyzer.metrics.facts import SummaryFacts
    from analyzer.pack import Pack
    from analyzer.pricing import PriceTable

__all__ = ["Analysis", "analyze_runs", "runs_in_window", "started_in"]


@dataclass
class Analysis:
    """Everything reconstructed from a batch of trace files."""

    ingested: Ingested
    runs: RunSet
    packs: tuple[Pack, ...] = ()
    evaluation: Evaluation | None = None  # None when no pack was applied
    prices: PriceTable | None = None
    #: ``pricing.unpriced_models(runs.steps, runs.runs)`` when computed beforehand (the
    #: partitioned path does, so that a summary need not load every step); None: compute it
    unpriced: pl.DataFrame | None = None
    #: What a summary reads, merged from the partitions' (`analyzer.metrics.facts`); None: read
    #: from the tables above
    facts: SummaryFacts | None = None


def analyze_runs(
    ingested: Ingested,
    runset: RunSet,
    *,
    retries: RetryScan | None = None,
    packs: Sequence[Pack] = (),
    prices: PriceTable | None = None,
    since_ns: int | None = None,
    until_ns: int | None = None,
) -> Analysis:
    """`analyze` from runs already rebuilt (and their retries, when scanned already): the
    time window, prices, retries and rule packs; what a dataset's prebuilt runs go through."""
    from analyzer.checks.retries import all_retries
    from analyzer.pricing import apply_prices, load_prices

    if since_ns is not None or until_ns is not None:
        runset = runs_in_window(runset, since_ns, until_ns)
        if retries is not None:
            retries = retries.restrict(runset.runs.select("run_id"))
    ingested.log.runs = runset.runs.height
    prices = prices if prices is not None else load_prices()
    runset = apply_prices(runset, prices)
    if retries is None:  # once: for retry costs here and the retries rules
        retries = all_retries(runset)
    runset = _with_retries(runset, retries.found)
    evaluation = None
    if packs:
        from analyzer.checks import evaluate

        evaluation = evaluate(packs, runset, retries=retries)
        runset = _with_findings(runset, evaluation, packs)
    return Analysis(
        ingested=ingested,
        runs=runset,
        packs=tuple(packs),
        evaluation=evaluation,
        prices=prices,
    )


def runs_in_window(runset: RunSet, since_ns: int | None, until_ns: int | None) -> RunSet:
    """The runs of ``runset`` that started in [since_ns, until_ns), with their steps and sources."""
    runs = runset.runs.filter(started_in(since_ns, until_ns))
    ids = runs.select("run_id")
    return dataclasses.replace(
        runset,
        runs=runs,
        steps=runset.steps.join(ids, on="run_id", how="semi"),
        sources=runset.sources.join(ids, on="run_id", how="semi"),
        span_runs=runset.span_runs.join(ids, on="run_id", how="semi"),
    )


def started_in(since_ns: int | None, until_ns: int | None) -> pl.Expr:
    """True for the runs whose start is at or after ``since_ns`` and before ``until_ns``
    (None: no bound)."""
    start = pl.col("started_ns")
    keep = pl.lit(True)
    if since_ns is not None:
        keep = keep & (start >= since_ns)
    if until_ns is not None:
        keep = keep & (start < until_ns)
    return keep


def _with_retries(runset: RunSet, superseded: pl.DataFrame) -> RunSet:
    """Add ``retries`` and ``retry_cost_usd`` (the cost of the ``superseded`` attempts, rows of
    `retry_steps`) to runs."""

    cost = superseded.join(
        runset.steps.select("run_id", "span_id", "kind", "cost_usd"),
        on=["run_id", "span_id"],
        how="left",
    )
    # Unknown only when a superseded *model* call is unpriced: a tool call costs no tokens, and
    # HTTP resends cost nothing we can see.
    unknown = pl.col("cost_usd").is_null() & (pl.col("kind") == "model_call")
    per_run = cost.group_by("run_id").agg(
        pl.col("count").sum().alias("retries"),
        pl.col("cost_usd").fill_null(0.0).sum().alias("_cost"),
        unknown.fill_null(False).any().alias("_unknown"),
    )
    runs = (
        runset.runs.join(per_run, on="run_id", how="left")
        .with_columns(
            retries=pl.col("retries").fill_null(0).cast(pl.Int64),
            retry_cost_usd=pl.when(pl.col("_unknown").fill_null(False))
            .then(None)
            .otherwise(pl.col("_cost").fill_null(0.0).round(12)),
        )
        .drop("_cost", "_unknown")
    )
    return dataclasses.replace(runset, runs=runs)


def _with_findings(runset: RunSet, evaluation: Evaluation, packs: Sequence[Pack]) -> RunSet:
    """Add ``findings`` (count per run), ``score`` (/100 from rule weights) and
    ``failed_rules`` (the ids of the rules it has findings of) to runs."""

    from analyzer.scores import rule_weights, run_scores

    counts = evaluation.findings.group_by("run_id").len("findings")
    scores = run_scores(runset.runs, evaluation.findings, weights=rule_weights(packs))
    runs = (
        runset.runs.join(counts, on="run_id", how="left")
        .with_columns(pl.col("findings").fill_null(0).cast(pl.Int64))
        .join(scores.select("run_id", "score", "failed_rules"), on="run_id", how="left")
    )
    return dataclasses.replace(runset, runs=runs)
