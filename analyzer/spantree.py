"""The span tree as row indices: each span's parent row and marked ancestors, column-wise.

Rows are those of a normalized frame (a ``_i`` row index column); a parent index is null for a
root or an orphan (a parent that was never exported).
"""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["nearest_marked_ancestor", "parent_index", "roots", "topmost"]

#: Pointer doubling stops after 2**40 levels: only a parent-id cycle gets that far.
MAX_DEPTH_DOUBLINGS = 40


def parent_index(frame: pl.DataFrame) -> pa.Array:
    """Row index of each span's parent within the frame (null for roots and orphans)."""
    ids = frame.select(
        "trace_id", pl.col("span_id").alias("parent_span_id"), pl.col("_i").alias("_p")
    )
    ids = ids.unique(subset=["trace_id", "parent_span_id"], keep="first")
    joined = frame.select("_i", "trace_id", "parent_span_id").join(
        ids, on=["trace_id", "parent_span_id"], how="left", maintain_order="left"
    )
    return joined.get_column("_p").cast(pl.Int64).to_arrow()


def nearest_marked_ancestor(parent: pa.Array, marked: pa.Array) -> pa.Array:
    """For each row, the nearest strict ancestor whose `marked` is true (pointer doubling)."""
    found = pc.if_else(
        pc.fill_null(pc.take(marked, parent), False), parent, pa.nulls(len(parent), pa.int64())
    )
    jump = parent
    for _ in range(MAX_DEPTH_DOUBLINGS):
        need = pc.and_(pc.is_null(found), pc.is_valid(jump))
        if not pc.any(need).as_py():
            break
        found, jump = (
            pc.if_else(need, pc.take(found, jump), found),
            pc.if_else(need, pc.take(jump, jump), pa.nulls(len(jump), pa.int64())),
        )
    return found


def topmost(nearest: pa.Array, marked: pa.Array) -> pa.Array:
    """For each row, its topmost marked ancestor-or-self (null when none)."""
    top = pc.if_else(
        pc.and_(marked, pc.is_null(nearest)), pa.array(range(len(marked)), pa.int64()), nearest
    )
    for _ in range(MAX_DEPTH_DOUBLINGS):
        up = pc.take(nearest, pc.fill_null(top, 0))
        move = pc.and_(pc.is_valid(top), pc.is_valid(up))
        if not pc.any(move).as_py():
            break
        top = pc.if_else(move, up, top)
    return top


def roots(parent: pa.Array) -> pa.Array:
    """For each row, the root its chain of parents reaches (itself for a root or an orphan;
    pointer doubling; in a cycle of parent ids, some span of the cycle)."""
    n = len(parent)
    own = pa.array(range(n), pa.int64())
    up = pc.fill_null(pc.cast(parent, pa.int64()), own)
    for _ in range(MAX_DEPTH_DOUBLINGS):
        further = pc.take(up, up)
        if pc.all(pc.equal(further, up)).as_py():
            break
        up = further
    return up
