"""summary.json: the versioned, machine-readable figures of a report."""

from __future__ import annotations

from typing import Any

import polars as pl

__all__ = ["SUMMARY_VERSION", "build_summary"]

SUMMARY_VERSION = 1


def build_summary(analysis) -> dict[str, Any]:
    """The summary of an analysis: ingest accounting and run totals, deterministic."""
    from analyzer import __version__

    runs = analysis.runs.runs
    log = analysis.ingested.log

    def total(col: str) -> int | None:
        series = runs.get_column(col)
        return None if series.null_count() == len(series) else int(series.sum())

    by_agent = runs.group_by(pl.col("agent").fill_null("-")).len().sort("agent").iter_rows()
    models = sorted({m for ms in runs.get_column("models").to_list() for m in ms})
    return {
        "summary_version": SUMMARY_VERSION,
        "agenttrace_version": __version__,
        "ingest": {**log.as_dict(), "files_skipped": analysis.ingested.skipped},
        "runs": {
            "count": runs.height,
            "with_answer": int(runs.get_column("has_answer").sum()),
            "without_answer": int((~runs.get_column("has_answer")).sum()),
            "with_content": int(runs.get_column("has_content").sum()),
            "model_calls": total("model_calls") or 0,
            "tool_calls": total("tool_calls") or 0,
            "unexecuted_tool_calls": total("unexecuted_tool_calls") or 0,
            "input_tokens": total("input_tokens"),
            "output_tokens": total("output_tokens"),
            "cached_input_tokens": total("cached_input_tokens"),
            "agents": {name: n for name, n in by_agent},
            "models": models,
        },
    }
