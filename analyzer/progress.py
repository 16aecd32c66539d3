"""Progress of a long analysis on standard error: a bar on a terminal, log lines otherwise.

The engine reports its stages (reading the input, analyzing partitions, writing a dataset) to a
`Progress`. On a terminal each stage is a transient tqdm bar; elsewhere (a nightly job's log, a
CI step) a stage that runs for more than `LINE_EVERY` seconds prints plain lines such as
``agenttrace: analyze 3/8 partitions, 410,233 spans read, 72.4 s``, every `LINE_EVERY` seconds
and when it ends (a quick command prints none). A command given ``--quiet`` passes no Progress.
"""

from __future__ import annotations

import io
import os
import sys
import time
from typing import Any, TextIO

__all__ = ["LINE_EVERY", "Progress"]

#: Seconds a stage runs before its first log line, and between two of its lines.
LINE_EVERY = 10.0


def _columns(stream: TextIO) -> int:
    """The width of the terminal `stream` is (0: unknown)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return 0


class Progress:
    """Where the engine reports its stages: `stage`, then `advance` once per item done.

    `bar`: a tqdm bar (default: when `stream` is a terminal); else log lines.
    """

    def __init__(self, stream: TextIO | None = None, *, bar: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.bar = self.stream.isatty() if bar is None else bar
        self.started = time.monotonic()
        self.spans = 0
        self._name = ""
        self._unit = ""
        self._total = 0
        self._done = 0
        self._lines = 0  # printed of this stage
        self._printed = 0.0
        self._tqdm: Any = None

    def stage(self, name: str, total: int, unit: str) -> None:
        """Start stage `name` of `total` items (files, partitions) named `unit`."""
        self.close()
        self._name, self._total, self._unit, self._done, self._lines = name, total, unit, 0, 0
        self._printed = time.monotonic()
        if self.bar:
            from tqdm import tqdm

            self._tqdm = tqdm(
                total=total,
                desc=name,
                unit=f" {unit}",
                file=self.stream,
                leave=False,
                # a terminal of no size (a pseudo-terminal never sized) would hide the bar
                **({} if _columns(self.stream) else {"ncols": 80, "nrows": 24}),
            )

    def advance(self, spans: int = 0) -> None:
        """One more item of the stage done, which read `spans` spans."""
        self._done += 1
        self.spans += spans
        if self._tqdm is not None:
            self._tqdm.set_postfix_str(f"{self.spans:,} spans", refresh=False)
            self._tqdm.update(1)
            return
        now = time.monotonic()
        due = now - self._printed >= LINE_EVERY
        if due or (self._done == self._total and self._lines):
            self._printed = now
            self._lines += 1
            self.stream.write(
                f"agenttrace: {self._name} {self._done}/{self._total} {self._unit}, "
                f"{self.spans:,} spans read, {now - self.started:.1f} s\n"
            )
            self.stream.flush()

    def file_read(self, _path: str, spans: int) -> None:
        """`advance` in the form the readers call back (a file read, its spans)."""
        self.advance(spans)

    def close(self) -> None:
        """End the current stage (its bar is removed)."""
        if self._tqdm is not None:
            self._tqdm.close()
            self._tqdm = None
