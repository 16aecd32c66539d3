"""grounded_figures: every figure of the answer appears in what the run had read before it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from analyzer.checks.base import (
    Check,
    CheckContext,
    LoadEnv,
    empty_findings,
    findings,
    patterns_ok,
    quote_expr,
)
from analyzer.checks.figures import extract_figures, source_keys, unescape_json

__all__ = ["DEFAULT_IGNORE", "GroundedFigures"]

#: What `ignore` is when a rule does not set it: bare integers 0 to 9 (list numbering, "2
#: documents", "step 3").
DEFAULT_IGNORE: tuple[int, ...] = tuple(range(10))


@dataclass(frozen=True, kw_only=True)
class GroundedFigures(Check):
    """Every figure in the answer comes from a source the run had read before answering.

    Flags
    -----
    ``ungrounded_figure``: a figure of the answer (amount, number, percentage, date, time,
    identifier mixing letters and digits) that appears in none of the answer's sources: the
    system and user messages, and the tool results, available at the answer time (the end of
    the model call that gave it; CONTRACT section 2). The model's own earlier outputs are not
    sources: a figure it made up does not ground itself. One finding per distinct figure, in
    the order of the answer; the detail gives how the figure was read.

    Figures compare by value, whatever their format: numbers numerically in French and English
    formats (``1 234,56 €`` in the answer is grounded by ``1234.56`` in a tool result;
    ``385 000 €`` with a narrow no-break space by ``385000``; ``€512,000`` by ``512000``; a
    percentage ``3,2 %`` by ``3.2`` or ``0.032``), currency not compared; dates by day
    (``2026-03-04``, ``04/03/2026``, ``4 mars 2026`` and ``March 4, 2026`` are the same day;
    an all-numeric date whose first two parts could each be the month, such as ``03/04/2026``,
    is read both ways, day first and month first, and either reading may ground it; a date
    without year is grounded by a source date with the same day and month); times as hh:mm
    (``14h30`` = ``14:30`` = ``2:30 pm``); identifiers as text, case-folded (``LST-21503`` =
    ``lst-21503``). Derived figures (a sum, a difference, a conversion) are not in any source:
    they are flagged, ``ignore`` them where expected. The reading rules are in
    analyzer/checks/figures.py.

    Runs with no answer are not judged; a run whose answer content was not recorded, or that
    recorded no input message before its answer (message content not captured), is counted as
    unverifiable, never as passing. JSON escapes of common accented letters and spaces
    (``\\u00e9``, ``\\u202f``) are decoded in sources and answer before reading.

    Why it matters
    --------------
    A perfect trajectory does not make a correct answer: a price, a surface, a rate or an
    opening time the agent invented reads as well as a true one. A figure absent from
    everything the agent was given is the deterministic part of a faithfulness review.

    Options
    -------
    ignore : list of integers and regular expressions
        Figures never flagged. An integer ignores a plain number of that value (not an amount,
        percentage, date or time: ``3`` ignores ``3 documents`` and ``3ème``, not ``3 €``); a
        text is a regular expression (Rust syntax) searched in the figure as written in the
        answer (``"^20[0-9]{2}$"`` ignores years written alone, ``"(?i)^v[0-9]"`` versions).
        Default: the integers 0 to 9 (list numbering, small counts). Setting ``ignore``
        replaces the default: ``ignore: []`` checks every figure.

    Example
    -------
    - id: grounded-figures
      type: grounded_figures
      ignore: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, "^20[0-9]{2}$"]
      severity: high
    """

    type = "grounded_figures"
    kinds = ("ungrounded_figure",)

    ignore: tuple[int | str, ...] | None = field(default=None, metadata={"schema": {"minItems": 0}})

    @classmethod
    def from_options(cls, options: dict[str, Any], env: LoadEnv) -> Check | None:
        consequence = "every figure would be ignored"
        ok = patterns_ok(env, "ignore", options.get("ignore") or (), consequence)
        return super().from_options(options, env) if ok else None

    def _ignored(self) -> pl.Expr:
        items = DEFAULT_IGNORE if self.ignore is None else self.ignore
        numbers = [str(i) for i in items if not isinstance(i, str)]
        patterns = [p for p in items if isinstance(p, str)]
        ignored = (pl.col("kind") == "number") & pl.col("is_int") & pl.col("reading").is_in(numbers)
        for pattern in patterns:
            ignored = ignored | pl.col("figure").str.contains(pattern)
        return ignored.fill_null(False)

    def check(self, ctx: CheckContext) -> pl.DataFrame:
        answers = ctx.mark_answers().select(
            "run_id", "answer_ns", "answer_span_id", unescape_json(pl.col("text")).alias("text")
        )
        figures, keys = extract_figures(
            answers, "text", keep=("run_id", "answer_ns", "answer_span_id")
        )
        figures = figures.filter(~self._ignored()).unique(
            ["run_id", "figure"], keep="first", maintain_order=True
        )
        if figures.is_empty():
            return empty_findings()
        runs = figures.select("run_id", "answer_ns").unique()
        sources = (
            ctx.sources.join(runs, on="run_id")
            .filter(pl.col("available_ns") <= pl.col("answer_ns"))
            .select("run_id", "origin", "text")
        )
        with_input = (
            sources.filter(pl.col("origin").str.starts_with("message:")).select("run_id").unique()
        )
        ctx.mark(
            runs.join(with_input, on="run_id", how="anti"),
            "unverifiable",
            "no input message recorded before the answer (message content not captured)",
        )
        figures = figures.join(with_input, on="run_id", how="semi")
        claimed = figures.select("run_id", "figure").join(
            keys.filter(~pl.col("extra")).select("figure", "key"), on="figure"
        )
        known = source_keys(
            sources.join(with_input, on="run_id", how="semi"),
            "text",
            keep=("run_id",),
            wanted=claimed.get_column("key").unique(),
        )
        grounded = claimed.join(known, on=["run_id", "key"], how="semi")
        missing = figures.join(grounded, on=["run_id", "figure"], how="anti")
        shown = pl.col("reading").is_not_null() & (pl.col("reading") != pl.col("figure"))
        return findings(
            missing,
            "ungrounded_figure",
            pl.concat_str(
                "kind",
                pl.lit(" "),
                quote_expr(pl.col("figure")),
                pl.lit(" appears in no prior source"),
                pl.when(shown).then(pl.format(" (read as {})", "reading")).otherwise(pl.lit("")),
            ),
            spans="answer_span_id",
            pos="figure_no",
        )
