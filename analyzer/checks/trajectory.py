"""trajectory: ordered steps, forbidden tools, a step ceiling and first-call arguments."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar

import polars as pl

from analyzer.checks.base import (
    Check,
    CheckContext,
    LoadEnv,
    RunFinding,
    calls_over,
    did_you_mean,
    empty_findings,
    findings,
    quote,
    quote_expr,
)
from analyzer.exactjson import loads_exact
from analyzer.jsonpath import key_path

__all__ = ["Trajectory", "same_value"]

# Offsets of _pos so that a run's findings read in order: sequence, forbidden calls, ceiling,
# arguments.
_FORBIDDEN_POS = 1_000
_MAX_STEPS_POS = 1_000_000
_ARGS_POS = 2_000_000


@dataclass(frozen=True, kw_only=True)
class Trajectory(Check):
    """The run's tool calls follow the expected trajectory.

    Flags
    -----
    ``missing_step``: ``sequence`` must appear, in order, within the run's tool-call names;
    other calls in between are allowed. Names are matched greedily, earliest call first; a name
    with no call after the previous matched one is a missing step (the detail says "never
    called", or "not called after X" when it was called only out of order) and matching goes on
    with the next name. ``forbidden_tool``: each call of a ``forbidden`` tool.
    ``max_steps``: more tool calls in the run than ``max_steps`` (evidence: the calls beyond
    it). ``argument_mismatch``: for each tool in ``args``, its FIRST call in the run must carry
    each expected argument; a later call that gets it right does not repair the first.

    Tool calls are all the calls the model made, including those requested that no tool span
    recorded ("requested, no tool span"): the trajectory judges the agent's decisions.

    Arguments compare after case and whitespace folding ("CMD-127745" equals " cmd-127745");
    numbers compare as numbers (1 equals 1.0, and "249" in the call equals 249 expected); a
    nested object only needs the keys it lists. A first call whose arguments were not
    recorded is counted as unverifiable, not as passing; a tool of ``args`` that the run never
    called gives no mismatch (put it in ``sequence`` to require it).

    Why it matters
    --------------
    An exact expected trajectory breaks at every model change (re-reading an order before
    refunding is fine); a subsequence, forbidden tools and a ceiling catch what costs: a refund
    without validation, a loop, a lookup of the wrong order number.

    Options
    -------
    sequence : list of tool names
        Tools that must be called in this order (other calls may come in between).
    forbidden : list of tool names
        Tools that must never be called.
    max_steps : integer
        Most tool calls allowed in a run.
    args : mapping tool -> {argument: expected value}
        Expected arguments of the first call of each tool; each tool must be in ``sequence``
        or among the pack's ``tools``.

    At least one option is required.

    Example
    -------
    - id: refund-trajectory
      type: trajectory
      sequence: [chercher_commande, escalader_humain]
      forbidden: [creer_remboursement]
      max_steps: 3
      args: {chercher_commande: {numero: CMD-127745}}
    """

    type = "trajectory"
    kinds = ("missing_step", "forbidden_tool", "max_steps", "argument_mismatch")
    tool_fields = ("sequence", "args")

    #: Settle text arguments column-wise before the per-call comparison (tests turn it off to
    #: check both ways agree).
    columnwise: ClassVar[bool] = True

    sequence: tuple[str, ...] = field(default=(), metadata={"schema": {"uniqueItems": False}})
    forbidden: tuple[str, ...] = ()
    max_steps: int | None = None
    args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: dict[str, Any], env: LoadEnv) -> Check | None:
        rule = super().from_options(options, env)
        assert isinstance(rule, Trajectory)
        ok = True
        for tool in sorted(set(rule.sequence) & set(rule.forbidden)):
            env.report(("forbidden",), f"{tool} is both in sequence and forbidden")
            ok = False
        if rule.max_steps is not None and rule.max_steps < len(rule.sequence):
            env.report(
                ("max_steps",),
                f"max_steps {rule.max_steps} < {len(rule.sequence)} tools in sequence: "
                "no run can pass",
            )
            ok = False
        known = set(rule.sequence) | set(env.tools)
        for tool, expected in rule.args.items():
            if tool not in known:
                where = "sequence or the pack's tools" if env.tools else "sequence"
                env.report(
                    ("args", tool),
                    f"unknown tool {tool!r} in args: not in {where}{did_you_mean(tool, known)}",
                )
                ok = False
                continue
            props = (env.tools.get(tool) or {}).get("properties")
            if isinstance(props, Mapping):
                for name in expected:
                    if name not in props:
                        env.report(
                            ("args", tool, name),
                            f"{tool} has no argument {name!r} in its schema"
                            f"{did_you_mean(name, props)} (arguments: {', '.join(sorted(props))})",
                        )
                        ok = False
        return rule if ok else None

    def check(self, ctx: CheckContext) -> list[pl.DataFrame]:
        calls = ctx.tool_calls
        parts = []
        if self.sequence:
            parts.append(self._sequence(ctx, calls))
        if self.forbidden:
            parts.append(self._forbidden(calls))
        if self.max_steps is not None:
            parts.append(self._max_steps(calls))
        if self.args:
            parts.append(self._args(ctx, calls))
        return parts

    def _sequence(self, ctx: CheckContext, calls: pl.DataFrame) -> pl.DataFrame:
        names = list(self.sequence)
        relevant = calls.filter(pl.col("tool").is_in(names)).select(
            "run_id", "call_no", "tool", "span"
        )
        spans = (
            relevant.sort("run_id", "call_no")
            .group_by("run_id", "tool", maintain_order=True)
            .agg(pl.col("span").alias("_spans"))
        )
        # One pass per sequence name (sequences are short): the earliest call of that name
        # after the last matched call; a name not found leaves the position where it was.
        state = ctx.runs.select(
            "run_id",
            pl.lit(-1, pl.Int64).alias("_last"),
            pl.lit(None, pl.String).alias("_prev"),
            pl.lit(None, pl.String).alias("_prev_span"),
        )
        missing = []
        for k, name in enumerate(names):
            hit = (
                relevant.filter(pl.col("tool") == name)
                .join(state.select("run_id", "_last"), on="run_id")
                .filter(pl.col("call_no") > pl.col("_last"))
                .sort("run_id", "call_no")
                .group_by("run_id", maintain_order=True)
                .first()
                .select("run_id", pl.col("call_no").alias("_hit"), pl.col("span").alias("_hs"))
            )
            step = state.join(hit, on="run_id", how="left")
            missing.append(
                step.filter(pl.col("_hit").is_null()).select(
                    "run_id",
                    "_prev",
                    "_prev_span",
                    pl.lit(name).alias("tool"),
                    pl.lit(k, pl.Int64).alias("_pos"),
                )
            )
            found = pl.col("_hit").is_not_null()
            state = step.select(
                "run_id",
                pl.coalesce("_hit", "_last").cast(pl.Int64).alias("_last"),
                pl.when(found).then(pl.lit(name)).otherwise("_prev").alias("_prev"),
                pl.when(found).then("_hs").otherwise("_prev_span").alias("_prev_span"),
            )
        out = pl.concat(missing).join(spans, on=["run_id", "tool"], how="left")
        where = pl.format("(sequence step {} of {})", pl.col("_pos") + 1, pl.lit(len(names)))
        return findings(
            out,
            "missing_step",
            pl.when(pl.col("_spans").is_null())
            .then(pl.format("{} never called {}", "tool", where))
            .otherwise(pl.format("{} not called after {} {}", "tool", "_prev", where)),
            tool="tool",
            spans=[pl.col("_spans").fill_null([]), pl.col("_prev_span")],
            pos="_pos",
        )

    def _forbidden(self, calls: pl.DataFrame) -> pl.DataFrame:
        return findings(
            calls.filter(pl.col("tool").is_in(list(self.forbidden))),
            "forbidden_tool",
            pl.format(
                "forbidden tool {} {} (tool call {})",
                "tool",
                pl.when(pl.col("executed").fill_null(True))
                .then(pl.lit("called"))
                .otherwise(pl.lit("requested, no tool span")),
                pl.col("call_no") + 1,
            ),
            tool="tool",
            spans="span",
            pos=pl.col("call_no") + _FORBIDDEN_POS,
        )

    def _max_steps(self, calls: pl.DataFrame) -> pl.DataFrame:
        limit = self.max_steps
        assert limit is not None
        return findings(
            calls_over(calls, limit, "span"),
            "max_steps",
            pl.format("{} tool calls > max_steps {}", "_n", pl.lit(limit)),
            spans="_over",
            pos=_MAX_STEPS_POS,
        )

    def _args(self, ctx: CheckContext, calls: pl.DataFrame) -> pl.DataFrame:
        # tool_calls are in run order, so the first row of each (run, tool) is its first call.
        first = (
            calls.filter(pl.col("tool").is_in(list(self.args)))
            .select("run_id", "tool", "call_no", "span", "arguments")
            .unique(["run_id", "tool"], keep="first", maintain_order=True)
        )
        unrecorded = first.filter(pl.col("arguments").is_null())
        ctx.mark(
            unrecorded.get_column("run_id").unique(),
            "unverifiable",
            "arguments of a first call not recorded",
        )
        order = {tool: i for i, tool in enumerate(self.args)}

        def compare(row: dict[str, Any]) -> list[RunFinding]:
            tool = row["tool"]
            pos = _ARGS_POS + 1000 * order[tool]
            spans = [row["span"]] if row["span"] else []
            try:
                actual = loads_exact(row["arguments"])
            except ValueError:
                actual = None
            if not isinstance(actual, dict):
                return [
                    RunFinding(
                        "argument_mismatch",
                        f"{tool}'s first call has arguments that are not a JSON object: "
                        f"{quote(row['arguments'])}",
                        tool=tool,
                        span_ids=spans,
                        pos=pos,
                    )
                ]
            out = []
            for i, (name, want) in enumerate(self.args[tool].items()):
                if name not in actual:
                    detail = f"{tool} {name} missing from its first call (expected {_show(want)})"
                elif not same_value(want, actual[name]):
                    detail = (
                        f"{tool} {name} {_show(actual[name])} in its first call, "
                        f"expected {_show(want)}"
                    )
                else:
                    continue
                out.append(
                    RunFinding(
                        "argument_mismatch",
                        detail,
                        tool=tool,
                        argument=name,
                        span_ids=spans,
                        pos=pos + i,
                    )
                )
            return out

        recorded = first.filter(pl.col("arguments").is_not_null())
        if self.columnwise:
            undecided, vectorized = self._text_arguments(recorded, order)
        else:
            undecided, vectorized = recorded, empty_findings()
        todo = undecided.select("run_id", "tool", "span", "arguments")
        return pl.concat([vectorized, ctx.each(todo, compare)])

    def _text_arguments(
        self, first: pl.DataFrame, order: dict[str, int]
    ) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Judge column-wise the first calls whose expected arguments are all texts.

        Per expected argument, the call's value (a JSON path match) is either equal after
        folding (lower-casing equality implies casefold equality, so `same_value` agrees), or
        plainly a different ASCII text: not an object, list, boolean or anything a number could
        be written as. A call decided that way for every argument needs no Python; the others
        (numbers, missing keys, unparsable arguments) are left to `same_value`. Returns the
        calls left undecided and the mismatches found.
        """
        undecided = []
        found = []
        for tool, expected in self.args.items():
            rows = first.filter(pl.col("tool") == tool)
            textual = all(isinstance(v, str) for v in expected.values())
            if not textual or any("'" in k or "\\" in k for k in expected):
                undecided.append(rows)  # not expressible column-wise: left to Python
                continue
            # Each value is extracted once (a JSON parse per call), then compared.
            rows = rows.with_columns(
                pl.col("arguments").str.json_path_match(key_path(key)).alias(f"_v{i}")
                for i, key in enumerate(expected)
            )
            settled = pl.lit(True)
            for i, value in enumerate(expected.values()):
                got = pl.col(f"_v{i}")
                folded = got.str.replace_all(r"\s+", " ").str.strip_chars().str.to_lowercase()
                equal = (folded == _fold(value).lower()).fill_null(False)
                # A different ASCII text is a mismatch for sure: on ASCII, lower-casing is
                # case folding and both engines agree on whitespace. Other texts ("Straße"
                # casefolds to "strasse") are left to Python.
                plain = (
                    got.is_not_null()
                    & got.str.contains(r"^[\t\n\x0b\x0c\r\x20-\x7e]*$")
                    & ~got.str.contains(r"^\s*[-+.0-9\[{]")
                    & ~got.is_in(["true", "false"])
                ).fill_null(False)
                rows = rows.with_columns(equal.alias(f"_eq{i}"))
                settled = settled & (pl.col(f"_eq{i}") | plain)
            rows = rows.with_columns(_settled=settled)
            undecided.append(rows.filter(~pl.col("_settled")).select(first.columns))
            done = rows.filter("_settled")
            for i, (key, value) in enumerate(expected.items()):
                found.append(
                    findings(
                        done.filter(~pl.col(f"_eq{i}")),
                        "argument_mismatch",
                        pl.format(
                            f"{tool} {key} {{}} in its first call, expected {_show(value)}",
                            quote_expr(pl.col(f"_v{i}")),
                        ),
                        tool="tool",
                        argument=pl.lit(key),
                        spans="span",
                        pos=_ARGS_POS + 1000 * order[tool] + i,
                    )
                )
        mismatches = pl.concat(found) if found else empty_findings()
        left = pl.concat(undecided) if undecided else first.clear()
        return left, mismatches


# --- argument comparison ----------------------------------------------------------------------

_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def _as_number(value: Any) -> Decimal | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | Decimal):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, str) and _NUMBER.match(value.strip()):
        try:
            return Decimal(value.strip())
        except InvalidOperation:  # an exponent beyond what Decimal reads
            return None
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def same_value(expected: Any, actual: Any) -> bool:
    """Whether an argument value matches the expected one (see Trajectory's docstring).

    Numbers compare as numbers when either side is a number (``"249"`` matches ``249``, but two
    strings ``"007"`` and ``"7"`` differ); strings after case and whitespace folding; objects on
    the expected keys only; lists item by item.
    """
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(
            k in actual and same_value(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(expected)
            and all(same_value(e, a) for e, a in zip(expected, actual, strict=True))
        )
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, bool) or isinstance(actual, bool):
        return _fold(_text(expected)) == _fold(_text(actual))
    if _is_number(expected) or _is_number(actual):
        a, b = _as_number(expected), _as_number(actual)
        if a is not None and b is not None:
            return a == b
    if isinstance(actual, Mapping | list):
        return False
    return _fold(_text(expected)) == _fold(_text(actual))


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, Decimal | int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _show(value: Any) -> str:
    return quote(_text(value)) if isinstance(value, str) else _text(value)
