"""The column-wise fast paths give exactly the findings of the per-row Python comparison."""

from __future__ import annotations

import json

from factories import tables

from analyzer.checks import evaluate
from analyzer.checks.trajectory import Trajectory
from analyzer.pack import pack_from_mapping
from analyzer.runs import build_runs

MISSING = object()

# Values close to the expected ones (case, spacing, numbers written several ways) and far
# from them (objects, lists, booleans, nulls, other scripts).
TEXTS = [
    "CMD-127745",
    " cmd-127745 ",
    "CMD -127745",
    "CMD-127746",
    "Straße",
    "STRASSE",
    "strasse",
    "İstanbul",
    "i̇stanbul",
    "12345",
    "012345",
    "12345.0",
    "true",
    "True",
    "",
    "  ",
    "a\nb",
    "x" * 80,
    '{"a": 1}',
    "[1]",
    "-1",
    ".5",
]
EXPECTED = ["CMD-127745", "strasse", "12345", "true", "İstanbul", "-1", ""]


def _run_rows(i: int, arguments: str | None, answer: str) -> list[dict]:
    trace = f"{i + 1:032x}"
    agent = f"{i + 1:08x}{0:08x}"
    return [
        dict(trace_id=trace, span_id=agent, role="agent", start_ns=0, end_ns=100),
        dict(
            trace_id=trace,
            span_id=f"{i + 1:08x}{1:08x}",
            parent_span_id=agent,
            role="tool_call",
            tool_name="t",
            start_ns=1,
            end_ns=2,
            arguments=arguments,
        ),
        dict(
            trace_id=trace,
            span_id=f"{i + 1:08x}{2:08x}",
            parent_span_id=agent,
            role="model_call",
            start_ns=3,
            end_ns=4,
            output_text=answer,
            finish_reasons=["stop"],
        ),
    ]


def _both_ways(monkeypatch, cls, pack, rs):
    fast = evaluate([pack], rs)
    monkeypatch.setattr(cls, "columnwise", False)
    slow = evaluate([pack], rs)
    monkeypatch.setattr(cls, "columnwise", True)
    return fast, slow


ALL_VALUES = [
    *TEXTS,
    12345,
    12345.0,
    1,
    1.0,
    0.5,
    -1,
    True,
    False,
    None,
    {"v": "CMD-127745"},
    ["CMD-127745"],
    MISSING,
]


def test_trajectory_text_arguments_agree_on_every_value(monkeypatch):
    # One run per (value of a, value of b); one rule per expected value of a, b fixed.
    rows = []
    i = 0
    for va in ALL_VALUES:
        for vb in ("CMD-127745", "cmd-127746", 7, MISSING):
            doc = {k: v for k, v in (("a", va), ("b", vb)) if v is not MISSING}
            rows += _run_rows(i, json.dumps(doc, ensure_ascii=False), "ok")
            i += 1
    rows += _run_rows(i, "{not json", "ok")
    rs = build_runs(*tables(rows))
    rules = [
        {"id": f"r{n}", "type": "trajectory", "args": {"t": {"a": want, "b": "CMD-127745"}}}
        for n, want in enumerate(EXPECTED)
    ]
    pack = pack_from_mapping({"pack": "p", "tools": {"t": {"type": "object"}}, "rules": rules})
    fast, slow = _both_ways(monkeypatch, Trajectory, pack, rs)
    assert fast.findings.height > 500  # most pairs differ somewhere
    assert fast.findings.equals(slow.findings)
    assert fast.coverage.equals(slow.coverage)


def test_columnwise_is_on_by_default():
    assert Trajectory.columnwise is True
