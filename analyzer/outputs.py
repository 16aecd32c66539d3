"""What `report --out DIR` writes: summary, findings, runs, steps, quarantine, page, manifest.

The files are rendered by `analyzer.render` and the Parquet tables encoded here; this module
schedules them: the tables are encoded in threads of their own while the page is rendered.
"""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from analyzer.checks import COVERAGE_SCHEMA, FINDING_SCHEMA, Evaluation
from analyzer.outfiles import output_folder, replacing, write_text
from analyzer.spans import empty_table

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
    write_text(path, json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def _jsonl(path: Path, rows) -> None:
    with replacing(path) as tmp, tmp.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n")


#: Rows per row group of the Parquet outputs (`_parquet`): one row group at a time is in memory.
ROW_GROUP_ROWS = 1 << 16


def _parquet(batches: pa.RecordBatchReader, path: Path) -> None:
    """Write `batches` to `path` as Parquet (zstd), as they come, in row groups of exactly
    `ROW_GROUP_ROWS` rows (the last one fewer), each encoded from one contiguous table: so the
    file's bytes depend on the rows only, not on how they were cut into batches (a frame's
    chunks, a partitioned merge's pieces), and one row group is in memory at a time."""
    schema = batches.schema
    # No dictionary pages: most texts are unique (arguments, results, answers), so dictionaries
    # cost time and add bytes.
    with (
        replacing(path) as tmp,
        pq.ParquetWriter(tmp, schema, compression="zstd", use_dictionary=False) as writer,
    ):
        pending: list[pa.RecordBatch] = []
        rows = 0

        def flush(n: int) -> None:
            nonlocal pending, rows
            table = pa.Table.from_batches(pending, schema)
            writer.write_table(table.slice(0, n).combine_chunks(), row_group_size=n)
            pending, rows = table.slice(n).to_batches(), rows - n

        for batch in batches:
            pending.append(batch)
            rows += batch.num_rows
            while rows >= ROW_GROUP_ROWS:
                flush(ROW_GROUP_ROWS)
        if rows:
            flush(rows)


def _with_started_at(runs: pa.RecordBatchReader) -> pa.RecordBatchReader:
    """`runs` with their start time as a UTC timestamp (``started_at``), batch by batch."""

    def convert(table: pa.Table) -> pa.Table:
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        started = pl.from_epoch("started_ns", time_unit="ns").dt.replace_time_zone("UTC")
        return frame.with_columns(started_at=started).to_arrow()

    schema = convert(empty_table(runs.schema)).schema
    return pa.RecordBatchReader.from_batches(
        schema,
        (out for batch in runs for out in convert(pa.Table.from_batches([batch])).to_batches()),
    )


def _labels_file(labels) -> dict[str, str] | None:
    if labels is None:
        return None
    labels = getattr(labels, "labels", labels)  # scored: the file it was scored with
    return {"path": labels.path, "sha256": labels.sha256}


def write_outputs(
    analysis,
    summary: dict[str, Any],
    out: Path,
    *,
    command: list[str],
    redaction: dict[str, str] | None = None,
    labels=None,
) -> None:
    """Write every output file of a report into `out` (created if needed).

    Each file is written under a temporary name and renamed when complete
    (`analyzer.outfiles`); ``manifest.json`` is removed first and written last, so a folder
    holding it holds one complete report.

    `redaction`: how the content was redacted (`analyzer.redact.redaction_record`), or None.
    `labels`: the golden labels the summary scored (`analyzer.metrics.labels.LabelSet`, or already
    scored: `LabelScores`), or None; given, labels.parquet holds every labelled field of every
    run, expected against actual.
    """
    from analyzer import __version__

    output_folder(out)
    (out / "manifest.json").unlink(missing_ok=True)
    _json(out / "summary.json", summary)
    evaluation = analysis.evaluation
    if evaluation is None:  # no pack: no finding, no coverage
        evaluation = Evaluation(
            findings=pl.DataFrame(schema=FINDING_SCHEMA),
            errors=[],
            coverage=pl.DataFrame(schema=COVERAGE_SCHEMA),
        )
    findings = evaluation.findings

    def steps() -> None:
        _parquet(analysis.runs.batches("steps"), out / "steps.parquet")

    def others() -> None:
        _parquet(_with_started_at(analysis.runs.batches("runs")), out / "runs.parquet")
        _parquet(evaluation.batches("findings"), out / "findings.parquet")
        # Which runs each rule judged: the denominators of its rates (`agenttrace diff`).
        _parquet(evaluation.batches("coverage"), out / "coverage.parquet")

    from analyzer.render.html import render_html, run_browser

    # The tables are read a batch at a time (a partitioned result's merged from its spill,
    # never whole) and encoded in two threads, the steps (the most rows) in one, the others in
    # another, and the page's run browser is built in a third (polars, Arrow and zlib let the
    # GIL go), while the rest of the page is rendered (great-tables: Python, mostly).
    with ThreadPoolExecutor(3, thread_name_prefix="agenttrace-out") as writers:
        written = [writers.submit(steps), writers.submit(others)]
        browser = writers.submit(run_browser, analysis, labels=labels)
        _jsonl(out / "findings.jsonl", findings.iter_rows(named=True))
        if labels is not None:
            from analyzer.metrics.labels import scored

            fields = scored(labels, analysis.runs).fields.sort("case_id", "run_id", "field")
            with replacing(out / "labels.parquet") as tmp:
                fields.write_parquet(tmp)
        log = analysis.ingested.log
        _jsonl(out / "quarantine.jsonl", (entry.as_dict() for entry in log.quarantine))
        page = render_html(analysis, summary, labels=labels, browser=browser.result)
        write_text(out / "report.html", page)
        for done in written:
            done.result()
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
        # labels.parquet was scored with this file: `diff` reads the results back
        "labels": _labels_file(labels),
        "redaction": redaction,
        "outputs": {},
    }
    for name in _HASHED:
        manifest["outputs"][name] = hashlib.sha256((out / name).read_bytes()).hexdigest()
    _json(out / "manifest.json", manifest)
