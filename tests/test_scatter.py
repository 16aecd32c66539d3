"""Values put into a column at given rows (`analyzer.scatter`): the last value at a row named
twice, and texts that group as the equal texts they are."""

from __future__ import annotations

import json
import random
from pathlib import Path

import polars as pl
import pytest

from analyzer.engine import analyze_paths
from analyzer.scatter import scatter

LONG = "gpt-5-mini-2025-08-07"  # longer than the 12 bytes a string view holds inline
VALUES = ["a", "y" * 13, LONG, "gpt-5-mini", None]


@pytest.mark.parametrize("seed", range(3))
def test_the_last_value_at_a_row_wins_and_equal_texts_group_as_one(seed):
    draw = random.Random(seed)
    for _ in range(500):
        n = draw.randrange(1, 10)
        column = pl.Series("c", [draw.choice(VALUES) for _ in range(n)], dtype=pl.String)
        before = column.to_list()
        rows = [draw.randrange(n) for _ in range(draw.randrange(n + 1))]
        values = [draw.choice(VALUES) for _ in rows]
        out = scatter(column, pl.Series(rows, dtype=pl.UInt32), values)
        expected = column.to_list()
        for row, value in zip(rows, values, strict=True):
            expected[row] = value
        assert out.to_list() == expected and out.name == "c"
        assert column.to_list() == before  # a copy
        groups = pl.DataFrame({"k": [0] * n, "v": out}).group_by("k")
        assert groups.agg(pl.col("v").n_unique()).item(0, "v") == len(set(expected))
        assert sorted(groups.agg(pl.col("v").unique()).item(0, "v"), key=str) == sorted(
            set(expected), key=str
        )


def test_numbers_too_and_no_row():
    assert scatter(pl.Series([1.0, None, 3.0]), [1, 1], [None, 2.5]).to_list() == [1.0, 2.5, 3.0]
    assert scatter(pl.Series([1, 2]), [], []).to_list() == [1, 2]


def test_a_model_named_by_langfuse_alone_is_listed_once(tmp_path: Path):
    """A Langfuse API export records the model in each generation's ``model`` field only: two
    calls of one model are one model of the run (they were listed twice, which changed the
    run's configuration hash)."""

    def observation(id_, kind, second, model=None, parent=None):
        return {
            "id": id_,
            "traceId": "t-1",
            "type": kind,
            "name": id_,
            "startTime": f"2025-06-01T10:00:0{second}.000Z",
            "endTime": f"2025-06-01T10:00:0{second}.500Z",
            "parentObservationId": parent,
            **({"model": model} if model else {}),
        }

    observations = [
        observation("root", "AGENT", 0),
        observation("g1", "GENERATION", 1, LONG, "root"),
        observation("g2", "GENERATION", 2, LONG, "root"),
    ]
    path = tmp_path / "langfuse.json"
    path.write_text(json.dumps({"data": observations}))
    (run,) = analyze_paths([path]).runs.runs.select("models", "model_calls").to_dicts()
    assert run == {"models": [LONG], "model_calls": 2}
