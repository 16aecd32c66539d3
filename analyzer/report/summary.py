"""summary.json: the versioned, machine-readable figures of a report."""

from __future__ import annotations

from typing import Any

import polars as pl

__all__ = ["SEVERITIES", "SUMMARY_VERSION", "build_summary", "findings_summary"]

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
        "packs": [
            {"name": pack.name, "rules": len(pack.rules), "sha256": pack.sha256}
            for pack in analysis.packs
        ],
        "findings": findings_summary(analysis),
    }


SEVERITIES = ("critical", "high", "medium", "low")


def findings_summary(analysis) -> dict[str, Any]:
    """Finding counts: total, by severity, and per rule and kind with the runs involved."""
    evaluation = analysis.evaluation
    empty = {"total": 0, "by_severity": dict.fromkeys(SEVERITIES, 0), "by_rule": []}
    if evaluation is None:
        return {**empty, "check_errors": []}
    found = evaluation.findings
    coverage = evaluation.coverage
    by_severity = dict(found.group_by("severity").len().iter_rows())
    applied = coverage.group_by("pack", "rule_id").agg(
        pl.len().alias("runs_applied"),
        (pl.col("status") == "checked").sum().alias("runs_checked"),
        (pl.col("status") == "unverifiable").sum().alias("runs_unverifiable"),
    )
    per_kind = found.group_by("pack", "rule_id", "kind", "severity").agg(
        pl.len().alias("findings"), pl.col("run_id").n_unique().alias("runs")
    )
    rows = (
        applied.join(per_kind, on=["pack", "rule_id"], how="left")
        .with_columns(pl.col("findings", "runs").fill_null(0))
        .sort("pack", "rule_id", "kind", nulls_last=True)
    )
    return {
        "total": found.height,
        "by_severity": {s: int(by_severity.get(s, 0)) for s in SEVERITIES},
        "by_rule": rows.to_dicts(),
        "check_errors": [
            {"run_id": e.run_id, "rule_id": e.rule_id, "pack": e.pack, "error": e.error}
            for e in evaluation.errors
        ],
    }
