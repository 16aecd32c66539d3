"""The one-way flow: files -> span table -> normalized spans -> runs and steps -> findings."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from analyzer.ingest import Ingested, read_traces
from analyzer.runs import RunSet, build_runs

if TYPE_CHECKING:
    from analyzer.checks import Evaluation
    from analyzer.pack import Pack

__all__ = ["Analysis", "analyze", "analyze_paths"]


@dataclass
class Analysis:
    """Everything reconstructed from a batch of trace files."""

    ingested: Ingested
    normalized: pa.Table
    runs: RunSet
    packs: tuple[Pack, ...] = ()
    evaluation: Evaluation | None = None  # None when no pack was applied


def analyze(
    ingested: Ingested,
    *,
    run_key: str | None = None,
    case_key: str | None = None,
    packs: Sequence[Pack] = (),
) -> Analysis:
    """Normalize the span table, rebuild its runs and apply the rule packs (if any)."""
    from analyzer.conventions import normalize

    normalized = normalize(ingested.spans)
    runset = build_runs(ingested.spans, normalized, run_key=run_key, case_key=case_key)
    ingested.log.runs = runset.runs.height
    evaluation = None
    if packs:
        from analyzer.checks import evaluate

        evaluation = evaluate(packs, runset)
    return Analysis(
        ingested=ingested,
        normalized=normalized,
        runs=runset,
        packs=tuple(packs),
        evaluation=evaluation,
    )


def analyze_paths(
    paths: list[str | Path],
    *,
    run_key: str | None = None,
    case_key: str | None = None,
    packs: Sequence[Pack] = (),
    progress: Callable[[str, int], None] | None = None,
) -> Analysis:
    """Read `paths`, rebuild their runs and apply the rule packs (if any)."""
    return analyze(
        read_traces(paths, progress=progress), run_key=run_key, case_key=case_key, packs=packs
    )
