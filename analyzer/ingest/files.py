"""Expand the PATH arguments into the trace files to read, sorted, with their digests; and
estimate the span table they would make (polars and Arrow are not imported here)."""

from __future__ import annotations

import hashlib
import os
import re
import stat
import sys
from collections.abc import Sequence
from pathlib import Path

from analyzer.errors import InputError

__all__ = [
    "AUTO_MIN_BYTES",
    "DATASET_LOCK",
    "DATASET_MANIFEST",
    "DATASET_TEMP",
    "NOT_TRACE_SUFFIXES",
    "PART_NAME",
    "dataset_holding",
    "estimate_bytes",
    "expand_paths",
    "sha256_of",
    "unfinished_dataset",
]

#: The file that marks a folder as a dataset written by `agenttrace ingest`.
DATASET_MANIFEST = "agenttrace-dataset.json"
#: The lock file an ingest holds (an OS lock) while it writes into a dataset; it names the
#: holder. Removed when the ingest ends: one left without a holder is an interrupted ingest's.
DATASET_LOCK = "agenttrace-dataset.lock"
#: How the temporary names an ingest writes under in a dataset folder begin.
DATASET_TEMP = ".agenttrace-"
#: The name of a dataset's span part (``spans/``; ``runs/`` holds the stem).
PART_NAME = re.compile(r"part-\d{5,}\.parquet")

#: Inside a walked folder, files with these suffixes are documentation or code, not traces: they
#: are listed as skipped instead of being sniffed. A file named explicitly is always sniffed.
NOT_TRACE_SUFFIXES = frozenset(
    {".md", ".rst", ".txt", ".py", ".sh", ".yaml", ".yml", ".toml", ".html", ".css", ".js", ".ini"}
)

#: `report` takes the partitioned path by itself when the input's span table would reach this.
AUTO_MIN_BYTES = 512 << 20
#: Estimated span-table bytes per byte of input, by kind of input (JSON is about the size of the
#: table it gives; compressed files expand; a dataset part is zstd-compressed Parquet).
_EXPANSION = {"plain": 1.2, "compressed": 10.0, "dataset": 8.0}


def expand_paths(paths: list[str | Path]) -> tuple[list[Path], list[Path]]:
    """Files and dataset folders named by `paths`, and the files skipped by name.

    Folders are walked recursively in sorted order; inside them, hidden entries are ignored and
    files with a `NOT_TRACE_SUFFIXES` suffix are skipped. A folder holding a dataset manifest
    is returned whole, not walked. A folder reached again (a symbolic link to itself or to a
    folder above it) is not walked again, and anything but a regular file (a FIFO, a socket, a
    device, a broken link), named or found in a folder, is skipped unopened (reading a FIFO
    waits forever): each goes with a note, written on stderr as a warning (once a process).
    Raises InputError for a missing path, when no file is found, for a file or folder inside a
    dataset (a part is no trace file: its accounting is in the manifest) and for an unfinished
    dataset (`unfinished_dataset`).
    """
    if not paths:
        raise InputError("no input: give at least one trace file or folder")
    found: list[Path] = []
    skipped: list[Path] = []
    notes: list[str] = []
    walked: set[tuple[int, int]] = set()
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise InputError(f"{path}: no such file or folder")
        holder = dataset_holding(path)
        if holder is not None:
            raise InputError(
                f"{path}: is part of the agenttrace dataset {holder}, not a trace file; "
                f"give the dataset folder {holder} instead"
            )
        if path.is_dir():
            for child in _walk(path, walked, skipped, notes):
                (skipped if child.suffix.lower() in NOT_TRACE_SUFFIXES else found).append(child)
        elif _regular(path, skipped, notes):
            found.append(path)
    for note in notes:
        if note not in _WARNED:  # callers expand the same paths more than once
            _WARNED.add(note)
            print(f"warning: {note}", file=sys.stderr)
    if not found:
        raise InputError(f"no input: {', '.join(str(p) for p in paths)} holds no file")
    # Keep the order given, drop repeats (a file named twice is read once).
    seen: set[Path] = set()
    unique = []
    for path in found:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(path)
    return unique, skipped


#: The notes of `expand_paths` already written on stderr by this process.
_WARNED: set[str] = set()


def _regular(path: Path, skipped: list[Path], notes: list[str]) -> bool:
    """Whether `path` is a regular file (following links); if not, it goes to `skipped` with
    a note saying what it is."""
    try:
        mode = path.stat().st_mode
    except OSError as err:
        what = "a broken symbolic link" if path.is_symlink() else (err.strerror or str(err))
    else:
        if stat.S_ISREG(mode):
            return True
        what = next(
            (name for test, name in _KINDS if test(mode)), f"not a regular file (mode {mode:o})"
        )
    skipped.append(path)
    notes.append(f"{path}: {what}; skipped, not opened")
    return False


_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _walk(
    folder: Path, walked: set[tuple[int, int]], skipped: list[Path], notes: list[str]
) -> list[Path]:
    """The files under `folder`; a folder already walked (same device and inode: a symbolic
    link loop, or two links to one folder) is not walked again."""
    info = os.stat(folder)
    if (info.st_dev, info.st_ino) in walked:
        notes.append(f"{folder}: a folder already walked (a symbolic link loop?); not walked again")
        return []
    walked.add((info.st_dev, info.st_ino))
    if (folder / DATASET_MANIFEST).is_file():
        return [folder]
    if unfinished_dataset(folder):
        raise InputError(
            f"{folder}: an unfinished agenttrace dataset (no manifest: an ingest into it was "
            "interrupted, or is still running); run `agenttrace ingest ... --out "
            f"{folder}` again to recover it"
        )
    out: list[Path] = []
    for child in sorted(folder.iterdir(), key=lambda p: p.name):
        if child.name.startswith("."):
            continue
        if child.is_dir():
            out.extend(_walk(child, walked, skipped, notes))
        elif _regular(child, skipped, notes):
            out.append(child)
    return out


def unfinished_dataset(folder: Path) -> bool:
    """Whether `folder`, which has no manifest, holds what an ingest writes before its first
    manifest: the lock file, temporary names, or ``spans/part-NNNNN.parquet``."""
    try:
        names = {p.name for p in folder.iterdir()}
    except OSError:
        return False
    if DATASET_LOCK in names or any(n.startswith(DATASET_TEMP) for n in names):
        return True
    spans = folder / "spans"
    return spans.is_dir() and any(PART_NAME.fullmatch(p.name) for p in spans.glob("part-*"))


def dataset_holding(path: Path) -> Path | None:
    """The dataset folder (finished or not) `path` is inside of (under its ``spans/`` or
    ``runs/``), None when it is in none."""
    path = path.absolute()
    for depth, folder in enumerate(path.parents):
        if depth > 3:
            break
        inside = path.relative_to(folder).parts[0]
        if inside in ("spans", "runs") and (
            (folder / DATASET_MANIFEST).is_file() or unfinished_dataset(folder)
        ):
            return folder
    return None


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file's bytes, streamed."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def estimate_bytes(paths: Sequence[str | Path]) -> int:
    """About how large the span table of `paths` would be in memory (to choose a path)."""
    files, _ = expand_paths(list(paths))
    total = 0.0
    for path in files:
        if path.is_dir():
            total += sum(p.stat().st_size for p in path.rglob("*.parquet")) * _EXPANSION["dataset"]
            continue
        size = path.stat().st_size
        compressed = path.suffix.lower() in (".gz", ".zst", ".zstd")
        total += size * _EXPANSION["compressed" if compressed else "plain"]
    return int(total)
