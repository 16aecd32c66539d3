"""forbidden_text: no forbidden pattern appears in the answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from analyzer.checks.base import (
    Check,
    CheckContext,
    LoadEnv,
    findings,
    patterns_ok,
    quote,
    quote_expr,
    with_decoded_answers,
)

__all__ = ["ForbiddenText"]


@dataclass(frozen=True, kw_only=True)
class ForbiddenText(Check):
    r"""The answer contains none of the forbidden patterns.

    Flags
    -----
    ``forbidden_text``: one finding per pattern found anywhere in the answer, with the number
    of occurrences and the first one; ``argument`` is the pattern. Patterns use the Rust regex
    syntax (no look-around or back-references; ``(?i)`` for case-insensitive, ``\b`` for a
    word boundary) and a plain text is a pattern that matches itself (escape ``. * + ? ( ) [ ]
    { } | ^ $ \``). A JSON answer that writes escapes is also read decoded: a pattern absent
    from its text is looked for in its string values (``"\u2014"`` is an em dash). Runs with
    no answer are not judged; a run whose answer content was not recorded is counted as
    unverifiable.

    Why it matters
    --------------
    Some markers must never reach a customer: leftover reasoning, internal codes, phrases
    that betray generated text, an em dash a style guide forbids. A grep is an automatic
    criterion that never drifts.

    Options
    -------
    patterns : list of regular expressions, required
        Texts that must not appear in the answer.

    Example
    -------
    - id: no-ai-markers
      type: forbidden_text
      patterns: ["—", "(?i)\\bconcrètement\\b", "(?i)as an ai"]
      severity: low
    """

    type = "forbidden_text"
    kinds = ("forbidden_text",)

    patterns: tuple[str, ...]

    @classmethod
    def from_options(cls, options: dict[str, Any], env: LoadEnv) -> Check | None:
        consequence = "every answer would be flagged"
        ok = patterns_ok(env, "patterns", options["patterns"], consequence)
        return super().from_options(options, env) if ok else None

    def check(self, ctx: CheckContext) -> list[pl.DataFrame]:
        answers = with_decoded_answers(ctx.mark_answers())
        parts = []
        for pos, pattern in enumerate(self.patterns):
            # an escape hides the text from the raw answer: its decoded values are read then
            in_raw = pl.col("text").str.count_matches(pattern) > 0
            read = pl.when(in_raw).then(pl.col("text")).otherwise(pl.col("decoded"))
            found = answers.select(
                "run_id",
                "answer_span_id",
                read.str.count_matches(pattern).fill_null(0).alias("_n"),
                read.str.extract(pattern, 0).alias("_first"),
            ).filter(pl.col("_n") > 0)
            times = pl.format(
                "{} {}",
                "_n",
                pl.when(pl.col("_n") == 1).then(pl.lit("time")).otherwise(pl.lit("times")),
            )
            first = (
                pl.when(pl.col("_first") == pattern)
                .then(pl.lit(""))
                .otherwise(pl.format(", first {}", quote_expr(pl.col("_first"))))
            )
            detail = pl.format("{} found {} in the answer{}", pl.lit(quote(pattern)), times, first)
            parts.append(
                findings(
                    found,
                    "forbidden_text",
                    detail,
                    argument=pl.lit(pattern),
                    spans="answer_span_id",
                    pos=pos,
                )
            )
        return parts
