"""grounded_arguments: tool-call argument values appear in what the run had read before the call."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import polars as pl

from analyzer.checks.base import (
    CHECK_SCHEMA,
    Check,
    CheckContext,
    LoadEnv,
    did_you_mean,
    empty_findings,
    quote_expr,
)
from analyzer.checks.figures import (
    canon_number,
    distinct_texts,
    fold_text,
    read_figures,
    source_keys,
    unescape_json,
)

try:
    from analyzer.checks import _flat_leaves as _native
except ImportError:  # built without a C compiler: Python reads every arguments text
    _native = None

__all__ = ["ID_NAME", "ID_VALUE", "GroundedArguments", "argument_leaves"]

#: Argument names checked by default (the last key of the path, array indexes aside):
#: ``id``, ``*_id``, ``*Id``, ``numero``, ``*_number``, ``orderNumber``, ``ref``, ...
ID_NAME = (
    r"(?i:(?:^|[_\-.])(?:id|ids|uuid|numero|number|ref|reference)$)"
    r"|[a-z0-9](?:Id|ID|Ids|IDs|Uuid|UUID|Number|Numero|Ref|Reference)$"
)
#: String values checked by default whatever their name: one token of letters, digits and
#: ``_ - .`` with at least one digit and three characters (CMD-127745, ACC-55210, 2026-03-04).
ID_VALUE = r"^[A-Za-z0-9][A-Za-z0-9_.\-]+[A-Za-z0-9]$"

# Compared as figures (numbers and dates by value) rather than as text.
_FIGURE_KINDS = ("number", "amount", "percentage", "date", "time")
#: A JSON number whose exponent has four digits or more (``1e999999999``) is compared as
#: written, like a text: no source states such a figure in full, and writing it out could take
#: gigabytes.
_AS_WRITTEN = pl.col("is_number") & pl.col("value").str.contains(r"[eE][+-]?0*[1-9][0-9]{3,}$")
_LEAVES = {
    "_call": pl.UInt32,
    "leaf_no": pl.Int64,
    "path": pl.String,
    "name": pl.String,
    "value": pl.String,
    "is_number": pl.Boolean,
}
_LEAF = ["_call", "leaf_no", "path", "value", "is_number", "run_id", "call_no", "tool", "span"]
_LEAF += ["start_ns"]
_MISSING = [*_LEAF, "_later_ns", "_later_span"]
_SEP = "\x00"  # between folded sources: a value never matches across two of them
#: An argument path: keys joined by ".", array items as [i] or left out.
_PATH_SCHEMA = {
    "title": "argument path",
    "type": "string",
    "minLength": 1,
    "pattern": r"^[^.\[\]]+(\[[0-9]*\])*(\.[^.\[\]]+(\[[0-9]*\])*)*$",
}


@dataclass(frozen=True, kw_only=True)
class GroundedArguments(Check):
    """Argument values of tool calls come from something the run had read before the call.

    Flags
    -----
    ``hallucinated_argument``: a checked argument value of a tool call that appears in none
    of the call's sources: the system and user messages and the tool results available when
    the call started (CONTRACT section 2), e.g. ``account_id 'ACC-778821' appears in no prior
    source``. A value that shows up only in a source read after the call is flagged too (the
    detail says so, and names the call's own result when the value first shows up there,
    only echoed back). The model's own outputs are not sources: an id it made up does not ground
    itself. Calls the model requested that no tool span recorded count.

    Text values are grounded when a source contains them, as recorded or with its JSON
    escapes decoded, after case and whitespace folding (``acc-30418`` is grounded by
    ``ACC-30418``, ``"marc  DUVAL"`` by ``Marc Duval``). JSON numbers compare by value with
    the figures found in the sources, in any common format, as grounded_figures reads them
    (``1234.56`` is grounded by ``1 234,56 €``, ``1,234.56`` or ``1234.560``; ``249`` by
    ``249 €``; not by ``12490``). A text that reads as one whole number, date or time
    (``"1 234,56"``, ``"2026-03-04"``) is grounded either way, by value or as text.
    Booleans and nulls are never checked.

    Nested arguments are checked leaf by leaf; a leaf is named by its path, keys joined with
    ``.`` and array items with ``[i]`` (``client.account_id``, ``lines[1].sku``). A call whose
    arguments were not recorded or are not a JSON object, or that has values to check but no
    input message recorded before it (message content not captured), is counted as
    unverifiable (partial when the run has other calls checked), never as passing.

    Why it matters
    --------------
    A fabricated account number or date passes every schema and the runtime accepts it: the
    call looks right and poisons everything downstream. The value the agent used must come
    from the file it was given or a tool it called.

    Options
    -------
    tools : list of tool names
        Tools whose calls are checked (exact names). Default: every tool.
    arguments : list of argument paths
        Arguments to check, by path (``account_id``, ``client.account_id``; ``lines.sku``
        covers ``lines[0].sku`` and ``lines[1].sku``; ``client`` covers every leaf under it),
        whatever their values. Default: id-like arguments, that is any leaf whose name is
        ``id``, ends in ``_id``, ``Id``, ``_number``, ``Number``, ``numero``, ``_ref`` (and
        similar), and any text value shaped like an identifier: one token of letters, digits,
        ``_``, ``-`` and ``.`` with at least one digit and three characters (``CMD-127745``,
        ``C123456``, ``2026-03-04``; not ``"v2"``, URLs, sentences or plain JSON numbers
        under other names).

    Example
    -------
    - id: grounded-account-ids
      type: grounded_arguments
      tools: [lookup_account]
      arguments: [account_id]
      severity: high
    """

    type = "grounded_arguments"
    kinds = ("hallucinated_argument",)
    tool_fields = ("tools",)

    tools: tuple[str, ...] = ()
    arguments: tuple[str, ...] = field(default=(), metadata={"schema": {"items": _PATH_SCHEMA}})

    @classmethod
    def from_options(cls, options: dict[str, Any], env: LoadEnv) -> Check | None:
        rule = super().from_options(options, env)
        assert isinstance(rule, GroundedArguments)
        ok = True
        specs = {t: (env.tools.get(t) or {}).get("properties") for t in rule.tools}
        if rule.tools and all(isinstance(p, Mapping) for p in specs.values()):
            known = {name for props in specs.values() for name in props}
            for i, path in enumerate(rule.arguments):
                head = _pattern(path).split(".")[0]
                if head not in known:
                    env.report(
                        ("arguments", i),
                        f"no tool of {', '.join(rule.tools)} has an argument {head!r} in its "
                        f"schema{did_you_mean(head, known)}",
                    )
                    ok = False
        return rule if ok else None

    def check(self, ctx: CheckContext) -> pl.DataFrame:
        calls = ctx.tool_calls
        if self.tools:
            calls = calls.filter(pl.col("tool").is_in(list(self.tools)))
        calls = calls.select(
            "run_id", "call_no", "tool", "span", "start_ns", "arguments"
        ).with_row_index("_call")
        leaves, malformed = argument_leaves(calls.filter(pl.col("arguments").is_not_null()))
        leaves = leaves.filter(self._selected()).join(
            calls.select("_call", "run_id", "call_no", "tool", "span", "start_ns"), on="_call"
        )
        # A call with values to check is verifiable only once an input message was recorded.
        first_message = (
            ctx.sources.filter(pl.col("origin").str.starts_with("message:"))
            .group_by("run_id")
            .agg(pl.col("available_ns").min().alias("_first_message"))
        )
        leaves = leaves.join(first_message, on="run_id", how="left").with_columns(
            _verifiable=(pl.col("_first_message") <= pl.col("start_ns")).fill_null(False)
        )
        self._mark(ctx, calls, malformed, leaves)
        leaves = leaves.filter("_verifiable").drop("_first_message", "_verifiable")
        if leaves.is_empty():
            return empty_findings()

        figures, keys = read_figures(
            leaves.with_columns(
                _text=pl.when(pl.col("is_number"))
                .then(pl.lit(None, pl.String))
                .otherwise(pl.col("value").str.strip_chars())
            ),
            "_text",
        )
        as_figure = (pl.col("is_number") & ~_AS_WRITTEN) | pl.col("kind").is_in(
            _FIGURE_KINDS
        ).fill_null(False)
        sources = ctx.sources.select("run_id", "available_ns", "span_id", "text")
        by_value = self._by_value(figures.filter(as_figure), keys, sources).select(_MISSING)
        # A text that reads as a figure may also be grounded as text ("127745" in CMD-127745).
        by_text = (
            pl.concat(
                [
                    figures.filter(~as_figure).select(_LEAF),
                    by_value.filter(~pl.col("is_number")).select(_LEAF),
                ]
            )
            .with_columns(_folded=_fold_value(pl.col("value")))
            .filter(pl.col("_folded") != "")
        )
        missing = pl.concat(
            [
                by_value.filter("is_number"),
                self._by_text(by_text, sources).select(_MISSING),
            ],
            how="vertical_relaxed",
        )
        shown = (
            pl.when(pl.col("is_number"))
            .then(pl.col("value"))
            .otherwise(quote_expr(pl.col("value")))
        )
        # a value first seen in the result of the call that sent it is only echoed back
        echoed = (pl.col("_later_span") == pl.col("span")).fill_null(False)
        return (
            missing.sort("run_id", "call_no", "leaf_no")
            .select(
                "run_id",
                pl.lit("hallucinated_argument").alias("kind"),
                "tool",
                pl.col("path").alias("argument"),
                pl.format(
                    "{} {} appears in no prior source{}",
                    "path",
                    shown,
                    pl.when(echoed)
                    .then(pl.lit(" (first seen in the call's own result)"))
                    .when(pl.col("_later_ns").is_not_null())
                    .then(pl.lit(" (first seen after the call)"))
                    .otherwise(pl.lit("")),
                ).alias("detail"),
                pl.when(echoed)
                .then(pl.concat_list("span"))
                .otherwise(pl.concat_list("span", "_later_span").list.drop_nulls())
                .alias("span_ids"),
                (pl.col("call_no") * 1_000_000 + pl.col("leaf_no")).cast(pl.Int64).alias("_pos"),
            )
            .cast(CHECK_SCHEMA)
        )

    @staticmethod
    def _mark(
        ctx: CheckContext, calls: pl.DataFrame, malformed: pl.DataFrame, leaves: pl.DataFrame
    ) -> None:
        """Coverage: a run whose calls could all not be judged is unverifiable; partial when
        some other call of the run was checked."""
        unverifiable = pl.concat(
            [
                calls.filter(pl.col("arguments").is_null()).select(
                    "run_id", pl.lit("arguments of a call not recorded").alias("reason")
                ),
                malformed.select("run_id", pl.lit("arguments not a JSON object").alias("reason")),
                leaves.filter(~pl.col("_verifiable")).select(
                    "run_id",
                    pl.lit(
                        "no input message recorded before a call (message content not captured)"
                    ).alias("reason"),
                ),
            ]
        ).unique()
        checked = leaves.filter("_verifiable").select("run_id").unique()
        for reason, rows in unverifiable.group_by("reason", maintain_order=True):
            ctx.mark(rows.join(checked, on="run_id", how="anti"), "unverifiable", str(reason[0]))
            ctx.mark(rows.join(checked, on="run_id", how="semi"), "partial", str(reason[0]))

    def _selected(self) -> pl.Expr:
        if self.arguments:
            wanted = sorted({_pattern(a) for a in self.arguments})
            bare = pl.col("path").str.replace_all(r"\[[0-9]+\]", "")
            under = pl.lit(False)
            for name in wanted:
                under = under | bare.str.starts_with(name + ".")
            return bare.is_in(wanted) | under
        id_value = (
            ~pl.col("is_number")
            & pl.col("value").str.contains(ID_VALUE)
            & pl.col("value").str.contains("[0-9]")
        )
        return pl.col("name").str.contains(ID_NAME) | id_value.fill_null(False)

    @staticmethod
    def _by_value(leaves: pl.DataFrame, keys: pl.DataFrame, sources: pl.DataFrame):
        """Leaves compared as figures: grounded when a key of theirs is vouched for by a source
        available at the call's start. Returns the others, with where they first appear."""
        if leaves.is_empty():
            return _ungrounded(leaves, None)
        number_keys = _number_keys(leaves.filter("is_number"))
        text_keys = (
            leaves.filter(~pl.col("is_number"))
            .select("_call", "leaf_no", "_text")
            .join(keys.filter(~pl.col("extra")).select("_text", "key"), on="_text")
            .drop("_text")
        )
        wanted = pl.concat([number_keys, text_keys]).join(
            leaves.select("_call", "leaf_no", "run_id", "start_ns"), on=["_call", "leaf_no"]
        )
        runs = wanted.select("run_id").unique()
        vouched = source_keys(
            sources.join(runs, on="run_id", how="semi"),
            "text",
            keep=("run_id", "available_ns", "span_id"),
            wanted=wanted.get_column("key").unique(),
        )
        first = (
            vouched.join(wanted.select("run_id", "key").unique(), on=["run_id", "key"])
            .sort("run_id", "key", "available_ns", "span_id")
            .group_by("run_id", "key", maintain_order=True)
            .first()
        )
        seen = (
            wanted.join(first, on=["run_id", "key"])
            .sort("_call", "leaf_no", "available_ns")
            .group_by("_call", "leaf_no", maintain_order=True)
            .agg(
                pl.col("available_ns").first().alias("_first_ns"),
                pl.col("span_id").first().alias("_first_span"),
                pl.col("start_ns").first(),
            )
        )
        return _ungrounded(leaves, seen)

    @staticmethod
    def _by_text(leaves: pl.DataFrame, sources: pl.DataFrame) -> pl.DataFrame:
        """Leaves compared as text: grounded when a source available at the call's start
        contains the folded value. Returns the others, with where they first appear.

        First, one Aho-Corasick pass over the distinct source texts finds every value without
        whitespace as written in a source (ASCII case ignored): most ids are settled there.
        The values left are searched in each run's folded sources (escapes decoded, case and
        whitespace folded) joined in time order into one text: the first occurrence falls in
        the earliest source holding the value, so one search per value says whether a source
        before the call holds it.
        """
        if leaves.is_empty():
            return _ungrounded(leaves, None)
        # Sources read after a run's last checked call ground nothing (the slow path below
        # still reads them to say where a value first appears).
        last = leaves.group_by("run_id").agg(pl.col("start_ns").max().alias("_last"))
        runs = sources.join(last, on="run_id")
        runs, texts = distinct_texts(
            runs.filter(pl.col("available_ns") <= pl.col("_last")).drop("_last"), "text"
        )
        plain = ~pl.col("_folded").str.contains(r"\s")
        wanted = leaves.filter(plain).get_column("_folded").unique()
        # (Eager: the streaming engine would rebuild the automaton for every chunk.)
        found = (
            texts.select(
                "_tid",
                pl.col("text")
                .str.extract_many(wanted.implode(), ascii_case_insensitive=True, overlapping=True)
                .alias("_folded"),
            )
            .explode("_folded")
            .drop_nulls("_folded")
            .with_columns(pl.col("_folded").str.to_lowercase())
            .unique()
        )
        # a value is grounded by a whole token only: ACC-550 is not in ACC-5501
        tokens = _token_patterns(found.get_column("_folded"), case_insensitive=True)
        found = (
            found.join(texts, on="_tid")
            .join(tokens, on="_folded")
            .filter(pl.col("text").str.contains(pl.col("_pattern")))
            .select("_tid", "_folded")
        )
        as_written = (
            leaves.filter(plain)
            .select("_call", "leaf_no", "run_id", "start_ns", "_folded")
            .join(runs.drop("text").join(found, on="_tid"), on=["run_id", "_folded"])
            .filter(pl.col("available_ns") <= pl.col("start_ns"))
            .select("_call", "leaf_no")
            .unique()
        )
        leaves = leaves.join(as_written, on=["_call", "leaf_no"], how="anti")

        rest = sources.join(leaves.select("run_id").unique(), on="run_id", how="semi")
        rest, texts = distinct_texts(rest, "text")
        folded = (
            rest.drop("text")
            .join(
                texts.select("_tid", _fold_value(unescape_json(pl.col("text"))).alias("_f")),
                on="_tid",
            )
            .sort("run_id", "available_ns", "span_id")
            .with_columns(_len=pl.col("_f").str.len_bytes() + len(_SEP))
            .with_columns(_start=(pl.col("_len").cum_sum() - pl.col("_len")).over("run_id"))
        )
        joined = folded.group_by("run_id", maintain_order=True).agg(
            pl.col("_f").str.join(_SEP).alias("_all")
        )
        tokens = _token_patterns(leaves.get_column("_folded"), case_insensitive=False)
        at = pl.col("_all").str.find(pl.col("_pattern"))
        # the match starts at the value, or at the character before it that bounds it
        value_at = (
            pl.when(
                pl.col("_all").str.slice(at, pl.col("_folded").str.len_chars()) == pl.col("_folded")
            )
            .then(at)
            .otherwise(at + 1)
        )
        found = (
            leaves.join(joined, on="run_id", how="left")
            .join(tokens, on="_folded", how="left")
            .with_columns(_at=value_at)
            .drop("_all", "_pattern")
            .sort("_at")
        )
        located = found.filter(pl.col("_at").is_not_null()).join_asof(
            folded.select(
                "run_id",
                pl.col("_start").cast(pl.UInt32).alias("_at"),
                pl.col("available_ns").alias("_first_ns"),
                pl.col("span_id").alias("_first_span"),
            ).sort("_at"),
            on="_at",
            by="run_id",
            strategy="backward",
            check_sortedness=False,  # both sides are sorted on _at, hence within each run
        )
        return _ungrounded(leaves, located).drop("_folded")


def _ungrounded(leaves: pl.DataFrame, seen: pl.DataFrame | None) -> pl.DataFrame:
    """``leaves`` but those ``seen`` (``_call``, ``leaf_no``, ``start_ns``, ``_first_ns``,
    ``_first_span``: where a leaf first appears) in a source before the call, with
    ``_later_ns`` and ``_later_span``: where the others first appear (null: nowhere)."""
    if seen is None:
        return leaves.with_columns(
            _later_ns=pl.lit(None, pl.Int64), _later_span=pl.lit(None, pl.String)
        )
    key = ["_call", "leaf_no"]
    later = pl.col("_first_ns") > pl.col("start_ns")
    return leaves.join(seen.filter(~later), on=key, how="anti").join(
        seen.filter(later).select(
            *key, pl.col("_first_ns").alias("_later_ns"), pl.col("_first_span").alias("_later_span")
        ),
        on=key,
        how="left",
    )


def _pattern(path: str) -> str:
    """An `arguments` entry as a path without array indexes (``lines[0].sku`` -> lines.sku)."""
    return re.sub(r"\[[0-9]*\]", "", path)


#: What bounds a token: a value grounded in a text stands there with no letter or digit
#: against its letters and digits (ACC-550 is not grounded by ACC-5501, 501 not by 4155012345).
_BOUND_BEFORE, _BOUND_AFTER = "(?:^|[^0-9A-Za-z])", "(?:$|[^0-9A-Za-z])"


def _token_patterns(values: pl.Series, *, case_insensitive: bool) -> pl.DataFrame:
    """_folded, _pattern: per distinct value, the regular expression of it as a whole token
    (bounded only where its first or last character is a letter or digit)."""
    rows = []
    flags = "(?i)" if case_insensitive else ""
    for value in values.drop_nulls().unique().to_list():
        before = _BOUND_BEFORE if value[:1].isascii() and value[:1].isalnum() else ""
        after = _BOUND_AFTER if value[-1:].isascii() and value[-1:].isalnum() else ""
        rows.append((value, f"{flags}{before}{re.escape(value)}{after}"))
    return pl.DataFrame(rows, schema={"_folded": pl.String, "_pattern": pl.String}, orient="row")


def _fold_value(expr: pl.Expr) -> pl.Expr:
    return fold_text(expr).str.replace_all(_SEP, " ")


def _number_keys(leaves: pl.DataFrame) -> pl.DataFrame:
    """_call, leaf_no, key of JSON-number leaves: N: and the canonical decimal (sign dropped;
    the rare exponent form is expanded in Python, once per distinct value)."""
    plain = leaves.select("_call", "leaf_no", pl.col("value").str.strip_chars_start("-"))
    exponent = plain.filter(pl.col("value").str.contains("[eE]"))
    expanded = {v: format(Decimal(v), "f") for v in exponent.get_column("value").unique()}
    plain = plain.with_columns(pl.col("value").replace(expanded) if expanded else pl.col("value"))
    return plain.select(
        "_call", "leaf_no", pl.concat_str(pl.lit("N:"), canon_number(pl.col("value"))).alias("key")
    )


# --- argument leaves ---------------------------------------------------------------------------


def argument_leaves(calls: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The scalar leaves of each call's JSON arguments, and the calls that are not objects.

    ``calls`` needs ``_call`` (a row id), ``run_id`` and ``arguments``. Returns ``(leaves,
    malformed)``: leaves have ``_call``, ``leaf_no`` (document order), ``path``, ``name`` (the
    last key of the path), ``value`` (text as in the JSON: a string's content, or a number's
    digits), ``is_number``; booleans and nulls are left out. ``malformed`` lists the calls
    whose arguments are not a JSON object. Flat objects without escapes (most tool calls) are
    read natively in one pass (`_flat_native`, where the extension is built); the others are
    parsed in Python (`_walk`), once per distinct arguments text.
    """
    parts = []
    rest = calls
    if _native is not None:
        flat, rest = _flat_native(calls)
        parts.append(flat)
    texts = rest.select("arguments").unique().get_column("arguments").to_list()
    parsed: dict[str, list[tuple[str, str, str, bool]] | None] = {t: _walk(t) for t in texts}
    rows: list[tuple[Any, ...]] = []
    bad = []
    for call, text in rest.select("_call", "arguments").iter_rows():
        found = parsed[text]
        if found is None:
            bad.append(call)
            continue
        rows.extend((call, i, *leaf) for i, leaf in enumerate(found))
    parts.append(pl.DataFrame(rows, schema=_LEAVES, orient="row"))
    leaves = pl.concat([p.cast(_LEAVES) for p in parts], how="vertical")  # type: ignore[arg-type]
    malformed = calls.filter(pl.col("_call").is_in(bad)).select("_call", "run_id")
    return leaves, malformed


def _flat_native(calls: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The leaves of the calls whose arguments are flat objects, read in C
    (`analyzer.checks._flat_leaves`), and the other calls, left to `_walk`.

    Flat: a JSON object of scalars and arrays of scalars, no escape or control character in
    any string, no key twice, 64 keys at most. The leaves are those `_walk` gives.
    """
    import pyarrow as pa

    texts = calls.get_column("arguments").to_arrow().cast(pa.large_string())
    validity, offsets, data = texts.buffers()
    rest, *columns = _native.leaves(
        validity, offsets, data if data is not None else b"", texts.offset, len(texts)
    )
    row, leaf_no, path_off, path, name_off, name, value_off, value, is_number = map(
        pa.py_buffer, columns
    )
    n = len(is_number)

    def column(dtype: pa.DataType, *buffers: pa.Buffer) -> pl.Series:
        return pl.Series(pa.Array.from_buffers(dtype, n, [None, *buffers]))

    leaves = pl.DataFrame(
        {
            "_call": calls.get_column("_call").gather(column(pa.int64(), row)),
            "leaf_no": column(pa.int64(), leaf_no),
            "path": column(pa.large_string(), path_off, path),
            "name": column(pa.large_string(), name_off, name),
            "value": column(pa.large_string(), value_off, value),
            "is_number": column(pa.uint8(), is_number).cast(pl.Boolean),
        }
    )
    left = pa.Array.from_buffers(pa.uint8(), len(texts), [None, pa.py_buffer(rest)])
    return leaves, calls.filter(pl.Series(left).cast(pl.Boolean))


class _Number(str):
    """A JSON number kept as its text."""


def _walk(text: str) -> list[tuple[str, str, str, bool]] | None:
    """Scalar leaves (path, name, value, is_number) of a JSON object; None if not one."""
    try:
        data = json.loads(text, parse_float=_Number, parse_int=_Number)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    out: list[tuple[str, str, str, bool]] = []

    def visit(node: Any, path: str, name: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                visit(value, f"{path}.{key}" if path else str(key), str(key))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                visit(value, f"{path}[{i}]", name)
        elif isinstance(node, _Number):
            out.append((path, name, str.__str__(node), True))
        elif isinstance(node, str):
            out.append((path, name, node, False))
        # booleans and nulls are never checked

    visit(data, "", "")
    return out
