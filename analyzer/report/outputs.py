"""What `report --out DIR` writes: summary, findings, runs, steps, quarantine, page, manifest."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import polars as pl

from analyzer.checks import COVERAGE_SCHEMA, FINDING_SCHEMA

__all__ = ["write_outputs"]

_HASHED = (
    "summary.json",
    "findings.jsonl",
    "findings.parquet",
    "coverage.parquet",
    "runs.parquet",
    "steps.parquet",
    "quarantine.jsonl",
    "report.html",
)


def _json(path: Path, data: Any) -> None:
    path.write_text(
        json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
    )


def write_outputs(
    analysis,
    summary: dict[str, Any],
    out: Path,
    *,
    command: list[str],
    redaction: dict[str, str] | None = None,
) -> None:
    """Write every output file of a report into `out` (created if needed).

    `redaction`: how the content was redacted (`analyzer.redact.redaction_record`), or None.
    """
    from analyzer import __version__

    out.mkdir(parents=True, exist_ok=True)
    _json(out / "summary.json", summary)
    runs = analysis.runs.runs.with_columns(
        started_at=pl.from_epoch("started_ns", time_unit="ns").dt.replace_time_zone("UTC")
    )
    runs.write_parquet(out / "runs.parquet", compression="zstd")
    analysis.runs.steps.write_parquet(out / "steps.parquet", compression="zstd")
    findings = (
        analysis.evaluation.findings
        if analysis.evaluation is not None
        else pl.DataFrame(schema=FINDING_SCHEMA)
    )
    findings.write_parquet(out / "findings.parquet", compression="zstd")
    # Which runs each rule judged: the denominators of its rates (`agenttrace diff` reads it).
    coverage = (
        analysis.evaluation.coverage
        if analysis.evaluation is not None
        else pl.DataFrame(schema=COVERAGE_SCHEMA)
    )
    coverage.write_parquet(out / "coverage.parquet", compression="zstd")
    with (out / "findings.jsonl").open("w", encoding="utf-8") as fh:
        for row in findings.iter_rows(named=True):
            fh.write(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n")
    log = analysis.ingested.log
    with (out / "quarantine.jsonl").open("w", encoding="utf-8") as fh:
        for entry in log.quarantine:
            fh.write(json.dumps(entry.as_dict(), sort_keys=True, ensure_ascii=False) + "\n")
    from analyzer.report.html import render_html

    (out / "report.html").write_text(render_html(analysis, summary), encoding="utf-8")
    manifest = {
        "agenttrace_version": __version__,
        "command": command,
        "inputs": [
            {
                "path": f.path,
                "sha256": f.sha256,
                "bytes": f.size,
                "format": f.format,
                "spans_read": f.spans_read,
                "spans_kept": f.spans_kept,
            }
            for f in log.files
        ],
        "packs": [
            {
                "name": pack.name,
                "path": str(pack.path) if pack.path else None,
                "sha256": pack.sha256,
            }
            for pack in analysis.packs
        ],
        "prices": analysis.prices.describe() if analysis.prices is not None else None,
        "redaction": redaction,
        "outputs": {},
    }
    for name in _HASHED:
        manifest["outputs"][name] = hashlib.sha256((out / name).read_bytes()).hexdigest()
    _json(out / "manifest.json", manifest)
