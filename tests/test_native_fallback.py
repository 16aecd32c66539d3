"""Without the C extensions (as on a machine with no C compiler) the Python readers they stand
in front of read the sample traces and the real traces alike: the same span table and log
(`analyzer.ingest._otlp_lines` before the robust path) and the same argument leaves
(`analyzer.checks._flat_leaves` before `grounded_arguments._walk`)."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest

from analyzer.checks import grounded_arguments
from analyzer.conventions import normalize
from analyzer.ingest import otlp_json
from analyzer.ingest.reader import read_traces

ROOT = Path(__file__).resolve().parent.parent
REAL = Path(os.environ.get("AGENTTRACE_REAL_TRACES", "/work/shared/real-traces"))
INPUTS = [ROOT / "sample_traces" / name for name in ("kyc", "support", "realestate")]
if REAL.is_dir():
    INPUTS.append(REAL)


def _read():
    ingested = read_traces(INPUTS, jobs=1, digests=False)
    return ingested.spans, ingested.log


@pytest.mark.skipif(otlp_json._native is None, reason="the native lines reader was not built")
def test_the_robust_path_alone_reads_the_samples_and_real_traces_alike(monkeypatch):
    spans, log = _read()
    assert spans.num_rows > 100
    monkeypatch.setattr(otlp_json, "_native", None)
    robust, robust_log = _read()
    assert spans.equals(robust)
    assert log == robust_log


@pytest.mark.skipif(grounded_arguments._native is None, reason="the native reader was not built")
def test_python_alone_reads_the_arguments_of_the_samples_and_real_traces_alike(monkeypatch):
    spans, _ = _read()
    calls = (
        normalize(spans)
        .select(pl.col("arguments").cast(pl.String))
        .drop_nulls()
        .with_columns(run_id=pl.lit("r"))
        .with_row_index("_call")
    )
    assert calls.height > 100

    def leaves():
        found, malformed = grounded_arguments.argument_leaves(calls)
        return found.sort("_call", "leaf_no"), malformed.sort("_call")

    native, native_bad = leaves()
    monkeypatch.setattr(grounded_arguments, "_native", None)
    python, python_bad = leaves()
    assert native.height > 100
    assert native.equals(python) and native_bad.equals(python_bad)
