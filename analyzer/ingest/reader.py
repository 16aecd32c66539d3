"""Read trace files of any supported format into one de-duplicated span table."""

from __future__ import annotations

import contextlib
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
from analyzer.ingest import accounting, limits
from analyzer.ingest.accounting import FileLog, IngestLog
from analyzer.ingest.detect import open_decompressed, sniff_stream, stream_break
from analyzer.ingest.files import DATASET_MANIFEST, expand_paths, sha256_of
from analyzer.ingest.limits import truncate_text
from analyzer.spans import (
    ATTR,
    ATTRS,
    EVENT,
    SHARED_SCHEMA,
    SPAN_SCHEMA,
    empty_table,
    is_shared,
    shared_resources,
)

__all__ = [
    "Ingested",
    "cap_values",
    "finalize_spans",
    "iter_salvaging",
    "kept_order",
    "read_file",
    "read_spans",
    "read_traces",
    "readable",
]

#: Order of the span table handed downstream: by trace, then time, then id.
SPAN_ORDER = ["trace_id", "start_ns", "end_ns", "span_id"]


@dataclass
class Ingested:
    """A de-duplicated span table and the accounting of how it was read."""

    spans: pa.Table  # `SPAN_SCHEMA`, or `SHARED_SCHEMA` from a spill (`analyzer.engine`)
    log: IngestLog
    skipped: list[str] = field(default_factory=list)  # files skipped by name inside folders
    #: The row of each span's parent in `spans` (int64; null for a root or an orphan), as
    #: `finalize_spans` found it; None when not known (the run model then looks it up).
    parents: pa.Array | None = None


def read_file(path: Path, log: FileLog, *, jobs: int = 1) -> Iterator[pa.RecordBatch]:
    """Yield the span batches of one file, whatever its format; bad records go to `log`.

    JSON lines are read on `jobs` threads (same rows, counts and quarantine as one). Raises
    TraceFormatError when the file is not a trace in any supported format. Attribute values
    are cut at `MAX_ATTRIBUTE_BYTES` (`cap_values`).
    """
    size = path.stat().st_size
    log.size = size
    with path.open("rb") as raw:
        stream, layers = open_decompressed(raw, size, str(path))
        fmt, blank_lines = sniff_stream(stream, -1 if layers else size)
        log.format = "+".join([fmt, *layers]) if layers else fmt
        batches: Iterator[pa.RecordBatch] = iter(())
        if fmt == "jsonl":
            from analyzer.ingest.otlp_json import read_lines

            batches = read_lines(stream, log, jobs=jobs, first_line=1 + blank_lines)
        elif fmt == "otlp-json":
            from analyzer.ingest.otlp_json import read_document

            batches = read_document(stream.read(), log)
        elif fmt == "json":
            from analyzer.ingest.documents import read_json_document

            batches = read_json_document(stream.read(), log)
        elif fmt == "proto":
            from analyzer.ingest.otlp_proto import read_frames

            batches = read_frames(stream, log)
        elif fmt == "parquet":
            batches = _read_span_parquet(stream, log)
        elif fmt != "empty":
            raise TraceFormatError(f"{path}: not a trace file (no known format recognised)")
        for batch in batches:
            yield cap_values(batch, log)
        # a cut or corrupt compressed file ends early: what came before it was read above
        broken = stream_break(stream)
        if broken is not None:
            log.quarantine_record(*broken, b"")


def _position(fmt: str, source_pos: int, span_id: str | None) -> str:
    """Where a kept span is, for a warning: its line or frame offset where known, and its id."""
    base = fmt.split("+")[0]
    where = {"jsonl": f"line {source_pos}, ", "proto": f"byte {source_pos}, "}.get(base, "")
    return f"{where}span {span_id}"


def _cap_attrs(lists: pa.Array) -> tuple[pa.Array, list[tuple[int, str, int]]]:
    """`lists` (of `ATTRS`) with every text or JSON value over `MAX_ATTRIBUTE_BYTES` cut and
    marked (a cut JSON value is no JSON any more: it moves to ``str``); and (list index, key,
    original bytes) of each value cut. Columnar check; Python only for the values cut."""
    values = lists.flatten()
    if not len(values):
        return lists, []
    texts = pc.struct_field(values, "str")
    jsons = pc.struct_field(values, "json")
    longest = max(
        pc.max(pc.binary_length(texts)).as_py() or 0, pc.max(pc.binary_length(jsons)).as_py() or 0
    )
    if longest <= limits.MAX_ATTRIBUTE_BYTES:  # the common case: two kernels over the offsets
        return lists, []
    over = pc.or_(
        pc.greater(pc.binary_length(texts), limits.MAX_ATTRIBUTE_BYTES).fill_null(False),
        pc.greater(pc.binary_length(jsons), limits.MAX_ATTRIBUTE_BYTES).fill_null(False),
    )
    index = pc.indices_nonzero(over)
    owner = pc.take(pc.list_parent_indices(lists), index).to_pylist()
    keys = pc.take(pc.struct_field(values, "key"), index).to_pylist()
    cut = [
        truncate_text(text if text is not None else json_text)
        for text, json_text in zip(
            pc.take(texts, index).to_pylist(), pc.take(jsons, index).to_pylist(), strict=True
        )
    ]
    texts = pc.replace_with_mask(texts, over, pa.array([kept for kept, _ in cut], pa.string()))
    jsons = pc.if_else(over, pa.scalar(None, pa.string()), jsons)
    fields = {f.name: pc.struct_field(values, f.name) for f in ATTR}
    fields["str"], fields["json"] = texts, jsons
    rebuilt = pa.StructArray.from_arrays([fields[f.name] for f in ATTR], fields=list(ATTR))
    sizes = [size for _, size in cut]
    return _relist(lists, rebuilt, ATTRS), list(zip(owner, keys, sizes, strict=True))


def _relist(lists: pa.Array, values: pa.Array, typ: pa.DataType) -> pa.Array:
    """A list array of the shape of `lists` (a slice too) over `values`, its items replaced."""
    offsets = pc.subtract(lists.offsets, pa.scalar(lists.offsets[0].as_py(), pa.int32()))
    return pa.ListArray.from_arrays(offsets, values, type=typ, mask=lists.is_null())


def _cap_resources(column: pa.Array) -> tuple[pa.Array, list[tuple[int, str, int]]]:
    """`_cap_attrs` of resource attributes, plain or shared (then each value cut is reported
    at the first span of each resource that holds it)."""
    if not pa.types.is_dictionary(column.type):
        return _cap_attrs(column)
    capped, cut = _cap_attrs(column.dictionary)
    if not cut:
        return column, cut
    rows = {e: pc.index(column.indices, e).as_py() for e in {entry for entry, _, _ in cut}}
    spans = sorted((rows[e], key, size) for e, key, size in cut if rows[e] >= 0)
    return pa.DictionaryArray.from_arrays(column.indices, capped), spans


def cap_values(batch: pa.RecordBatch, log: FileLog) -> pa.RecordBatch:
    """`batch` with attribute values (of spans, resources and events) cut at
    `MAX_ATTRIBUTE_BYTES` and marked; a warning in `log` names each value cut."""
    columns = dict(zip(batch.schema.names, batch.columns, strict=True))
    span_ids = trace_pos = None
    changed = False

    def warn(rows: list[tuple[int, str, int]], what: str) -> None:
        nonlocal span_ids, trace_pos
        if span_ids is None:
            span_ids = batch.column("span_id").to_pylist()
            trace_pos = batch.column("source_pos").to_pylist()
        for row, key, size in rows:
            log.warn(
                _position(log.format, trace_pos[row], span_ids[row]),
                f"{what} {key!r}: value of {size:,} bytes cut to {limits.MAX_ATTRIBUTE_BYTES:,} "
                "and marked",
            )

    attrs, cut = _cap_attrs(batch.column("attributes"))
    if cut:
        columns["attributes"], changed = attrs, True
        warn(cut, "attribute")
    resource, cut = _cap_resources(batch.column("resource_attributes"))
    if cut:
        columns["resource_attributes"], changed = resource, True
        # the resource is repeated on each of its spans: one warning per line or frame
        positions = batch.column("source_pos").to_pylist()
        once: dict[tuple[object, str], tuple[int, str, int]] = {}
        for row, key, size in cut:
            once.setdefault((positions[row], key), (row, key, size))
        warn(list(once.values()), "resource attribute")
    events = batch.column("events")
    flat = events.flatten()
    if len(flat):
        event_attrs, cut = _cap_attrs(pc.struct_field(flat, "attributes"))
        if cut:
            parents = pc.list_parent_indices(events).to_pylist()
            rebuilt = pa.StructArray.from_arrays(
                [pc.struct_field(flat, "time_ns"), pc.struct_field(flat, "name"), event_attrs],
                fields=list(EVENT),
            )
            columns["events"] = _relist(events, rebuilt, pa.list_(EVENT))
            changed = True
            warn([(parents[e], key, size) for e, key, size in cut], "event attribute")
    if not changed:
        return batch
    return pa.RecordBatch.from_arrays([columns[n] for n in batch.schema.names], schema=batch.schema)


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
    digests: bool = True,
) -> Ingested:
    """Read every trace file under `paths` into one span table.

    Formats are recognised by content (see `analyzer.ingest.detect`). A file that is not a trace
    is quarantined whole and the batch goes on; a damaged record is quarantined and counted.
    Spans exported twice (same trace and span id) are kept once. The result is sorted by
    trace id, start, end and span id, so it does not depend on the order of the files.
    `jobs` (default: the CPUs this process may run on) is how many threads read a JSON lines
    file; the result is the same for any value. Each file's SHA-256 goes into its log
    (``FileLog.sha256``) unless `digests` is False (then "": no file is hashed).
    """
    spans, log, skipped = read_spans(paths, progress=progress, jobs=jobs, digests=digests)
    return finalize_spans(spans, log, skipped=skipped)


def read_spans(
    paths: list[str | Path],
    *,
    progress: Callable[[str, int], None] | None = None,
    jobs: int | None = None,
    digests: bool = True,
) -> tuple[pa.Table, IngestLog, list[str]]:
    """`read_traces` before `finalize_spans`: every span read (duplicates included, in file
    order), the log of the reads and the paths skipped."""
    if jobs is None:
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
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
            digest = hasher.submit(sha256_of, path).result if digests else no_digest
            batches = list(iter_salvaging(path, file_log, jobs=jobs, digest=digest))
            if batches:
                tables.append(pa.Table.from_batches(batches, schema=SPAN_SCHEMA))
            if progress is not None:
                progress(str(path), file_log.spans_read)
    spans = pa.concat_tables(tables) if tables else empty_table(SPAN_SCHEMA)
    return spans, log, [str(p) for p in skipped]


def no_digest() -> str:
    """The ``digest`` of `iter_salvaging` that hashes nothing: the file's log keeps "" (a
    caller that records no digest need not read every file twice)."""
    return ""


def iter_salvaging(
    path: Path,
    file_log: FileLog,
    *,
    jobs: int = 1,
    digest: Callable[[], str] | None = None,
) -> Iterator[pa.RecordBatch]:
    """The batches of a file as they are read; when it breaks mid-way, those before the break.

    A file that is no trace at all is quarantined whole. A stream that breaks (a truncated
    gzip, a corrupt zstd frame, a read error) keeps the spans already decoded; spans the reader
    had counted but not yet handed over are quarantined, so the accounting still balances.
    `digest` gives the file's SHA-256 (default: computed here, after the read).
    """
    handed = batches = 0
    digest = digest or (lambda: sha256_of(path))
    try:
        for batch in read_file(path, file_log, jobs=jobs):
            batches += 1
            handed += batch.num_rows
            yield batch
        file_log.sha256 = digest()
        return
    except AgentTraceError as err:
        position = "file" if not batches else "end of readable data"
        reason = str(err).removeprefix(f"{path}: ")
    except (OSError, EOFError, ValueError, zstandard.ZstdError) as err:
        position = "end of readable data"
        reason = f"stream broken after {handed:,} spans: {err}"
    with contextlib.suppress(OSError):
        file_log.sha256 = digest()
    lost = max(0, file_log.spans_read - handed - file_log.spans_quarantined)
    file_log.quarantine_record(
        position, reason, _head(path) if position == "file" else b"", lost=lost
    )


def _head(path: Path) -> bytes:
    try:
        with path.open("rb") as fh:
            return fh.read(200)
    except OSError:
        return b""


#: The columns finalize_spans reads to de-duplicate and order; the others are only gathered.
_KEY_COLUMNS = ["trace_id", "span_id", "parent_span_id", "start_ns", "end_ns", "source_file"]


def finalize_spans(spans: pa.Table, log: IngestLog, skipped: list[str] | None = None) -> Ingested:
    """De-duplicate, count orphans, fill the per-file kept/duplicate counts, and sort: the
    Ingested spans of `log` (and of the `skipped` files), with the row of each span's parent,
    looked up here to count the orphans (`Ingested.parents`: the run model reads it).

    Of the copies of a span, the one from the first file in path order (then the earliest
    position) is kept, so the result does not depend on the order the files were given in.
    """
    order, parents = kept_order(spans, log)
    return Ingested(
        spans=gather(readable(spans), order), log=log, skipped=skipped or [], parents=parents
    )


def kept_order(spans: pa.Table, log: IngestLog) -> tuple[pa.Array, pa.Array]:
    """What `finalize_spans` does but the gather: the row of `spans` of each kept span in the
    final order (int64), and the row in that order of each kept span's parent (null for a root
    or an orphan); the counts, orphans and warnings go to `log`."""
    # Only the key columns go through polars; the nested columns (attributes are most of the
    # bytes) are gathered by the caller, straight into their final order, if at all.
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
    kept = keys.filter(pl.col("_first")).drop("_first").with_row_index("_k")
    known = kept.select(
        "trace_id", pl.col("span_id").alias("parent_span_id"), pl.col("_k").alias("_p")
    )
    linked = (
        kept.select("_k", "trace_id", "parent_span_id")
        .filter(pl.col("parent_span_id").is_not_null())
        .join(known, on=["trace_id", "parent_span_id"], how="left")
    )
    log.orphans = linked.get_column("_p").null_count()
    _warn_skew(kept, log)
    parent = (  # kept row -> kept row of its parent
        pl.Series("_p", [None] * kept.height, dtype=pl.UInt32)
        .scatter(linked.get_column("_k"), linked.get_column("_p"))
        .cast(pl.Int64)
        .to_arrow()
    )
    _warn_cycles(kept, parent, log)
    # single-threaded: polars' parallel sort of these keys costs more CPU than it saves
    ordered = kept.sort(SPAN_ORDER, multithreaded=False)
    order = ordered.get_column("_row").to_arrow().cast(pa.int64())
    # the parents in the final order: the final row of each kept row's parent
    final_k = ordered.get_column("_k")
    position = (
        pl.zeros(kept.height, dtype=pl.Int64, eager=True)
        .scatter(final_k, pl.int_range(0, kept.height, dtype=pl.Int64, eager=True))
        .to_arrow()
    )
    return order, pc.take(position, pc.take(parent, final_k.to_arrow()))


def readable(spans: pa.Table) -> pa.Table:
    """`spans` in `SHARED_SCHEMA` with its resources in one dictionary (a spilled partition),
    else in `SPAN_SCHEMA`."""
    if is_shared(spans):
        return shared_resources(spans.cast(SHARED_SCHEMA))
    return spans if spans.schema == SPAN_SCHEMA else spans.cast(SPAN_SCHEMA)


def _warn_rows(log: IngestLog, rows: pl.DataFrame, reason, more: str) -> None:
    """One warning per row of `rows` (source_file, source_pos, span_id, ...) in its file's log,
    the first `accounting.MAX_WARNINGS` in the file at most, then one saying how many more
    (``"N more spans <more>"``, `more` their kind)."""
    files = {f.path: f for f in log.files}
    cap = accounting.MAX_WARNINGS
    for (path,), group in rows.group_by("source_file", maintain_order=True):
        file_log = files.get(path)
        if file_log is None:
            continue
        for row in group.sort("source_pos", "span_id").head(cap).iter_rows(named=True):
            file_log.warn(
                _position(file_log.format, row["source_pos"], row["span_id"]),
                reason(row),
                kind=more,
                order=(row["source_pos"], row["span_id"]),
            )
        if group.height > cap:
            extra = group.height - cap
            file_log.warn("file", f"{extra:,} more spans {more}", spans=extra)


def _warn_skew(kept: pl.DataFrame, log: IngestLog) -> None:
    """A warning for each span that ends before it starts (kept as read: the run's duration
    does not use it)."""
    skewed = kept.filter(pl.col("end_ns") < pl.col("start_ns"))
    if skewed.height:
        _warn_rows(
            log,
            skewed,
            lambda r: (
                f"ends {r['start_ns'] - r['end_ns']:,} ns before it starts (clock skew); "
                "kept as read"
            ),
            "end before they start",
        )


def _warn_cycles(kept: pl.DataFrame, parent: pa.Array, log: IngestLog) -> None:
    """A warning for each cycle of parent ids (a span its own ancestor), in the log of the file
    of its first span: the cycle's spans and how many spans in or under it have no root.

    Pointer doubling over the parent index (Arrow takes): rounds = log2 of the deepest chain,
    so a forest of depth 10 costs 4 takes. Only cycles keep a pointer after n steps.
    """
    n = kept.height
    if parent.null_count == n:
        return
    jump = parent
    steps = 1
    while jump.null_count < n and steps < n:
        jump = pc.take(jump, jump)
        steps *= 2
    if jump.null_count == n:
        return
    stuck = pc.indices_nonzero(jump.is_valid())
    ends = pc.take(jump, stuck).to_pylist()  # each a span on a cycle
    up = parent.to_pylist()
    cycle_of: dict[int, int] = {}  # span on a cycle -> its cycle's first span
    cycles: dict[int, list[int]] = {}
    for start in sorted(set(ends)):
        if start in cycle_of:
            continue
        members = [start]
        node = up[start]
        while node != start:
            members.append(node)
            node = up[node]
        first = min(members)
        i = members.index(first)
        members = members[i:] + members[:i]  # from the span read first
        cycles[first] = members
        cycle_of.update(dict.fromkeys(members, first))
    under: dict[int, int] = dict.fromkeys(cycles, 0)
    for end in ends:
        under[cycle_of[end]] += 1
    info = kept.select("trace_id", "span_id", "source_file")
    files = {f.path: f for f in log.files}
    for first, members in sorted(cycles.items()):
        trace_id, _, path = info.row(first)
        ids = info.get_column("span_id").gather(members[:4]).to_list()
        shown = " -> ".join([*ids, "..." if len(members) > 4 else ids[0]])
        file_log = files.get(path)
        if file_log is not None:
            file_log.warn(
                f"trace {trace_id}",
                f"parent ids form a cycle of {len(members):,} spans ({shown}); "
                f"{under[first]:,} spans in or under it have no root",
                spans=under[first],
            )


def gather(table: pa.Table, order: pa.Array) -> pa.Table:
    """`table.take(order)`, the columns gathered on Arrow's CPU count (all cores, or a pool
    worker's share: `analyzer.workers`), as Arrow's take is single-threaded, into the memory
    pool that keeps the pages it frees (`_gather_pool`)."""
    pool = _gather_pool()
    threads = min(pa.cpu_count(), 4)

    def take(column: pa.ChunkedArray) -> pa.Array:
        # from one chunk: Arrow's take across chunks is slower (list columns)
        return pc.take(column.combine_chunks(memory_pool=pool), order, memory_pool=pool)

    if threads < 2 or table.num_rows < 100_000:
        return pa.table([take(column) for column in table.columns], schema=table.schema)
    # the list columns cost most: start them first so the others fill in around them
    names = sorted(table.column_names, key=lambda n: table.column(n).nbytes, reverse=True)
    with ThreadPoolExecutor(threads) as pool_threads:
        taken = dict(
            zip(
                names,
                pool_threads.map(lambda n: take(table.column(n)), names),
                strict=True,
            )
        )
    return pa.table([taken[n] for n in table.column_names], schema=table.schema)


def _gather_pool() -> pa.MemoryPool:
    """Arrow's jemalloc pool where it is built in, else the default one.

    In a process that has just parsed (and freed) gigabytes, the default mimalloc pool faults
    the freed pages in anew for a large gather, where jemalloc reuses them.
    """
    try:
        return pa.jemalloc_memory_pool()
    except NotImplementedError:
        return pa.default_memory_pool()
