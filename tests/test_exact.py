"""Exact sums and order statistics of the summary read part by part (analyzer.metrics.passes),
against Python's exact arithmetic (fractions) and a sort of all values."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

from analyzer.metrics.passes import ExactSum, _by_group, _quantile, _sorted


def _floats(draw: random.Random, n: int) -> list[float]:
    """Floats over the whole range: tiny and huge, negative, subnormal, zeros, repeats."""
    special = [0.0, -0.0, 5e-324, -5e-324, 1e308, -1e308, 1.0, 1.0, 0.1, 0.1]
    return [
        draw.choice(special)
        if draw.random() < 0.1
        else draw.uniform(-1, 1) * 10.0 ** draw.randrange(-300, 300)
        for _ in range(n)
    ]


@pytest.mark.parametrize("seed", range(3))
def test_exact_sum_is_exact_and_the_same_in_any_order_and_split(seed):
    draw = random.Random(seed)
    values = [v for v in _floats(draw, 5_000) if abs(v) < 1e300]  # totals stay finite
    exact = sum(map(Fraction, values), Fraction(0))
    whole = ExactSum()
    whole.add(np.array(values))
    assert whole.total() == float(exact) == math.fsum(values)  # correctly rounded
    assert whole.mean(len(values)) == float(exact / len(values))
    draw.shuffle(values)
    merged = ExactSum()
    for part in (values[:1000], values[1000:1001], [], values[1001:]):
        merged.add(part)
    assert merged.total() == whole.total()
    assert merged.mean(len(values)) == whole.mean(len(values))
    assert sum(map(Fraction, merged._parts), Fraction(0)) == exact


def test_exact_sum_leaves_out_non_finite_values_and_reads_minus_zero_as_zero():
    total = ExactSum()
    total.add([1.5, math.nan, math.inf, -math.inf])
    assert total.total() == 1.5
    assert total.mean(3) == 0.5
    nothing = ExactSum()
    nothing.add([-0.0, -0.0])
    assert math.copysign(1, nothing.total()) == 1
    assert nothing.mean(2) == 0.0
    # a mean rounded once: the rounded sum divided by n would be one ulp off
    values = [1.0, 2.0**-53, 2.0**-53]
    mean = ExactSum()
    mean.add(values)
    assert mean.mean(3) == float(sum(map(Fraction, values)) / 3)


@pytest.mark.parametrize("seed", range(3))
def test_groups_are_sorted_without_nan_and_minus_zero(seed):
    draw = random.Random(seed)
    sets = {s: _floats(draw, draw.randrange(1, 2_000)) for s in range(5)}
    sets[5] = [3.0] * 200 + [2.0]  # ties
    sets[6] = [math.nan, 1.0]  # NaN left out
    sets[7] = [math.nan]  # no value: no group
    rows = [(s, v) for s, vs in sets.items() for v in vs]
    draw.shuffle(rows)
    groups = np.array([s for s, _ in rows])
    values = np.array([v for _, v in rows])
    found = dict(_by_group(groups, values))
    assert sorted(found) == [0, 1, 2, 3, 4, 5, 6]
    assert list(_by_group(groups[:0], values[:0])) == []
    for s, got in found.items():
        expected = sorted(v for v in sets[s] if not math.isnan(v))
        assert got.tolist() == expected
        assert not np.signbit(got[got == 0]).any()  # -0.0 read as 0.0
        assert np.array_equal(_sorted(np.array(sets[s])), got)


def test_type_7_quantile_of_sorted_values_is_polars():
    values = [v for v in _floats(random.Random(5), 1_001) if abs(v) < 1e300]
    ordered = _sorted(np.array(values))
    for q in (0.0, 0.5, 0.95, 0.99, 1.0):
        assert _quantile(ordered, q) == pl.Series(values).quantile(q, interpolation="linear")
    assert _quantile(ordered[:0], 0.5) is None
