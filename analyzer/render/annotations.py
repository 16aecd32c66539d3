"""`report --annotations github`: findings as GitHub Actions workflow commands.

Each finding becomes one ``::error`` (critical, high), ``::warning`` (medium) or ``::notice``
(low) line on standard output, which GitHub shows on the run's summary page. GitHub shows at
most ten annotations of each level per step, so the most severe ten of each level are printed
(by severity, then case id, run id and rule), then one plain line counting those left out.
Trace text is escaped as the workflow-command syntax requires (``%``, line breaks, and ``:``
and ``,`` in properties), so no finding can end its line or start another command.
"""

from __future__ import annotations

import polars as pl

from analyzer.checks.base import SEVERITIES
from analyzer.textsafe import clip

__all__ = ["PER_LEVEL", "github_annotations"]

#: Annotations GitHub shows per level and step.
PER_LEVEL = 10
_LEVEL = {"critical": "error", "high": "error", "medium": "warning", "low": "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(findings: pl.DataFrame) -> list[str]:
    """The workflow-command lines of `findings` (FINDING_SCHEMA), see the module."""
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    ordered = findings.with_columns(
        _rank=pl.col("severity").replace_strict(rank, default=len(rank), return_dtype=pl.Int64)
    ).sort("_rank", "case_id", "run_id", "pack", "rule_id", nulls_last=True, maintain_order=True)
    lines: list[str] = []
    shown = dict.fromkeys(_LEVEL.values(), 0)
    left = 0
    for f in ordered.iter_rows(named=True):
        level = _LEVEL.get(f["severity"], "notice")
        if shown[level] >= PER_LEVEL:
            left += 1
            continue
        shown[level] += 1
        title = f"agenttrace {f['pack']}/{f['rule_id']}: {f['kind']}"
        run = f"case {f['case_id']}" if f["case_id"] else f"run {f['run_id']}"
        message = clip(f"{run}: {f['detail']}", 500)
        lines.append(f"::{level} title={_property(clip(title, 200))}::{_data(message)}")
    if left:
        lines.append(
            f"agenttrace: {left:,} more findings not annotated (GitHub shows ten per level)"
        )
    return lines
