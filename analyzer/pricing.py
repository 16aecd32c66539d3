"""Price tables and costs: list prices per million tokens -> cost per model call and per run.

**Table.** YAML validated by ``schemas/prices.schema.json`` (`load_prices`); the dated default
is ``rules/prices.yaml``. A recorded model name is priced by the entry whose ``model`` equals
it (case-insensitive, surrounding spaces ignored), else by the first entry, in file order,
whose ``match`` pattern (Rust regex syntax, case-insensitive) is found in it. Matching runs
once per distinct model name, not per span.

**Cost of a model call** (`price_steps`), in USD::

    uncached = input_tokens - cached_input_tokens
    cost = (uncached * input + cached_input_tokens * cached_input + output_tokens * output) * 1e-6

The product with 1e-6 (not a division by 1e6, which polars computes as that product for
some frames and exactly for others) gives a call the same cost whatever steps are priced with
it. ``cached_input`` falls back to ``input`` when the table gives none. Input tokens are taken to
*include* cached tokens: the OTel GenAI conventions say ``gen_ai.usage.input_tokens`` "SHOULD
include all types of input tokens, including cached tokens" and that
``gen_ai.usage.cache_read.input_tokens`` is included in it (CONVENTIONS.md section 1); OpenAI's
``prompt_tokens`` and OpenInference's ``llm.token_count.prompt`` count the same way. Where a
span reports more cached tokens than input tokens, its input count evidently excludes them
(Anthropic's raw ``usage.input_tokens`` does), so the input count is priced whole as uncached.
Cache *writes* (``cache_creation``) are priced as ordinary input; reasoning tokens are part of
the output count. A missing token count counts as zero, but a model call that recorded no
input and no output count has no cost (null), except a failed call, which is 0: providers do
not bill a rejected request and such spans carry no usage.

**Cost of a run** (`price_runs`): the sum over its model calls, null when any model call of
the run has no cost (unknown model or no usage): never a partial sum, never zero for an
unknown price. A run that recorded no model call has no cost either: its calls were not
exported or not recognised (a subagent's session, a trace split in two), and what it cost is
unknown. Sums are rounded to 1e-12 USD so that they do not depend on summation order. Agent
spans that carry aggregated usage are not steps, so they are never added again (CONTRACT
section 2).

**Recorded cost.** A cost the span carried itself (``llm.cost.total``, ``operation.cost``,
``gen_ai.usage.cost``, any-agent's input + output cost, Langfuse's cost details), read by the
normalizer into ``recorded_cost_usd``, stays beside ``cost_usd`` on steps and runs; it is
never summed with or substituted for the computed cost.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
import hashlib
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import yaml

from analyzer.errors import PriceTableError
from analyzer.resources import bundled_rules_text, schema
from analyzer.yamlplace import SAFE_LOADER, load_yaml, problems_text, show

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator, ValidationError

    from analyzer.runs import RunSet

__all__ = [
    "BUNDLED_PRICES",
    "NO_MODEL_CALL",
    "TOKENS_PER_UNIT",
    "PriceTable",
    "apply_prices",
    "load_prices",
    "match_models",
    "price_runs",
    "price_steps",
    "prices_from_mapping",
    "unpriced_models",
]

#: The default table shipped in ``rules/``.
BUNDLED_PRICES = "prices.yaml"
#: Prices are per this many tokens.
TOKENS_PER_UNIT = 1_000_000
#: Run costs are rounded to this many decimals (1e-12 USD): sums stay order-independent.
_ROUND = 12

_ENTRY_SCHEMA: dict[str, pl.DataType] = {
    "entry": pl.Int64(),
    "model": pl.String(),
    "match": pl.String(),
    "input": pl.Float64(),
    "output": pl.Float64(),
    "cached_input": pl.Float64(),
}


@dataclass(frozen=True)
class PriceTable:
    """A validated price table."""

    currency: str
    as_of: str  # YYYY-MM-DD
    models: pl.DataFrame  # columns of _ENTRY_SCHEMA, one row per entry, in file order
    source: str  # the file as given, or "<built-in rules/prices.yaml>"
    sha256: str | None = None  # of the file's bytes, for the manifest

    def describe(self) -> dict[str, Any]:
        """What the manifest and summary record about the table."""
        return {
            "source": self.source,
            "sha256": self.sha256,
            "currency": self.currency,
            "as_of": self.as_of,
            "models": self.models.height,
        }


# --- loading -----------------------------------------------------------------------------------


def load_prices(path: str | Path | None = None) -> PriceTable:
    """The price table in ``path`` (YAML or JSON), or the bundled one when ``path`` is None.

    Raises `PriceTableError` (exit code 2 at the CLI) naming the file, the line and the path
    inside it (``models[3].input``) of every problem found.
    """
    if path is None:
        text = bundled_rules_text(BUNDLED_PRICES)
        raw = text.encode("utf-8")
        shown = f"<built-in rules/{BUNDLED_PRICES}>"
    else:
        shown = str(path)
        raw, text = read_text(path, "price table", PriceTableError)
    data, root = parse_yaml(text, shown, PriceTableError, _Loader)  # aliases bounded
    return _build(data, root, shown, hashlib.sha256(raw).hexdigest(), bundled=path is None)


def read_text(path: str | Path, what: str, error: type[Exception]) -> tuple[bytes, str]:
    """The bytes of the file `path` (the ``what`` of an error) and their UTF-8 text; `error`
    names the file when it cannot be read or is not UTF-8."""
    try:
        raw = Path(path).read_bytes()
    except OSError as err:
        raise error(f"{path}: cannot read the {what}: {err.strerror or err}") from err
    try:
        return raw, raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(f"{path}: not UTF-8 text ({err.reason})") from err


def parse_yaml(
    text: str, shown: str, error: type[Exception], loader: type = SAFE_LOADER
) -> tuple[Any, yaml.Node | None]:
    """`load_yaml` of `text`; `error` names the file `shown` and the line of a syntax error."""
    try:
        return load_yaml(text, loader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{shown}:{mark.line + 1}" if mark is not None else shown
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise error(f"{where}: not valid YAML: {problem}") from err


def unknown_keys(
    where: tuple[str | int, ...], value: dict[str, Any], known: list[str], what: str = "key"
) -> list[tuple[tuple[str | int, ...], str]]:
    """A problem per key of `value` not in `known`, with the closest known key if any."""
    out = []
    for key in sorted(k for k in value if k not in known):
        close = difflib.get_close_matches(str(key), known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        out.append(
            ((*where, key), f"unknown {what} {key!r}{hint}; expected one of {', '.join(known)}")
        )
    return out


def prices_from_mapping(data: Any, source: str = "<prices>") -> PriceTable:
    """A price table from already-parsed data (same validation as `load_prices`)."""
    return _build(data, None, source, None)


def _build(
    data: Any, root: yaml.Node | None, shown: str, sha256: str | None, bundled: bool = False
) -> PriceTable:
    """The table of `data` (its YAML node tree `root` gives the lines problems are reported at);
    the table `bundled` with the package is not checked against the JSON Schema (the tests do:
    a `report` with the bundled prices then never imports jsonschema)."""
    problems: list[tuple[tuple[str | int, ...], str]] = []
    if not isinstance(data, dict):
        problems.append(((), f"a price table is a mapping, not {_kind(data)}"))
    else:
        problems.extend([] if bundled else schema_problems(data, "prices.schema.json", _explain))
        problems.extend(_semantic_problems(data))
    if problems:
        raise PriceTableError(problems_text(problems, root, shown, "price table"))
    assert isinstance(data, dict)
    models = pl.DataFrame(
        [
            {
                "entry": i,
                "model": m["model"],
                "match": m.get("match"),
                "input": float(m["input"]),
                "output": float(m["output"]),
                "cached_input": (
                    float(m["cached_input"]) if m.get("cached_input") is not None else None
                ),
            }
            for i, m in enumerate(data["models"])
        ],
        schema=_ENTRY_SCHEMA,
    )
    return PriceTable(
        currency=data["currency"], as_of=data["as_of"], models=models, source=shown, sha256=sha256
    )


class _Loader(SAFE_LOADER):  # type: ignore[misc,valid-type]
    """SafeLoader that keeps dates as written: ``as_of: 2026-11-01`` unquoted is the text."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in SAFE_LOADER.yaml_implicit_resolvers.items()
}


@cache
def _validator(name: str) -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schema(name))


def schema_problems(
    data: Any, name: str, explain: Callable[[ValidationError], list[tuple[Any, str]]]
) -> list[tuple[tuple[str | int, ...], str]]:
    """What `explain` says of each error of `data` against the bundled JSON Schema `name`,
    ordered by path."""
    out = []
    for err in sorted(_validator(name).iter_errors(data), key=lambda e: [str(p) for p in e.path]):
        out.extend(explain(err))
    return out


def _explain(err: ValidationError) -> list[tuple[tuple[str | int, ...], str]]:
    where = tuple(err.path)
    value = err.instance
    sch = err.schema if isinstance(err.schema, dict) else {}
    if err.validator == "additionalProperties" and isinstance(value, dict):
        return unknown_keys(where, value, sorted(sch.get("properties", {})))
    if err.validator == "required":
        missing = re.findall(r"'([^']+)' is a required property", err.message)
        return [(where, f"missing required key {missing[0]!r}" if missing else err.message)]
    if err.validator == "type":
        return [(where, f"expected {sch.get('type')}, got {_kind(value)} {show(value)}")]
    if err.validator == "minimum":
        return [(where, f"{show(value)} is negative; prices are USD per million tokens, >= 0")]
    if err.validator == "pattern" and where == ("as_of",):
        return [(where, f"{show(value)} is not a date written YYYY-MM-DD")]
    if err.validator == "enum" and where == ("currency",):
        return [(where, f"{show(value)} is not supported; prices must be in USD")]
    return [(where, err.message)]


def _semantic_problems(data: dict[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    """What the schema cannot say: real dates, unique names, patterns polars accepts, prices
    that are numbers (YAML's ``.nan`` passes every bound)."""
    out: list[tuple[tuple[str | int, ...], str]] = []
    as_of = data.get("as_of")
    if isinstance(as_of, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", as_of):
        try:
            dt.date.fromisoformat(as_of)
        except ValueError:
            out.append((("as_of",), f"{as_of!r} is not a calendar date"))
    models = data.get("models")
    seen: dict[str, int] = {}
    patterns: list[tuple[int, str]] = []
    for i, entry in enumerate(models if isinstance(models, list) else []):
        if not isinstance(entry, dict):
            continue
        name = entry.get("model")
        if isinstance(name, str):
            key = name.strip().lower()
            if key in seen:
                out.append(
                    (("models", i, "model"), f"{name!r} is already priced in models[{seen[key]}]")
                )
            else:
                seen[key] = i
        for field in ("input", "output", "cached_input"):
            price = entry.get(field)
            if isinstance(price, float) and math.isnan(price):
                out.append((("models", i, field), "not a number (.nan)"))
        pattern = entry.get("match")
        if isinstance(pattern, str) and pattern:
            patterns.append((i, f"(?i){pattern}"))  # as matching reads it
    if patterns and rust_regex_error(*(p for _, p in patterns)):  # one query when all compile
        for i, pattern in patterns:
            problem = rust_regex_error(pattern)
            if problem:
                out.append((("models", i, "match"), f"not a valid pattern: {problem}"))
    return out


def rust_regex_error(*patterns: str) -> str | None:
    """Why polars (Rust regex syntax) refuses one of ``patterns``, or None."""
    try:
        pl.select(pl.lit("").str.contains(p).alias(str(i)) for i, p in enumerate(patterns))
    except pl.exceptions.PolarsError as err:
        lines = [ln.strip() for ln in str(err).splitlines() if ln.strip().startswith("error:")]
        return lines[0].removeprefix("error:").strip() if lines else str(err).splitlines()[0]
    return None


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    kinds = (("a number", int | float), ("a text", str), ("a list", list), ("a mapping", dict))
    for name, t in kinds:
        if isinstance(value, t):
            return name
    return "null" if value is None else type(value).__name__


# --- model families ------------------------------------------------------------------------------

#: A snapshot suffix of a model name: a date (-2024-08-06, -20241022, @20240229), a four or
#: three digit release (-0613, -2407, -002), -latest, or a Bedrock version (-v2:0).
_SNAPSHOT = r"(?:[-@]\d{4}-?\d{2}-?\d{2}|-\d{3,4}|-latest|-v\d+(?::\d+)?)$"


def model_family(name: pl.Expr) -> pl.Expr:
    """The family of a model name, its snapshot suffixes removed: ``gpt-4.1-2025-04-14`` ->
    ``gpt-4.1``, ``anthropic.claude-3-5-sonnet-20241022-v2:0`` ->
    ``anthropic.claude-3-5-sonnet``."""
    return name.str.replace(_SNAPSHOT, "").str.replace(_SNAPSHOT, "")


# --- matching ----------------------------------------------------------------------------------


def match_models(names: Iterable[str | None] | pl.Series, prices: PriceTable) -> pl.DataFrame:
    """Each distinct non-null model name -> the entry that prices it (nulls when none).

    Columns: ``model`` (as recorded), ``priced_as`` (the entry's model name), ``input``,
    ``output``, ``cached_input``; sorted by model. An exact name wins over any pattern; among
    patterns the first in file order wins.
    """
    series = names if isinstance(names, pl.Series) else pl.Series(list(names), dtype=pl.String)
    frame = (
        pl.DataFrame({"model": series.cast(pl.String)})
        .drop_nulls()
        .unique()
        .sort("model")
        .with_columns(_key=pl.col("model").str.strip_chars())
    )
    table = prices.models
    exact = table.select(
        pl.col("model").str.strip_chars().str.to_lowercase().alias("_lower"),
        pl.col("entry").alias("_exact"),
    )
    frame = frame.with_columns(_lower=pl.col("_key").str.to_lowercase()).join(
        exact, on="_lower", how="left", maintain_order="left"
    )
    patterns = tuple(table.filter(pl.col("match").is_not_null()).select("entry", "match").rows())
    by_pattern = pl.Series(_pattern_entries(tuple(frame.get_column("_key")), patterns))
    frame = frame.with_columns(
        entry=pl.coalesce(pl.col("_exact"), pl.lit(by_pattern.cast(pl.Int64))).cast(pl.Int64)
    )
    return frame.join(
        table.rename({"model": "priced_as"}), on="entry", how="left", maintain_order="left"
    ).select("model", "priced_as", "input", "output", "cached_input")


@lru_cache(maxsize=64)
def _pattern_entries(
    keys: tuple[str, ...], patterns: tuple[tuple[int, str], ...]
) -> tuple[int | None, ...]:
    """Per key, the entry of the first pattern that matches it (case-insensitive), else None.
    Kept per process: the partitions of one dump ask for the same few model names again."""
    found = [
        pl.when(pl.col("_key").str.contains(f"(?i){pattern}")).then(pl.lit(entry, pl.Int64))
        for entry, pattern in patterns
    ]
    frame = pl.DataFrame({"_key": list(keys)}, schema={"_key": pl.String})
    return tuple(frame.select(pl.coalesce([*found, pl.lit(None, pl.Int64)])).to_series())


# --- costs -------------------------------------------------------------------------------------


def price_steps(steps: pl.DataFrame, prices: PriceTable | None = None) -> pl.DataFrame:
    """``steps`` plus ``priced_as`` and ``cost_usd`` (USD; null for tool calls and unknowns).

    Uses the bundled table when ``prices`` is None. Row order and other columns are kept,
    ``recorded_cost_usd`` included. See the module docstring for the formula.
    """
    prices = prices if prices is not None else load_prices(None)
    is_model = pl.col("kind") == "model_call"
    names = steps.select(pl.col("model").filter(is_model)).to_series()
    mapping = match_models(names, prices).rename(
        {"input": "_p_in", "output": "_p_out", "cached_input": "_p_cached"}
    )
    out = steps.drop("priced_as", "cost_usd", strict=False)
    out = out.join(mapping, on="model", how="left", maintain_order="left")
    inp = pl.col("input_tokens").fill_null(0).cast(pl.Float64)
    cached = pl.col("cached_input_tokens").fill_null(0).cast(pl.Float64)
    output = pl.col("output_tokens").fill_null(0).cast(pl.Float64)
    # More cached than input tokens: this span's input count excludes the cache reads.
    uncached = pl.when(cached > inp).then(inp).otherwise(inp - cached)
    cost = (
        uncached * pl.col("_p_in")
        + cached * pl.coalesce("_p_cached", "_p_in")
        + output * pl.col("_p_out")
    ) * (1 / TOKENS_PER_UNIT)
    has_usage = pl.col("input_tokens").is_not_null() | pl.col("output_tokens").is_not_null()
    failed = pl.col("status") == "error"
    return out.with_columns(
        priced_as=pl.when(is_model).then(pl.col("priced_as")),
        cost_usd=pl.when(~is_model | pl.col("priced_as").is_null())
        .then(pl.lit(None, pl.Float64))
        .when(has_usage)
        .then(cost)
        .when(failed)
        .then(pl.lit(0.0))
        .otherwise(pl.lit(None, pl.Float64)),
    ).drop("_p_in", "_p_out", "_p_cached")


def price_runs(runs: pl.DataFrame, priced_steps: pl.DataFrame) -> pl.DataFrame:
    """``runs`` plus ``cost_usd``: the sum over the run's model calls, null if any is unknown
    or the run recorded none."""
    model = priced_steps.select("run_id", "cost_usd").filter(
        priced_steps.get_column("kind") == "model_call"
    )
    totals = model.group_by("run_id").agg(
        pl.when(pl.col("cost_usd").is_null().any())
        .then(pl.lit(None, pl.Float64))
        .otherwise(pl.col("cost_usd").sum())
        .round(_ROUND)
        .alias("cost_usd")
    )
    out = runs.drop("cost_usd", strict=False)
    return out.join(totals, on="run_id", how="left", maintain_order="left")


def apply_prices(runset: RunSet, prices: PriceTable | None = None) -> RunSet:
    """A copy of ``runset`` whose steps and runs carry ``cost_usd`` (steps also ``priced_as``)."""
    steps = price_steps(runset.steps, prices)
    return dataclasses.replace(runset, steps=steps, runs=price_runs(runset.runs, steps))


#: The reason of `unpriced_models`' row for the runs that recorded no model call.
NO_MODEL_CALL = "no model call recorded"


def unpriced_models(priced_steps: pl.DataFrame, runs: pl.DataFrame) -> pl.DataFrame:
    """Why runs have no cost: their model calls with no cost, grouped by model name and reason,
    with their token counts, and the runs that recorded no model call.

    ``reason`` is ``no price`` (the table has no entry for the model, or the model name was
    not recorded: ``model`` null), ``no token counts`` (priced, but the call recorded no
    usage) or `NO_MODEL_CALL` (``model`` null, no call, ``runs`` those runs). Columns: model,
    reason, model_calls, runs, input_tokens, output_tokens, cached_input_tokens; sorted by
    model (null last), then reason.
    """
    model = priced_steps.filter(pl.col("kind") == "model_call")
    calls = model.filter(pl.col("cost_usd").is_null())
    reason = (
        pl.when(pl.col("priced_as").is_null())
        .then(pl.lit("no price"))
        .otherwise(pl.lit("no token counts"))
    )
    out = (
        calls.with_columns(reason=reason)
        .group_by("model", "reason")
        .agg(
            pl.len().cast(pl.Int64).alias("model_calls"),
            pl.col("run_id").n_unique().cast(pl.Int64).alias("runs"),
            pl.col("input_tokens").sum().cast(pl.Int64),
            pl.col("output_tokens").sum().cast(pl.Int64),
            pl.col("cached_input_tokens").sum().cast(pl.Int64),
        )
        .sort("model", "reason", nulls_last=True)
    )
    no_call = runs.filter(~pl.col("run_id").is_in(model.get_column("run_id").implode())).height
    if not no_call:
        return out
    row = {"model": None, "reason": NO_MODEL_CALL, "model_calls": 0, "runs": no_call}
    row |= dict.fromkeys(("input_tokens", "output_tokens", "cached_input_tokens"), 0)
    return pl.concat([out, pl.DataFrame([row], schema=out.schema)]).sort(
        "model", "reason", nulls_last=True
    )
