"""A side of a diff: a report folder read back, or trace files analyzed by the engine."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analyzer.errors import InputError
from analyzer.metrics.compare import Side, analysis_side, is_report_dir, report_side

__all__ = ["load_side"]


def load_side(
    path: str | Path,
    *,
    packs: Sequence[Any] = (),
    prices: Any = None,
    run_key: str | None = None,
    case_key: str | None = None,
    labels: Any = None,
) -> Side:
    """A side from a trace path (analyzed with ``packs`` and ``prices``, in bounded memory as
    ``report`` does) or a report folder.

    ``labels`` (an `analyzer.metrics.labels.LabelSet`) scores the runs for ``all_fields_correct``;
    without it, a report folder written with ``--labels`` keeps the label results it holds
    (``labels.parquet``).
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    if is_report_dir(path):
        return report_side(path, packs, labels)
    from analyzer.engine import analyze_paths

    analysis = analyze_paths(
        [path], run_key=run_key, case_key=case_key, packs=packs, prices=prices, digests=False
    )
    return analysis_side(path, analysis, labels)
