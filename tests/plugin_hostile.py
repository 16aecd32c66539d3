"""Hostile plugin rule types used by tests/test_bounded.py (loaded as plugin_hostile:Class)."""

from __future__ import annotations

import os
import sys
import time

import polars as pl

from analyzer.checks.base import Check, CheckContext

__all__ = ["Blocks", "EndsProcess", "Forever", "ForeverCheck", "Interrupts", "Swallows"]


class Forever:
    """Never returns: a busy loop."""

    def check_run(self, run, steps):
        while True:
            pass


class Swallows:
    """Never returns and swallows every exception it can."""

    def check_run(self, run, steps):
        while True:
            try:
                while True:
                    pass
            except BaseException:
                pass


class Blocks:
    """Never returns: sleeps in C."""

    def check_run(self, run, steps):
        time.sleep(3600)


class EndsProcess:
    """Tries to end the process: ``how`` is exit, os_exit or raise."""

    def __init__(self, how: str):
        self.how = how

    def check_run(self, run, steps):
        if self.how == "exit":
            sys.exit(3)
        if self.how == "os_exit":
            os._exit(4)
        raise SystemExit(5)


class Interrupts:
    """Raises KeyboardInterrupt itself (no Ctrl-C was pressed)."""

    def check_run(self, run, steps):
        raise KeyboardInterrupt


class ForeverCheck(Check):
    """A plugin deriving from Check whose check never returns."""

    type = "forever_check"
    kinds = ("never",)

    def check(self, ctx: CheckContext) -> pl.DataFrame:
        while True:
            pass
