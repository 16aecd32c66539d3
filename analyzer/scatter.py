"""Values put into a column at given rows, which polars' own ``Series.scatter`` gets wrong.

Two faults of polars' ``scatter`` (seen from 1.44 to 2.1) change agenttrace's results: a text
column scattered into holds views of equal texts that an eager group-by's ``unique`` and
``n_unique`` count as different (a run's two calls of one model listed it twice, so its
configuration hash and breakdown group changed with the memory layout), and where a row is
named twice with a null among its values, the value that stays is not always the last.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

__all__ = ["scatter"]


def scatter(series: pl.Series, rows: pl.Series | Sequence[int], values: Any) -> pl.Series:
    """A copy of `series` with `values` (a series or a list) at `rows`: where a row is named
    twice, its last value."""
    n = len(series)
    values = pl.Series(values, dtype=series.dtype)
    ends = pl.int_range(n, n + len(values), dtype=pl.Int64, eager=True)
    # integers, never null: polars scatters them in order, the last value winning
    at = pl.int_range(n, dtype=pl.Int64, eager=True).scatter(rows, ends)
    return pl.concat([series, values]).gather(at).alias(series.name)
