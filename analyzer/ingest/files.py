"""Expand the PATH arguments into the trace files to read, sorted, with their digests; and
estimate the span table they would make (polars and Arrow are not imported here)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from analyzer.errors import InputError

__all__ = [
    "AUTO_MIN_BYTES",
    "DATASET_MANIFEST",
    "NOT_TRACE_SUFFIXES",
    "estimate_bytes",
    "expand_paths",
    "sha256_of",
]

#: The file that marks a folder as a dataset written by `agenttrace ingest`.
DATASET_MANIFEST = "agenttrace-dataset.json"

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
    is returned whole, not walked. Raises InputError for a missing path and when no file is found.
    """
    if not paths:
        raise InputError("no input: give at least one trace file or folder")
    found: list[Path] = []
    skipped: list[Path] = []
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise InputError(f"{path}: no such file or folder")
        if path.is_dir():
            for child in _walk(path):
                (skipped if child.suffix.lower() in NOT_TRACE_SUFFIXES else found).append(child)
        else:
            found.append(path)
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


def _walk(folder: Path) -> list[Path]:
    if (folder / DATASET_MANIFEST).is_file():
        return [folder]
    out: list[Path] = []
    for child in sorted(folder.iterdir(), key=lambda p: p.name):
        if child.name.startswith("."):
            continue
        if child.is_dir():
            out.extend(_walk(child))
        elif child.is_file():
            out.append(child)
    return out


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
