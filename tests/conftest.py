"""Settings shared by every test."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_progress_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """No progress line from a command run in process: click's CliRunner mixes standard error
    into ``result.output``, and a busy machine makes a stage last long enough for a line
    (tests/test_progress.py sets its own interval)."""
    from analyzer import progress

    monkeypatch.setattr(progress, "LINE_EVERY", float("inf"))
