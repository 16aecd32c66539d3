"""required_tools: every required tool started before the run answered."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from analyzer.checks.base import Check, CheckContext, findings

__all__ = ["RequiredTools"]


@dataclass(frozen=True, kw_only=True)
class RequiredTools(Check):
    """Required tools were called before the answer.

    Flags
    -----
    For a run with an answer, each listed tool with no call started before the answer time
    (the end of the model call that gave the answer) is an ``omission``; the detail says
    "never called" or "called only after the answer". When a required tool is missing before
    the answer and the run had started the sequence (another required tool was called before
    the answer) or went on with it afterwards (a missing one was called after the answer), the
    run also gets one ``premature_answer``. A run with no answer gets one ``no_answer``
    instead.

    A call counts from its start, whether it succeeded or failed, and a call the model
    requested that no tool span recorded counts too (many instrumentations trace model calls
    only); the retries and argument rules judge those calls. Tool names match exactly.

    Why it matters
    --------------
    In a governed process (KYC, refunds) a verdict given before the mandatory checks ran is
    wrong whatever it says: the omission rate per tool is the first tool-reliability metric,
    and an answer written while checks were still outstanding is a premature answer.

    Options
    -------
    tools : list of tool names, required
        The tools every run must call before answering. An empty list checks only that
        the run answered (``no_answer``).

    Example
    -------
    - id: kyc-required-checks
      type: required_tools
      when: {attributes: {app.case_type: [kyc, kyc_renewal]}}
      tools: [screen_sanctions, lookup_beneficial_owners]
      severity: critical
    """

    type = "required_tools"
    kinds = ("omission", "premature_answer", "no_answer")
    tool_fields = ("tools",)

    tools: tuple[str, ...] = field(metadata={"schema": {"minItems": 0}})

    def check(self, ctx: CheckContext) -> list[pl.DataFrame]:
        n = len(self.tools)
        runs = ctx.answers.select("run_id", "has_answer", "answer_ns", "answer_span_id")
        calls = (
            ctx.tool_calls.filter(pl.col("tool").is_in(list(self.tools)))
            .join(runs, on="run_id")
            .with_columns(_before=pl.col("start_ns") < pl.col("answer_ns"))
            .sort("run_id", "index")  # joins do not keep order; evidence lists follow the run
        )
        per_tool = calls.group_by("run_id", "tool").agg(
            pl.col("_before").fill_null(False).sum().alias("_n_before"),
            pl.len().alias("_n_any"),
            pl.col("span").filter(~pl.col("_before").fill_null(False)).alias("_late"),
        )
        required = pl.DataFrame(
            {"tool": list(self.tools), "_pos": list(range(n))},
            schema={"tool": pl.String, "_pos": pl.Int64},
        )
        answered = runs.filter(pl.col("has_answer") & pl.col("answer_ns").is_not_null())
        ctx.mark(
            runs.filter(pl.col("has_answer") & pl.col("answer_ns").is_null()),
            "unverifiable",
            "answer time not recorded",
        )
        grid = (
            answered.join(required, how="cross")
            .join(per_tool, on=["run_id", "tool"], how="left")
            .with_columns(pl.col("_n_before", "_n_any").fill_null(0))
            .sort("run_id", "_pos")
        )
        late = pl.col("_n_any") - pl.col("_n_before")
        omissions = findings(
            grid.filter(pl.col("_n_before") == 0),
            "omission",
            pl.when(late > 0)
            .then(
                pl.format(
                    "{} called only after the answer ({} {})",
                    "tool",
                    late,
                    pl.when(late == 1).then(pl.lit("call")).otherwise(pl.lit("calls")),
                )
            )
            .otherwise(pl.format("{} never called", "tool")),
            tool="tool",
            spans=[pl.col("answer_span_id"), pl.col("_late").fill_null([])],
            pos="_pos",
        )

        per_run = grid.group_by("run_id").agg(
            (pl.col("_n_before") > 0).sum().alias("_done"),
            pl.col("tool").filter(pl.col("_n_before") == 0).alias("_missing"),
            (late > 0).any().alias("_went_on"),
            pl.col("answer_span_id").first(),
        )
        premature = per_run.filter(
            ((pl.col("_done") > 0) | pl.col("_went_on")) & (pl.col("_missing").list.len() > 0)
        )
        premature = findings(
            premature,
            "premature_answer",
            pl.format(
                "answered after {} of {} required tools; not called before the answer: {}",
                "_done",
                pl.lit(n),
                pl.col("_missing").list.join(", "),
            ),
            spans="answer_span_id",
            pos=n,
        )

        unanswered = runs.filter(~pl.col("has_answer")).select("run_id")
        called = (
            calls.join(unanswered, on="run_id")
            .group_by("run_id")
            .agg(pl.col("tool").n_unique().alias("_called"))
        )
        last_model = (
            ctx.model_calls.join(unanswered, on="run_id")
            .group_by("run_id")
            .agg(pl.col("span_id").last().alias("_last"))
        )
        no_answer = findings(
            unanswered.join(called, on="run_id", how="left").join(
                last_model, on="run_id", how="left"
            ),
            "no_answer",
            pl.format(
                "no answer; {} of {} required tools called",
                pl.col("_called").fill_null(0),
                pl.lit(n),
            )
            if n
            else pl.lit("no answer: the run ended without a final answer"),
            spans="_last",
        )
        return [omissions, premature, no_answer]
