"""Runs rebuilt at ingest and kept in the dataset, so that a report need not rebuild them.

What does not depend on the rules, the prices or the time window (the normalized spans turned
into runs, steps, sources, and the retries found in them) is computed once per dataset part by
`agenttrace ingest`, with the default run and case keys, and written next to the part::

    runs/part-NNNNN/{runs,steps,sources,span_runs,retries,retry_unknown,retry_unrecorded}.parquet
    runs/part-NNNNN/supersedes.parquet   (trace ids and the earlier parts holding them; only
                                          when some run straddles ingests)

A part holds whole traces of one ingest. When a later ingest adds spans to a trace already in
the dataset, the new part's runs are rebuilt from all the trace's spans (old and new) and the
part *supersedes* that trace: a report takes every trace's runs from the last part that has
them. Prebuilt runs are used only when every part has them and they were written by this
build of agenttrace (`analyzer.resources.code_digest`), and the manifest records the dataset's
spans in no run (counted over every part at ingest: a report reads no part outside its
window); otherwise the spans are analyzed again, with the same result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa

from analyzer import __version__
from analyzer.checks.retries import RetryScan, all_retries
from analyzer.errors import InputError
from analyzer.ingest.accounting import IngestLog
from analyzer.resources import code_digest
from analyzer.runs import RunSet, build_runs, empty_messages

__all__ = [
    "PrebuiltPart",
    "build_prebuilt",
    "of_runs",
    "prebuilt_dataset",
    "prebuilt_parts",
    "read_prebuilt",
    "spans_in_runs",
    "write_prebuilt",
]

_RUNSET_TABLES = ("runs", "steps", "sources", "span_runs", "messages")
_SUPERSEDES = "supersedes"


@dataclass(frozen=True)
class PrebuiltPart:
    """One part's prebuilt runs: their folder, and the traces later parts rebuilt (to drop)."""

    folder: str
    superseded: frozenset[str]
    #: the manifest entry of the rule results kept with them (`analyzer.materialized`)
    results: dict | None = None
    #: the earliest and latest start of its runs (None: not recorded, or no run)
    started_ns: tuple[int, int] | None = None

    def current(self, runs: pl.DataFrame) -> pl.DataFrame:
        """`runs` (in their order) without those of the traces later parts rebuilt."""
        if not self.superseded:
            return runs
        drop = pl.DataFrame({"trace_id": sorted(self.superseded)}, schema={"trace_id": pl.String})
        return runs.join(drop, on="trace_id", how="anti", maintain_order="left")

    def may_start_in(self, since_ns: int | None, until_ns: int | None) -> bool:
        """False when none of the part's runs started in [since_ns, until_ns)."""
        if self.started_ns is None:
            return True
        first, last = self.started_ns
        return (since_ns is None or last >= since_ns) and (until_ns is None or first < until_ns)

    def all_start_in(self, since_ns: int | None, until_ns: int | None) -> bool:
        """True when every run of the part started in [since_ns, until_ns) (None: no bound)."""
        if since_ns is None and until_ns is None:
            return True
        if self.started_ns is None:
            return False
        first, last = self.started_ns
        return (since_ns is None or first >= since_ns) and (until_ns is None or last < until_ns)


def build_prebuilt(spans: pa.Table, log: IngestLog | None = None) -> tuple[RunSet, RetryScan]:
    """The runs of a de-duplicated, finalized span table (default keys) and their retries;
    the files' reading notes go to `log` (`build_runs`)."""
    from analyzer.conventions import normalize

    runset = build_runs(spans, normalize(spans), log=log)
    return runset, all_retries(runset)


def write_prebuilt(
    runset: RunSet, retries: RetryScan, out: Path, name: str, supersedes: pl.DataFrame
) -> dict[str, object]:
    """Write a part's prebuilt runs into `out`/runs/`name`; its manifest entry. `supersedes`:
    the traces it rebuilt (``trace_id``) and each earlier part holding some of their spans
    (``part``, its index in the manifest)."""
    folder = Path("runs") / Path(name).stem
    target = out / folder
    target.mkdir(parents=True, exist_ok=True)
    frames = {t: getattr(runset, t) for t in _RUNSET_TABLES}
    frames["retries"] = retries.found
    frames["retry_unknown"] = retries.unknown_outcome.to_frame("run_id")
    frames["retry_unrecorded"] = retries.unrecorded_args.to_frame("run_id")
    if supersedes.height:
        frames[_SUPERSEDES] = supersedes.select("trace_id", "part").sort("trace_id", "part")
    for table, frame in frames.items():
        frame.write_parquet(target / f"{table}.parquet", compression="zstd", statistics=False)
    starts = runset.runs.get_column("started_ns")
    return {
        "path": folder.as_posix(),
        "agenttrace_version": __version__,
        "built_by": code_digest(),
        "supersedes": supersedes.get_column("trace_id").n_unique(),
        "started_ns": [starts.min(), starts.max()] if starts.len() else None,
    }


def prebuilt_dataset(paths: Sequence[str | Path]) -> list[PrebuiltPart] | None:
    """The prebuilt parts when `paths` names one dataset whose parts all have them, else None."""
    from analyzer.ingest.dataset import load_manifest
    from analyzer.ingest.files import DATASET_MANIFEST

    if len(paths) != 1 or not (Path(paths[0]) / DATASET_MANIFEST).is_file():
        return None
    folder = Path(paths[0])
    manifest = load_manifest(folder)
    if "spans_outside_runs" not in manifest:  # written before they were counted at ingest
        return None
    return prebuilt_parts(folder, manifest)


def prebuilt_parts(folder: Path, manifest: dict) -> list[PrebuiltPart] | None:
    """The prebuilt runs of each part of the dataset `folder`, in manifest order, with the
    traces to drop from each; None when some part has none made by this build of agenttrace."""
    parts = manifest.get("parts", [])
    entries = [p.get("runs") for p in parts]
    if not parts or any(
        not isinstance(e, dict) or e.get("built_by") != code_digest() for e in entries
    ):
        return None
    everywhere: set[str] = set()  # superseded, the parts holding them not recorded
    held: dict[int, set[str]] = {}  # part index -> its traces superseded
    out: list[PrebuiltPart] = []
    for index in reversed(range(len(entries))):  # a trace is taken from the last part with it
        entry = entries[index]
        path = folder / str(entry["path"])
        starts = entry.get("started_ns")
        starts = (int(starts[0]), int(starts[1])) if isinstance(starts, list) else None
        dropped = frozenset(everywhere | held.get(index, set()))
        out.append(PrebuiltPart(str(path), dropped, entry.get("results"), starts))
        if entry.get("supersedes"):
            frame = _read(path, _SUPERSEDES)
            if "part" in frame.columns:
                for trace, part in frame.iter_rows():
                    held.setdefault(int(part), set()).add(trace)
            else:  # written before the parts holding them were recorded: dropped everywhere
                everywhere.update(frame.get_column("trace_id"))
    return out[::-1]


def read_prebuilt(part: PrebuiltPart) -> tuple[RunSet, RetryScan]:
    """A part's prebuilt runs and retries, without the runs of superseded traces."""
    path = Path(part.folder)
    frames = {t: _read(path, t) for t in (*_RUNSET_TABLES, "retries") if t != "messages"}
    frames["messages"] = read_messages(part)
    runset = RunSet(**{t: frames[t] for t in _RUNSET_TABLES})
    retries = RetryScan(
        frames["retries"],
        _read(path, "retry_unknown").get_column("run_id"),
        _read(path, "retry_unrecorded").get_column("run_id"),
    )
    if part.superseded:
        keep = part.current(runset.runs).select("run_id")
        runset = RunSet(**{t: of_runs(frames[t], keep) for t in _RUNSET_TABLES})
        retries = retries.restrict(keep)
    return runset, retries


def spans_in_runs(parts: Sequence[PrebuiltPart]) -> int:
    """The kept spans that the runs of `parts` hold, each counted once (in the part its trace
    is taken from); an ingest records the others in the manifest (``spans_outside_runs``)."""
    total = 0
    for part in parts:
        path = Path(part.folder) / "span_runs.parquet"
        rows = pl.scan_parquet(path)
        if part.superseded:
            rows = rows.filter(~pl.col("trace_id").is_in(sorted(part.superseded)))
        try:
            total += rows.select(pl.len()).collect().item()
        except (OSError, pl.exceptions.PolarsError) as err:
            raise InputError(f"{path}: unreadable prebuilt runs: {err}") from err
    return total


def of_runs(frame: pl.DataFrame, runs: pl.DataFrame) -> pl.DataFrame:
    """The rows of `frame` (in their order) whose ``run_id`` is one of `runs`'."""
    return frame.join(runs, on="run_id", how="semi", maintain_order="left")


def read_messages(part: PrebuiltPart) -> pl.DataFrame:
    """A part's prompt messages (`RunSet.messages`; empty for a part written before they were
    kept)."""
    path = Path(part.folder)
    if not (path / "messages.parquet").is_file():
        return empty_messages()
    return _read(path, "messages")


def _read(folder: Path, table: str) -> pl.DataFrame:
    try:
        return pl.read_parquet(folder / f"{table}.parquet")
    except (OSError, pl.exceptions.PolarsError) as err:
        raise InputError(f"{folder / table}.parquet: unreadable prebuilt runs: {err}") from err
