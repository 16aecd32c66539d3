"""Progress on standard error (`analyzer.progress`): log lines when it is not a terminal, a bar
when it is, nothing with --quiet; the outputs are the same either way."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path

from analyzer.progress import Progress

ROOT = Path(__file__).resolve().parents[1]
KYC = ROOT / "sample_traces" / "kyc"
LINE = re.compile(r"^agenttrace: (\w+) (\d+)/(\d+) (\w+), ([\d,]+) spans read, [\d.]+ s$")


def test_log_lines_say_the_stage_the_count_done_and_the_spans(monkeypatch) -> None:
    from analyzer import progress as module

    monkeypatch.setattr(module, "LINE_EVERY", 0.0)
    stream = io.StringIO()
    progress = Progress(stream, bar=False)
    progress.stage("read", 2, "files")
    progress.advance(1200)
    progress.advance(34)
    progress.stage("analyze", 1, "partitions")
    progress.advance()
    lines = stream.getvalue().splitlines()
    assert [LINE.match(line).groups() for line in lines] == [  # type: ignore[union-attr]
        ("read", "1", "2", "files", "1,200"),
        ("read", "2", "2", "files", "1,234"),
        ("analyze", "1", "1", "partitions", "1,234"),
    ]


def test_a_quick_stage_prints_no_line_and_a_long_one_its_end_too(monkeypatch) -> None:
    from analyzer import progress as module

    clock = [100.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: clock[0])
    stream = io.StringIO()
    progress = Progress(stream, bar=False)
    progress.stage("read", 3, "files")
    progress.advance(5)
    progress.advance(5)
    progress.advance(5)  # the whole stage within LINE_EVERY: silent
    assert stream.getvalue() == ""
    progress.stage("analyze", 3, "partitions")
    clock[0] += module.LINE_EVERY
    progress.advance()  # a line once the stage ran LINE_EVERY seconds
    clock[0] += 1
    progress.advance()  # too soon for another
    progress.advance()  # but the end of a stage that printed is always said
    assert [line.split(",")[0] for line in stream.getvalue().splitlines()] == [
        "agenttrace: analyze 1/3 partitions",
        "agenttrace: analyze 3/3 partitions",
    ]


def test_on_a_terminal_the_progress_is_a_bar_that_goes_away() -> None:
    stream = io.StringIO()
    progress = Progress(stream, bar=True)
    progress.stage("analyze", 4, "partitions")
    for _ in range(4):
        progress.advance(250)
    progress.close()
    text = stream.getvalue()
    assert text.startswith("\ranalyze:") and "/4 [" in text and "partitions" in text
    assert "agenttrace:" not in text  # no log line
    assert re.search(r"\r +\r$", text)  # wiped when the stage ends


def _report(*args: str, stderr=subprocess.PIPE) -> subprocess.CompletedProcess:
    agenttrace = Path(sys.executable).with_name("agenttrace")
    return subprocess.run(
        [str(agenttrace), "report", str(KYC), "--rules", "kyc", "-j", "1", *args],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        check=False,
    )


def test_a_report_logs_its_long_stages_when_stderr_is_no_terminal_and_nothing_when_quiet(
    monkeypatch,
) -> None:
    from click.testing import CliRunner

    from analyzer import progress as module
    from analyzer.cli import main

    monkeypatch.setattr(module, "LINE_EVERY", 0.0)  # every stage counts as long
    args = ["report", str(KYC), "--rules", "kyc", "-j", "1", "--partitions", "2"]
    logged = CliRunner().invoke(main, [*args, "--format", "json"])
    quiet = CliRunner().invoke(main, [*args, "--format", "json", "--quiet"])
    assert logged.exit_code == quiet.exit_code == 0
    stages = [LINE.match(line).groups()[:4] for line in logged.stderr.splitlines()]  # type: ignore[union-attr]
    assert stages[-1] == ("analyze", "2", "2", "partitions")
    assert [s for s in stages if s[0] == "read"][-1] == ("read", "5", "5", "files")
    assert logged.stderr.splitlines()[-1].split(", ")[1] == "162 spans read"
    assert quiet.stderr == ""
    assert logged.stdout == quiet.stdout  # the summary does not depend on the progress
    assert _report("--partitions", "2").stderr == ""  # a quick report: no line


def test_a_report_on_a_terminal_draws_a_bar_on_it() -> None:
    leader, follower = pty.openpty()
    chunks: list[bytes] = []

    def drain() -> None:  # read as it comes: a closed terminal's unread output is lost
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        done = _report("--partitions", "2", "--format", "json", stderr=follower)
    finally:
        os.close(follower)
        reader.join(timeout=10)
        os.close(leader)
    assert done.returncode == 0
    drawn = b"".join(chunks).decode()
    assert "read:" in drawn and "analyze:" in drawn and "partitions" in drawn
    assert "agenttrace:" not in drawn
