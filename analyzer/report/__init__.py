"""Renderers of an analysis: summary.json, Parquet tables, the terminal summary."""

from analyzer.report.outputs import write_outputs
from analyzer.report.summary import build_summary
from analyzer.report.terminal import terminal_summary

__all__ = ["build_summary", "terminal_summary", "write_outputs"]
