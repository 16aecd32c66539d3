"""The Parquet dataset written by `agenttrace ingest`, and reading it back without re-parsing.

A dataset is a folder: ``agenttrace-dataset.json`` (the manifest: every file ingested, with its
SHA-256 and counts, and the Parquet parts), ``spans/part-NNNNN.parquet`` (parts added by each
ingest, never rewritten), ``runs/part-NNNNN/`` (each part's runs, prebuilt by
`analyzer.prebuilt`) and ``quarantine.jsonl``. Ingesting into an existing dataset appends: files
whose SHA-256 the manifest already lists are skipped, and spans already in the dataset (same
trace and span id) are counted as duplicates of the new file, not written again.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from analyzer.errors import InputError
from analyzer.ingest.accounting import FileLog, IngestLog, QuarantineEntry
from analyzer.ingest.files import DATASET_MANIFEST
from analyzer.spans import SPAN_SCHEMA, empty_table

__all__ = [
    "DATASET_FORMAT",
    "count_orphans",
    "dataset_parts",
    "drop_known",
    "existing_manifest",
    "ingested_digests",
    "known_spans",
    "load_manifest",
    "read_dataset",
    "read_dataset_log",
    "write_dataset",
    "write_manifest",
    "write_part",
]

DATASET_FORMAT = "agenttrace-dataset"
DATASET_VERSION = 1
_ROW_GROUP = 128 * 1024


def load_manifest(folder: Path) -> dict:
    """The manifest of the dataset `folder`; InputError when unreadable or not one."""
    try:
        manifest = json.loads((folder / DATASET_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise InputError(f"{folder}: unreadable dataset manifest: {err}") from err
    if not isinstance(manifest, dict) or manifest.get("format") != DATASET_FORMAT:
        raise InputError(f"{folder / DATASET_MANIFEST}: not an agenttrace dataset manifest")
    return manifest


def ingested_digests(folder: Path) -> set[str]:
    """The SHA-256 of every file already ingested into the dataset `folder` (empty if none)."""
    if not (folder / DATASET_MANIFEST).is_file():
        return set()
    return {f["sha256"] for f in load_manifest(folder).get("files", []) if f.get("sha256")}


def write_dataset(spans: pa.Table, log: IngestLog, out: Path, *, tool_version: str) -> Path:
    """Write `spans` and their accounting to the dataset folder `out`; return the manifest path.

    `out` is a new or empty folder, or an existing dataset, which is appended to: a span
    already in it (same trace and span id) is not written again and counts as a duplicate of
    its file in `log`. The manifest lists files sorted by path, so the order in which files were
    ingested does not show in it. Existing parts are never rewritten.
    """
    manifest = existing_manifest(out)
    parts = list(manifest.get("parts", [])) if manifest else []
    old_keys = known_spans(out, parts)
    spans = spans.cast(SPAN_SCHEMA)
    if old_keys.height and spans.num_rows:
        spans = drop_known(spans, old_keys, log)
    new = []
    if spans.num_rows or not parts:
        new.append(write_part(spans, out, f"part-{len(parts):05d}.parquet"))
    new_keys = pl.from_arrow(spans.select(["trace_id", "span_id", "parent_span_id"]))
    assert isinstance(new_keys, pl.DataFrame)
    orphans = count_orphans(pl.concat([old_keys, new_keys]))
    return write_manifest(out, manifest, new, log, orphans, tool_version=tool_version)


def existing_manifest(out: Path) -> dict | None:
    """The manifest of the dataset `out`, None for a new or empty folder; else InputError."""
    if (out / DATASET_MANIFEST).is_file():
        return load_manifest(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(
            f"{out}: exists and is neither an agenttrace dataset nor an empty folder; "
            "give a new --out folder or an existing dataset"
        )
    return None


def write_part(spans: pa.Table, out: Path, name: str) -> dict[str, object]:
    """Write one Parquet part of spans into `out`/spans; its manifest entry."""
    (out / "spans").mkdir(parents=True, exist_ok=True)
    part = Path("spans") / name
    pq.write_table(
        spans.cast(SPAN_SCHEMA), out / part, compression="zstd", row_group_size=_ROW_GROUP
    )
    return {"path": part.as_posix(), "spans": spans.num_rows}


def write_manifest(
    out: Path,
    manifest: dict | None,
    new_parts: list[dict],
    log: IngestLog,
    orphans: int,
    *,
    tool_version: str,
) -> Path:
    """Write the manifest (and quarantine.jsonl) of `out` after new parts were added; last,
    so that a crash before it leaves the dataset as it was."""
    parts = (list(manifest.get("parts", [])) if manifest else []) + new_parts
    if not parts:  # an ingest that found no span still leaves a readable dataset
        parts = [write_part(empty_table(SPAN_SCHEMA), out, "part-00000.parquet")]
    files = [_file_dict(f) for f in log.files]
    if manifest:
        files = list(manifest.get("files", [])) + files
    files.sort(key=lambda f: (str(f["path"]), str(f["sha256"])))
    document = {
        "format": DATASET_FORMAT,
        "version": DATASET_VERSION,
        "agenttrace_version": tool_version,
        "parts": parts,
        "orphan_spans": orphans,
        "files": files,
    }
    path = out / DATASET_MANIFEST
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    with (out / "quarantine.jsonl").open("w", encoding="utf-8") as fh:
        for data in files:
            for entry in data.get("quarantine", []):
                fh.write(json.dumps(entry, sort_keys=True, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


_KEYS = {"trace_id": pl.String, "span_id": pl.String, "parent_span_id": pl.String}


def known_spans(folder: Path, parts: list[dict], *, with_part: bool = False) -> pl.DataFrame:
    """trace_id, span_id, parent_span_id of every span already in the dataset (and, with
    `with_part`, ``part``: the index in `parts` of the part holding it)."""
    frames = []
    for index, part in enumerate(parts):
        table = pq.read_table(folder / part["path"], columns=list(_KEYS))
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        if with_part:
            frame = frame.with_columns(part=pl.lit(index, pl.UInt32))
        frames.append(frame)
    if not frames:
        return pl.DataFrame(schema=_KEYS | ({"part": pl.UInt32} if with_part else {}))
    return pl.concat(frames)


def drop_known(spans: pa.Table, known: pl.DataFrame, log: IngestLog) -> pa.Table:
    """`spans` without those already in the dataset; each dropped span counts as a duplicate."""
    frame = pl.from_arrow(spans.select(["trace_id", "span_id", "source_file"]))
    assert isinstance(frame, pl.DataFrame)
    frame = frame.with_row_index("_row")
    seen = frame.join(known.select("trace_id", "span_id"), on=["trace_id", "span_id"], how="semi")
    if seen.is_empty():
        return spans
    dropped = dict(seen.group_by("source_file").len().iter_rows())
    for file_log in log.files:
        n = dropped.get(file_log.path, 0)
        file_log.spans_kept -= n
        file_log.duplicates += n
    keep = frame.join(seen.select("_row"), on="_row", how="anti").sort("_row")
    return spans.take(keep.get_column("_row").to_arrow().cast(pa.int64()))


def count_orphans(keys: pl.DataFrame) -> int:
    """Spans (trace_id, span_id, parent_span_id) whose parent is not among them."""
    known = keys.select("trace_id", pl.col("span_id").alias("parent_span_id"))
    with_parent = keys.filter(pl.col("parent_span_id").is_not_null())
    return with_parent.join(known, on=["trace_id", "parent_span_id"], how="anti").height


def _file_dict(f: FileLog) -> dict[str, object]:
    data = dataclasses.asdict(f)
    data["quarantine"] = [q.as_dict() for q in f.quarantine]
    if hasattr(f, "warnings"):
        data["warnings"] = [w.as_dict() for w in f.warnings]
    return data


def dataset_parts(folder: Path) -> list[Path]:
    """The Parquet part files of a dataset, in manifest order."""
    return [folder / part["path"] for part in load_manifest(folder).get("parts", [])]


def read_dataset_log(folder: Path) -> IngestLog:
    """The accounting recorded when the files of a dataset were ingested (formats `dataset:...`)."""
    log = IngestLog()
    for data in load_manifest(folder).get("files", []):
        data = dict(data)
        entries = [QuarantineEntry(**q) for q in data.pop("quarantine", [])]
        warnings = [QuarantineEntry(**w) for w in data.pop("warnings", [])]
        file_log = FileLog(**data, quarantine=entries)
        if warnings:
            file_log.warnings = warnings
        if not file_log.format.startswith("dataset:"):
            file_log.format = f"dataset:{file_log.format}"
        log.files.append(file_log)
    return log


def read_dataset(folder: Path) -> tuple[pa.Table, IngestLog]:
    """The span table of a dataset folder and the accounting recorded when it was ingested."""
    log = read_dataset_log(folder)
    tables = []
    for part in dataset_parts(folder):
        try:
            table = pq.read_table(part, schema=SPAN_SCHEMA)
        except (OSError, pa.ArrowException) as err:
            raise InputError(f"{part}: unreadable dataset part: {err}") from err
        tables.append(table)
    spans = pa.concat_tables(tables) if tables else empty_table(SPAN_SCHEMA)
    return spans, log
