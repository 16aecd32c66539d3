"""Plugin rule types used by the tests (loaded as plugin_example:Class)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analyzer.checks.base import CHECK_SCHEMA, Check, CheckContext, RunFinding

__all__ = ["Crashy", "MaxLength", "Ranked", "VectorCrash"]


class MaxLength:
    """Answers are at most max_chars characters long."""

    def __init__(self, max_chars: int):
        self.max_chars = max_chars

    def check_run(self, run, steps):
        answer = run["answer"]
        if answer is not None and len(answer) > self.max_chars:
            spans = [s["span_id"] for s in steps if s["span_id"] == run["answer_span_id"]]
            yield RunFinding(
                "too_long",
                f"answer is {len(answer)} chars > max_chars {self.max_chars}",
                span_ids=spans,
            )


class Crashy:
    """Raises on runs whose answer contains the trigger; flags nothing otherwise."""

    def __init__(self, trigger: str):
        self.trigger = trigger

    def check_run(self, run, steps):
        if self.trigger in (run["answer"] or ""):
            raise RuntimeError(f"{self.trigger} in the answer")
        return [{"kind": "seen", "detail": f"{len(steps)} steps"}] if run["answer"] == "x" else []


class Ranked:
    """Yields mappings placed by ``pos``, against the order of their kinds and of yielding."""

    def check_run(self, run, steps):
        yield {"kind": "alpha", "detail": "placed second", "pos": 1}
        yield {"kind": "zulu", "detail": "placed first", "pos": 0}


@dataclass(frozen=True, kw_only=True)
class VectorCrash(Check):
    """A whole-RunSet check that crashes when a run answered `explode` is among its runs."""

    kinds = ("flagged",)
    flag: str

    def check(self, ctx: CheckContext) -> pl.DataFrame:
        if (ctx.runs.get_column("answer") == "explode").any():
            raise ValueError("cannot handle an explosion")
        return (
            ctx.runs.filter(pl.col("answer") == self.flag)
            .select(
                "run_id",
                kind=pl.lit("flagged"),
                tool=pl.lit(None, pl.String),
                argument=pl.lit(None, pl.String),
                detail=pl.lit("answer is the flag"),
                span_ids=pl.concat_list("answer_span_id"),
            )
            .cast({k: v for k, v in CHECK_SCHEMA.items() if k != "_pos"})
        )
