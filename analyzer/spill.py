"""Spill folders: where a partitioned analysis or ingest keeps its intermediate files.

Each folder records its owner (process id and start time). The folder is removed when the
work ends, fails or is stopped by SIGTERM; a folder whose owner was killed outright (SIGKILL,
a power cut) is found and removed by the next analysis that spills into the same place.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

__all__ = ["PREFIX", "new_spill_folder", "remove_abandoned"]

PREFIX = "agenttrace-spill-"
_OWNER = "owner"
#: A folder with no owner recorded yet may be one being created this instant.
_GRACE_S = 600


def new_spill_folder(parent: str | Path | None = None) -> Path:
    """A new spill folder in `parent` (default: the system's temporary folder), after removing
    the folders there whose owner is gone."""
    if parent is not None:
        Path(parent).mkdir(parents=True, exist_ok=True)
    remove_abandoned(parent)
    folder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))
    (folder / _OWNER).write_text(_identity(os.getpid()) or str(os.getpid()), encoding="ascii")
    return folder


def remove_abandoned(parent: str | Path | None = None) -> list[Path]:
    """Remove the spill folders in `parent` whose owning process is gone; return them."""
    removed = []
    base = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    try:
        candidates = [p for p in base.iterdir() if p.name.startswith(PREFIX)]
    except OSError:
        return removed
    for folder in candidates:
        if not folder.is_dir() or folder.is_symlink():
            continue
        try:
            owner = (folder / _OWNER).read_text(encoding="ascii").strip()
        except OSError:
            try:
                fresh = time.time() - folder.stat().st_mtime < _GRACE_S
            except OSError:
                continue
            if fresh:
                continue
            owner = ""
        if owner and _alive(owner):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _identity(pid: int) -> str | None:
    """``pid:start`` (the start time in clock ticks since boot, from /proc), so that a process
    id reused by another process does not pass as the owner; None where /proc is missing."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return None
    # the command name (2nd field) is in parentheses and may hold spaces
    return f"{pid}:{stat.rsplit(')', 1)[1].split()[19]}"


def _alive(owner: str) -> bool:
    pid_text = owner.split(":", 1)[0]
    if not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if ":" in owner:
        return _identity(pid) == owner
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
