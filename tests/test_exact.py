"""Exact sums and order statistics over parts (analyzer.report.exact), against Python's exact
arithmetic (fractions, math.fsum) and a sort of all values."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

from analyzer.report.exact import Selection, exact_sums, exact_value, order_keys


def _floats(draw: random.Random, n: int) -> list[float]:
    """Floats over the whole range: tiny and huge, negative, subnormal, zeros, repeats."""
    special = [0.0, -0.0, 5e-324, -5e-324, 1e308, -1e308, 1.0, 1.0, 0.1, 0.1]
    return [
        draw.choice(special)
        if draw.random() < 0.1
        else draw.uniform(-1, 1) * 10.0 ** draw.randrange(-300, 300)
        for _ in range(n)
    ]


def test_order_keys_sort_like_the_floats():
    values = np.array([*sorted(_floats(random.Random(1), 2_000)), math.inf, -math.inf])
    keys = order_keys(values)
    order = np.argsort(keys, kind="stable")
    assert np.array_equal(np.sort(values), values[order])


def test_exact_sums_are_exact_per_code_and_merge_in_any_order():
    draw = random.Random(2)
    values = [v for v in _floats(draw, 5_000) if abs(v) < 1e300]  # totals stay finite
    codes = [draw.randrange(4) for _ in values]
    whole = exact_sums(np.array(codes), np.array(values))
    for code in range(4):
        mine = [v for v, c in zip(values, codes, strict=True) if c == code]
        assert whole[code] == sum(Fraction(v) for v in mine) * 2**1126
        assert exact_value(whole[code]) == math.fsum(mine)  # fsum: correctly rounded
        mean = sum(Fraction(v) for v in mine) / len(mine)
        assert exact_value(whole[code], len(mine)) == float(mean)
    # split in parts, shuffled: the same integers
    order = list(range(len(values)))
    draw.shuffle(order)
    merged: dict[int, int] = {}
    for part in (order[:1000], order[1000:1001], order[1001:]):
        sums = exact_sums(np.array([codes[i] for i in part]), np.array([values[i] for i in part]))
        for code, total in sums.items():
            merged[code] = merged.get(code, 0) + total
    assert merged == whole


def test_exact_sums_leave_out_non_finite_values():
    sums = exact_sums(np.array([0, 0, 0, 1]), np.array([1.5, math.nan, math.inf, math.nan]))
    assert sums == {0: int(Fraction(1.5) * 2**1126)}
    assert exact_sums(np.array([], dtype=np.int64), np.array([])) == {}


@pytest.mark.parametrize("seed", range(4))
def test_selection_gives_every_order_statistic_over_parts(seed):
    draw = random.Random(seed)
    sets = {s: _floats(draw, draw.randrange(1, 3_000)) for s in range(5)}
    sets[5] = [3.0] * 2_000 + [2.0]  # one bucket, ties
    sets[6] = [math.nan, 1.0]  # NaN left out
    rows = [(s, v) for s, vs in sets.items() for v in vs]
    draw.shuffle(rows)
    parts = [rows[i : i + 997] for i in range(0, len(rows), 997)]

    def feed(method):
        for part in parts:
            method(np.array([s for s, _ in part]), np.array([v for _, v in part]))

    selection = Selection()
    feed(selection.count)
    wanted = {s: {1, 2, len(vs) // 2, len(vs) - 1, len(vs), len(vs) + 5} for s, vs in sets.items()}
    selection.plan(wanted)
    feed(selection.keep)
    for s, vs in sets.items():
        ordered = sorted(v for v in vs if not math.isnan(v))
        assert selection.size(s) == len(ordered)
        for rank in wanted[s]:
            if 1 <= rank <= len(ordered):
                got = selection.value(s, rank)
                assert got == ordered[rank - 1]
                assert math.copysign(1, got) == 1 or got != 0  # -0.0 read as 0.0
    with pytest.raises(KeyError):
        selection.value(0, len(sets[0]) + 5)


def test_selection_keeps_only_the_planned_buckets():
    """Memory: the second pass keeps the values of a few buckets, not of the sets."""
    values = np.linspace(1.0, 1e6, 100_000)
    selection = Selection()
    selection.count(np.zeros(len(values), dtype=np.int64), values)
    selection.plan({0: [50_000]})
    selection.keep(np.zeros(len(values), dtype=np.int64), values)
    assert selection.value(0, 50_000) == values[49_999]
    assert sum(len(kept) for kept in selection._kept.values()) < 1_000


def test_type_7_quantile_from_order_statistics_is_polars():
    values = _floats(random.Random(5), 1_001)[:1_001]
    values = [v for v in values if abs(v) < 1e300]
    n = len(values)
    selection = Selection()
    selection.count(np.zeros(n, dtype=np.int64), np.array(values))
    qs = (0.5, 0.95, 0.99)
    ranks = {r for q in qs for r in (math.floor((n - 1) * q) + 1, math.floor((n - 1) * q) + 2)}
    selection.plan({0: ranks})
    selection.keep(np.zeros(n, dtype=np.int64), np.array(values))
    for q in qs:
        h = (n - 1) * q
        lo = math.floor(h)
        a, b = selection.value(0, lo + 1), selection.value(0, min(lo + 2, n))
        assert a + (h - lo) * (b - a) == pl.Series(values).quantile(q, interpolation="linear")
