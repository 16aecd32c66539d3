"""The one-way flow: files -> span table -> normalized spans -> runs and steps -> findings."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from analyzer.ingest import Ingested, read_traces
from analyzer.runs import RunSet, build_runs

if TYPE_CHECKING:
    from analyzer.checks import Evaluation
    from analyzer.pack import Pack
    from analyzer.pricing import PriceTable

__all__ = ["Analysis", "analyze", "analyze_paths"]


@dataclass
class Analysis:
    """Everything reconstructed from a batch of trace files."""

    ingested: Ingested
    normalized: pa.Table
    runs: RunSet
    packs: tuple[Pack, ...] = ()
    evaluation: Evaluation | None = None  # None when no pack was applied
    prices: PriceTable | None = None


def analyze(
    ingested: Ingested,
    *,
    run_key: str | None = None,
    case_key: str | None = None,
    packs: Sequence[Pack] = (),
    prices: PriceTable | None = None,
) -> Analysis:
    """Normalize the span table, rebuild its runs, price them and apply the rule packs.

    ``prices`` defaults to the bundled table (``rules/prices.yaml``). The runs then carry
    ``cost_usd``, ``retries``, ``retry_cost_usd``, and, when packs were applied,
    ``findings`` (count) and ``score`` (/100).
    """
    from analyzer.conventions import normalize
    from analyzer.pricing import apply_prices, load_prices

    normalized = normalize(ingested.spans)
    runset = build_runs(ingested.spans, normalized, run_key=run_key, case_key=case_key)
    ingested.log.runs = runset.runs.height
    prices = prices if prices is not None else load_prices()
    runset = _with_retries(apply_prices(runset, prices))
    evaluation = None
    if packs:
        from analyzer.checks import evaluate

        evaluation = evaluate(packs, runset)
        runset = _with_findings(runset, evaluation, packs)
    return Analysis(
        ingested=ingested,
        normalized=normalized,
        runs=runset,
        packs=tuple(packs),
        evaluation=evaluation,
        prices=prices,
    )


def _with_retries(runset: RunSet) -> RunSet:
    """Add ``retries`` and ``retry_cost_usd`` (the cost of the superseded attempts) to runs."""
    import polars as pl

    from analyzer.checks.retries import retry_steps

    superseded = retry_steps(runset)
    cost = superseded.join(
        runset.steps.select("run_id", "span_id", "cost_usd"), on=["run_id", "span_id"], how="left"
    )
    per_run = cost.group_by("run_id").agg(
        pl.col("count").sum().alias("retries"),
        # null when a superseded model call is unpriced; HTTP resends cost nothing we can see
        pl.when(pl.col("cost_usd").is_null() & pl.col("span_id").is_not_null())
        .then(None)
        .otherwise(pl.col("cost_usd").fill_null(0.0))
        .sum()
        .alias("_cost"),
        (pl.col("cost_usd").is_null() & pl.col("span_id").is_not_null()).any().alias("_unknown"),
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
    """Add ``findings`` (count per run) and ``score`` (/100 from rule weights) to runs."""
    import polars as pl

    from analyzer.metrics import rule_weights, run_scores

    counts = evaluation.findings.group_by("run_id").len("findings")
    scores = run_scores(runset.runs, evaluation.findings, weights=rule_weights(packs))
    runs = (
        runset.runs.join(counts, on="run_id", how="left")
        .with_columns(pl.col("findings").fill_null(0).cast(pl.Int64))
        .join(scores.select("run_id", "score"), on="run_id", how="left")
    )
    return dataclasses.replace(runset, runs=runs)


def analyze_paths(
    paths: list[str | Path],
    *,
    run_key: str | None = None,
    case_key: str | None = None,
    packs: Sequence[Pack] = (),
    prices: PriceTable | None = None,
    progress: Callable[[str, int], None] | None = None,
    jobs: int | None = None,
) -> Analysis:
    """Read `paths`, rebuild their runs, price them and apply the rule packs (if any)."""
    return analyze(
        read_traces(paths, progress=progress, jobs=jobs),
        run_key=run_key,
        case_key=case_key,
        packs=packs,
        prices=prices,
    )
