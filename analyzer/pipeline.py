"""The one-way flow: files -> span table -> normalized spans -> runs and steps."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from analyzer.ingest import Ingested, read_traces
from analyzer.runs import RunSet, build_runs

__all__ = ["Analysis", "analyze", "analyze_paths"]


@dataclass
class Analysis:
    """Everything reconstructed from a batch of trace files."""

    ingested: Ingested
    normalized: pa.Table
    runs: RunSet


def analyze(
    ingested: Ingested, *, run_key: str | None = None, case_key: str | None = None
) -> Analysis:
    """Normalize the span table and rebuild its runs."""
    from analyzer.conventions import normalize

    normalized = normalize(ingested.spans)
    runset = build_runs(ingested.spans, normalized, run_key=run_key, case_key=case_key)
    ingested.log.runs = runset.runs.height
    return Analysis(ingested=ingested, normalized=normalized, runs=runset)


def analyze_paths(
    paths: list[str | Path],
    *,
    run_key: str | None = None,
    case_key: str | None = None,
    progress: Callable[[str, int], None] | None = None,
) -> Analysis:
    """Read `paths` and rebuild their runs."""
    return analyze(read_traces(paths, progress=progress), run_key=run_key, case_key=case_key)
