"""Generated dumps cut across files, and the equality of two analyses, for the tests that hold
the partitioned and Spark paths to the in-process result."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from analyzer.metrics.summary import build_summary

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from gen_otlp import generate

__all__ = ["assert_same_analysis", "generate", "span_count", "split_dump"]


def span_count(lines: list[str]) -> int:
    """Spans in OTLP JSON lines, counted independently of the readers."""
    return sum(
        len(ss["spans"])
        for line in lines
        for rs in json.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
    )


def _write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def split_dump(
    folder: Path,
    spans: int,
    *,
    seed: int,
    concurrency: int,
    resent: Callable[[list[str], int], list[str]],
) -> dict:
    """A generated dump cut in two files `a.jsonl`, `b.jsonl` (runs straddle them) plus
    `c-resent.jsonl`, the lines `resent(lines, half)` that the exporter sent again, in
    `folder/in`; with the generator's counts and the duplicate spans counted apart."""
    whole = folder / "whole.jsonl"
    n_spans, traces, n_lines = generate(whole, spans, seed=seed, concurrency=concurrency)
    lines = whole.read_text(encoding="utf-8").splitlines()
    whole.unlink()
    half = len(lines) // 2
    inputs = folder / "in"
    inputs.mkdir()
    _write_lines(inputs / "a.jsonl", lines[:half])
    _write_lines(inputs / "b.jsonl", lines[half:])
    again = resent(lines, half)
    _write_lines(inputs / "c-resent.jsonl", again)
    return {
        "folder": inputs,
        "spans": n_spans,
        "traces": traces,
        "lines": n_lines,
        "duplicates": span_count(again),
    }


def assert_same_analysis(reference, result) -> None:
    """Runs (every column), steps, findings, coverage, errors and summary.json are identical."""
    assert result.runs.runs.columns == reference.runs.runs.columns
    assert result.runs.runs.equals(reference.runs.runs)
    assert result.runs.steps.equals(reference.runs.steps)
    assert result.evaluation.findings.equals(reference.evaluation.findings)
    assert result.evaluation.coverage.equals(reference.evaluation.coverage)
    assert result.evaluation.errors == reference.evaluation.errors
    left = json.dumps(build_summary(reference), sort_keys=True, ensure_ascii=False)
    right = json.dumps(build_summary(result), sort_keys=True, ensure_ascii=False)
    assert right == left
