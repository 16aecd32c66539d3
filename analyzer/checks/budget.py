"""budget: cost, model calls, tool calls, tokens and duration per run under their limits."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analyzer.checks.base import Check, CheckContext, calls_over, findings, fmt_num

__all__ = ["Budget"]

_LIMITS = ("max_cost_usd", "max_model_calls", "max_tool_calls", "max_tokens", "max_duration_s")


@dataclass(frozen=True, kw_only=True)
class Budget(Check):
    """Each run stays within its budget.

    Flags
    -----
    ``budget``: one finding per limit a run exceeds (strictly above the limit); ``argument``
    names the limit. Tokens are input plus output tokens of the model calls (cached input is
    part of input). Counts include failed calls, and tool calls the model requested that no
    span recorded. Evidence: the calls beyond the limit for the call counts, else the agent
    span.

    Cost is the run's computed cost (the ``cost_usd`` column of the runs, filled from a price
    table). Where no cost was computed (no price table, a model without a price, or a run
    that recorded no model call) the cost limit is skipped for that run and counted as
    unverifiable (partial when the rule has other limits), never as passing. Likewise for runs
    that recorded no token counts.

    Why it matters
    --------------
    The cost of a process instance includes every model call, tool round trip and retry; a run
    that loops or retries blows the budget long before anyone reads its answer.

    Options
    -------
    max_cost_usd : number
        Highest cost of a run in USD.
    max_model_calls : integer
        Most model calls in a run.
    max_tool_calls : integer
        Most tool calls in a run.
    max_tokens : integer
        Most input plus output tokens in a run.
    max_duration_s : number
        Longest run, in seconds.

    At least one limit is required.

    Example
    -------
    - id: budget
      type: budget
      max_cost_usd: 0.05
      max_model_calls: 12
      max_duration_s: 60
    """

    type = "budget"
    kinds = ("budget",)

    max_cost_usd: float | None = None
    max_model_calls: int | None = None
    max_tool_calls: int | None = None
    max_tokens: int | None = None
    max_duration_s: float | None = None

    def check(self, ctx: CheckContext) -> list[pl.DataFrame]:
        limits = [name for name in _LIMITS if getattr(self, name) is not None]
        status = "unverifiable" if len(limits) == 1 else "partial"
        runs = ctx.runs
        agent = "agent_span_id"  # the evidence of a limit of the whole run
        parts: list[pl.DataFrame] = []

        def emit(over: pl.DataFrame, limit: str, detail: pl.Expr, spans: str) -> None:
            parts.append(
                findings(
                    over,
                    "budget",
                    detail,
                    argument=pl.lit(limit),
                    spans=spans,
                    pos=_LIMITS.index(limit),
                )
            )

        if self.max_cost_usd is not None:
            limit = self.max_cost_usd
            if "cost_usd" not in runs.columns:
                ctx.mark(runs, status, "no cost computed (no price table)")
            else:
                ctx.mark(runs.filter(pl.col("cost_usd").is_null()), status, "cost unknown")
                emit(
                    runs.filter(pl.col("cost_usd") > limit),
                    "max_cost_usd",
                    pl.format(
                        "cost {} USD > max_cost_usd {}", _num("cost_usd"), pl.lit(fmt_num(limit))
                    ),
                    agent,
                )
        for name, calls, what in (
            ("max_model_calls", ctx.model_calls, "model calls"),
            ("max_tool_calls", ctx.tool_calls, "tool calls"),
        ):
            limit = getattr(self, name)
            if limit is None:
                continue
            span = "span" if "span" in calls.columns else "span_id"
            over = calls_over(calls, limit, span)
            emit(over, name, pl.format(f"{{}} {what} > {name} {limit}", "_n"), "_over")
        if self.max_tokens is not None:
            limit = self.max_tokens
            tokens = runs.with_columns(
                _tokens=pl.col("input_tokens").fill_null(0) + pl.col("output_tokens").fill_null(0),
                _known=pl.col("input_tokens").is_not_null() & pl.col("output_tokens").is_not_null(),
                _any=pl.col("input_tokens").is_not_null() | pl.col("output_tokens").is_not_null(),
            )
            # A partial count already over the limit is a finding; one under it proves nothing.
            ctx.mark(
                tokens.filter(~pl.col("_known") & (pl.col("_tokens") <= limit)),
                status,
                "token counts not recorded",
            )
            emit(
                tokens.filter((pl.col("_tokens") > limit) & pl.col("_any")),
                "max_tokens",
                pl.format(
                    f"{{}} tokens > max_tokens {limit} ({{}} in + {{}} out)",
                    "_tokens",
                    _int("input_tokens"),
                    _int("output_tokens"),
                ),
                agent,
            )
        if self.max_duration_s is not None:
            limit = self.max_duration_s
            ctx.mark(runs.filter(pl.col("duration_s").is_null()), status, "duration unknown")
            # Compared in whole nanoseconds: duration_s carries float noise (60 s can arrive as
            # 60.00000000000001) and a run of exactly the limit must pass.
            ns = (pl.col("duration_s") * 1e9).round().cast(pl.Int64)
            emit(
                runs.with_columns(_ns=ns).filter(pl.col("_ns") > round(limit * 1e9)),
                "max_duration_s",
                pl.format(
                    "duration {} s > max_duration_s {}",
                    _num(pl.col("_ns") / 1e9),
                    pl.lit(fmt_num(limit)),
                ),
                agent,
            )
        return parts


def _num(col: str | pl.Expr) -> pl.Expr:
    """`fmt_num` as an expression: integers plain, other numbers to 6 significant digits."""
    e = pl.col(col) if isinstance(col, str) else col
    text = e.round_sig_figs(6).cast(pl.String).str.replace(r"\.0$", "")
    return pl.when(e.is_null()).then(pl.lit("?")).otherwise(text)


def _int(col: str) -> pl.Expr:
    return pl.when(pl.col(col).is_null()).then(pl.lit("?")).otherwise(pl.col(col).cast(pl.String))
