"""Cost versus quality per step: where in a run the money goes, and how the runs fare."""

from __future__ import annotations

from typing import Any

import polars as pl

from analyzer.metrics import stats as m

__all__ = ["STEP_CAP", "step_rows"]

#: A run's model calls at this position or later are counted as one step (its last row).
STEP_CAP = 10


def step_rows(runs: pl.DataFrame) -> list[dict[str, Any]]:
    """The model calls of ``runs`` grouped by (agent of the run, step, model), where a call's
    step is its position among its run's model calls (1, 2..., `STEP_CAP` and later as one),
    sorted by them (nulls last). Per group: calls, priced calls, the mean and p95 (type 7) cost
    of a call over its priced calls, and the runs the calls belong to with how many were
    judged and correct (Wilson interval).

    ``runs`` has ``agent``, ``call_models``, ``call_costs`` (`facts._with_calls`; without them
    there is no row) and ``correct`` (bool; null: a run not judged).
    """
    if "call_models" not in runs.columns:
        return []
    n = pl.col("call_models").list.len()
    calls = (
        runs.filter(n > 0)
        .select(
            pl.int_range(pl.len(), dtype=pl.Int64).alias("_run"),
            "agent",
            "correct",
            pl.col("call_models").alias("model"),
            pl.col("call_costs").alias("cost"),
            pl.int_ranges(1, n + 1, dtype=pl.Int64).alias("step"),
        )
        .explode("model", "cost", "step")
        # + 0.0: a cost of -0.0 is 0.0, so a p95 never reads "-0.0"
        .with_columns(pl.col("step").clip(upper_bound=STEP_CAP), pl.col("cost") + 0.0)
    )
    # a run's calls at STEP_CAP and later share a group: each run counted once per group
    once = pl.col("_run").is_first_distinct()
    priced = pl.col("cost").drop_nulls().sort()
    groups = (
        calls.group_by("agent", "step", "model")
        .agg(
            pl.len().alias("calls"),
            pl.col("cost").count().alias("priced_calls"),
            priced.mean().alias("mean_cost_usd"),
            priced.quantile(0.95, interpolation="linear").alias("p95_cost_usd"),
            once.sum().alias("runs"),
            pl.col("correct").filter(once).count().alias("judged_runs"),
            pl.col("correct").filter(once).fill_null(False).sum().alias("correct_runs"),
        )
        .sort("agent", "step", "model", nulls_last=True)
    )
    rows = []
    for row in groups.iter_rows(named=True):
        rate = m.rate(row["correct_runs"], row["judged_runs"])
        rows.append(
            {
                **row,
                "correct_rate": rate["rate"],
                "correct_rate_lo": rate["lo"],
                "correct_rate_hi": rate["hi"],
            }
        )
    return rows
