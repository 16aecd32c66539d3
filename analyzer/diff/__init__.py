"""Before and after: compare two trace sets (or report folders) and gate a change."""

from analyzer.diff.compare import Diff, MetricDelta, Side, compare
from analyzer.diff.gate import Gate, GateCheck, judge, load_gate
from analyzer.diff.load import load_side
from analyzer.diff.render import render_html, render_json, render_markdown, render_table

__all__ = [
    "Diff",
    "Gate",
    "GateCheck",
    "MetricDelta",
    "Side",
    "compare",
    "judge",
    "load_gate",
    "load_side",
    "render_html",
    "render_json",
    "render_markdown",
    "render_table",
]
