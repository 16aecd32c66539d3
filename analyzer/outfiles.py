"""Output files that never escape their folder and never look complete when they are not.

Every file agenttrace writes for the user (`report --out`, `diff --out`) is written under a
temporary name created afresh in the target folder (``O_EXCL``: a planted symlink is never
opened) and renamed over its final name when it is complete: the rename replaces a symlink
at that name, it does not write through it. A failure removes the temporary file.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from analyzer.errors import InputError

__all__ = ["check_folder", "output_folder", "replacing", "write_text"]


def check_folder(path: Path, option: str = "--out") -> None:
    """InputError when `path` exists and is not a folder (checked before any work is done)."""
    if path.exists() and not path.is_dir():
        raise InputError(f"{path}: {option} names a file; give a folder (new or existing)")


def output_folder(path: Path, option: str = "--out") -> Path:
    """`path` as the folder outputs go into, created if needed; InputError when it is a file."""
    check_folder(path, option)
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def replacing(path: Path, *, temp_prefix: str = ".", durable: bool = False) -> Iterator[Path]:
    """A new temporary file beside `path` (named `temp_prefix`, random digits, `path`'s name)
    for the block to write; renamed to `path` when the block ends without error, removed when
    it raises. `durable`: the file, then its folder, are synced to disk around the rename
    (a dataset's parts and manifest)."""
    while True:  # O_EXCL: never an existing file, nor a symlink planted at the name
        tmp = path.parent / f"{temp_prefix}{secrets.token_hex(6)}-{path.name}.part"
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            os.close(os.open(tmp, flags, 0o666))
            break
        except FileExistsError:
            continue
    try:
        yield tmp
        if durable:
            _fsync(tmp, os.O_RDONLY | os.O_NOFOLLOW)
        os.replace(tmp, path)
        if durable:
            _fsync(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _fsync(path: Path, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text(path: Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` through `replacing`."""
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
