"""Intervals on a difference: Newcombe's hybrid score intervals and the bootstrap.

Every delta is ``candidate - baseline``; every interval is two-sided at 95 %.

- **Independent rates** (`newcombe_independent`): Newcombe (1998), "Interval estimation for
  the difference between independent proportions: comparison of eleven methods", Statistics
  in Medicine 17:873-890, method 10 (hybrid score): with Wilson intervals ``(l1, u1)`` of
  ``p1`` and ``(l2, u2)`` of ``p2``,
  ``L = d - sqrt((p1 - l1)^2 + (u2 - p2)^2)`` and ``U = d + sqrt((u1 - p1)^2 + (p2 - l2)^2)``.
- **Paired rates** (`newcombe_paired`): Newcombe (1998), "Improved confidence intervals for
  the difference between binomial proportions based on paired data", Statistics in Medicine
  17:2635-2650, method 10: the same square-and-add with the correlation of the two rates,
  ``L = d - sqrt((p1 - l1)^2 - 2 phi (p1 - l1)(u2 - p2) + (u2 - p2)^2)`` (and ``U`` likewise),
  where ``phi`` is the phi coefficient of the 2x2 table of pairs, corrected as in the paper:
  ``(A - n/2) / sqrt(...)`` when ``A = ad - bc > n/2``, 0 when ``0 <= A <= n/2``, ``A / sqrt(...)``
  when ``A < 0``, and 0 when a margin is empty.
- **Bootstrap** (`bootstrap_intervals`): percentile interval (2.5 % and 97.5 %, linear
  interpolation) of the statistic's delta over ``B`` resamples drawn with
  ``numpy.random.default_rng(seed)``. Paired: one draw of units (cases) serves both sides;
  two samples: each side's runs are drawn on their own, baseline first. A resample where the
  statistic is undefined on a side (no priced run, no passed run) is left out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from analyzer.metrics.stats import wilson

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "Interval",
    "bootstrap_intervals",
    "excludes_zero",
    "newcombe_independent",
    "newcombe_paired",
    "weighted_mean",
    "weighted_quantile",
    "weighted_ratio",
]

#: Resamples of every bootstrap interval.
BOOTSTRAP_RESAMPLES = 2000
#: Seed of ``numpy.random.default_rng``: the same inputs give the same intervals.
BOOTSTRAP_SEED = 20261203


@dataclass(frozen=True)
class Interval:
    """A delta and its 95 % interval (bounds None when the data cannot give one)."""

    delta: float | None
    lo: float | None
    hi: float | None


def excludes_zero(lo: float | None, hi: float | None) -> bool | None:
    """Whether ``[lo, hi]`` leaves out 0 (None without an interval)."""
    if lo is None or hi is None:
        return None
    return lo > 0.0 or hi < 0.0


def newcombe_independent(k1: int, n1: int, k2: int, n2: int) -> Interval:
    """``k1/n1 - k2/n2`` with Newcombe's hybrid score interval (1998, method 10)."""
    w1, w2 = wilson(k1, n1), wilson(k2, n2)
    if w1 is None or w2 is None:
        return Interval(None, None, None)
    return _square_and_add(k1 / n1, w1, k2 / n2, w2, phi=0.0)


def newcombe_paired(a: int, b: int, c: int, d: int) -> Interval:
    """``p1 - p2`` over ``n`` pairs with Newcombe's paired interval (1998, method 10).

    ``a``: pairs positive on both sides; ``b``: positive on side 1 only; ``c``: on side 2
    only; ``d``: on neither. So ``p1 = (a + b) / n`` and ``p2 = (a + c) / n``.
    """
    if min(a, b, c, d) < 0:
        raise ValueError(f"negative count in the paired table {(a, b, c, d)}")
    n = a + b + c + d
    if n == 0:
        return Interval(None, None, None)
    w1, w2 = wilson(a + b, n), wilson(a + c, n)
    assert w1 is not None and w2 is not None
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    if margins == 0:
        phi = 0.0
    elif cross > n / 2:
        phi = (cross - n / 2) / math.sqrt(margins)
    elif cross >= 0:
        phi = 0.0
    else:
        phi = cross / math.sqrt(margins)
    return _square_and_add((a + b) / n, w1, (a + c) / n, w2, phi=phi)


def _square_and_add(
    p1: float, w1: tuple[float, float], p2: float, w2: tuple[float, float], *, phi: float
) -> Interval:
    """``p1 - p2`` and its interval from the Wilson intervals ``w1``, ``w2`` of the two rates
    and their correlation ``phi`` (0 for independent rates), clipped to [-1, 1]."""
    (l1, u1), (l2, u2) = w1, w2
    delta = p1 - p2
    down = (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2
    up = (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2
    lo = delta - math.sqrt(max(0.0, down))
    hi = delta + math.sqrt(max(0.0, up))
    return Interval(delta, max(-1.0, lo), min(1.0, hi))


# --- weighted statistics (a resample = integer weights on the runs) ----------------------------

#: A statistic of one side: (values (n,), weights (B, n)) -> (B,) with NaN where undefined.
Statistic = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _known(values: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The non-NaN values and their weights (no copy when every value is known)."""
    known = ~np.isnan(values)
    if known.all():
        return values, weights
    return values[known], weights[:, known]


def weighted_mean(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Mean of the non-NaN values under each row of weights."""
    xs, w = _known(values, weights)
    total = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, (w @ xs) / np.where(total > 0, total, 1), np.nan)


def weighted_ratio(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``sum(w * values[:, 0]) / sum(w * values[:, 1])`` per row of weights.

    NaN when a drawn numerator is NaN (one unknown cost makes the total unknown) or when the
    drawn denominator is 0.
    """
    num, den = values[:, 0], values[:, 1]
    unknown = np.isnan(num)
    bottom = weights @ den
    if unknown.any():
        top = weights[:, ~unknown] @ num[~unknown]
        bad = (weights[:, unknown].sum(axis=1) > 0) | (bottom <= 0)
    else:
        top = weights @ num
        bad = bottom <= 0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(bad, np.nan, top / np.where(bottom > 0, bottom, 1))


def weighted_quantile(q: float) -> Statistic:
    """Type-7 quantile of the non-NaN values repeated as many times as their weight."""

    def stat(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
        picked = np.flatnonzero(~np.isnan(values))
        picked = picked[np.argsort(values[picked], kind="stable")]
        xs = values[picked]
        out = np.full(weights.shape[0], np.nan)
        if picked.size == 0:
            return out
        for row, cum in enumerate(np.cumsum(weights[:, picked], axis=1)):
            if cum[-1] > 0:
                h = (cum[-1] - 1) * q
                lo = np.floor(h)
                # the value at 0-based position p of the row's expanded sorted sample is xs[i]
                # for the first i with cum[i] > p
                i_lo, i_hi = np.searchsorted(cum, [lo, min(lo + 1, cum[-1] - 1)], side="right")
                out[row] = xs[i_lo] + (h - lo) * (xs[i_hi] - xs[i_lo])
        return out

    return stat


def _percentiles(deltas: np.ndarray) -> tuple[float | None, float | None]:
    deltas = deltas[~np.isnan(deltas)]
    if deltas.size == 0:
        return None, None
    lo, hi = np.quantile(deltas, [0.025, 0.975])
    # Round away float noise so that a zero delta in every resample gives exactly [0, 0].
    return float(np.round(lo, 12)), float(np.round(hi, 12))


#: One statistic to bootstrap: (statistic, baseline (values, unit), candidate (values, unit)).
Task = tuple[Statistic, tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def bootstrap_intervals(
    tasks: Sequence[Task],
    *,
    units: tuple[int, int],
    paired: bool,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> list[tuple[float | None, float | None]]:
    """Percentile 95 % interval of ``stat(candidate) - stat(baseline)`` for each task, over
    the same resamples (drawn once).

    Each side is ``(values, unit)``: one value (or row, for `weighted_ratio`) per run and the
    index of the run's resampling unit, below that side's count in ``units``. Paired: both
    sides share the units (cases) and one draw of them; two samples: each side's units are
    drawn on their own.
    """
    nb, nc = units
    if not tasks:
        return []
    if nb == 0 or nc == 0:
        return [(None, None)] * len(tasks)
    if paired and nb != nc:
        raise ValueError("paired sides must share their units")
    rng = np.random.default_rng(seed)
    widest = max(max(b[0].shape[0], c[0].shape[0]) for _, b, c in tasks)
    # Keep each block of weights near 4 M cells (32 MB) whatever the number of runs.
    chunk = max(1, min(250, 4_000_000 // max(1, widest, nb, nc)))
    deltas: list[list[np.ndarray]] = [[] for _ in tasks]
    done = 0
    while done < resamples:
        m = min(chunk, resamples - done)
        if paired:
            counts_b = counts_c = _draw(rng, nb, m)
        else:
            counts_b = _draw(rng, nb, m)
            counts_c = _draw(rng, nc, m)
        # Tasks over the same runs share one gathered block of weights.
        gathered: dict[tuple[str, int], np.ndarray] = {}
        for i, (stat, (xb, ub), (xc, uc)) in enumerate(tasks):
            sb = stat(xb, _gather(gathered, "b", counts_b, ub))
            sc = stat(xc, _gather(gathered, "c", counts_c, uc))
            deltas[i].append(sc - sb)
        done += m
    return [_percentiles(np.concatenate(d)) for d in deltas]


def _gather(
    cache: dict[tuple[str, int], np.ndarray], side: str, counts: np.ndarray, unit: np.ndarray
) -> np.ndarray:
    """Each run's weight (its unit's count) in each resample, computed once per unit array."""
    key = (side, id(unit))
    if key not in cache:
        cache[key] = counts[:, unit]
    return cache[key]


def _draw(rng: np.random.Generator, units: int, m: int) -> np.ndarray:
    """(m, units) counts: how often each unit is drawn in each of m resamples of size units."""
    picks = rng.integers(0, units, size=(m, units))
    flat = (picks + (np.arange(m, dtype=np.int64) * units)[:, None]).ravel()
    return np.bincount(flat, minlength=m * units).reshape(m, units).astype(np.float64)
