"""The Parquet dataset written by `agenttrace ingest`, and reading it back without re-parsing.

A dataset is a folder: ``agenttrace-dataset.json`` (the manifest: every file ingested, with its
SHA-256 and counts, and the Parquet parts), ``spans/part-NNNNN.parquet`` (parts added by each
ingest, never rewritten), ``runs/part-NNNNN/`` (each part's runs, prebuilt by
`analyzer.prebuilt`) and ``quarantine.jsonl``. Ingesting into an existing dataset appends: files
whose SHA-256 the manifest already lists are skipped, and spans already in the dataset (same
trace and span id) are counted as duplicates of the new file, not written again.

An ingest is a transaction (`ingesting`): it holds an OS lock on ``agenttrace-dataset.lock``
(a second ingest fails at once, naming the holder), writes every file under a temporary name
inside the folder (``.agenttrace-*``: created afresh, so a planted symlink is never written
through) made durable (fsync) before it is renamed into place, and writes the manifest last:
the dataset is the one the manifest describes, and a part not listed in it is not part of it.
What an interrupted ingest left (temporary names, parts no manifest lists, a lock file with no
holder, a first ingest that never wrote its manifest) is removed by the next ingest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import secrets
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from analyzer.errors import InputError
from analyzer.ingest.accounting import FileLog, IngestLog, QuarantineEntry
from analyzer.ingest.files import (
    DATASET_LOCK,
    DATASET_MANIFEST,
    DATASET_TEMP,
    PART_NAME,
    unfinished_dataset,
)
from analyzer.outfiles import _fsync, replacing
from analyzer.spans import SPAN_SCHEMA, empty_table

__all__ = [
    "DATASET_FORMAT",
    "Ingesting",
    "commit_parts",
    "count_orphans",
    "dataset_parts",
    "drop_known",
    "existing_manifest",
    "ingesting",
    "known_spans",
    "load_manifest",
    "next_part_index",
    "read_dataset",
    "read_dataset_log",
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


def existing_manifest(out: Path) -> dict | None:
    """The manifest of the dataset `out`, None for a new or empty folder, or for one an
    interrupted first ingest left (`ingesting` clears it); else InputError."""
    if (out / DATASET_MANIFEST).is_file():
        return load_manifest(out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not _unfinished(out))):
        raise InputError(
            f"{out}: exists and is neither an agenttrace dataset nor an empty folder; "
            "give a new --out folder or an existing dataset"
        )
    return None


def next_part_index(parts: list[dict]) -> int:
    """The number of the next part: after the highest a manifest lists (a partition that
    kept no span leaves its number unused, so counting the parts could name a listed one)."""
    numbers = [-1]
    for part in parts:
        name = Path(str(part.get("path", ""))).name
        if PART_NAME.fullmatch(name):
            numbers.append(int(name[5:-8]))
    return max(max(numbers) + 1, len(parts))


def write_part(spans: pa.Table, out: Path, name: str) -> dict[str, object]:
    """Write one Parquet part of spans into `out`/spans (under a temporary name, made
    durable, then renamed); its manifest entry."""
    folder = out / "spans"
    _real_folder(folder)
    folder.mkdir(parents=True, exist_ok=True)
    part = Path("spans") / name
    with _replacing(out / part) as tmp:
        pq.write_table(spans.cast(SPAN_SCHEMA), tmp, compression="zstd", row_group_size=_ROW_GROUP)
    return {"path": part.as_posix(), "spans": spans.num_rows}


def write_manifest(
    out: Path,
    manifest: dict | None,
    new_parts: list[dict],
    log: IngestLog,
    orphans: int,
    *,
    tool_version: str,
    outside_runs: int | None = None,
) -> Path:
    """Write the manifest (and quarantine.jsonl) of `out` after new parts were added; last,
    so that a crash before it leaves the dataset as it was. Each is written under a temporary
    name, made durable and renamed over its own: the manifest's rename commits the ingest.
    `outside_runs`: the dataset's kept spans in no run of its prebuilt runs (None: not every
    part has prebuilt runs, and a report reads the spans)."""
    parts = (list(manifest.get("parts", [])) if manifest else []) + new_parts
    if not parts:  # an ingest that found no span still leaves a readable dataset
        parts = [write_part(empty_table(SPAN_SCHEMA), out, "part-00000.parquet")]
    files = [dataclasses.asdict(f) for f in log.files]
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
    if outside_runs is not None:
        document["spans_outside_runs"] = outside_runs
    _write_quarantine(out, files)
    path = out / DATASET_MANIFEST
    with _replacing(path) as tmp:
        tmp.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def _write_quarantine(out: Path, files: list[dict]) -> None:
    """``quarantine.jsonl``: the quarantine entries of `files` (manifest entries), in order."""
    with _replacing(out / "quarantine.jsonl") as tmp, tmp.open("w", encoding="utf-8") as fh:
        for data in files:
            for entry in data.get("quarantine", []):
                fh.write(json.dumps(entry, sort_keys=True, ensure_ascii=False) + "\n")


# --- the transaction: lock, temporary names, recovery -------------------------------------


@dataclasses.dataclass
class Ingesting:
    """A dataset folder an ingest holds the lock of (`ingesting`)."""

    folder: Path
    #: its manifest as the lock was taken (None: a new dataset)
    manifest: dict | None
    #: what an interrupted ingest had left and was removed (paths inside the folder)
    recovered: list[str]
    #: the holder an interrupted ingest recorded in the lock file ("" if none)
    interrupted: str = ""

    def staging(self) -> Path:
        """A new folder inside the dataset for an ingest's parts, moved in by `commit_parts`
        (a fresh name: nothing planted in it; left over, removed by the next ingest)."""
        while True:
            folder = self.folder / f"{DATASET_TEMP}ingest-{os.getpid()}-{secrets.token_hex(4)}"
            with contextlib.suppress(FileExistsError):
                folder.mkdir()
                return folder


_HELD: dict[tuple[int, int], tuple[Ingesting, int]] = {}  # folder -> (held, lock file fd)


@contextlib.contextmanager
def ingesting(out: Path) -> Iterator[Ingesting]:
    """Hold the lock of the dataset `out` (created when new) for an ingest into it.

    Another process holding it: InputError naming the holder (pid, host, start), at once (no
    waiting: a nightly job finds the clash in its log). Then what an interrupted ingest left is
    removed (see the module's docstring), leaving the dataset its manifest describes. The lock
    file is removed on leaving; leaving with an error removes this ingest's unfinished files
    too. Re-entrant in one process: an inner `ingesting` of the same folder only reads the
    manifest. Subfolders ``spans``/``runs`` that are symlinks are refused (writes stay inside).
    """
    existing_manifest(out)  # refuse a folder holding something else before writing into it
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    stat = out.stat()
    key = (stat.st_dev, stat.st_ino)
    if key in _HELD:
        held, _ = _HELD[key]
        yield dataclasses.replace(held, manifest=existing_manifest(out), recovered=[])
        return
    fd, interrupted = _lock(out)
    try:
        for name in ("spans", "runs"):
            _real_folder(out / name)
        manifest = existing_manifest(out)
        recovered = _recover(out, manifest)
        if manifest is not None and (recovered or interrupted):
            _write_quarantine(out, list(manifest.get("files", [])))
        held = Ingesting(out, manifest, recovered, interrupted)
        _HELD[key] = (held, fd)
        try:
            yield held
        except BaseException:
            with contextlib.suppress(Exception):
                _recover(out, existing_manifest(out))
            raise
    finally:
        _HELD.pop(key, None)
        with contextlib.suppress(OSError):
            os.unlink(out / DATASET_LOCK)
        os.close(fd)  # releases the lock
        if created:
            with contextlib.suppress(OSError):
                out.rmdir()  # only when empty: an ingest that failed before writing anything


def _lock(out: Path) -> tuple[int, str]:
    """The fd of `out`'s lock file, locked and naming this process; and the holder a previous
    ingest recorded in it without removing it (interrupted), "" if none."""
    path = out / DATASET_LOCK
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as err:
            reason = "a symbolic link" if err.errno == errno.ELOOP else err.strerror
            raise InputError(f"{path}: cannot take the dataset lock: {reason}") from err
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = _holder(fd)
            os.close(fd)
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise InputError(f"{path}: cannot take the dataset lock: {err.strerror}") from err
            raise InputError(
                f"{out}: another agenttrace ingest is writing to this dataset "
                f"({holder or 'holder not yet recorded'}); wait until it ends, then run this "
                "one again"
            ) from None
        # the holder we waited on may have removed the file before we locked it: lock anew
        with contextlib.suppress(FileNotFoundError):
            now = os.stat(path, follow_symlinks=False)
            mine = os.fstat(fd)
            if (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
                break
        os.close(fd)
    interrupted = _holder(fd)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    record = {"pid": os.getpid(), "host": socket.gethostname(), "started": started}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(record, sort_keys=True) + "\n").encode(), 0)
    return fd, interrupted


def _holder(fd: int) -> str:
    """The holder recorded in a lock file: "pid P on host H, started T" ("" if none)."""
    try:
        record = json.loads(os.pread(fd, 4096, 0) or b"null")
        return f"pid {record['pid']} on host {record['host']}, started {record['started']}"
    except (OSError, ValueError, TypeError, KeyError):
        return ""


def _real_folder(path: Path) -> None:
    """InputError when `path` (a dataset's subfolder) is a symlink or not a folder."""
    if path.is_symlink():
        raise InputError(
            f"{path}: is a symbolic link; a dataset's subfolders must be real folders inside "
            "it (ingest writes nothing outside the dataset folder)"
        )
    if path.exists() and not path.is_dir():
        raise InputError(f"{path}: is not a folder; the dataset is damaged")


def _unfinished(out: Path) -> bool:
    """Whether the folder `out` (no manifest) holds only what an ingest writes."""
    if not unfinished_dataset(out):
        return False
    for entry in out.iterdir():
        name = entry.name
        if name.startswith(DATASET_TEMP) or name in (DATASET_LOCK, "quarantine.jsonl"):
            continue
        if name not in ("spans", "runs") or entry.is_symlink() or not entry.is_dir():
            return False
        for inner in entry.iterdir():
            if not (inner.name.startswith(DATASET_TEMP) or _is_part_name(inner)):
                return False
    return True


def _recover(out: Path, manifest: dict | None) -> list[str]:
    """Remove what an unfinished ingest left in `out`: temporary names, and parts (spans or
    runs) its manifest does not list (without a manifest, also quarantine.jsonl). Returns
    the paths removed, relative to `out`."""
    parts = manifest.get("parts", []) if manifest else []
    listed = {str(p.get("path")) for p in parts}
    listed |= {str(p["runs"].get("path")) for p in parts if isinstance(p.get("runs"), dict)}
    removed = []
    candidates = list(out.iterdir())
    for name in ("spans", "runs"):
        folder = out / name
        if folder.is_dir() and not folder.is_symlink():
            candidates.extend(folder.iterdir())
    for entry in candidates:
        relative = entry.relative_to(out).as_posix()
        if entry.name.startswith(DATASET_TEMP):
            left = True
        elif entry.parent == out:
            left = manifest is None and entry.name == "quarantine.jsonl"
        else:
            left = relative not in listed and _is_part_name(entry)
        if left:
            _remove(entry)
            removed.append(relative)
    return sorted(removed)


def _is_part_name(entry: Path) -> bool:
    """Whether `entry` is named as a part: ``spans/part-NNNNN.parquet``, ``runs/part-NNNNN``."""
    name = entry.name if entry.parent.name == "spans" else entry.name + ".parquet"
    return PART_NAME.fullmatch(name) is not None


def _remove(path: Path) -> None:
    """Remove a file, a symlink (not what it points to) or a folder."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def commit_parts(staging: Path, out: Path) -> None:
    """Move the parts an ingest wrote into `staging` (``spans/*``, ``runs/*``) into the
    dataset `out`, each made durable first. The names are the next ones (`next_part_index`):
    anything at them is left from an interrupted ingest, and is replaced (a symlink too, not
    written through)."""
    for name in ("spans", "runs"):
        source = staging / name
        if not source.is_dir():
            continue
        target = out / name
        _real_folder(target)
        target.mkdir(exist_ok=True)
        for entry in sorted(source.iterdir()):
            _fsync_tree(entry)
            final = target / entry.name
            if entry.is_dir() and (final.exists() or final.is_symlink()):
                _remove(final)
            os.replace(entry, final)
        _fsync(target, os.O_RDONLY | os.O_DIRECTORY)


def _replacing(path: Path):
    """`analyzer.outfiles.replacing` durably, under a name recovery recognises."""
    return replacing(path, temp_prefix=DATASET_TEMP, durable=True)


def _fsync_tree(path: Path) -> None:
    """fsync a file, or every file and folder under a folder (symlinks are not followed)."""
    if path.is_dir() and not path.is_symlink():
        for child in path.iterdir():
            _fsync_tree(child)
        _fsync(path, os.O_RDONLY | os.O_DIRECTORY)
    elif not path.is_symlink():
        _fsync(path, os.O_RDONLY | os.O_NOFOLLOW)


_KEYS = {"trace_id": pl.String, "span_id": pl.String, "parent_span_id": pl.String}


def known_spans(folder: Path, parts: list[dict]) -> pl.DataFrame:
    """trace_id, span_id, parent_span_id of every span already in the dataset, and ``part``:
    the index in `parts` of the part holding it."""
    frames = []
    for index, part in enumerate(parts):
        frame = pl.from_arrow(pq.read_table(folder / part["path"], columns=list(_KEYS)))
        assert isinstance(frame, pl.DataFrame)
        frames.append(frame.with_columns(part=pl.lit(index, pl.UInt32)))
    return pl.concat(frames) if frames else pl.DataFrame(schema=_KEYS | {"part": pl.UInt32})


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
        file_log = FileLog(**data, quarantine=entries, warnings=warnings)
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
