"""Outputs never escape their folder, never look complete when they are not, and an
environment error (a full disk) ends with exit 3 and one line, not a traceback (issue 34,
points 5 and 9)."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from analyzer.cli import main

ROOT = Path(__file__).resolve().parents[1]
KYC = str(ROOT / "sample_traces" / "kyc")
REPORT_FILES = (
    "summary.json",
    "findings.jsonl",
    "findings.parquet",
    "coverage.parquet",
    "runs.parquet",
    "steps.parquet",
    "quarantine.jsonl",
    "report.html",
    "manifest.json",
)


def _plant(out: Path, names, outside: Path) -> dict[str, Path]:
    """A symlink in `out` at each of `names`, to a file of its own in `outside`."""
    out.mkdir()
    outside.mkdir()
    targets = {}
    for name in names:
        target = outside / name
        target.write_text("precious\n")
        (out / name).symlink_to(target)
        targets[name] = target
    return targets


def test_report_replaces_planted_symlinks_instead_of_writing_through(tmp_path: Path):
    out = tmp_path / "out"
    targets = _plant(out, (*REPORT_FILES, "labels.parquet"), tmp_path / "outside")
    labels = ROOT / "sample_traces" / "kyc" / "labels.jsonl"
    args = ["report", KYC, "--out", str(out)]
    if labels.exists():
        args += ["--labels", str(labels)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert all(t.read_text() == "precious\n" for t in targets.values())
    umask = os.umask(0)
    os.umask(umask)
    for name in REPORT_FILES:
        assert not (out / name).is_symlink(), name
        assert (out / name).stat().st_mode & 0o777 == 0o666 & ~umask, name
    assert (out / "summary.json").stat().st_size > 0
    assert not list(out.glob(".*.part")), "temporary files left behind"


def test_diff_out_replaces_planted_symlinks(tmp_path: Path):
    out = tmp_path / "out"
    targets = _plant(out, ("diff.json", "diff.md", "diff.html"), tmp_path / "outside")
    result = CliRunner().invoke(main, ["diff", KYC, KYC, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert all(t.read_text() == "precious\n" for t in targets.values())
    assert json.loads((out / "diff.json").read_text())


def _agenttrace_with_file_limit(args: list[str], limit: int) -> subprocess.CompletedProcess:
    """agenttrace in a process whose files cannot grow past `limit` bytes: writes past it
    fail with EFBIG, as they would with ENOSPC on a full disk."""

    def limit_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [sys.executable, "-c", "from analyzer.cli import run; run()", *args],
        capture_output=True,
        text=True,
        preexec_fn=limit_files,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
    )


@pytest.mark.parametrize("debug", [False, True])
def test_a_full_disk_exits_3_with_one_line_and_leaves_no_complete_looking_report(
    tmp_path: Path, debug: bool
):
    out = tmp_path / "out"
    # A complete report first: a failed one over it must not leave its manifest standing.
    assert CliRunner().invoke(main, ["report", KYC, "--out", str(out)]).exit_code == 0
    assert (out / "manifest.json").exists()
    done = _agenttrace_with_file_limit(
        [*(["--debug"] if debug else []), "report", KYC, "--out", str(out)], 20_000
    )
    assert done.returncode == 3, done.stderr
    if debug:
        assert "Traceback (most recent call last)" in done.stderr
    else:
        assert "Traceback" not in done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("Error: ") and "File too large" in line, line
        assert line.endswith("(--debug shows the traceback)")
    assert not (out / "manifest.json").exists()
    assert not list(out.glob(".*.part")), "temporary files left behind"
