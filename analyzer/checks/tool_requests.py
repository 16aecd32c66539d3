"""tool_requests: every tool call that carries a call id answers a model's request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from analyzer.checks.base import Check, CheckContext, findings

if TYPE_CHECKING:
    from analyzer.runs import RunSet

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

    A run that starts by running a call, before its first model call, may resume a
    conversation whose model asked for that call in an earlier run (a call paused for an
    approval, run once approved): the call is requested when a model call of the run was given
    its result in the conversation (a tool message answering its id: providers accept no result
    of a call the conversation did not request); when the run recorded no prompt at all, it is
    unverifiable.

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
        flagged, unknown = _resumed(ctx, flagged)
        unjudged = calls.filter(~pl.col("_judged")).join(flagged, on="run_id", how="anti")
        ctx.mark(
            unjudged.select("run_id").unique(),
            "unverifiable",
            "a model call before a tool call did not record its output (the tool requests)",
        )
        ctx.mark(
            unknown.join(flagged, on="run_id", how="anti").join(unjudged, on="run_id", how="anti"),
            "unverifiable",
            "the run starts with a tool call and recorded no conversation (it may resume one "
            "whose model asked for the call)",
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


def _resumed(ctx: CheckContext, flagged: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The flagged calls less those that ran before their run's first model call and that the
    run's conversation had requested (a resumed run), and the runs of those left unknown (no
    prompt recorded)."""
    first = ctx.model_calls.group_by("run_id").agg(pl.col("start_ns").min().alias("_first_ns"))
    early = flagged.join(first, on="run_id").filter(pl.col("start_ns") < pl.col("_first_ns"))
    if early.is_empty():
        return flagged, pl.DataFrame(schema={"run_id": pl.String})
    answered, prompted = ctx.shared(answered_in_prompts)
    unknown = early.join(prompted, on="run_id", how="anti")
    cleared = pl.concat(
        [early.join(answered, on=["run_id", "tool_call_id"], how="semi"), unknown]
    ).select("run_id", "index")
    left = flagged.join(cleared, on=["run_id", "index"], how="anti")
    return left, unknown.select("run_id").unique()


def answered_in_prompts(runset: RunSet) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(run_id, tool_call_id) of the calls whose result a model call of the run was given
    (a tool message of its prompt), and the run_id of the runs that recorded any prompt."""
    messages = runset.messages
    answered = (
        messages.filter((pl.col("role") == "tool") & pl.col("tool_call_id").is_not_null())
        .select("run_id", "tool_call_id")
        .unique()
    )
    return answered, messages.select("run_id").unique()
