"""output_pattern: the answer, or one JSON field of it, matches a regular expression."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import orjson
import polars as pl

from analyzer.checks.base import (
    Check,
    CheckContext,
    LoadEnv,
    RunFinding,
    findings,
    quote,
    quote_expr,
    rust_regex_error,
    with_decoded_answers,
)
from analyzer.exactjson import loads_exact

__all__ = ["OutputPattern", "answer_field"]

_MISSING = object()


@dataclass(frozen=True, kw_only=True)
class OutputPattern(Check):
    """The answer, or a field of the JSON answer, has the expected format.

    Flags
    -----
    ``output_pattern``: the answer does not match ``pattern``; with ``field``, the answer must
    be a JSON object and that field's value must match (a number or boolean is matched as its
    JSON text). The whole value must match: ``CMD-[0-9]{6}`` refuses ``CMD-1234567``; write
    ``.*CMD-[0-9]{6}.*`` to search inside a text. A null or absent field passes only with
    ``allow_null``. An answer that is one JSON-encoded text (``"CMD-127745"`` in quotes, as
    some frameworks record it) is matched decoded as well. ``field`` may be a dotted path
    (``verdict.order``) when no key has that exact name.

    Patterns use the Rust regex syntax (as ripgrep; no look-around or back-references), which
    runs in linear time whatever the answer holds; ``(?i)`` makes a pattern case-insensitive,
    ``(?s)`` lets ``.`` match newlines. Runs with no answer are not judged (required_tools
    reports them); a run whose answer content was not recorded is counted as unverifiable.

    Why it matters
    --------------
    When another system consumes the answer (an order number, a decision code), a value in the
    wrong format breaks it downstream; a regex is the cheapest contract to enforce.

    Options
    -------
    pattern : text, required
        The regular expression the value must match in full.
    field : text
        Name (or dotted path) of the JSON field to check instead of the whole answer.
    allow_null : boolean
        Whether a null or absent field passes (default false).

    Example
    -------
    - id: order-format
      type: output_pattern
      field: numero_commande
      pattern: "CMD-[0-9]{6}"
      allow_null: true
    """

    type = "output_pattern"
    kinds = ("output_pattern",)

    pattern: str
    field: str | None = None
    allow_null: bool = False

    @classmethod
    def from_options(cls, options: dict[str, Any], env: LoadEnv) -> Check | None:
        problem = rust_regex_error(options["pattern"])
        if problem:
            env.report(("pattern",), f"invalid regular expression: {problem}")
            return None
        return super().from_options(options, env)

    def check(self, ctx: CheckContext) -> list[pl.DataFrame]:
        answers = ctx.mark_answers()
        if self.field is None:
            # an answer written as one JSON-encoded text is matched decoded too
            answers = with_decoded_answers(answers)
            values = answers.select(
                "run_id",
                "answer_span_id",
                pl.col("text").alias("_value"),
                pl.when(pl.col("text").str.contains(r'^\s*"')).then("decoded").alias("_decoded"),
            )
            problems: list[pl.DataFrame] = []
            what = "answer"
        else:
            field = self.field
            # Each distinct answer is read once.
            extracted: list[tuple[str, str | None, str]] = []
            seen: dict[str, Any] = {}

            def read(row: dict[str, Any]) -> list[RunFinding]:
                spans = [row["answer_span_id"]] if row["answer_span_id"] else []
                if row["text"] not in seen:
                    seen[row["text"]] = answer_field(row["text"], field)
                value = seen[row["text"]]
                if isinstance(value, str):
                    extracted.append((row["run_id"], row["answer_span_id"], value))
                    return []
                if value is None and self.allow_null:
                    return []
                reason = {
                    None: f"{field} is null or absent (allow_null is false)",
                    "not_json": f"answer is not a JSON object, so {field} cannot be read",
                    "not_scalar": f"{field} is an object or a list, not a value",
                }[value if value is None else value.reason]
                return [RunFinding("output_pattern", reason, argument=field, span_ids=spans)]

            problems = [ctx.each(answers.select("run_id", "answer_span_id", "text"), read)]
            values = pl.DataFrame(
                extracted,
                schema={"run_id": pl.String, "answer_span_id": pl.String, "_value": pl.String},
                orient="row",
            ).with_columns(_decoded=pl.lit(None, pl.String))
            what = field
        whole = f"^(?:{self.pattern})$"
        bad = values.filter(
            ~pl.col("_value").str.contains(whole)
            & ~pl.col("_decoded").str.contains(whole).fill_null(False)
        )
        mismatches = findings(
            bad,
            "output_pattern",
            pl.format(
                "{} {} does not match {}",
                pl.lit(what),
                quote_expr(pl.col("_value")),
                pl.lit(quote(self.pattern)),
            ),
            argument=pl.lit(self.field, pl.String),
            spans="answer_span_id",
        )
        return [*problems, mismatches]


class _Problem:
    def __init__(self, reason: str):
        self.reason = reason


def answer_field(text: str, field: str) -> str | _Problem | None:
    """The text of ``field`` in a JSON answer: a str, None (null or absent), or a problem."""
    value = _field(text, field, orjson.loads)
    if isinstance(value, float):  # matched as written ("249.50", not 249.5)
        value = _field(text, field, loads_exact)
    if isinstance(value, _Problem) or value is None:
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | Decimal):
        return str(value)
    return _Problem("not_scalar")


def _field(text: str, field: str, loads) -> Any:
    try:
        doc = loads(text)
    except ValueError:  # orjson.JSONDecodeError is a ValueError too
        if loads is orjson.loads:  # NaN, huge integers: the standard library is laxer
            return _field(text, field, loads_exact)
        return _Problem("not_json")
    if not isinstance(doc, dict):
        return _Problem("not_json")
    value: Any = doc.get(field, _MISSING)
    if value is _MISSING and "." in field:
        value = doc
        for part in field.split("."):
            value = value.get(part, _MISSING) if isinstance(value, dict) else _MISSING
    if value is _MISSING or value is None:
        return None
    return value
