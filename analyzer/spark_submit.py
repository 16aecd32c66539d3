"""``spark-submit analyzer/spark_submit.py PATH... [report options]``: ``agenttrace report
--engine spark`` as a Spark application (see `analyzer.spark`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None) -> None:
    """``agenttrace report --engine spark`` with these arguments."""
    from analyzer.cli import main as cli

    args = list(sys.argv[1:] if argv is None else argv)
    cli(["report", "--engine", "spark", *args], prog_name="agenttrace-spark")


if __name__ == "__main__":
    # Run as a file: this folder heads sys.path, where its modules would shadow top-level ones
    # of the same name (``spark``); the package is imported instead.
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != here]
    from analyzer.spark_submit import main as _main

    _main()
