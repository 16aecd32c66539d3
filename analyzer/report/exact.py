"""Exact figures over values spread across parts, with one part in memory at a time.

A summary over a dump larger than memory is computed part by part. Counts merge by addition;
two kinds of figure need more to stay exact:

- **Sums of floats.** Adding floats rounds, so a total merged from the totals of parts depends
  on how the runs were split. `exact_sums` keeps each total as an integer number of units of
  2**-1126 (below the smallest double, so that every float is a whole number of them):
  integers add up exactly in any order, and `exact_value` rounds the final total (or mean)
  once, correctly.
- **Order statistics** (quantiles and their intervals). `Selection` finds them in two passes:
  the first counts the values of each set per bucket (the top `BUCKET_BITS` bits of an
  order-preserving key of the float, about 256 buckets per power of two); the buckets that
  hold the wanted ranks follow from the merged counts; the second pass keeps only the values
  in those buckets, as (value, count) pairs. Memory is the counts and the values of a few
  buckets, whatever the number of parts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

import numpy as np

__all__ = ["BUCKET_BITS", "Selection", "exact_sums", "exact_value", "order_keys"]

#: Bits of the order key that make a bucket: sign, 11 of exponent, 8 of mantissa.
BUCKET_BITS = 20
_SHIFT = np.uint64(64 - BUCKET_BITS)
_SIGN = np.uint64(1 << 63)
#: exact_sums counts in units of 2**-1126: a double is a 53-bit integer times 2**(e - 53) with
#: e >= -1073. Mantissas are split in halves of 26 bits: int64 sums of up to 2**37 values.
_UNIT_EXP = 1126
_HALF = 26
#: Bucket counts not yet merged, at most (beyond those merged).
_MERGE_AT = 1 << 18


def order_keys(values: np.ndarray) -> np.ndarray:
    """Unsigned 64-bit keys in the order of the float64 ``values`` (no NaN; -0.0 is read as
    0.0, as a sort would find them equal)."""
    bits = (np.asarray(values, dtype=np.float64) + 0.0).view(np.uint64)
    return np.where(bits & _SIGN, ~bits, bits | _SIGN)


def exact_sums(codes: np.ndarray, values: np.ndarray) -> dict[int, int]:
    """Per code, the exact sum of its finite ``values`` in units of 2**-1126 (codes with no
    finite value are left out)."""
    values = np.asarray(values, dtype=np.float64)
    codes = np.asarray(codes, dtype=np.int64)
    keep = np.isfinite(values)
    values, codes = values[keep], codes[keep]
    if not len(values):
        return {}
    mantissa, exponent = np.frexp(values)  # values = mantissa * 2**exponent, |mantissa| < 1
    whole = np.ldexp(mantissa, 53).astype(np.int64)  # exact: 53 bits
    shift = exponent.astype(np.int64) - 53 + _UNIT_EXP  # >= 0 for every double
    high, low = whole >> _HALF, whole & ((1 << _HALF) - 1)
    order = np.lexsort((shift, codes))
    codes, shift, high, low = codes[order], shift[order], high[order], low[order]
    starts = np.flatnonzero(np.r_[True, (codes[1:] != codes[:-1]) | (shift[1:] != shift[:-1])])
    high_sums = np.add.reduceat(high, starts)
    low_sums = np.add.reduceat(low, starts)
    totals: dict[int, int] = {}
    for code, s, h, lo in zip(
        codes[starts].tolist(),
        shift[starts].tolist(),
        high_sums.tolist(),
        low_sums.tolist(),
        strict=True,
    ):
        totals[code] = totals.get(code, 0) + (((h << _HALF) + lo) << s)
    return totals


def exact_value(total: int, divisor: int = 1) -> float:
    """``total`` (units of 2**-1126, from `exact_sums`) divided by ``divisor``, correctly
    rounded to a float."""
    return float(Fraction(total, divisor << _UNIT_EXP))


def _from_keys(keys: np.ndarray) -> np.ndarray:
    """The floats of `order_keys`."""
    keys = np.asarray(keys, dtype=np.uint64)
    return np.where(keys & _SIGN, keys & ~_SIGN, ~keys).view(np.float64)


def _runs_of(
    *columns: np.ndarray, weights: np.ndarray | None = None
) -> tuple[list[np.ndarray], np.ndarray]:
    """The distinct rows of equal-length integer ``columns`` (sorted), and how many rows each
    stands for (or the sum of their ``weights``)."""
    order = np.lexsort(columns[::-1])
    cols = [c[order] for c in columns]
    change = np.zeros(len(order), dtype=bool)
    if len(order):
        change[0] = True
        for c in cols:
            change[1:] |= c[1:] != c[:-1]
    starts = np.flatnonzero(change)
    if weights is None:
        return [c[starts] for c in cols], np.diff(np.r_[starts, len(order)])
    sums = np.add.reduceat(weights[order], starts) if len(starts) else weights[:0]
    return [c[starts] for c in cols], sums


class Selection:
    """Exact order statistics of many sets of values (each set an integer id, below 2**40),
    fed part by part twice: `count` every part, `plan` the ranks wanted, `keep` every part
    again, then `value` of any planned rank. NaN values are left out."""

    def __init__(self) -> None:
        self._counted: list[tuple[np.ndarray, np.ndarray]] = []  # not merged yet: buckets, counts
        self._pending = 0  # buckets in _counted
        self._buckets = np.zeros(0, dtype=np.int64)  # merged: set << BUCKET_BITS | bucket
        self._counts = np.zeros(0, dtype=np.int64)
        self._sizes: dict[int, int] | None = None
        self._wanted = np.zeros(0, dtype=np.int64)  # planned buckets, sorted
        self._before: dict[int, int] = {}  # planned bucket -> values of its set before it
        self._kept: dict[int, dict[int, int]] = {}  # planned bucket -> order key -> values
        self._sorted: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # `_ordered`, once read

    @staticmethod
    def _keyed(sets: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values = np.asarray(values, dtype=np.float64)
        keep = ~np.isnan(values)
        return np.asarray(sets, dtype=np.int64)[keep], order_keys(values[keep])

    @staticmethod
    def _bucketed(sets: np.ndarray, keys: np.ndarray) -> np.ndarray:
        return (sets << BUCKET_BITS) | (keys >> _SHIFT).astype(np.int64)

    def count(self, sets: np.ndarray, values: np.ndarray) -> None:
        """First pass: count the values of each set per bucket."""
        self.count_keys(*self._keyed(sets, values))

    def count_keys(self, sets: np.ndarray, keys: np.ndarray) -> None:
        """`count` of values given by their `order_keys`."""
        self._counted.append(np.unique(self._bucketed(sets, keys), return_counts=True))
        self._pending += len(self._counted[-1][0])
        self._sizes = None
        if self._pending > len(self._buckets) + _MERGE_AT:  # bounded: merge the counts so far
            self._merge()

    def _merge(self) -> None:
        if self._sizes is not None:
            return
        if self._counted:
            buckets = np.concatenate([self._buckets, *(b for b, _ in self._counted)])
            counts = np.concatenate([self._counts, *(c for _, c in self._counted)])
            (self._buckets,), self._counts = _runs_of(buckets, weights=counts)
            self._counted, self._pending = [], 0
        (sets,), sizes = _runs_of(self._buckets >> BUCKET_BITS, weights=self._counts)
        self._sizes = dict(zip(sets.tolist(), sizes.tolist(), strict=True))

    def size(self, set_id: int) -> int:
        """How many values of the set were counted."""
        self._merge()
        assert self._sizes is not None
        return self._sizes.get(set_id, 0)

    def plan(self, ranks: Mapping[int, Iterable[int]]) -> None:
        """The 1-based ranks to be read of each set (those outside 1..size are ignored)."""
        self._merge()
        pairs = [(s, r) for s, rs in ranks.items() for r in set(rs) if 1 <= r <= self.size(s)]
        if pairs:
            sets, wanted = np.array(pairs, dtype=np.int64).T
            cum = np.cumsum(self._counts)
            first = np.searchsorted(self._buckets, sets << BUCKET_BITS)  # each set's 1st bucket
            offset = np.where(first > 0, cum[first - 1], 0)  # values of the sets before it
            at = np.searchsorted(cum, offset + wanted)  # the bucket holding the rank
            before = cum[at] - self._counts[at] - offset
            self._before = dict(zip(self._buckets[at].tolist(), before.tolist(), strict=True))
        self._wanted = np.array(sorted(self._before), dtype=np.int64)
        self._buckets = self._counts = np.zeros(0, dtype=np.int64)

    def keep(self, sets: np.ndarray, values: np.ndarray) -> None:
        """Second pass: keep the values of the planned buckets."""
        self.keep_keys(*self._keyed(sets, values))

    def keep_keys(self, sets: np.ndarray, keys: np.ndarray) -> None:
        """`keep` of values given by their `order_keys`."""
        buckets = self._bucketed(sets, keys)
        if not len(self._wanted) or not len(buckets):
            return
        at = np.minimum(np.searchsorted(self._wanted, buckets), len(self._wanted) - 1)
        hit = self._wanted[at] == buckets
        if not hit.any():
            return
        (found, found_keys), counts = _runs_of(buckets[hit], keys[hit].view(np.int64))
        for bucket, key, n in zip(
            found.tolist(), found_keys.view(np.uint64).tolist(), counts.tolist(), strict=True
        ):
            kept = self._kept.setdefault(bucket, {})
            kept[key] = kept.get(key, 0) + n

    def value(self, set_id: int, rank: int) -> float:
        """The value of 1-based ``rank`` in the set (a rank given to `plan`)."""
        first = set_id << BUCKET_BITS
        lo, hi = np.searchsorted(self._wanted, [first, first + (1 << BUCKET_BITS)])
        for bucket in self._wanted[lo:hi].tolist():
            before = self._before[bucket]
            if rank <= before:
                break
            keys, upto = self._ordered(bucket)
            at = int(np.searchsorted(upto, rank - before))
            if at < len(keys):
                return float(_from_keys(keys[at : at + 1])[0])
        raise KeyError((set_id, rank))

    def _ordered(self, bucket: int) -> tuple[np.ndarray, np.ndarray]:
        """The kept values of a bucket as sorted order keys, and how many values go up to
        each."""
        if bucket not in self._sorted:
            kept = self._kept.get(bucket, {})
            keys = np.array(sorted(kept), dtype=np.uint64)
            upto = np.cumsum([kept[k] for k in keys.tolist()], dtype=np.int64)
            self._sorted[bucket] = (keys, upto)
        return self._sorted[bucket]
