"""How diff values are written: rates in %, deltas of rates in points, costs in USD."""

from __future__ import annotations

import math

from analyzer.metrics.compare import METRICS, MetricDelta

__all__ = ["amount_text", "delta_text", "interval_text", "label", "value_text"]

_DASH = "-"


def _usd(value: float, signed: bool = False) -> str:
    sign = "+" if signed and value > 0 else ("-" if value < 0 else "")
    v = abs(value)
    if v == 0:
        return "$0"
    if v >= 1:
        return f"{sign}${v:,.2f}"
    decimals = min(12, max(2, 2 - math.floor(math.log10(v))))
    return f"{sign}${v:.{decimals}f}"


def value_text(metric: str, value: float | None) -> str:
    """A metric value as shown (rates in %, score in points, cost in USD)."""
    if value is None:
        return _DASH
    unit = METRICS[metric]
    if unit == "rate":
        return f"{100 * value:.1f}%"
    if unit == "USD":
        return _usd(value)
    if unit == "points":
        return f"{value:.1f}"
    if unit == "tokens":
        return f"{value:,.0f}"
    return f"{value:.2f}"


def delta_text(metric: str, value: float | None, *, precise: bool = False) -> str:
    """A delta as shown: signed, rates in percentage points.

    ``precise`` (gate messages) keeps 4 significant digits, so that a delta just short of a
    limit never reads as equal to it.
    """
    if value is None:
        return _DASH
    unit = METRICS[metric]
    if unit == "rate":
        return f"{100 * value:+.4g} pp" if precise else f"{100 * value:+.1f} pp"
    if unit == "USD":
        return _usd(value, signed=True) if value else "$0"
    if unit == "points":
        return f"{value:+.4g}" if precise else f"{value:+.1f}"
    if unit == "tokens":
        return f"{value:+,.0f}"
    return f"{value:+.4g}" if precise else f"{value:+.2f}"


def interval_text(row: MetricDelta) -> str:
    """``[lo, hi]`` in the delta's unit, or a dash."""
    if row.lo is None or row.hi is None:
        return _DASH
    lo, hi = delta_text(row.metric, row.lo), delta_text(row.metric, row.hi)
    if METRICS[row.metric] == "rate":
        lo, hi = lo.removesuffix(" pp"), hi.removesuffix(" pp")
        return f"[{lo}, {hi}] pp"
    return f"[{lo}, {hi}]"


def amount_text(metric: str, value: float) -> str:
    """A limit's amount, unsigned, in the delta's unit (``0 pp``, ``8``, ``$0.00100``)."""
    return delta_text(metric, abs(value), precise=True).lstrip("+")


def label(row: MetricDelta) -> str:
    """The row's name: ``metric[key]``, ``pass^k`` or the metric."""
    if row.metric == "pass_hat_k":
        return f"pass^{row.key}"
    return f"{row.metric}[{row.key}]" if row.key is not None else row.metric
