"""tool_errors: a tool call failed and the run answered without that tool ever succeeding."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analyzer.checks.base import Check, CheckContext, findings

__all__ = ["ToolErrors"]


@dataclass(frozen=True, kw_only=True)
class ToolErrors(Check):
    """A failed tool call was not followed by a successful call of the same tool.

    Flags
    -----
    ``ignored_tool_error``: for a run with an answer, each tool whose calls before the answer
    include a failed one (span status ERROR) and no successful call after the last failure,
    one finding per tool, the failed calls as evidence. A failure the agent recovered from (the
    same tool called again and succeeding before the answer) is not flagged, nor is a run that
    stopped without answering (the required-tools rule reports ``no_answer`` there). A call the
    model requested that no tool span recorded has no status and is not a failure.

    Why it matters
    --------------
    An answer written after a failed lookup, screening or refund, with no successful retry,
    rests on a result the agent never got: the verdict looks complete, the check behind it did
    not happen. Instrumentations record the failure on the tool span; nothing else shows it.

    Options
    -------
    tools : list of tool names, optional
        Only these tools (default: every tool).

    Example
    -------
    - id: ignored-tool-errors
      type: tool_errors
      tools: [screen_sanctions, lookup_account]
      severity: high
    """

    type = "tool_errors"
    kinds = ("ignored_tool_error",)
    tool_fields = ("tools",)

    tools: tuple[str, ...] | None = None

    def check(self, ctx: CheckContext) -> pl.DataFrame:
        answers = ctx.answers.filter(pl.col("has_answer")).select("run_id", "answer_ns")
        calls = ctx.tool_calls.filter(pl.col("executed").fill_null(True))
        if self.tools is not None:
            calls = calls.filter(pl.col("tool").is_in(list(self.tools)))
        calls = calls.join(answers, on="run_id").filter(
            pl.col("answer_ns").is_null() | (pl.col("start_ns") < pl.col("answer_ns"))
        )
        failed = pl.col("status") == "error"
        per_tool = (
            calls.sort("run_id", "index")
            .group_by("run_id", "tool", maintain_order=True)
            .agg(
                pl.col("index").filter(failed).max().alias("_last_fail"),
                pl.col("index").filter(~failed).max().alias("_last_ok"),
                pl.col("span").filter(failed).alias("span_ids"),
                pl.col("call_no").filter(failed).min().alias("_pos"),
            )
            .filter(
                pl.col("_last_fail").is_not_null()
                & (pl.col("_last_ok").is_null() | (pl.col("_last_ok") < pl.col("_last_fail")))
            )
        )
        return findings(
            per_tool,
            "ignored_tool_error",
            pl.format(
                "{} failed {} time(s) and never succeeded afterwards; the run answered anyway",
                "tool",
                pl.col("span_ids").list.len(),
            ),
            tool="tool",
            spans="span_ids",
            pos="_pos",
        )
