"""Read trace files of any supported format into one de-duplicated span table."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import mmap
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import zstandard

from analyzer.errors import AgentTraceError, TraceFormatError
from analyzer.ingest.accounting import FileLog, IngestLog
from analyzer.ingest.detect import open_decompressed, sniff, stream_break
from analyzer.ingest.files import DATASET_MANIFEST, expand_paths, sha256_of
from analyzer.spans import SPAN_SCHEMA

__all__ = ["PARALLEL_MIN_BYTES", "Ingested", "finalize_spans", "read_file", "read_traces"]

#: Order of the span table handed downstream: by trace, then time, then id.
SPAN_ORDER = ["trace_id", "start_ns", "end_ns", "span_id"]

#: A plain JSON lines file this large or larger is read by several processes (`jobs`); a smaller
#: one in this process, as a worker spends about 0.5 s starting (imports) before it reads.
#: Measured (read_traces, 2 cores): 64 MB 1.1 s with 1 process, 1.3 s with 2; 140 MB 2.3 s
#: with 1, 1.85 s with 2; even at about 90 MB.
PARALLEL_MIN_BYTES = 96 << 20


@dataclass
class Ingested:
    """A de-duplicated span table and the accounting of how it was read."""

    spans: pa.Table
    log: IngestLog
    skipped: list[str] = field(default_factory=list)  # files skipped by name inside folders


def read_file(path: Path, log: FileLog, *, jobs: int = 1) -> Iterator[pa.RecordBatch]:
    """Yield the span batches of one file, whatever its format; bad records go to `log`.

    An uncompressed JSON lines file of `PARALLEL_MIN_BYTES` or more is split across `jobs`
    processes (same rows, counts and quarantine as one). Raises TraceFormatError when the file
    is not a trace in any supported format.
    """
    size = path.stat().st_size
    log.size = size
    with path.open("rb") as raw:
        stream, layers = open_decompressed(raw, size, str(path))
        fmt = sniff(stream, -1 if layers else size)
        log.format = "+".join([fmt, *layers]) if layers else fmt
        if fmt == "jsonl" and not layers and jobs > 1 and size >= PARALLEL_MIN_BYTES:
            from analyzer.ingest.otlp_json import read_lines_file

            yield from read_lines_file(path, log, jobs)
        elif fmt == "jsonl":
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
        elif fmt != "empty":
            raise TraceFormatError(f"{path}: not a trace file (no known format recognised)")
        # a cut or corrupt compressed file ends early: what came before it was read above
        broken = stream_break(stream)
        if broken is not None:
            log.quarantine_record(broken.position, broken.reason, b"")


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
    jobs: int | None = None,
) -> Ingested:
    """Read every trace file under `paths` into one span table.

    Formats are recognised by content (see `analyzer.ingest.detect`). A file that is not a trace
    is quarantined whole and the batch goes on; a damaged record is quarantined and counted.
    Spans exported twice (same trace and span id) are kept once. The result is sorted by
    trace id, start, end and span id, so it does not depend on the order of the files.
    `jobs` (default: the number of CPUs) is how many processes may read one big JSON lines
    file; the result is the same for any value.
    """
    if jobs is None:
        jobs = os.cpu_count() or 1
    files, skipped = expand_paths(paths)
    log = IngestLog()
    tables: list[pa.Table] = []
    # digests are taken on a thread while the file is parsed (hashlib lets go of the GIL)
    with ThreadPoolExecutor(1, thread_name_prefix="agenttrace-sha256") as hasher:
        for path in files:
            if path.is_dir() and (path / DATASET_MANIFEST).is_file():
                from analyzer.ingest.dataset import read_dataset

                table, dataset_log = read_dataset(path)
                tables.append(table)
                log.files.extend(dataset_log.files)
                continue
            file_log = FileLog(path=str(path))
            log.files.append(file_log)
            batches = _read_salvaging(path, file_log, jobs, hasher)
            if batches:
                tables.append(pa.Table.from_batches(batches, schema=SPAN_SCHEMA))
            if progress is not None:
                progress(str(path), file_log.spans_read)
    spans = pa.concat_tables(tables) if tables else SPAN_SCHEMA.empty_table()
    spans = finalize_spans(spans, log)
    return Ingested(spans=spans, log=log, skipped=[str(p) for p in skipped])


def _read_salvaging(
    path: Path, file_log: FileLog, jobs: int, hasher: ThreadPoolExecutor
) -> list[pa.RecordBatch]:
    """All batches of a file; when it breaks mid-way, those read before the break are kept.

    A file that is no trace at all is quarantined whole. A stream that breaks (a truncated
    gzip, a corrupt zstd frame, a read error) keeps the spans already decoded; spans the reader
    had counted but not yet handed over are quarantined, so the accounting still balances.
    """
    batches: list[pa.RecordBatch] = []
    digest = hasher.submit(_sha256, path)
    try:
        for batch in read_file(path, file_log, jobs=jobs):
            batches.append(batch)
        file_log.sha256 = digest.result()
        return batches
    except AgentTraceError as err:
        position = "file" if not batches else "end of readable data"
        reason = str(err).removeprefix(f"{path}: ")
    except (OSError, EOFError, ValueError, zstandard.ZstdError) as err:
        position = "end of readable data"
        reason = f"stream broken after {sum(b.num_rows for b in batches):,} spans: {err}"
    with contextlib.suppress(OSError):
        file_log.sha256 = digest.result()
    file_log.quarantine_record(position, reason, _head(path) if position == "file" else b"")
    lost = file_log.spans_read - sum(b.num_rows for b in batches) - file_log.spans_quarantined
    if lost > 0:
        file_log.spans_quarantined += lost
        file_log.quarantine[-1] = dataclasses.replace(file_log.quarantine[-1], spans=lost)
    return batches


_HASH_STEP = 64 << 20


def _sha256(path: Path) -> str:
    """`sha256_of`, in 64 MiB steps over a memory map: run on a thread beside the parser.

    Each step gives the GIL back to the parsing thread; taken back after every MiB (a plain read
    loop), the parse of 1M spans beside it took 6.7-7.8 s, against 6.1-6.4 s (2 runs each).
    """
    with path.open("rb") as fh:
        try:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # empty, or not a regular file
            return sha256_of(path)
    digest = hashlib.sha256()
    with mm, memoryview(mm) as view:
        for start in range(0, len(view), _HASH_STEP):
            digest.update(view[start : start + _HASH_STEP])
    return digest.hexdigest()


def _head(path: Path) -> bytes:
    try:
        with path.open("rb") as fh:
            return fh.read(200)
    except OSError:
        return b""


#: The columns finalize_spans reads to de-duplicate and order; the others are only gathered.
_KEY_COLUMNS = ["trace_id", "span_id", "parent_span_id", "start_ns", "end_ns", "source_file"]


def finalize_spans(spans: pa.Table, log: IngestLog) -> pa.Table:
    """De-duplicate, count orphans, fill the per-file kept/duplicate counts, and sort.

    Of the copies of a span, the one from the first file in path order (then the earliest
    position) is kept, so the result does not depend on the order the files were given in.
    """
    # Only the key columns go through polars; the nested columns (attributes are most of the
    # bytes) are gathered once, at the end, straight into their final order.
    keys = pl.from_arrow(spans.select([*_KEY_COLUMNS, "source_pos"]))
    assert isinstance(keys, pl.DataFrame)
    keys = keys.with_row_index("_row")
    files = sorted(keys["source_file"].unique().to_list())
    rank = pl.DataFrame(
        {"source_file": files, "_file": range(len(files))},
        schema={"source_file": pl.String, "_file": pl.UInt32},
    )
    keys = (
        keys.join(rank, on="source_file", how="left", maintain_order="left")
        .sort(["_file", "source_pos", "_row"])
        .with_columns(_first=pl.struct("trace_id", "span_id").is_first_distinct())
    )
    counts = {(f, k): n for f, k, n in keys.group_by("source_file", "_first").len().iter_rows()}
    for file_log in log.files:
        if file_log.format.startswith("dataset:"):
            continue  # read back from a dataset: its counts are those recorded at ingest
        file_log.spans_kept = counts.get((file_log.path, True), 0)
        file_log.duplicates = counts.get((file_log.path, False), 0)
    kept = keys.filter(pl.col("_first"))
    known = kept.select("trace_id", pl.col("span_id").alias("parent_span_id"))
    with_parent = kept.filter(pl.col("parent_span_id").is_not_null())
    log.orphans = with_parent.join(known, on=["trace_id", "parent_span_id"], how="anti").height
    order = kept.sort(SPAN_ORDER)["_row"].to_arrow().cast(pa.int64())
    if spans.schema != SPAN_SCHEMA:
        spans = spans.cast(SPAN_SCHEMA)
    return _gather(spans, order)


def _gather(table: pa.Table, order: pa.Array) -> pa.Table:
    """`table.take(order)`, the columns gathered on all cores (Arrow's take is single-threaded).

    Measured on 1M spans: 3 CPU-s of user time either way, 1.7 s wall on two idle cores
    instead of 3.1.
    """
    pool = _gather_pool()
    threads = min(os.cpu_count() or 1, 4)
    if threads < 2 or table.num_rows < 100_000:
        columns = [pc.take(column, order, memory_pool=pool) for column in table.columns]
        return pa.table(columns, schema=table.schema)
    # the list columns cost most: start them first so the others fill in around them
    names = sorted(table.column_names, key=lambda n: table.column(n).nbytes, reverse=True)
    with ThreadPoolExecutor(threads) as pool_threads:
        taken = dict(
            zip(
                names,
                pool_threads.map(
                    lambda n: pc.take(table.column(n), order, memory_pool=pool), names
                ),
                strict=True,
            )
        )
    return pa.table([taken[n] for n in table.column_names], schema=table.schema)


def _gather_pool() -> pa.MemoryPool:
    """Arrow's jemalloc pool where it is built in, else the default one.

    In a process that has just parsed (and freed) gigabytes, the default mimalloc pool spent
    2.4-3.1 s of system time on the 1.1 GB gather of 1M spans; jemalloc 1.1-1.2 s (5 runs).
    """
    try:
        return pa.jemalloc_memory_pool()
    except NotImplementedError:
        return pa.default_memory_pool()
