"""The distributed path: the same analysis inside PySpark (``groupBy(run key).applyInArrow``).

Spans are read by the project's own readers (one Spark task per local trace file,
``mapInArrow``; files under a URI are read as bytes by Spark's ``binaryFile`` source first) or
from the Parquet dataset of ``agenttrace ingest`` (``spark.read.parquet``, any path Spark reads).
Every span gets the key of its run (the trace id, or the value of ``run_key`` as
`analyzer.runs` picks it), spans are grouped by that key (hashed into ``buckets`` groups, so
each Python call analyzes many runs at once; ``buckets=0`` groups by the run key itself), and
each group goes through `analyzer.partition.analyze_partition`, the function the engine
calls on every partition. The partial results come back to the driver as Arrow IPC bytes and
are merged by `analyzer.partition.merge_partials`: the result equals `engine.analyze_paths`.

Needs the ``spark`` extra (``pip install 'agenttrace[spark]'``) on the driver and on every
executor; local trace files must be readable at the same path on every executor.

Run on a cluster with ``spark-submit ... analyzer/spark_submit.py PATH... [report options]``
or ``python -m analyzer.spark_submit --spark-master URL PATH... [report options]``: both are
``agenttrace report --engine spark``.
"""

from __future__ import annotations

import io
import math
import os
import pickle
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from analyzer.pack import Pack
    from analyzer.partition import PartitionOptions
    from analyzer.pipeline import Analysis
    from analyzer.pricing import PriceTable

__all__ = ["DEFAULT_MASTER", "analyze_spark", "spark_session"]

#: The master when neither ``master`` nor the ``SPARK_REMOTE`` environment variable gives one.
DEFAULT_MASTER = "local[*]"

# Columns added to the span table on the way: the reading accounting of one file (pickled
# FileLog, on one extra row per file, every span column null), the run-key value of a span, and
# the group key.
_LOG, _VALUE, _PART = "_agenttrace_log", "_agenttrace_value", "_agenttrace_part"
#: The frames of a partial result sent back to the driver (the unpriced models too: the
#: summary reads them from the merged result, not from its steps; the prompt messages
#: report.html shows).
_FRAMES = ("runs", "steps", "findings", "coverage", "unpriced", "messages")
#: The other fields of a partial result sent back, pickled.
_META = ("errors", "counts", "orphans", "outside_runs", "warnings")
#: Spans per Arrow batch handed from a reader to Spark.
_BATCH_ROWS = 4096
#: Rows of a result frame per Arrow IPC piece sent back to the driver.
_PIECE_ROWS = 8192
#: Bytes of span table per span, about (to size the groups of a dataset read by Spark).
_SPAN_BYTES = 1100
_RESULT_SCHEMA = "part string, kind string, piece int, data binary"


def spark_session(master: str | None = None) -> SparkSession:
    """The active Spark session, else a new one on `master`.

    Without `master`: ``SPARK_REMOTE`` (a Spark Connect URL, as PySpark reads it), else the
    master `spark-submit` was given, else ``local[*]``. A ``sc://`` master is a Spark Connect
    server. A local master binds to 127.0.0.1 and opens no web UI: a local run needs no network.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    builder = SparkSession.builder.appName("agenttrace")
    remote = os.environ.get("SPARK_REMOTE")
    if master is None and remote:
        return builder.remote(remote).getOrCreate()
    if master is not None and master.startswith("sc://"):
        return builder.remote(master).getOrCreate()
    if remote:
        # PySpark connects to SPARK_REMOTE whenever it is set: the master asked for wins
        del os.environ["SPARK_REMOTE"]
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    if master is None and "PYSPARK_GATEWAY_PORT" in os.environ:
        return builder.getOrCreate()  # under spark-submit: its --master and --conf hold
    master = master or DEFAULT_MASTER
    builder = builder.master(master)
    if master.startswith("local"):
        # The Python workers must be this interpreter (its environment holds agenttrace). A
        # driver started in Python takes their interpreter from PYSPARK_PYTHON, else "python3"
        # on the PATH (the conf spark.pyspark.python is spark-submit's): an agenttrace of a
        # virtual environment not activated ran its workers on another Python, without pyarrow.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # read when the JVM starts
        builder = (
            builder.config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
        )
    return builder.getOrCreate()


def analyze_spark(
    paths_or_dataset: str | Path | Sequence[str | Path],
    *,
    spark: SparkSession | None = None,
    master: str | None = None,
    run_key: str | None = None,
    case_key: str | None = None,
    packs: Sequence[Pack] = (),
    prices: PriceTable | None = None,
    since_ns: int | None = None,
    until_ns: int | None = None,
    buckets: int | None = None,
) -> Analysis:
    """`engine.analyze_paths` computed by Spark: the same runs, steps, findings and accounting.

    `paths_or_dataset` are trace files, folders (walked as the CLI walks them) and dataset
    folders of ``agenttrace ingest``. A URI with a scheme (``hdfs://``, ``s3a://``, ``file:``)
    is read by Spark: a dataset folder, else trace files (a folder's files listed recursively
    by Spark, hidden ones left out, up to 2 GB each, named by URI).

    `spark` is the session to use (default: `spark_session(master)`; a session created here is
    stopped at the end). `buckets` is how many groups of runs are analyzed (default: the
    session's parallelism, more for a large input: one per `PARTITION_BYTES` of span table);
    ``0`` makes one group per run key (one Python call per run: slow beyond a few thousand).
    """
    from analyzer.partition import PartitionOptions, merge_partials
    from analyzer.pricing import load_prices

    given = [paths_or_dataset] if isinstance(paths_or_dataset, str | Path) else paths_or_dataset
    inputs = _plan(list(given))  # before any session: a missing path fails fast
    _require_pyspark()
    from pyspark.sql import SparkSession

    prices = prices if prices is not None else load_prices()
    own = spark is None and SparkSession.getActiveSession() is None
    session = spark if spark is not None else spark_session(master)
    try:
        frame = _spans(session, inputs)
        frame = _with_parts(frame, run_key, _buckets(session, buckets, inputs.estimate))
        options = PartitionOptions(run_key, case_key, tuple(packs), prices, since_ns, until_ns)
        results = frame.groupBy(_PART).applyInArrow(_group_function(options), _RESULT_SCHEMA)
        partials, file_logs = _collect(results.toLocalIterator())
    finally:
        if own:
            session.stop()
    log = inputs.log
    for index, file_log in file_logs.items():
        log.files[index] = file_log
    return merge_partials(partials, log, packs=packs, prices=prices, skipped=inputs.skipped)


def _require_pyspark() -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError as err:
        from analyzer.errors import InputError

        raise InputError("the spark engine needs PySpark: pip install 'agenttrace[spark]'") from err


# --- reading ----------------------------------------------------------------------------------


@dataclass
class _Inputs:
    """What to read: the IngestLog in the order `read_traces` gives it (with a placeholder for
    each file Spark parses), those files, the dataset parts, the remote datasets, the files
    skipped by name, and an estimate of the span table's bytes."""

    log: Any
    files: list[tuple[int, str]]  # (index in log.files, path)
    parquet: list[str]
    uris: list[str]
    skipped: list[str]
    estimate: int


def _plan(given: list[str | Path]) -> _Inputs:
    from analyzer.engine import estimate_bytes
    from analyzer.errors import InputError
    from analyzer.ingest.accounting import FileLog, IngestLog
    from analyzer.ingest.dataset import dataset_parts, read_dataset_log
    from analyzer.ingest.files import DATASET_MANIFEST, expand_paths

    if not given:
        raise InputError("no input: give at least one trace file or folder")
    uris = [u for u in map(_uri, given) if u is not None]
    local = [p for p in given if _uri(p) is None]
    files, skipped = expand_paths(local) if local else ([], [])
    inputs = _Inputs(IngestLog(), [], [], uris, [str(p) for p in skipped], 0)
    for path in files:
        if path.is_dir() and (path / DATASET_MANIFEST).is_file():
            inputs.log.files.extend(read_dataset_log(path).files)
            inputs.parquet.extend(str(part) for part in dataset_parts(path))
            continue
        inputs.files.append((len(inputs.log.files), str(path)))
        inputs.log.files.append(FileLog(path=str(path)))
    inputs.estimate = estimate_bytes(files) if files else 0
    return inputs


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/+(.*)$")


def _uri(path: str | Path) -> str | None:
    """The URI `path` names (``hdfs://...``, ``s3a://...``, ``file:/...``), None for a local
    path. A URI that went through `pathlib` (one slash left) is restored."""
    text = str(path)
    found = _SCHEME.match(text)
    if found is None or Path(text).exists():
        return None
    scheme, rest = found.groups()
    return f"file:/{rest}" if scheme == "file" else f"{scheme}://{rest}"


def _spans(session: SparkSession, inputs: _Inputs) -> DataFrame:
    """The span DataFrame of the inputs, with the reading rows (see `_read_file`)."""
    import pyspark.sql.functions as F

    from analyzer.ingest.accounting import FileLog
    from analyzer.ingest.files import DATASET_MANIFEST

    remote_files: dict[str, int] = {}  # trace file URI -> its index in log.files
    for uri in inputs.uris:
        manifest = _remote_text(session, f"{uri.rstrip('/')}/{DATASET_MANIFEST}")
        if manifest is not None:
            dataset_log, parts, spans = _remote_dataset(uri, manifest)
            inputs.log.files.extend(dataset_log.files)
            inputs.parquet.extend(parts)
            inputs.estimate += spans * _SPAN_BYTES
            continue
        for path, length in _remote_listing(session, uri, inputs.skipped):
            remote_files[path] = len(inputs.log.files)
            inputs.log.files.append(FileLog(path=path))
            inputs.estimate += length
    frames = []
    if inputs.files:
        n = len(inputs.files)
        ids = session.range(0, n, 1, numPartitions=n)  # one task per file
        frames.append(ids.mapInArrow(_ReadFiles(inputs.files), _read_schema()))
    if remote_files:
        blobs = session.read.format("binaryFile").load(list(remote_files)).select("path", "content")
        frames.append(blobs.mapInArrow(_ReadBlobs(remote_files), _read_schema()))
    if inputs.parquet:
        spans = session.read.parquet(*inputs.parquet).select(*_span_names())
        frames.append(spans.withColumn(_LOG, F.lit(None).cast("binary")))
    if not frames:  # no span at all: an empty frame of the right shape
        frames.append(session.range(0).mapInArrow(_ReadFiles([]), _read_schema()))
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other)
    return frame


def _remote_text(session: SparkSession, uri: str) -> str | None:
    """The text of the file at `uri` read through Spark, None when there is none."""
    try:
        rows = session.read.text(uri, wholetext=True).collect()
    except Exception:  # Spark raises its own errors for a missing path
        return None
    return rows[0][0] if rows else ""


def _remote_listing(session: SparkSession, uri: str, skipped: list[str]) -> list[tuple[str, int]]:
    """(path, bytes) of the files under `uri` as Spark lists them (hidden ones left out),
    sorted; documentation and code files by suffix go to `skipped`, as in a walked folder."""
    from analyzer.errors import InputError
    from analyzer.ingest.files import NOT_TRACE_SUFFIXES

    reader = session.read.format("binaryFile").option("recursiveFileLookup", "true")
    try:
        rows = reader.load(uri).select("path", "length").collect()
    except Exception as err:
        reason = (str(err).strip().splitlines() or ["unreadable"])[0]
        raise InputError(f"{uri}: no trace file or dataset readable by Spark: {reason}") from err
    found = []
    for path, length in sorted((r["path"], r["length"]) for r in rows):
        if Path(path).suffix.lower() in NOT_TRACE_SUFFIXES:
            skipped.append(path)
        else:
            found.append((path, length))
    if not found:
        raise InputError(f"no input: {uri} holds no file")
    return found


def _remote_dataset(uri: str, manifest: str) -> tuple[Any, list[str], int]:
    """The accounting, Parquet parts and span count of the dataset folder at `uri`, given the
    text of its manifest."""
    import json
    import tempfile

    from analyzer.ingest.dataset import dataset_parts, read_dataset_log
    from analyzer.ingest.files import DATASET_MANIFEST

    base = uri.rstrip("/")
    # the manifest is read by the same functions as a local one, from a local copy
    with tempfile.TemporaryDirectory(prefix="agenttrace-manifest-") as folder:
        (Path(folder) / DATASET_MANIFEST).write_text(manifest, encoding="utf-8")
        log = read_dataset_log(Path(folder))
        parts = [f"{base}/{p.relative_to(folder).as_posix()}" for p in dataset_parts(Path(folder))]
    spans = sum(int(part.get("spans", 0)) for part in json.loads(manifest).get("parts", []))
    return log, parts, spans


def _span_names() -> list[str]:
    from analyzer.spans import SPAN_SCHEMA

    return list(SPAN_SCHEMA.names)


def _read_schema() -> Any:
    """The Spark schema of the span table plus the reading-accounting column."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    from analyzer.spans import SPAN_SCHEMA

    return from_arrow_schema(SPAN_SCHEMA.append(pa.field(_LOG, pa.binary())))


def _read_file(path: Path, label: str, index: int) -> Iterator[pa.RecordBatch]:
    """The span batches of one file read by the project's readers (with `label` as its name),
    then one row carrying its FileLog (every span column null)."""
    import pyarrow as pa

    from analyzer.ingest.accounting import FileLog
    from analyzer.ingest.reader import iter_salvaging
    from analyzer.spans import SPAN_SCHEMA

    schema = SPAN_SCHEMA.append(pa.field(_LOG, pa.binary()))
    file_log = FileLog(path=label)
    for spans in iter_salvaging(path, file_log):
        # in slices: the JVM turns each batch into rows at once, and a reader's batch can hold
        # tens of thousands of spans
        for start in range(0, spans.num_rows, _BATCH_ROWS):
            piece = spans.slice(start, _BATCH_ROWS)
            logs = pa.nulls(piece.num_rows, pa.binary())
            yield pa.RecordBatch.from_arrays([*piece.columns, logs], schema=schema)
    row: dict[str, list] = {name: [None] for name in SPAN_SCHEMA.names}
    row[_LOG] = [pickle.dumps((index, file_log))]
    yield pa.RecordBatch.from_pydict(row, schema=schema)


@dataclass(frozen=True)
class _ReadFiles:
    """mapInArrow: parse the local files whose ids come in (see `_read_file`)."""

    files: list[tuple[int, str]]

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for file_id in batch.column(0).to_pylist():
                index, path = self.files[file_id]
                yield from _read_file(Path(path), path, index)


@dataclass(frozen=True)
class _ReadBlobs:
    """mapInArrow: parse files Spark read as bytes (``binaryFile``), each from a temporary
    copy, as the readers read files (see `_read_file`)."""

    files: dict[str, int]  # path -> index in log.files

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import tempfile

        for batch in batches:
            for path, content in zip(
                batch.column("path").to_pylist(), batch.column("content"), strict=True
            ):
                with tempfile.TemporaryDirectory(prefix="agenttrace-blob-") as folder:
                    copy = Path(folder) / (Path(path).name or "trace")
                    copy.write_bytes(content.as_buffer() or b"")
                    yield from _read_file(copy, path, self.files[path])


# --- grouping ---------------------------------------------------------------------------------


def _buckets(session: SparkSession, buckets: int | None, estimate: int) -> int:
    """The number of run groups: as asked, else the parallelism of the session (at least one
    group per `PARTITION_BYTES` of span table, so a group fits a Python worker)."""
    from analyzer.engine import PARTITION_BYTES

    if buckets is not None:
        if buckets < 0:
            raise ValueError(f"buckets must be 0 or more, not {buckets}")
        return buckets
    try:
        parallel = session.sparkContext.defaultParallelism
    except Exception:  # Spark Connect has no SparkContext
        parallel = int(session.conf.get("spark.sql.shuffle.partitions") or 1)
    return max(parallel, math.ceil(estimate / PARTITION_BYTES), 1)


def _with_parts(frame: DataFrame, run_key: str | None, buckets: int) -> DataFrame:
    """`frame` with the group of each span: its run key (the trace id, or the trace's value of
    `run_key`), or a hash of it into `buckets` groups. Reading rows get a null group."""
    import pyspark.sql.functions as F
    from pyspark.sql import Window
    from pyspark.sql.types import StringType, StructField, StructType

    key = F.col("trace_id")
    if run_key is not None:
        schema = StructType([*frame.schema.fields, StructField(_VALUE, StringType(), True)])
        frame = frame.mapInArrow(_RunKeyValues(run_key), schema)
        # the value the trace's runs take: as analyzer.runs._trace_attribute picks it (root
        # spans first, then the earliest start, then the span id)
        order = F.struct(F.col("parent_span_id").isNotNull(), F.col("start_ns"), F.col("span_id"))
        first = F.min_by(F.col(_VALUE), F.when(F.col(_VALUE).isNotNull(), order))
        frame = frame.withColumn(_VALUE, first.over(Window.partitionBy("trace_id")))
        key = F.coalesce(F.col(_VALUE), key)
    if buckets > 0:
        key = F.pmod(F.xxhash64(key), F.lit(buckets)).cast("string")
    part = F.when(F.col(_LOG).isNull(), key)
    columns = [*_span_names(), _LOG]
    return frame.select(*columns, part.alias(_PART))


@dataclass(frozen=True)
class _RunKeyValues:
    """mapInArrow: each span's value of the run-key attribute, by `analyzer.runs`' own rule."""

    run_key: str

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        from analyzer.runs import span_attribute

        for batch in batches:
            values = span_attribute(pa.Table.from_batches([batch]), self.run_key)
            yield batch.append_column(_VALUE, values.to_arrow().cast(pa.string()))


# --- analysis of a group ----------------------------------------------------------------------


def _group_function(options: PartitionOptions):
    """The function applyInArrow calls: a plain one-parameter function without annotations, as
    Spark reads its parameters and type hints to choose how to call it."""

    def analyze_group(table):
        return _analyze_group(options, table)

    return analyze_group


def _analyze_group(options: PartitionOptions, table: pa.Table) -> pa.Table:
    """applyInArrow: one group of whole runs through `analyze_partition`; its partial result as
    rows of Arrow IPC pieces of its frames (and the pickled rest). Reading rows pass through."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from analyzer.partition import analyze_partition
    from analyzer.spans import SPAN_SCHEMA

    out: dict[str, list] = {"part": [], "kind": [], "piece": [], "data": []}

    def add(part: str | None, kind: str, piece: int, data: bytes) -> None:
        for name, value in zip(out, (part, kind, piece, data), strict=True):
            out[name].append(value)

    is_log = pc.is_valid(table.column(_LOG))
    for data in table.filter(is_log).column(_LOG).to_pylist():
        add(None, "log", 0, data)
    spans = table.filter(pc.invert(is_log))
    if spans.num_rows:
        partial = analyze_partition(spans.select(SPAN_SCHEMA.names).cast(SPAN_SCHEMA), options)
        part = spans.column(_PART)[0].as_py()
        for kind in _FRAMES:
            frame = getattr(partial, kind)
            if frame is None:  # no pack applied: no piece at all
                continue
            # pieces of a bounded size: each is one value the JVM copies (and pickles) whole
            starts = range(0, frame.height, _PIECE_ROWS) if frame.height else [0]
            for piece, start in enumerate(starts):
                add(part, kind, piece, _ipc(frame.slice(start, _PIECE_ROWS)))
        add(part, "meta", 0, pickle.dumps({n: getattr(partial, n) for n in _META}))
    types = {"part": pa.string(), "kind": pa.string(), "piece": pa.int32(), "data": pa.binary()}
    return pa.table({name: pa.array(values, types[name]) for name, values in out.items()})


def _ipc(frame: Any) -> bytes:
    sink = io.BytesIO()
    frame.write_ipc(sink)
    return sink.getvalue()


def _collect(rows: Iterator[Any]) -> tuple[list[Any], dict[int, Any]]:
    """The partial results (in group order) and the file logs (by index) of the result rows."""
    import polars as pl

    from analyzer.partition import PartialResult

    pieces: dict[str | None, dict[str, list[tuple[int, bytes]]]] = {}
    file_logs: dict[int, Any] = {}
    for row in rows:
        if row["kind"] == "log":
            index, file_log = pickle.loads(row["data"])
            file_logs[index] = file_log
            continue
        group = pieces.setdefault(row["part"], {})
        group.setdefault(row["kind"], []).append((row["piece"], bytes(row["data"])))
    partials = []
    for part in sorted(pieces, key=lambda p: (p is None, p or "")):
        group = pieces.pop(part)
        frames: dict[str, pl.DataFrame | None] = {}
        for kind in _FRAMES:
            found = sorted(group.get(kind, []), key=lambda item: item[0])
            parts = [pl.read_ipc(io.BytesIO(data)) for _, data in found]
            frames[kind] = pl.concat(parts, rechunk=False) if parts else None
        partials.append(PartialResult(**frames, **pickle.loads(group["meta"][0][1])))
    return partials, file_logs
