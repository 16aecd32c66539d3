"""tool_requests: every tool call that carries a call id answers a model's request."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analyzer.checks.base import Check, CheckContext, findings

__all__ = ["ToolRequests"]


@dataclass(frozen=True, kw_only=True)
class ToolRequests(Check):
    """Tool calls run only when a model call of the run asked for them.

    Flags
    -----
    ``unrequested_tool_call``: a tool call that carries a tool call id, and that no model call
    of the run requested: neither by that id nor, where ids differ between the model and the
    framework, by the tool's name and arguments, else its name in order (the pairing of
    `analyzer.runs`). Tool spans with no call id are the framework's own functions and are not
    judged. A call is judged only when every model call that started before it recorded its
    output (the requests are in the output), and the run recorded at least one model call (a
    run with none did not export the calls that asked): otherwise the run is counted as
    unverifiable, never as passing. Runs without a tool call carrying an id are not applicable.

    Why it matters
    --------------
    A tool the model never asked for ran anyway: a call replayed from another conversation, a
    side effect triggered by code around the agent, or a request the trace lost. In a governed
    process each action must trace back to a decision; a refund with no request behind it is
    not one the agent can account for.

    Options
    -------
    tools : list of tool names, optional
        Only these tools (default: every tool).

    Example
    -------
    - id: requested-calls
      type: tool_requests
      severity: medium
    """

    type = "tool_requests"
    kinds = ("unrequested_tool_call",)
    tool_fields = ("tools",)

    tools: tuple[str, ...] | None = None

    def check(self, ctx: CheckContext) -> pl.DataFrame:
        calls = ctx.tool_calls.filter(pl.col("executed") & pl.col("tool_call_id").is_not_null())
        if self.tools is not None:
            calls = calls.filter(pl.col("tool").is_in(list(self.tools)))
        ctx.mark(
            ctx.runs.join(calls, on="run_id", how="anti"),
            "not_applicable",
            "no tool call with a call id",
        )
        # the first model call of the run whose output was not recorded: from its start, the
        # requests are unknown
        blind = (
            ctx.model_calls.filter(~pl.col("has_content"))
            .group_by("run_id")
            .agg(pl.col("start_ns").min().alias("_blind_ns"))
        )
        # a run with no model call at all: the calls that asked were not exported
        modelless = ctx.runs.filter(pl.col("model_calls") == 0).select("run_id")
        if modelless.height:
            modelless = calls.join(modelless, on="run_id", how="semi").select("run_id").unique()
            reason = "the run recorded no model call: the tool requests are unknown"
            ctx.mark(modelless, "unverifiable", reason)
            calls = calls.join(modelless, on="run_id", how="anti")
        calls = calls.join(blind, on="run_id", how="left").with_columns(
            _judged=pl.col("_blind_ns").is_null() | (pl.col("start_ns") < pl.col("_blind_ns"))
        )
        flagged = calls.filter(pl.col("_judged") & pl.col("requested_by").is_null())
        unjudged = calls.filter(~pl.col("_judged")).join(flagged, on="run_id", how="anti")
        ctx.mark(
            unjudged.select("run_id").unique(),
            "unverifiable",
            "a model call before a tool call did not record its output (the tool requests)",
        )
        return findings(
            flagged,
            "unrequested_tool_call",
            pl.format(
                "{} ran with call id {}, which no model call of the run requested",
                "tool",
                pl.concat_str(pl.lit("'"), "tool_call_id", pl.lit("'")),
            ),
            tool="tool",
            argument="tool_call_id",
            spans="span",
            pos="call_no",
        )
