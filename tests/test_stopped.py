"""A stopped or killed `report` leaves no worker running and no spill folder behind (issue 34,
point 10): SIGTERM ends the workers and removes the spill folder at once; after a SIGKILL the
workers die with their parent and the next run removes the abandoned folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analyzer.spill import PREFIX, new_spill_folder, remove_abandoned

ROOT = Path(__file__).resolve().parents[1]
KYC = str(ROOT / "sample_traces" / "kyc")

SLOW_PLUGIN = '''
import time

class Slow:
    """Sleeps on every run: keeps the workers busy."""

    def __init__(self, seconds):
        self.seconds = seconds

    def check_run(self, run, steps):
        time.sleep(self.seconds)
        return []
'''
SLOW_PACK = "pack: slow\nrules:\n  - {id: slow, type: 'slow_plugin:Slow', seconds: 2}\n"


def _children(pid: int) -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.add(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def _slow_report(tmp_path: Path) -> tuple[subprocess.Popen, set[int], Path]:
    """A `report --partitions 2 --jobs 2` whose two workers are busy in the slow plugin."""
    (tmp_path / "slow_plugin.py").write_text(SLOW_PLUGIN)
    (tmp_path / "slow.yaml").write_text(SLOW_PACK)
    spill = tmp_path / "spill"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    args = ["report", KYC, "--rules", str(tmp_path / "slow.yaml"), "--allow-plugins"]
    args += ["--partitions", "2", "--jobs", "2", "--spill", str(spill)]
    proc = subprocess.Popen(
        [sys.executable, "-c", "from analyzer.cli import run; run()", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    workers: set[int] = set()

    def busy() -> bool:
        workers.update(_children(proc.pid))
        return len(workers) >= 2 and any(spill.glob(f"{PREFIX}*/part-*"))

    if not _wait(busy, 60):
        proc.kill()
        pytest.fail(f"the report never got its workers busy: {proc.stderr.read()!r}")
    time.sleep(1.0)  # the workers are in the plugin now
    return proc, workers, spill


def test_sigterm_ends_workers_and_removes_the_spill_folder(tmp_path: Path):
    proc, workers, spill = _slow_report(tmp_path)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 128 + signal.SIGTERM
    assert _wait(lambda: not any(_alive(w) for w in workers), 10), "workers left running"
    assert not list(spill.glob(f"{PREFIX}*")), "spill folder left behind"


def test_sigkill_workers_die_with_the_parent_and_the_next_run_cleans_up(tmp_path: Path):
    proc, workers, spill = _slow_report(tmp_path)
    proc.kill()
    proc.wait(timeout=10)
    # each worker still had runs to sleep on for several seconds
    assert _wait(lambda: not any(_alive(w) for w in workers), 3), "workers outlived the parent"
    (left,) = spill.glob(f"{PREFIX}*")
    assert remove_abandoned(spill) == [left]
    assert not left.exists()


def test_a_live_owner_keeps_its_spill_folder(tmp_path: Path):
    mine = new_spill_folder(tmp_path)
    assert remove_abandoned(tmp_path) == [] and mine.exists()
    # an owner that is gone (a process id reused by another process counts as gone)
    (mine / "owner").write_text(f"{os.getpid()}:1")
    orphan = tmp_path / f"{PREFIX}old"
    orphan.mkdir()
    os.utime(orphan, (0, 0))  # no owner recorded, long ago: abandoned
    fresh = tmp_path / f"{PREFIX}new"
    fresh.mkdir()  # no owner recorded yet, just made: may be being created
    assert sorted(remove_abandoned(tmp_path)) == sorted([mine, orphan])
    assert fresh.exists()
