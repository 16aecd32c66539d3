"""Run scores: each run's score out of 100 from the weights of the rules it failed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import polars as pl

from analyzer.checks import FINDING_SCHEMA

if TYPE_CHECKING:
    from analyzer.pack import Pack

__all__ = ["SCORE", "SEVERITY_WEIGHTS", "lost_points", "rule_weights", "run_scores"]

#: The weight of a rule without ``weight:``, by its severity: the points a run loses by
#: failing it.
SEVERITY_WEIGHTS = {"critical": 40.0, "high": 20.0, "medium": 10.0, "low": 5.0}


def rule_weights(packs: Sequence[Pack]) -> dict[tuple[str, str], float]:
    """(pack, rule_id) -> the rule's weight: its ``weight:``, else that of its severity."""
    return {
        (pack.name, rule.id): float(
            rule.weight if rule.weight is not None else SEVERITY_WEIGHTS[rule.severity]
        )
        for pack in packs
        for rule in pack.rules
    }


def run_scores(
    runs: pl.DataFrame,
    findings: pl.DataFrame | None,
    *,
    weights: Mapping[tuple[str, str], float] | None = None,
) -> pl.DataFrame:
    """Per run: ``score`` out of 100 and ``failed_rules`` (sorted rule ids).

    ``weights`` maps (pack, rule_id) to a weight (`rule_weights`); rules not in it weigh
    `SEVERITY_WEIGHTS` of their findings' severity.
    """
    out = runs.select("run_id").join(lost_points(findings, weights), on="run_id", how="left")
    return out.select(
        "run_id",
        SCORE,
        pl.col("failed_rules").fill_null(pl.lit([], pl.List(pl.String))),
    ).sort("run_id")


#: The score of a run from the points it lost (`lost_points`; null: none lost).
SCORE = (100.0 - pl.col("_lost").fill_null(0.0)).clip(0.0, 100.0).alias("score")


def lost_points(
    findings: pl.DataFrame | None, weights: Mapping[tuple[str, str], float] | None
) -> pl.DataFrame:
    """Per run with a finding: ``_lost`` (the weights of its failed rules), ``failed_rules``."""
    given = pl.DataFrame(
        [(p, r, float(w)) for (p, r), w in (weights or {}).items()],
        schema={"pack": pl.String, "rule_id": pl.String, "_w": pl.Float64},
        orient="row",
    )
    failed = (
        (findings if findings is not None else pl.DataFrame(schema=FINDING_SCHEMA))
        .group_by("run_id", "pack", "rule_id")
        .agg(pl.col("severity").first())
        .join(given, on=["pack", "rule_id"], how="left")
        .with_columns(
            _w=pl.coalesce("_w", pl.col("severity").replace_strict(SEVERITY_WEIGHTS, default=None))
        )
    )
    missing = failed.filter(pl.col("_w").is_null())
    if not missing.is_empty():
        rule = missing.row(0, named=True)
        raise ValueError(f"rule {rule['rule_id']!r} has unknown severity {rule['severity']!r}")
    return failed.group_by("run_id").agg(
        pl.col("_w").sort().sum().alias("_lost"),
        pl.col("rule_id").unique().sort().alias("failed_rules"),
    )
