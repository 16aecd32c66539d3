"""The pure core of an analysis: one partition's spans to a partial result, and partial
results merged into one `Analysis`.

`analyze_partition` is a pure function of the spans of whole runs (a hash partition of the
input, all of a small input, or one Spark group): de-duplication, conventions, runs, prices,
checks and the facts a summary reads. `merge_partials` concatenates the partials' runs, steps,
findings and coverage in the order of one whole analysis and sums their accounting. The
driver (`analyzer.engine`) decides the partitions and where they run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from analyzer.checks import Evaluation
from analyzer.ingest.accounting import FileLog, IngestLog, QuarantineEntry, merge_warnings
from analyzer.ingest.reader import (
    Ingested,
    kept_order,
    readable,
)
from analyzer.runs import RunSet, RunTables, empty_messages
from analyzer.spans import (
    SPAN_SCHEMA,
    empty_table,
)

if TYPE_CHECKING:
    from analyzer.checks import CheckError
    from analyzer.checks.retries import RetryScan
    from analyzer.engine import Spill
    from analyzer.metrics.facts import SummaryFacts
    from analyzer.pack import Pack
    from analyzer.pipeline import Analysis
    from analyzer.pricing import PriceTable

__all__ = [
    "BATCH_BYTES",
    "RUN_TABLES",
    "STEP_BATCH",
    "PartialResult",
    "PartitionOptions",
    "SpilledEvaluation",
    "SpilledRunSet",
    "analyze_partition",
    "by_run",
    "empty_sources",
    "empty_span_runs",
    "fill_log",
    "merge_partials",
    "partial_result",
    "prebuilt_partial",
    "read_ipc_file",
    "spill_facts",
    "spill_tables",
    "write_batches",
    "write_ipc_batches",
]


@dataclass
class PartialResult:
    """What one partition's spans give: its runs, steps, findings, coverage and accounting.

    ``counts`` maps each source file to (spans kept, duplicates dropped) in this partition;
    ``orphans`` counts kept spans whose parent is not in the partition (so in no file, since a
    trace never straddles partitions); ``outside_runs`` the kept spans in no run.
    """

    runs: pl.DataFrame
    steps: pl.DataFrame
    findings: pl.DataFrame | None  # None when no pack was applied
    coverage: pl.DataFrame | None
    errors: list[CheckError] = field(default_factory=list)
    counts: dict[str, tuple[int, int]] = field(default_factory=dict)
    orphans: int = 0
    outside_runs: int = 0
    warnings: dict[str, list[QuarantineEntry]] = field(default_factory=dict)
    unpriced: pl.DataFrame | None = None  # pricing.unpriced_models of the steps
    facts: SummaryFacts | None = None  # what a summary reads (analyzer.metrics.facts)
    messages: pl.DataFrame | None = None  # `RunSet.messages` (the prompts report.html shows)
    #: `RunSet.sources` and `span_runs` (what the checks read): kept by an input analyzed in
    #: memory, for a caller that checks its runs again; None once spilled
    sources: pl.DataFrame | None = None
    span_runs: pl.DataFrame | None = None


def analyze_partition(spans: pa.Table, options: PartitionOptions) -> PartialResult:
    """Analyze the spans of whole runs (not yet de-duplicated) with `options`: de-duplication,
    conventions, runs, retries, prices, checks.

    `spans` must hold every span of each run it touches (both copies of a duplicate included):
    all the spans of a small input, a hash partition by trace id (or by run-key value), or one
    Spark group; in `SPAN_SCHEMA` or `SHARED_SCHEMA` (a spilled partition). The result is the
    whole input's result restricted to these runs; with a case class, also the facts a summary
    with that case class reads (`analyzer.metrics.facts`).
    """
    from analyzer.conventions import normalize
    from analyzer.runs import build_runs

    files = sorted(set(pc.unique(spans.column("source_file")).to_pylist()) - {None})
    formats = dict(options.formats)
    log = IngestLog(files=[FileLog(path=f, format=formats.get(f, "")) for f in files])
    # `finalize_spans` of the spans, without gathering them: the
    # spans are normalized as read (duplicates included) and only their normalized rows are
    # put in the final order, most of the bytes of spans being attributes that normalizing
    # reads once.
    order, parents = kept_order(spans, log)
    spans = readable(spans)
    runset = build_runs(
        spans,
        normalize(spans).gather(pl.Series(order)),
        run_key=options.run_key,
        case_key=options.case_key,
        parents=parents,
        span_rows=order,
        log=log,
    )
    return prebuilt_partial(runset, None, options, log)


def partial_result(analysis: Analysis, case_class: str | None) -> PartialResult:
    """The PartialResult of one partition's Analysis (with the facts a summary with the case
    class `case_class` reads)."""
    from analyzer.metrics.facts import summary_facts
    from analyzer.pricing import unpriced_models

    evaluation = analysis.evaluation
    log = analysis.ingested.log
    return PartialResult(
        runs=analysis.runs.runs,
        steps=analysis.runs.steps,
        findings=evaluation.findings if evaluation is not None else None,
        coverage=evaluation.coverage if evaluation is not None else None,
        errors=list(evaluation.errors) if evaluation is not None else [],
        counts={f.path: (f.spans_kept, f.duplicates) for f in log.files},
        orphans=log.orphans,
        outside_runs=log.outside_runs,
        warnings={f.path: list(f.warnings) for f in log.files},
        unpriced=unpriced_models(analysis.runs.steps, analysis.runs.runs),
        facts=summary_facts(analysis, case_class) if case_class is not None else None,
        messages=analysis.runs.messages,
        sources=analysis.runs.sources,
        span_runs=analysis.runs.span_runs,
    )


def _merge_unpriced(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """`pricing.unpriced_models` of all runs from those of disjoint partitions (all sums)."""
    merged = pl.concat(frames, how="vertical_relaxed")
    sums = [c for c in merged.columns if c not in ("model", "reason")]
    return (
        merged.group_by("model", "reason")
        .agg(pl.col(c).sum().cast(merged.schema[c]) for c in sums)
        .select(merged.columns)
        .sort("model", "reason", nulls_last=True)
    )


def by_run(frames: Iterable[pl.DataFrame]) -> pl.DataFrame | None:
    """Frames of disjoint runs, each in the in-process order: one frame in that order.

    Every order the in-process path gives starts with ``run_id``, and a run's rows all come from
    one partition, so a stable sort on ``run_id`` alone restores it.
    """
    frames = list(frames)
    if not frames:
        return None
    nonempty = [f for f in frames if f.height] or frames[:1]
    merged = pl.concat(nonempty, how="vertical_relaxed", rechunk=False)
    return merged.sort("run_id", maintain_order=True)


class _SpilledFrame:
    """A frame attribute of a `_ReadsSpill`, loaded whole from its spill when first used."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        if self.name not in obj._frames:
            obj._frames[self.name] = obj._spill.load(self.name)
        return obj._frames[self.name]

    def __set__(self, obj: Any, value: pl.DataFrame) -> None:
        obj._frames[self.name] = value


class _ReadsSpill(RunTables):
    """`RunTables` whose `_SpilledFrame` tables are in the spill (`Spill`) until first used as
    frames: till then read a batch at a time from their merged files, or narrowly from each
    partition's."""

    def __init__(self, spill: Spill) -> None:
        self._spill = spill
        self._frames: dict[str, pl.DataFrame] = {}

    def _tables(self, name: str) -> Any:
        """Where table `name` is read from: the spill while it is only there (not loaded, nor
        set), else the frame."""
        spilled = isinstance(getattr(type(self), name, None), _SpilledFrame)
        return self._spill if spilled and name not in self._frames else super()

    def batches(self, name: str) -> pa.RecordBatchReader:
        return self._tables(name).batches(name)

    def select(self, name: str, *args: Any, **kwargs: Any) -> pl.DataFrame:
        return self._tables(name).select(name, *args, **kwargs)


class SpilledRunSet(_ReadsSpill, RunSet):
    """A RunSet whose runs, steps and messages are read from the spill when first used.

    ``sources`` and ``span_runs`` are empty: they served the checks, which ran per partition.
    ``messages`` are empty when the partitions did not keep them (a dataset's prebuilt runs).
    """

    runs = _SpilledFrame()  # type: ignore[assignment]
    steps = _SpilledFrame()  # type: ignore[assignment]
    messages = _SpilledFrame()  # type: ignore[assignment]

    def __init__(self, spill: Spill) -> None:
        super().__init__(spill)
        self.sources = empty_sources()
        self.span_runs = empty_span_runs()
        if "messages" not in spill.kept:
            self.messages = empty_messages()


class SpilledEvaluation(_ReadsSpill, Evaluation):
    """An Evaluation whose coverage is read from the spill when first used."""

    coverage = _SpilledFrame()  # type: ignore[assignment]

    def __init__(self, findings: pl.DataFrame, errors: list[CheckError], spill: Spill) -> None:
        super().__init__(spill)
        self.findings = findings
        self.errors = errors


def merge_partials(
    partials: Iterable[PartialResult],
    log: IngestLog,
    *,
    packs: Sequence[Pack] = (),
    prices: PriceTable | None = None,
    skipped: Sequence[str] = (),
    spill: Spill | None = None,
) -> Analysis:
    """One `Analysis` from the partial results of disjoint partitions (any order).

    The partials' per-run tables are emptied as they are merged (memory).
    `log` holds the per-file read counts and quarantine of the whole input (as the readers left
    them); the kept and duplicate counts, orphans, spans in no run and runs are filled in from
    the partials.
    `spill`, when given, holds the per-run tables (runs, steps, findings, coverage) instead:
    the findings are loaded now, the others read from it as used. The partials' facts, when
    they all have them, are merged into the Analysis's.
    """
    from analyzer.metrics.facts import merge_facts
    from analyzer.pipeline import Analysis

    partials = list(partials)

    def merged(name: str) -> pl.DataFrame:
        """`_take_by_run` of frame `name`; that of no run (its schema) when no partial has it."""
        frame = _take_by_run(partials, name)
        return frame if frame is not None else getattr(_empty_partial(packs, prices), name)

    facts = None
    if partials and all(p.facts is not None for p in partials):
        parts = [p.facts for p in partials if p.facts is not None]
        for p in partials:
            p.facts = None  # released as merged
        facts = merge_facts(parts)
    runset: RunSet
    if spill is None:
        runset = RunSet(
            runs=merged("runs"),
            steps=merged("steps"),
            sources=_concat([p.sources for p in partials], empty_sources()),
            span_runs=_concat([p.span_runs for p in partials], empty_span_runs()),
            messages=merged("messages"),
        )
        count = runset.runs.height
    else:
        assert facts is not None, "a spilled result is merged from its partitions' facts"
        runset = SpilledRunSet(spill)
        count = facts.height
    fill_log(log, partials, count)
    evaluation = None
    if packs:
        errors = sorted(
            (e for p in partials for e in p.errors), key=lambda e: (e.run_id, e.rule_id, e.pack)
        )
        if spill is None:
            findings, coverage = merged("findings"), merged("coverage")
            evaluation = Evaluation(findings=findings, errors=errors, coverage=coverage)
        else:
            evaluation = SpilledEvaluation(spill.load("findings"), errors, spill)
    unpriced = [p.unpriced for p in partials if p.unpriced is not None]
    return Analysis(
        ingested=Ingested(spans=empty_table(SPAN_SCHEMA), log=log, skipped=list(skipped)),
        runs=runset,
        packs=tuple(packs),
        evaluation=evaluation,
        prices=prices,
        unpriced=_merge_unpriced(unpriced or [_empty_partial(packs, prices).unpriced]),
        facts=facts,
    )


def _concat(frames: list[pl.DataFrame | None], empty: pl.DataFrame) -> pl.DataFrame:
    """The frames of the partials that kept them, one after the other; `empty` if none."""
    kept = [f for f in frames if f is not None]
    return pl.concat(kept, how="vertical_relaxed") if kept else empty


def _take_by_run(partials: list[PartialResult], name: str) -> pl.DataFrame | None:
    """`by_run` of one frame of every partial, each partial's frame released (emptied) as it
    is taken, so that the inputs and the merged frames of all tables are never held at once."""
    frames = [getattr(p, name) for p in partials if getattr(p, name) is not None]
    for p in partials:
        if getattr(p, name) is not None:
            setattr(p, name, getattr(p, name).clear())
    return by_run(frames)


def fill_log(log: IngestLog, partials: Sequence[Any], runs: int) -> None:
    """Fill in `log` (read counts and quarantine as the readers left them) from what the
    partitions give (`PartialResult`, or anything with its ``counts``, ``warnings``,
    ``orphans`` and ``outside_runs``): each file's kept and duplicate spans and warnings (in an
    order, and with counts, that do not depend on the partitions: `merge_warnings`), the
    orphans, the spans in no run, and `runs`."""
    kept: dict[str, int] = {}
    dups: dict[str, int] = {}
    warnings: dict[str, list[QuarantineEntry]] = {}
    for p in partials:
        for path, (k, d) in p.counts.items():
            kept[path] = kept.get(path, 0) + k
            dups[path] = dups.get(path, 0) + d
        for path, entries in p.warnings.items():
            warnings.setdefault(path, []).extend(entries)
    for file_log in log.files:
        if file_log.format.startswith("dataset:"):
            continue  # read back from a dataset: its counts are those recorded at ingest
        file_log.spans_kept = kept.get(file_log.path, 0)
        file_log.duplicates = dups.get(file_log.path, 0)
        file_log.warnings.extend(merge_warnings(warnings.get(file_log.path, [])))
    log.orphans = sum(p.orphans for p in partials)
    log.outside_runs = sum(p.outside_runs for p in partials)
    log.runs = runs


_EMPTY: dict[tuple, PartialResult] = {}


def _empty_partial(packs: Sequence[Pack], prices: PriceTable | None) -> PartialResult:
    """The result of no spans at all: the frames' schemas for an empty merge."""
    key = (tuple(id(p) for p in packs), id(prices))
    if key not in _EMPTY:
        options = PartitionOptions(packs=tuple(packs), prices=prices)
        _EMPTY[key] = analyze_partition(empty_table(SPAN_SCHEMA), options)
    return _EMPTY[key]


def empty_sources() -> pl.DataFrame:
    """The (empty) sources frame of a merged RunSet."""
    return pl.DataFrame(
        schema={
            "run_id": pl.String,
            "available_ns": pl.Int64,
            "origin": pl.String,
            "span_id": pl.String,
            "text": pl.String,
        }
    )


def empty_span_runs() -> pl.DataFrame:
    """The (empty) span_runs frame of a merged RunSet."""
    return pl.DataFrame(schema={"trace_id": pl.String, "span_id": pl.String, "run_id": pl.String})


#: The per-run tables a partition writes to the spill (not sent back whole: see `_merge_ordered`).
#: The messages (`RunSet.messages`) serve report.html alone: read for the runs it embeds
#: (`Spill.select`), never merged.
RUN_TABLES = ("steps", "runs", "findings", "coverage", "messages")


@dataclass(frozen=True)
class PartitionOptions:
    """The analysis options every partition (or Spark group) is analyzed with; picklable."""

    run_key: str | None = None
    case_key: str | None = None
    packs: tuple = ()
    prices: Any = None
    since_ns: int | None = None
    until_ns: int | None = None
    case_class: str | None = None  # the facts of each partition are computed for it
    tables: tuple[str, ...] = RUN_TABLES  # those the caller reads: the others are not written
    #: file -> its format, as read, once the files are read: a warning then says the line or
    #: byte of its span
    formats: tuple[tuple[str, str], ...] = ()

    def reading(self, log: IngestLog) -> PartitionOptions:
        """These options with the formats of the files `log` read."""
        return dataclasses.replace(self, formats=tuple((f.path, f.format) for f in log.files))


def write_batches(frame: pl.DataFrame, path: str, compression: str | None = None) -> None:
    """Write `frame` as an IPC file of small batches, and its rows per run, in order, to
    `path`.runs."""
    write_ipc_batches(frame.to_arrow(), path, compression)
    write_ipc_batches(
        frame.group_by("run_id", maintain_order=True).len("_n").to_arrow(),
        f"{path}.runs",
        compression,
    )


def write_ipc_batches(table: pa.Table, path: str, compression: str | None = None) -> None:
    """Write `table` as an IPC file of batches of about `BATCH_BYTES` (at most `STEP_BATCH`
    rows, at least 64); compressed, 4x as large (a dataset's kept results: each buffer of a
    batch is decompressed on its own, and small buffers decompress slowly)."""
    per_row = table.nbytes / max(table.num_rows, 1)
    size = BATCH_BYTES if compression is None else 4 * BATCH_BYTES
    rows = max(64, min(STEP_BATCH, int(size / max(per_row, 1.0))))
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with (
        pa.OSFile(path, "wb") as sink,
        pa.ipc.new_file(sink, table.schema, options=options) as writer,
    ):
        writer.write_table(table, max_chunksize=rows)


def prebuilt_partial(
    runset: RunSet,
    retries: RetryScan | None,
    options: PartitionOptions,
    log: IngestLog | None = None,
) -> PartialResult:
    """The PartialResult of runs already rebuilt (and their retries, when scanned already)
    analyzed with `options`: window, prices, checks; `log`: the reading of their spans."""
    from analyzer.pipeline import analyze_runs

    analysis = analyze_runs(
        Ingested(spans=empty_table(SPAN_SCHEMA), log=log if log is not None else IngestLog()),
        runset,
        retries=retries,
        packs=options.packs,
        prices=options.prices,
        since_ns=options.since_ns,
        until_ns=options.until_ns,
    )
    return partial_result(analysis, options.case_class)


def spill_tables(
    partial: PartialResult,
    out: str,
    compression: str | None = None,
    tables: Collection[str] = RUN_TABLES,
) -> PartialResult:
    """Write the per-run tables of `partial` named in `tables` to `out`.<table>.arrow, with
    their rows per run (`write_batches`); `partial` with those tables emptied and the others
    dropped (None)."""
    partial.sources = partial.span_runs = None
    for name in RUN_TABLES:
        frame = getattr(partial, name)
        if frame is not None and name in tables:
            write_batches(frame, f"{out}.{name}.arrow", compression)
            setattr(partial, name, frame.clear())
        else:
            setattr(partial, name, None)
    return partial


def spill_facts(partial: PartialResult, out: str) -> PartialResult:
    """Write the runs of `partial`'s summary facts to `out`.facts.parquet; `partial` with them
    read from there when the summary needs them (so that the process merging the partitions
    never holds them all)."""
    from analyzer.metrics.facts import RunsPart

    facts = partial.facts
    if facts is not None and any(p.frame is not None for p in facts.parts):
        path = f"{out}.facts.parquet"
        facts.runs().write_parquet(path, statistics=False)
        partial.facts = dataclasses.replace(facts, parts=[RunsPart(facts.height, path=path)])
    return partial


#: The most rows a record batch of a spilled per-run table holds, and about the most bytes:
#: the ordered merge holds one batch of each partition's file at a time (`_StepCursor`), for
#: each of its ranges and of the tables merged at once: small batches keep the merge's memory
#: low however many partitions there are.
STEP_BATCH = 4096
BATCH_BYTES = 1 << 18


def read_ipc_file(path: str) -> pl.DataFrame:
    """The frame in the Arrow IPC file `path` (read, not mapped). Read by polars itself: an
    Arrow table converted to polars holds both copies at once."""
    return pl.read_ipc(path)
