"""The engine: the one driver of every analysis (`analyze_paths`) and of an ingest.

It cuts the input into partitions and merges what `analyzer.partition.analyze_partition` gives
for each. A small input is one partition, read and analyzed in this process. A big one is read
once into a spill folder, each span into the partition of its trace (a hash of the trace id, or
of the run key's value), as Arrow IPC files holding each resource's attributes once
(`SHARED_SCHEMA`), so the spans of a run meet in one partition whatever file they sit in; a
process pool then analyzes the partitions one at a time each, and the merge keeps the findings
and the facts a summary reads while the runs, steps and coverage stay in the spill until used.
A dataset of ``agenttrace ingest`` is analyzed part by part from its prebuilt runs (or its kept
rule results, `analyzer.materialized`). Spark calls the same `analyze_partition` per group
(`analyzer.spark`).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import re
import shutil
import weakref
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from analyzer.ingest.accounting import FileLog, IngestLog, QuarantineEntry
from analyzer.ingest.files import (
    AUTO_MIN_BYTES,
    DATASET_MANIFEST,
    estimate_bytes,
    expand_paths,
    sha256_of,
)
from analyzer.ingest.reader import (
    Ingested,
    finalize_spans,
    gather,
    read_spans,
)
from analyzer.partition import (
    RUN_TABLES,
    STEP_BATCH,
    PartialResult,
    PartitionOptions,
    analyze_partition,
    by_run,
    fill_log,
    merge_partials,
    prebuilt_partial,
    read_ipc_file,
    spill_facts,
    spill_tables,
    write_batches,
)
from analyzer.progress import Progress
from analyzer.spans import (
    SHARED_SCHEMA,
    SPAN_SCHEMA,
    compact_resources,
    empty_table,
    plain_resources,
    shared_resources,
)
from analyzer.spill import new_spill_folder
from analyzer.workers import default_jobs, process_pool, stop_workers

_R = TypeVar("_R")

if TYPE_CHECKING:
    from analyzer.pack import Pack
    from analyzer.pipeline import Analysis
    from analyzer.prebuilt import PrebuiltPart
    from analyzer.pricing import PriceTable

__all__ = [
    "AUTO_MIN_BYTES",
    "CHANGED_WHILE_READ",
    "PARTITION_BYTES",
    "UNIT_BYTES",
    "analyze_paths",
    "choose_partitions",
    "default_jobs",
    "estimate_bytes",
    "ingest_partitioned",
    "partition_ids",
]

#: Span-table bytes (estimated) per partition when the count is chosen automatically.
#: A partition of about 150k spans peaks near 1 GB in the process that analyzes it.
PARTITION_BYTES = 128 << 20
#: A plain JSON lines file is read in pieces of about this many bytes, one process each.
UNIT_BYTES = 96 << 20

# --- partition ids -----------------------------------------------------------------------------


def partition_ids(keys: pa.Array | pa.ChunkedArray, partitions: int) -> pa.Array:
    """The partition (0 .. partitions-1) of each key: a fixed-seed hash, the same everywhere."""
    series = pl.Series("k", keys)
    if partitions <= 1:
        return pa.array([0] * len(series), pa.uint32())
    return (series.hash(seed=0x5EED) % partitions).cast(pl.UInt32).to_arrow()


# --- the spill ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Unit:
    """A piece of input one process reads: a byte range of a JSON lines file, a whole file,
    or one Parquet part of a dataset.

    A range is read with its lines numbered from 1: the lines before it are counted by the
    processes reading the ranges before it, and its spans' line numbers are shifted once all
    ranges are read (`_spill_all`, `_read_ipc_folder`)."""

    index: int
    path: str
    kind: str  # "range", "file", "dataset"
    start: int = 0
    stop: int = 0
    hashed: bool = True  # its file's SHA-256 is taken


def choose_partitions(estimated: int, jobs: int) -> int:
    """Partitions for a span table of about `estimated` bytes: `PARTITION_BYTES` each at most,
    and a multiple of `jobs`, so that the processes finish their last ones together (9 at 1M
    spans on 2 cores left one process alone with the ninth)."""
    jobs = max(jobs, 1)
    return math.ceil(max(1, math.ceil(estimated / PARTITION_BYTES)) / jobs) * jobs


def _plan_units(
    files: list[Path], log: IngestLog, jobs: int, digests: bool = True
) -> tuple[list[_Unit], list[FileLog | None]]:
    """The units `jobs` processes read and, per unit, the FileLog it adds to (None for dataset
    parts); `digests`: the files are hashed."""
    from analyzer.ingest.dataset import dataset_parts, read_dataset_log

    units: list[_Unit] = []
    owners: list[FileLog | None] = []
    for path in files:
        if path.is_dir() and (path / DATASET_MANIFEST).is_file():
            log.files.extend(read_dataset_log(path).files)
            for part in dataset_parts(path):
                units.append(_Unit(len(units), str(part), "dataset"))
                owners.append(None)
            continue
        file_log = FileLog(path=str(path))
        log.files.append(file_log)
        ranges = _line_ranges(path, jobs)
        if ranges is None:
            units.append(_Unit(len(units), str(path), "file", hashed=digests))
            owners.append(file_log)
            continue
        file_log.format = "jsonl"
        file_log.size = path.stat().st_size
        for start, stop in ranges:
            units.append(_Unit(len(units), str(path), "range", start, stop, hashed=digests))
            owners.append(file_log)
    return units, owners


def _line_ranges(path: Path, jobs: int) -> list[tuple[int, int]] | None:
    """Newline-aligned byte ranges of an uncompressed JSON lines file, None for other files:
    of about equal sizes (`UNIT_BYTES` at most, to within a line), as many as a multiple of
    `jobs`, so that the processes finish their last pieces together (no process waits alone
    for a last short piece of another)."""
    from analyzer.ingest.detect import open_decompressed, sniff

    try:
        size = path.stat().st_size
        if size < 2 * UNIT_BYTES:
            return None
        with path.open("rb") as raw:
            stream, layers = open_decompressed(raw, size, str(path))
            if layers or sniff(stream, size) != "jsonl":
                return None
        pieces = math.ceil(math.ceil(size / UNIT_BYTES) / jobs) * jobs
        points = [0]
        with path.open("rb") as fh:
            for piece in range(1, pieces):
                fh.seek(max(points[-1], size * piece // pieces))
                fh.readline()
                if fh.tell() >= size:
                    break
                points.append(fh.tell())
        points.append(size)
        return list(itertools.pairwise(points))
    except Exception:  # anything odd: the ordinary reader decides, salvaging what it can
        return None


def _shifted(entries: list[dict[str, Any]], lines: int) -> list[dict[str, Any]]:
    """Quarantine or warning entries of a range read with its lines numbered from 1, their
    positions ("line 12", "line 12 span 3", "line 12, span S") moved on by `lines`."""
    return [
        e | {"position": _LINE.sub(lambda m: f"line {int(m[1]) + lines}", e["position"], 1)}
        for e in entries
    ]


_LINE = re.compile(r"^line (\d+)")


def _log_state(log: FileLog) -> dict[str, Any]:
    data = dataclasses.asdict(log)
    for name in ("quarantine", "warnings"):
        data[name] = [q.as_dict() for q in getattr(log, name)]
    return data


def _add_log(into: FileLog, part: dict[str, Any], whole: bool) -> None:
    """Add a unit's reading counts to its file's log (a whole-file unit also sets its identity)."""
    for name in ("records", "spans_read", "records_quarantined", "spans_quarantined"):
        setattr(into, name, getattr(into, name) + part[name])
    into.quarantine.extend(QuarantineEntry(**q) for q in part["quarantine"])
    into.warnings.extend(QuarantineEntry(**q) for q in part["warnings"])
    if whole:
        into.format, into.size, into.sha256 = part["format"], part["size"], part["sha256"]


def _read_unit(unit: _Unit, log: FileLog, cursor: list[int]) -> Iterator[pa.RecordBatch]:
    """The spans of `unit`; a range's lines numbered from ``cursor[0]``, and ``cursor[0]`` left
    at the number of the line after it."""
    if unit.kind == "range":
        from analyzer.ingest.otlp_json import _read_lines
        from analyzer.ingest.reader import cap_values

        log.format = "jsonl"  # warnings name the lines of kept spans
        with open(unit.path, "rb") as fh:
            fh.seek(unit.start)
            for batch in _read_lines(fh, log, cursor, unit.stop - unit.start):
                yield cap_values(batch, log)
    elif unit.kind == "file":
        from analyzer.ingest.reader import iter_salvaging, no_digest

        yield from iter_salvaging(Path(unit.path), log, digest=None if unit.hashed else no_digest)
    else:
        import pyarrow.parquet as pq

        parquet = pq.ParquetFile(unit.path)
        for group in range(parquet.num_row_groups):
            table = parquet.read_row_group(group).select(SPAN_SCHEMA.names).cast(SPAN_SCHEMA)
            yield from table.to_batches()


def _spill_unit(unit: _Unit, spill: str, partitions: int, run_key: str | None) -> dict[str, Any]:
    """Read one unit and write its spans to the partition files; its reading counts (and a
    range's count of lines, ``lines``)."""
    log = FileLog(path=unit.path)
    cursor = [1]
    batches = [shared_resources(batch) for batch in _read_unit(unit, log, cursor)]
    table = pa.Table.from_batches(batches, schema=SHARED_SCHEMA)
    del batches
    if table.num_rows:
        pid = partition_ids(table.column("trace_id"), partitions)
        _write_by_partition(table, pid, Path(spill) / "in", f"u{unit.index:06d}.arrow")
        if run_key is not None:
            keys = _run_key_candidates(table, run_key)
            keys.write_ipc(Path(spill) / "keys" / f"u{unit.index:06d}")
    return _log_state(log) | {"lines": cursor[0] - 1}


def _write_by_partition(table: pa.Table, pid: pa.Array, folder: Path, name: str) -> None:
    """The spans of `table` (`SHARED_SCHEMA`) in file `name` of the folder of their partition
    (`pid`), each partition's in reading order and with only the resources it uses."""
    order = pc.sort_indices(pid)  # stable: each partition keeps the reading order
    table = gather(shared_resources(table), order)
    offset = 0
    for item in sorted(pc.value_counts(pid).to_pylist(), key=lambda c: c["values"]):
        part, n = item["values"], item["counts"]
        target = folder / f"p{part:05d}"
        target.mkdir(parents=True, exist_ok=True)
        _write_ipc(compact_resources(table.slice(offset, n)), target / name)
        offset += n


def _write_ipc(table: pa.Table, path: Path) -> None:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def _read_ipc_folder(folder: Path, lines: dict[int, int] | None = None) -> pa.Table:
    """The spans of a spill folder's files (`SHARED_SCHEMA`, their resources in one
    dictionary); those a unit wrote (``u<index>.arrow``) with their line numbers moved on by
    ``lines[index]`` (`_spill_all`)."""
    files = sorted(folder.glob("*.arrow")) if folder.is_dir() else []
    tables = []
    for path in files:
        with pa.memory_map(str(path)) as source:
            table = pa.ipc.open_file(source).read_all()
        shift = lines.get(int(path.stem[1:]), 0) if lines and path.stem[0] == "u" else 0
        if shift:
            position = table.schema.get_field_index("source_pos")
            moved = pc.add(table.column(position), shift)
            table = table.set_column(position, table.field(position), moved)
        tables.append(table)
    return shared_resources(pa.concat_tables(tables)) if tables else empty_table(SHARED_SCHEMA)


def _run_key_candidates(table: pa.Table, run_key: str) -> pl.DataFrame:
    """Per trace, the span whose `run_key` value `runs` would take (`runs.root_first`)."""
    from analyzer.runs import root_first, span_attribute

    frame = pl.from_arrow(table.select(["trace_id", "parent_span_id", "start_ns", "span_id"]))
    assert isinstance(frame, pl.DataFrame)
    frame = frame.with_columns(_value=span_attribute(table, run_key))
    return root_first(frame.filter(pl.col("_value").is_not_null()), "trace_id")


def _regroup(source: int, spill: str, targets: str | None, lines: dict[int, int]) -> None:
    """Move the spans of trace partition `source` to the partitions of their run-key value
    (`targets`: the file of `_run_key_targets`; its files deleted once read; `lines`: see
    `_read_ipc_folder`)."""
    folder = Path(spill) / "in" / f"p{source:05d}"
    table = _read_ipc_folder(folder, lines)
    shutil.rmtree(folder, ignore_errors=True)  # mapped: readable until `table` goes
    if not table.num_rows:
        return
    if targets is None:
        pid = pa.array([source] * table.num_rows, pa.uint32())
    else:
        frame = pl.DataFrame({"trace_id": pl.Series(table.column("trace_id"))}).with_row_index("_r")
        joined = frame.join(pl.read_ipc(targets), on="trace_id", how="left").sort("_r")
        pid = joined.select(pl.col("_p").fill_null(source).cast(pl.UInt32)).to_series().to_arrow()
    _write_by_partition(table, pid, Path(spill) / "grouped", f"s{source:05d}.arrow")


# --- analysis of the spilled partitions -------------------------------------------------------


def _analyze_spilled(
    folder: str, out: str, options: PartitionOptions, lines: dict[int, int]
) -> PartialResult:
    """Analyze one spilled partition (`lines`: see `_read_ipc_folder`); write its per-run tables
    to `out`.<table>.arrow (see `spill_tables`); the rest. The partition's span files are
    deleted once read: their page cache is freed for the writes that follow, and the parent does
    not delete them all at the end."""
    spans = _read_ipc_folder(Path(folder), lines)
    partial = analyze_partition(spans, options)
    del spans
    shutil.rmtree(folder, ignore_errors=True)
    return spill_facts(spill_tables(partial, out, tables=options.tables), out)


def _analyze_prebuilt(part: PrebuiltPart, out: str, options: PartitionOptions) -> PartialResult:
    """`_analyze_spilled` of a dataset part's prebuilt runs (no span is read), from the rule
    results kept with them when they are for these packs and prices (`analyzer.materialized`)."""
    from analyzer.materialized import kept_results
    from analyzer.prebuilt import read_prebuilt

    kept = kept_results(part, out, options)
    if kept is not None:
        if "messages" in options.tables:  # not among the kept results: the prebuilt runs'
            from analyzer.prebuilt import read_messages

            runs = read_ipc_file(f"{out}.runs.arrow").select("run_id")
            order = runs.with_row_index("_run")  # the messages in the runs' order
            messages = (
                read_messages(part)
                .join(order, on="run_id")
                .sort("_run", "index", "position")
                .drop("_run")
            )
            write_batches(messages, f"{out}.messages.arrow")
            kept.messages = messages.clear()
        return kept
    partial = prebuilt_partial(*read_prebuilt(part), options)
    return spill_facts(spill_tables(partial, out, tables=options.tables), out)


#: Rows per piece of the ordered merge.
_MERGE_STEPS = 1 << 14


class _StepCursor:
    """Reads the rows of one partition's file of a per-run table in order, a few batches at a
    time, from row `skip` on."""

    def __init__(self, path: str, skip: int = 0) -> None:
        self._batch = 0
        if skip:  # the batches' row counts, from a map of the file (only their headers read)
            with pa.memory_map(path) as source:
                mapped = pa.ipc.open_file(source)
                while skip >= (rows := mapped.get_batch(self._batch).num_rows):
                    skip -= rows
                    self._batch += 1
        self._file = pa.OSFile(path, "rb")  # read, not mapped: pages read are not kept
        self._reader = pa.ipc.open_file(self._file)
        self.schema = self._reader.schema
        self._offset = skip
        self._current: pa.RecordBatch | None = None

    def take(self, n: int) -> list[pa.RecordBatch]:
        out = []
        while n > 0:
            if self._current is None:  # each batch read once, however many takes it serves
                self._current = self._reader.get_batch(self._batch)
            piece = self._current.slice(self._offset, n)
            out.append(piece)
            n -= piece.num_rows
            self._offset += piece.num_rows
            if self._offset >= self._current.num_rows:
                self._batch, self._offset, self._current = self._batch + 1, 0, None
        return out

    def close(self) -> None:
        self._file.close()


#: Threads that merge a table's ranges of runs at once (`_merge_ordered`); and the fewest rows
#: a range is given.
_MERGE_THREADS = 2
_MERGE_RANGE_MIN = 1 << 16


def _sorted_by_run(files: list[str]) -> pl.DataFrame:
    """The rows of all partitions' files in the in-process order (by run, stable), read whole
    and sorted: for a small table (the findings), cheaper than `_merge_ordered`."""
    frames = [read_ipc_file(path) for path in files]
    target = _common_schema(frames)
    merged = pl.concat([f.cast(target) for f in frames], how="vertical", rechunk=False)
    return merged.sort("run_id", maintain_order=True)


def _merge_ordered(files: list[str], rows_per_run: list[pl.DataFrame], out: str) -> list[str]:
    """Merge the rows of all partitions' files in the in-process order (by run, stable), given
    each file's rows per run (run_id, _n, in its order), into IPC files `out`.0, `out`.1, ...
    (returned; their rows follow each other in that order). Merged piece by piece: one batch
    of each input is in memory at a time; the runs cut in ranges of about equal rows merged in
    threads of their own, one file each (Arrow computes without the GIL)."""
    order = (
        pl.concat(
            [
                f.with_columns(_p=pl.lit(i, pl.UInt32), _skip=pl.col("_n").cum_sum() - pl.col("_n"))
                for i, f in enumerate(rows_per_run)
            ],
            how="vertical_relaxed",
        )
        .sort("run_id", maintain_order=True)
        .with_columns(_start=pl.col("_n").cum_sum() - pl.col("_n"))
    )
    total = int(order.get_column("_n").sum() or 0)
    ranges = max(1, min(_MERGE_THREADS, total // _MERGE_RANGE_MIN))
    ranged = order.with_columns(_range=pl.col("_start").cast(pl.Int64) * ranges // max(total, 1))
    parts = [ranged.filter(pl.col("_range") == k) for k in range(ranges)]
    outs = [f"{out}.{k}" for k in range(ranges)]
    cursor_sets = []
    try:
        for part in parts:
            # a range's rows of each file follow each other, from the first of its runs there
            skips = dict(part.group_by("_p").agg(pl.col("_skip").min()).iter_rows())
            cursor_sets.append([_StepCursor(f, skips.get(i, 0)) for i, f in enumerate(files)])
        empties = [pl.from_arrow(empty_table(c.schema)) for c in cursor_sets[0]]
        schema = pl.DataFrame(schema=_common_schema(empties)).to_arrow().schema
        merge = functools.partial(_write_merged, schema=schema)
        with ThreadPoolExecutor(ranges, thread_name_prefix="agenttrace-merge") as threads:
            list(threads.map(merge, parts, cursor_sets, outs))
    finally:
        for cursors in cursor_sets:
            for cursor in cursors:
                cursor.close()
    return outs


def _mapped_frame(paths: list[str]) -> pl.DataFrame:
    """The frame of the IPC files `paths`, one after the other, mapped."""
    tables = []
    for path in paths:
        with pa.memory_map(path) as source:
            tables.append(pa.ipc.open_file(source).read_all())
    merged = pl.from_arrow(pa.concat_tables([t for t in tables if t.num_rows] or tables[:1]))
    assert isinstance(merged, pl.DataFrame)
    return merged


def _read_batches(paths: list[str]) -> pa.RecordBatchReader:
    """The record batches of the IPC files `paths` (one schema), one after the other, each
    read when reached (read, not mapped: the pages read are not kept)."""
    with pa.OSFile(paths[0], "rb") as first:
        schema = pa.ipc.open_file(first).schema

    def batches() -> Iterator[pa.RecordBatch]:
        for path in paths:
            with pa.OSFile(path, "rb") as source:
                reader = pa.ipc.open_file(source)
                for i in range(reader.num_record_batches):
                    yield reader.get_batch(i)

    return pa.RecordBatchReader.from_batches(schema, batches())


def _write_merged(
    order: pl.DataFrame, cursors: list[_StepCursor], out: str, schema: pa.Schema
) -> None:
    """Write the rows of `order`'s runs (run_id, _n, _p: the file, in the merged order) to the
    IPC file `out` (`schema`), read from the `cursors` of the files, piece by piece: each piece
    gathered with Arrow's take (through polars, every string would be converted there and
    back)."""
    order = order.with_columns(_piece=(pl.col("_n").cum_sum() - pl.col("_n")) // _MERGE_STEPS)
    with pa.OSFile(out, "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        for (_,), piece in order.group_by("_piece", maintain_order=True):
            tables = []
            base = {}
            rows = 0
            need = piece.group_by("_p", maintain_order=True).agg(pl.col("_n").sum())
            for part, n in sorted(need.iter_rows()):
                base[part] = rows
                rows += n
                table = pa.Table.from_batches(cursors[part].take(n))
                tables.append(table if table.schema == schema else table.cast(schema))
            if not tables:
                continue
            rows_of = piece.with_columns(
                _start=pl.col("_p").replace_strict(base, return_dtype=pl.Int64)
                + pl.col("_n").cum_sum().over("_p")
                - pl.col("_n")
            )
            index = rows_of.select(
                pl.int_ranges("_start", pl.col("_start") + pl.col("_n")).explode()
            ).to_series()
            writer.write_table(pa.concat_tables(tables).take(index.to_arrow()), STEP_BATCH)


def _common_schema(frames: list[pl.DataFrame]) -> dict[str, pl.DataType]:
    """Column -> the first dtype that is not Null among `frames` (same columns, in order)."""
    schema: dict[str, pl.DataType] = dict(frames[0].schema)
    for frame in frames[1:]:
        for name, dtype in frame.schema.items():
            if schema[name] == pl.Null and dtype != pl.Null:
                schema[name] = dtype
    return schema


@contextmanager
def _pool(jobs: int, started: Executor | None = None) -> Iterator[Executor]:
    """A pool of `jobs` worker processes (one thread for 1), or the one `started` already. On
    leaving, the workers exit in the background, handing their memory back while the caller
    merges what they returned; on an error the caller waits for them."""
    if started is not None:
        pool = started
    elif jobs <= 1:
        pool = ThreadPoolExecutor(1)  # one worker thread: the same code, no process
    else:
        pool = process_pool(jobs)
    try:
        yield pool
    except Exception:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    except BaseException:  # stopped (SIGTERM, Ctrl-C): the workers' results will not be used
        if isinstance(pool, ProcessPoolExecutor):
            stop_workers(pool)
        raise
    pool.shutdown(wait=False)


def analyze_paths(
    paths: Sequence[str | Path],
    *,
    partitions: int | None = None,
    jobs: int | None = None,
    spill: str | Path | None = None,
    run_key: str | None = None,
    case_key: str | None = None,
    packs: Sequence[Pack] = (),
    prices: PriceTable | None = None,
    since_ns: int | None = None,
    until_ns: int | None = None,
    progress: Progress | None = None,
    case_class: str | None = None,
    tables: Collection[str] | None = None,
    digests: bool = True,
    pool: Executor | None = None,
) -> Analysis:
    """Read `paths`, rebuild their runs, price them and apply the rule packs: the Analysis every
    command reports, computed in bounded memory (see the module docstring).

    `partitions`: 0 reads and analyzes everything in this process; None (auto) does so for an
    input under `AUTO_MIN_BYTES` of estimated span table, else takes one partition per
    `PARTITION_BYTES` (at least one per job). `progress` gets the stages (`analyzer.progress`).
    `jobs` (default: the CPUs of this process) processes read the input and analyze
    partitions. `spill` is a folder for the temporary files (default: a new folder in the
    system's temporary directory, removed when the result is no longer used); the runs, steps
    and coverage of the result are read from it when first used, and the facts its summary
    reads (`analyzer.metrics.facts`, for `case_class`, default
    `analyzer.metrics.summary.DEFAULT_CASE_CLASS`) are merged from the partitions'. A dataset
    with prebuilt runs (`analyzer.prebuilt`), given alone and with the default run and case
    keys, is analyzed from those, one unit per part (`partitions` does not apply).

    `tables` names the per-run tables of the result that the caller reads, of ``runs``,
    ``steps``, ``coverage`` and ``messages`` (the prompts report.html shows; None: all; the
    findings are always read): the partitions do not write the others to the spill, and
    reading one from the result raises RuntimeError (the messages are empty instead). A
    summary alone reads none of them (`analyzer.render.build_summary` without labels,
    `terminal_summary`).

    `digests`: each file's SHA-256 goes into its log (``FileLog.sha256``); False: no file is
    hashed (the logs keep ""), for a caller that records no digest (a `report` without
    ``--out``).

    `pool`: `jobs` worker processes the caller started (`analyzer.workers.start_pool`), used
    instead of new ones and shut down as they would be; a dataset's prebuilt runs leave it
    unused (the caller shuts it down).
    """
    from analyzer.metrics.summary import DEFAULT_CASE_CLASS
    from analyzer.prebuilt import prebuilt_dataset
    from analyzer.pricing import load_prices

    jobs = jobs or default_jobs()
    files, skipped = expand_paths(list(paths))
    prices = prices if prices is not None else load_prices()
    options = PartitionOptions(
        run_key,
        case_key,
        tuple(packs),
        prices,
        since_ns,
        until_ns,
        case_class or DEFAULT_CASE_CLASS,
        tuple(n for n in RUN_TABLES if n == "findings" or tables is None or n in tables),
    )
    prebuilt = prebuilt_dataset(files) if run_key is None and case_key is None else None
    if prebuilt is not None and partitions != 0:
        return _analyze_prebuilt_dataset(files[0], prebuilt, options, jobs, spill, progress)
    if partitions is None:
        estimated = estimate_bytes(paths)
        partitions = choose_partitions(estimated, jobs) if estimated >= AUTO_MIN_BYTES else 0
    if partitions == 0:
        return _analyze_in_memory(paths, len(files), options, jobs, digests, progress)
    folder = new_spill_folder(spill)
    try:
        (folder / "keys").mkdir()
        log = IngestLog()
        units, owners = _plan_units(files, log, jobs, digests)
        with _pool(jobs, pool) as pool:
            lines = _spill_all(pool, units, owners, folder, partitions, run_key, progress)
            options = options.reading(log)
            source = folder / "in"
            if run_key is not None:
                targets = _run_key_targets(folder, partitions)
                regroup = functools.partial(
                    _regroup, spill=str(folder), targets=targets, lines=lines
                )
                list(pool.map(regroup, range(partitions)))
                source, lines = folder / "grouped", {}
            outs = [str(folder / f"part-{p:05d}") for p in range(partitions)]
            analyze = functools.partial(_analyze_spilled, options=options, lines=lines)
            sources = [str(source / f"p{p:05d}") for p in range(partitions)]
            results = _tracked(progress, pool.map(analyze, sources, outs), partitions)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return _merged(folder, outs, results, log, options, [str(p) for p in skipped])


def _tracked(progress: Progress | None, results: Iterable[_R], total: int) -> list[_R]:
    """`results` (of the partitions, as they come), each reported to `progress`."""
    if progress is None:
        return list(results)
    progress.stage("analyze", total, "partitions")
    done = []
    for result in results:
        done.append(result)
        progress.advance()
    progress.close()
    return done


def _analyze_in_memory(
    paths: Sequence[str | Path],
    files: int,
    options: PartitionOptions,
    jobs: int,
    digests: bool,
    progress: Progress | None,
) -> Analysis:
    """`analyze_paths` of an input small enough for memory: one partition, every span
    read in this process (`files`: how many files `paths` name, for the progress)."""
    read = None
    if progress is not None:
        progress.stage("read", files, "files")
        read = progress.file_read
    spans, log, skipped = read_spans(list(paths), progress=read, jobs=jobs, digests=digests)
    if progress is not None:
        progress.close()
    partial = analyze_partition(spans, options.reading(log))
    return merge_partials(
        [partial], log, packs=options.packs, prices=options.prices, skipped=skipped
    )


def _analyze_prebuilt_dataset(
    dataset: Path,
    parts: list[PrebuiltPart],
    options: PartitionOptions,
    jobs: int,
    spill: str | Path | None,
    progress: Progress | None,
) -> Analysis:
    """`analyze_paths` of a dataset from its prebuilt runs: one unit per part."""
    from analyzer.ingest.dataset import load_manifest, read_dataset_log
    from analyzer.materialized import read_as_kept

    log = read_dataset_log(dataset)
    # a part none of whose runs started in the window adds nothing: not read (nightly windows
    # of a dataset of many nights read that night's parts)
    parts = [p for p in parts if p.may_start_in(options.since_ns, options.until_ns)]
    kept = read_as_kept(parts, options)
    folder = new_spill_folder(spill)
    try:
        outs = [str(folder / f"part-{p:05d}") for p in range(len(parts))]
        # kept results are a few small files per part: read on threads (a process takes
        # longer to start)
        with ThreadPoolExecutor(jobs) if kept else _pool(jobs) as pool:
            analyze = functools.partial(_analyze_prebuilt, options=options)
            results = _tracked(progress, pool.map(analyze, parts, outs), len(parts))
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    analysis = _merged(folder, outs, results, log, options, [])
    manifest = load_manifest(dataset)
    log.orphans = int(manifest.get("orphan_spans", 0))
    log.outside_runs = int(manifest["spans_outside_runs"])  # counted at ingest: `prebuilt_dataset`
    return analysis


class Spill:
    """The per-run tables of a partitioned result in its spill folder: each partition's file
    of each table `kept`, with its rows per run. The folder is removed once no table of the
    result can be read from it."""

    def __init__(self, folder: Path, outs: list[str], kept: Collection[str]) -> None:
        self.folder = folder
        self.outs = outs
        self.kept = set(kept)
        self._merged_files: dict[str, list[str]] = {}
        weakref.finalize(self, shutil.rmtree, folder, True)

    def _files(self, name: str) -> list[str]:
        if name not in self.kept:
            raise RuntimeError(
                f"the {name} of this result were not kept: analyze_paths(tables=...) left them out"
            )
        return [f"{o}.{name}.arrow" for o in self.outs]

    def merged(self, name: str) -> list[str]:
        """The files of table `name` merged in order (`_merge_ordered`), when first asked."""
        if name not in self._merged_files:
            files = self._files(name)
            rows = [read_ipc_file(f"{f}.runs") for f in files]
            self._merged_files[name] = _merge_ordered(
                files, rows, str(self.folder / f"{name}.arrow")
            )
        return self._merged_files[name]

    def load(self, name: str) -> pl.DataFrame:
        """Table `name` whole: the findings read and sorted; the others merged into files of
        the spill, piece by piece, and mapped."""
        if name == "findings":
            return _sorted_by_run(self._files(name))
        return _mapped_frame(self.merged(name))

    def batches(self, name: str) -> pa.RecordBatchReader:
        """Table `name` in order, a batch at a time, from its merged files."""
        return _read_batches(self.merged(name))

    def select(
        self,
        name: str,
        columns: Sequence[str] | None = None,
        run_ids: Sequence[str] | None = None,
    ) -> pl.DataFrame:
        """`RunTables.select` of table `name`, read from each partition's file (only those
        columns, or the rows of `run_ids`) and put in order: no merge."""
        frames = []
        for path in self._files(name):
            scan = pl.scan_ipc(path)
            if run_ids is not None:  # polars reads the run ids first, then the rows it keeps
                scan = scan.filter(pl.col("run_id").is_in(list(run_ids)))
            if columns is not None:  # with the run ids, to put the rows in order
                names = scan.collect_schema().names()
                scan = scan.select("run_id", *(c for c in columns if c in names and c != "run_id"))
            frames.append(scan.collect())
        merged = by_run(frames)
        assert merged is not None
        if columns is None:
            return merged
        return merged.select(c for c in columns if c in merged.columns)


def _merged(
    folder: Path,
    outs: list[str],
    partials: list[PartialResult],
    log: IngestLog,
    options: PartitionOptions,
    skipped: list[str],
) -> Analysis:
    """One Analysis from the partitions' results and their per-run tables in the spill
    `folder` (removed when the Analysis is no longer used)."""
    written = {n for n in RUN_TABLES if all(getattr(p, n) is not None for p in partials)}
    spill = Spill(folder, outs, written)
    analysis = merge_partials(
        partials,
        log,
        packs=options.packs,
        prices=options.prices,
        skipped=skipped,
        spill=spill if partials else None,
    )
    if analysis.facts is not None:
        analysis.facts.keep = spill  # its parts' files are in the spill
    return analysis


def _spill_all(
    pool: Executor,
    units: list[_Unit],
    owners: list[FileLog | None],
    folder: Path,
    partitions: int,
    run_key: str | None,
    progress: Progress | None,
) -> dict[int, int]:
    """Read every unit into the spill; fill the file logs (files read in ranges are hashed here
    meanwhile). Returns the lines before each range (by unit index, where not 0): its spans'
    line numbers are shifted by as much when read back (`_read_ipc_folder`).

    The ranges are numbered apart because counting the lines before each one would take a read
    of the file in this process, whose CPU the readers of the ranges want."""
    if progress is not None:
        progress.stage("read", len(units), "files" if len(units) == len(owners) else "pieces")
    futures = [pool.submit(_spill_unit, unit, str(folder), partitions, run_key) for unit in units]
    # the files read in ranges are hashed here, while the processes read the ranges
    hashed = dict.fromkeys(u.path for u in units if u.kind == "range" and u.hashed)
    digests = {path: sha256_of(Path(path)) for path in hashed}
    lines: dict[int, int] = {}
    read: dict[str, int] = {}  # lines of the ranges of a file read so far
    for unit, owner, future in zip(units, owners, futures, strict=True):
        state = future.result()
        if unit.kind == "range":
            before = read.get(unit.path, 0)
            read[unit.path] = before + state["lines"]
            if before:
                lines[unit.index] = before
                for name in ("quarantine", "warnings"):
                    state[name] = _shifted(state[name], before)
        if owner is not None:
            _add_log(owner, state, whole=unit.kind == "file")
        if progress is not None:
            progress.advance(state.get("spans_read", 0))
    for owner in owners:
        if owner is not None and owner.path in digests:
            owner.sha256 = digests[owner.path]
    return lines


def _run_key_targets(folder: Path, partitions: int) -> str | None:
    """trace_id -> partition of its run-key value, for the traces whose partition changes."""
    files = sorted((folder / "keys").glob("u*"))
    if not files:
        return None
    from analyzer.runs import root_first

    best = root_first(pl.concat([pl.read_ipc(f) for f in files]), "trace_id")
    value_part = pl.Series(partition_ids(best.get_column("_value").to_arrow(), partitions))
    trace_part = pl.Series(partition_ids(best.get_column("trace_id").to_arrow(), partitions))
    moved = best.select("trace_id").with_columns(_p=value_part).filter(value_part != trace_part)
    path = folder / "targets.arrow"
    moved.write_ipc(path)
    return str(path)


# --- ingest into a dataset, partition by partition ---------------------------------------------


@dataclass
class _IngestPart:
    counts: dict[str, tuple[int, int]]
    orphans: int
    part: dict | None
    warnings: dict[str, list[QuarantineEntry]]
    outside_runs: int = 0  # counted over the whole dataset once its parts are in


def _ingest_spilled(
    folder: str,
    known: str | None,
    name: str,
    out: str,
    old_parts: list[str],
    options: PartitionOptions | None,
    lines: dict[int, int],
) -> _IngestPart:
    """De-duplicate one spilled partition (also against the dataset's spans; `lines`: see
    `_read_ipc_folder`), write its part, its prebuilt runs (`analyzer.prebuilt`) and, with
    `options`, their rule results (`analyzer.materialized`) into `out`: the ingest's staging
    folder inside the dataset, whose parts `analyzer.ingest.dataset.commit_parts` moves in."""
    from analyzer.ingest.dataset import count_orphans, drop_known, known_spans, write_part
    from analyzer.materialized import keep_results
    from analyzer.prebuilt import build_prebuilt, write_prebuilt

    spans = _read_ipc_folder(Path(folder), lines)
    files = sorted(set(pc.unique(spans.column("source_file")).to_pylist()) - {None})
    log = IngestLog(files=[FileLog(path=f) for f in files])
    # each span's own resource list, as the dataset's parts hold them: decoded once gathered
    spans = plain_resources(finalize_spans(spans, log).spans)
    # the dataset's spans in this partition, with the index of the old part holding each
    old = pl.read_ipc(known) if known is not None else known_spans(Path(out), [])
    if old.height and spans.num_rows:
        spans = drop_known(spans, old, log)
    keys = pl.from_arrow(spans.select(["trace_id", "span_id", "parent_span_id"]))
    assert isinstance(keys, pl.DataFrame)
    if not spans.num_rows:
        part = None
    else:
        part = write_part(spans, Path(out), name)
        # traces that also have spans in earlier parts: their runs are rebuilt whole here
        where = keys.select(pl.col("trace_id").unique()).join(
            old.select("trace_id", "part").unique(), on="trace_id", how="inner"
        )
        straddling = where.get_column("trace_id").unique()
        whole = spans
        if straddling.len():
            holding = [old_parts[i] for i in sorted(where.get_column("part").unique())]
            earlier = _spans_of_traces(holding, straddling)
            whole = finalize_spans(pa.concat_tables([spans, earlier]), IngestLog()).spans
        runset, retries = build_prebuilt(whole, log)
        del whole, spans
        entry = write_prebuilt(runset, retries, Path(out), name, where)
        if options is not None:
            results = keep_results(runset, retries, Path(out) / str(entry["path"]), options)
            if results is not None:
                entry["results"] = results
        part["runs"] = entry
    return _IngestPart(
        counts={f.path: (f.spans_kept, f.duplicates) for f in log.files},
        orphans=count_orphans(pl.concat([old.drop("part"), keys])),
        part=part,
        warnings={f.path: list(f.warnings) for f in log.files},
    )


def _spans_of_traces(parts: list[str], traces: pl.Series) -> pa.Table:
    """The spans of `traces` in the dataset parts `parts` (those that hold some)."""
    import pyarrow.dataset as ds

    wanted = pa.array(traces.to_list(), pa.string())
    dataset = ds.dataset(parts, format="parquet", schema=SPAN_SCHEMA)
    return dataset.to_table(filter=ds.field("trace_id").isin(wanted))


def ingest_partitioned(
    paths: Sequence[str | Path],
    out: Path,
    *,
    tool_version: str,
    jobs: int | None = None,
    partitions: int | None = None,
    spill: str | Path | None = None,
    progress: Progress | None = None,
    packs: Sequence[Pack] = (),
    prices: PriceTable | None = None,
    case_class: str | None = None,
    digests: Mapping[str, str] | None = None,
) -> Ingested:
    """`read_traces` + `write_dataset` in bounded memory: the input is spilled into hash
    partitions of trace ids, each de-duplicated (also against spans already in the dataset
    `out`) and written as one Parquet part with its prebuilt runs. The dataset reads back as
    the in-memory ingest would give it; `jobs` does not change a byte of it. With `packs`,
    the runs are also checked with them and `prices` (default: the bundled table), and the
    results kept for reports with the same packs and prices (`analyzer.materialized`; the
    summary facts for `case_class`, default `analyzer.metrics.summary.DEFAULT_CASE_CLASS`).
    Returns the accounting (and an empty span table).

    A transaction (`analyzer.ingest.dataset.ingesting`): under the dataset's lock, the parts
    are written in a staging folder inside the dataset, moved in, and the manifest written
    last. A file that changed while it was read (its size, times or inode differ after the
    read from before it, or its SHA-256 from `digests`, those taken before by the caller) is
    not recorded as ingested (no SHA-256 in the manifest) and gets a warning: the next ingest
    reads it whole again, its spans kept now counting as duplicates then."""
    from analyzer.ingest.dataset import (
        commit_parts,
        ingesting,
        known_spans,
        next_part_index,
        write_manifest,
    )
    from analyzer.prebuilt import prebuilt_parts, spans_in_runs

    options = None
    if packs:
        from analyzer.metrics.summary import DEFAULT_CASE_CLASS
        from analyzer.pricing import load_prices

        prices = prices if prices is not None else load_prices()
        case_class = case_class or DEFAULT_CASE_CLASS
        options = PartitionOptions(packs=tuple(packs), prices=prices, case_class=case_class)
    jobs = jobs or default_jobs()
    files, skipped = expand_paths(list(paths))
    if partitions is None:  # from the input only, so that any `jobs` writes the same parts;
        # an even count above one, which two processes (the small machine) share evenly
        partitions = max(1, math.ceil(estimate_bytes(paths) / PARTITION_BYTES))
        partitions += partitions % 2 if partitions > 1 else 0
    with ingesting(out) as target:
        manifest = target.manifest
        old_parts = list(manifest.get("parts", [])) if manifest else []
        staging = target.staging()
        folder = new_spill_folder(spill)
        try:
            (folder / "keys").mkdir()
            known = _spill_known(known_spans(out, old_parts), folder, partitions)
            log = IngestLog()
            before = {str(f): _file_identity(f) for f in files if not f.is_dir()}
            units, owners = _plan_units(files, log, jobs)
            base = next_part_index(old_parts)
            with _pool(jobs) as pool:
                lines = _spill_all(pool, units, owners, folder, partitions, None, progress)
                _changed_files(owners, before, digests or {})
                write = functools.partial(
                    _ingest_spilled,
                    out=str(staging),
                    old_parts=[str(out / p["path"]) for p in old_parts],
                    options=options,
                    lines=lines,
                )
                results = _tracked(
                    progress,
                    pool.map(
                        write,
                        [str(folder / "in" / f"p{p:05d}") for p in range(partitions)],
                        [known.get(p) for p in range(partitions)],
                        [f"part-{base + p:05d}.parquet" for p in range(partitions)],
                    ),
                    partitions,
                )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        fill_log(log, results, 0)
        new_parts = [r.part for r in results if r.part is not None]
        commit_parts(staging, out)
        parts = old_parts + new_parts
        built = prebuilt_parts(out, {"parts": parts})
        outside = None if built is None else sum(p["spans"] for p in parts) - spans_in_runs(built)
        write_manifest(
            out,
            manifest,
            new_parts,
            log,
            log.orphans,
            tool_version=tool_version,
            outside_runs=outside,
        )
        shutil.rmtree(staging, ignore_errors=True)
    return Ingested(spans=empty_table(SPAN_SCHEMA), log=log, skipped=[str(p) for p in skipped])


#: The warning a file that changed while it was read gets (`ingest_partitioned`).
CHANGED_WHILE_READ = (
    "changed while it was read: not recorded as ingested; the next ingest reads it whole "
    "again (the spans kept now count as duplicates then)"
)


def _file_identity(path: Path) -> tuple[int, ...] | None:
    """What changes when a file's content does: inode, size, modification and change times."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _changed_files(
    owners: list[FileLog | None], before: dict[str, tuple[int, ...] | None], digests: Mapping
) -> None:
    """Clear the SHA-256 of each file read (all read and hashed by now) that changed since
    `before` (or whose digest differs from `digests`), with a warning: not recorded as
    ingested under either content."""
    for log in {id(o): o for o in owners if o is not None}.values():
        old = digests.get(log.path)
        moved = before.get(log.path) != _file_identity(Path(log.path))
        if not moved and (old is None or not log.sha256 or old == log.sha256):
            continue
        log.sha256 = ""
        log.warn("file", CHANGED_WHILE_READ, spans=0)


def _spill_known(keys: pl.DataFrame, folder: Path, partitions: int) -> dict[int, str]:
    """The dataset's span keys, one IPC file per partition of their trace ids."""
    if keys.is_empty():
        return {}
    pid = pl.Series(partition_ids(keys.get_column("trace_id").to_arrow(), partitions))
    out = {}
    for (part,), frame in keys.with_columns(_p=pid).group_by("_p"):
        path = folder / "keys" / f"known-{part:05d}.arrow"
        frame.drop("_p").write_ipc(path)
        out[int(part)] = str(path)
    return out
