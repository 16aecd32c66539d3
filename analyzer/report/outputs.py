"""What `report --out DIR` writes: summary, findings, runs, steps, quarantine, page, manifest."""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
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


#: Rows per row group of the Parquet outputs (`_parquet`).
ROW_GROUP_ROWS = 1 << 18


def _parquet(frame: pl.DataFrame, path: Path) -> None:
    """Write `frame` to `path` as Parquet (zstd), in row groups of `ROW_GROUP_ROWS` rows: given,
    so that the file's bytes do not depend on how the frame is cut in chunks. With polars'
    default they did past one row group: the 909k steps of 1M spans in chunks of 4096 rows, or
    with one chunk cut short where a partitioned merge joined two ranges of runs, were written
    in 13 and 14 row groups."""
    frame.write_parquet(path, compression="zstd", row_group_size=ROW_GROUP_ROWS)


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
    steps = analysis.runs.steps
    findings = (
        analysis.evaluation.findings
        if analysis.evaluation is not None
        else pl.DataFrame(schema=FINDING_SCHEMA)
    )

    def tables() -> None:
        _parquet(runs, out / "runs.parquet")
        _parquet(steps, out / "steps.parquet")
        _parquet(findings, out / "findings.parquet")
        # Which runs each rule judged: the denominators of its rates (`agenttrace diff` reads
        # it). Read here alone: the page does not.
        coverage = (
            analysis.evaluation.coverage
            if analysis.evaluation is not None
            else pl.DataFrame(schema=COVERAGE_SCHEMA)
        )
        _parquet(coverage, out / "coverage.parquet")

    # The Parquet files are encoded in a thread of their own (polars lets the GIL go) while the
    # page is rendered (Python, mostly): at 1M spans 0.9 s and 1.1 s, one after the other
    # before; these outputs 2.2 -> 1.7-1.95 s.
    with ThreadPoolExecutor(1, thread_name_prefix="agenttrace-parquet") as writer:
        written = writer.submit(tables)
        with (out / "findings.jsonl").open("w", encoding="utf-8") as fh:
            for row in findings.iter_rows(named=True):
                fh.write(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n")
        log = analysis.ingested.log
        with (out / "quarantine.jsonl").open("w", encoding="utf-8") as fh:
            for entry in log.quarantine:
                fh.write(json.dumps(entry.as_dict(), sort_keys=True, ensure_ascii=False) + "\n")
        from analyzer.report.html import render_html

        (out / "report.html").write_text(render_html(analysis, summary), encoding="utf-8")
        written.result()
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
