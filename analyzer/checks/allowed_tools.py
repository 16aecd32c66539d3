"""allowed_tools: every tool call uses a tool from the list."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analyzer.checks.base import Check, CheckContext, findings

__all__ = ["AllowedTools"]

_SHOWN = 6  # allowed tools named in a detail before "..."


@dataclass(frozen=True, kw_only=True)
class AllowedTools(Check):
    """Only the listed tools are called.

    Flags
    -----
    ``wrong_tool``: each tool call whose tool is not in ``tools``, one finding per call (a
    call the model requested that no tool span recorded counts too). Tool names match exactly.
    A run with a tool call that recorded no tool name is counted as unverifiable.

    Why it matters
    --------------
    A tool outside the agent's remit (a write tool in a read-only review, another team's API)
    is a wrong-tool error even when the answer looks right; the wrong-tool rate is one of the
    tool-reliability metrics.

    Options
    -------
    tools : list of tool names, required
        The tools the agent may call.

    Example
    -------
    - id: allowed-tools
      type: allowed_tools
      tools: [chercher_commande, escalader_humain]
      severity: high
    """

    type = "allowed_tools"
    kinds = ("wrong_tool",)

    tools: tuple[str, ...]

    def check(self, ctx: CheckContext) -> pl.DataFrame:
        calls = ctx.tool_calls
        ctx.mark(
            calls.filter(pl.col("tool").is_null()).get_column("run_id").unique(),
            "unverifiable",
            "a tool call recorded no tool name",
        )
        allowed = sorted(self.tools)
        shown = ", ".join(allowed[:_SHOWN]) + (", ..." if len(allowed) > _SHOWN else "")
        return findings(
            calls.filter(~pl.col("tool").is_in(allowed)),
            "wrong_tool",
            pl.format(
                "{} is not an allowed tool (tool call {}{}; allowed: {})",
                "tool",
                pl.col("call_no") + 1,
                pl.when(pl.col("executed").fill_null(True))
                .then(pl.lit(""))
                .otherwise(pl.lit(", requested, no tool span")),
                pl.lit(shown),
            ),
            tool="tool",
            spans="span",
            pos="call_no",
        )
