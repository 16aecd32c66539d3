"""Read trace files of any supported format into one de-duplicated span table."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow as pa
import zstandard

from analyzer.errors import AgentTraceError, TraceFormatError
from analyzer.ingest.accounting import FileLog, IngestLog
from analyzer.ingest.detect import open_decompressed, sniff
from analyzer.ingest.files import DATASET_MANIFEST, expand_paths, sha256_of
from analyzer.spans import SPAN_SCHEMA

__all__ = ["Ingested", "finalize_spans", "read_file", "read_traces"]

#: Order of the span table handed downstream: by trace, then time, then id.
SPAN_ORDER = ["trace_id", "start_ns", "end_ns", "span_id"]


@dataclass
class Ingested:
    """A de-duplicated span table and the accounting of how it was read."""

    spans: pa.Table
    log: IngestLog
    skipped: list[str] = field(default_factory=list)  # files skipped by name inside folders


def read_file(path: Path, log: FileLog) -> Iterator[pa.RecordBatch]:
    """Yield the span batches of one file, whatever its format; bad records go to `log`.

    Raises TraceFormatError when the file is not a trace in any supported format.
    """
    size = path.stat().st_size
    log.size = size
    with path.open("rb") as raw:
        stream, layers = open_decompressed(raw, size, str(path))
        fmt = sniff(stream, -1 if layers else size)
        log.format = "+".join([fmt, *layers]) if layers else fmt
        if fmt == "empty":
            return
        if fmt == "jsonl":
            from analyzer.ingest.otlp_json import read_lines

            yield from read_lines(stream, log)
        elif fmt == "otlp-json":
            from analyzer.ingest.otlp_json import read_document

            yield from read_document(stream.read(), log)
        elif fmt == "json":
            from analyzer.ingest.documents import read_json_document

            yield from read_json_document(stream.read(), log)
        elif fmt == "proto":
            from analyzer.ingest.otlp_proto import read_frames

            yield from read_frames(stream, log)
        elif fmt == "parquet":
            yield from _read_span_parquet(stream, log)
        else:
            raise TraceFormatError(f"{path}: not a trace file (no known format recognised)")


def _read_span_parquet(stream, log: FileLog) -> Iterator[pa.RecordBatch]:
    import pyarrow.parquet as pq

    table = pq.read_table(stream)
    missing = [n for n in SPAN_SCHEMA.names if n not in table.column_names]
    if missing:
        raise TraceFormatError(f"{log.path}: Parquet file without span columns {missing[:5]}")
    table = table.select(SPAN_SCHEMA.names).cast(SPAN_SCHEMA)
    log.records += table.num_rows
    log.spans_read += table.num_rows
    yield from table.to_batches()


def read_traces(
    paths: list[str | Path],
    *,
    progress: Callable[[str, int], None] | None = None,
) -> Ingested:
    """Read every trace file under `paths` into one span table.

    Formats are recognised by content (see `analyzer.ingest.detect`). A file that is not a trace
    is quarantined whole and the batch goes on; a damaged record is quarantined and counted.
    Spans exported twice (same trace and span id) are kept once. The result is sorted by
    trace id, start, end and span id, so it does not depend on the order of the files.
    """
    files, skipped = expand_paths(paths)
    log = IngestLog()
    tables: list[pa.Table] = []
    for path in files:
        if path.is_dir() and (path / DATASET_MANIFEST).is_file():
            from analyzer.ingest.dataset import read_dataset

            table, dataset_log = read_dataset(path)
            tables.append(table)
            log.files.extend(dataset_log.files)
            continue
        file_log = FileLog(path=str(path))
        log.files.append(file_log)
        batches = _read_salvaging(path, file_log)
        if batches:
            tables.append(pa.Table.from_batches(batches, schema=SPAN_SCHEMA))
        if progress is not None:
            progress(str(path), file_log.spans_read)
    spans = pa.concat_tables(tables) if tables else SPAN_SCHEMA.empty_table()
    spans = finalize_spans(spans, log)
    return Ingested(spans=spans, log=log, skipped=[str(p) for p in skipped])


def _read_salvaging(path: Path, file_log: FileLog) -> list[pa.RecordBatch]:
    """All batches of a file; when it breaks mid-way, those read before the break are kept.

    A file that is no trace at all is quarantined whole. A stream that breaks (a truncated
    gzip, a corrupt zstd frame, a read error) keeps the spans already decoded; spans the reader
    had counted but not yet handed over are quarantined, so the accounting still balances.
    """
    batches: list[pa.RecordBatch] = []
    try:
        file_log.sha256 = sha256_of(path)
        for batch in read_file(path, file_log):
            batches.append(batch)
        return batches
    except AgentTraceError as err:
        position = "file" if not batches else "end of readable data"
        reason = str(err).removeprefix(f"{path}: ")
    except (OSError, EOFError, ValueError, zstandard.ZstdError) as err:
        position = "end of readable data"
        reason = f"stream broken after {sum(b.num_rows for b in batches):,} spans: {err}"
    file_log.quarantine_record(position, reason, _head(path) if position == "file" else b"")
    lost = file_log.spans_read - sum(b.num_rows for b in batches) - file_log.spans_quarantined
    if lost > 0:
        file_log.spans_quarantined += lost
        file_log.quarantine[-1] = dataclasses.replace(file_log.quarantine[-1], spans=lost)
    return batches


def _head(path: Path) -> bytes:
    try:
        with path.open("rb") as fh:
            return fh.read(200)
    except OSError:
        return b""


def finalize_spans(spans: pa.Table, log: IngestLog) -> pa.Table:
    """De-duplicate, count orphans, fill the per-file kept/duplicate counts, and sort.

    Of the copies of a span, the one from the first file in path order (then the earliest
    position) is kept, so the result does not depend on the order the files were given in.
    """
    frame = pl.from_arrow(spans)
    assert isinstance(frame, pl.DataFrame)
    frame = frame.with_row_index("_row").sort(
        ["trace_id", "span_id", "source_file", "source_pos", "_row"]
    )
    first = frame.select(pl.struct("trace_id", "span_id").is_first_distinct()).to_series()
    dropped = frame.filter(~first).group_by("source_file").len()
    kept = frame.filter(first).drop("_row")
    per_file_kept = dict(kept.group_by("source_file").len().iter_rows())
    per_file_dup = dict(dropped.iter_rows())
    for file_log in log.files:
        if file_log.format.startswith("dataset:"):
            continue  # read back from a dataset: its counts are those recorded at ingest
        file_log.spans_kept = per_file_kept.get(file_log.path, 0)
        file_log.duplicates = per_file_dup.get(file_log.path, 0)
    known = kept.select(
        "trace_id", pl.col("span_id").alias("parent_span_id"), pl.lit(True).alias("_known")
    )
    with_parent = kept.filter(pl.col("parent_span_id").is_not_null())
    log.orphans = with_parent.join(known, on=["trace_id", "parent_span_id"], how="anti").height
    kept = kept.sort(SPAN_ORDER)
    return kept.to_arrow().cast(SPAN_SCHEMA)
