"""argument_schema: tool-call arguments are JSON that the tool's JSON Schema accepts."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

try:  # a fast validity check; jsonschema words the errors (as in output_schema)
    import jsonschema_rs
except ImportError:  # pragma: no cover - jsonschema alone gives the same verdicts, slower
    jsonschema_rs = None
import polars as pl

from analyzer import linear_regex
from analyzer.checks.base import Check, CheckContext, findings, json_path, schema_message

__all__ = ["ArgumentSchema"]

_NO_SCHEMA = ""  # schema key of a call whose tool has no known schema


@dataclass(frozen=True, kw_only=True)
class ArgumentSchema(Check):
    """Tool-call arguments are valid JSON and fit the tool's JSON Schema.

    Flags
    -----
    ``malformed_arguments``: each tool call whose arguments are not valid JSON (the detail
    gives line, column and what is wrong), or fail the tool's JSON Schema (Draft 2020-12; the
    detail gives the most relevant error, where it is and how many more there are;
    ``argument`` names the top-level argument at fault when there is one). A call the model
    requested that no tool span recorded counts too: its arguments are the model's.

    The schema of a tool comes from the pack (``tools:`` or ``tool_specs:``) when it defines
    that tool, else from the tool definitions the trace recorded (``gen_ai.tool.definitions``,
    OpenInference ``llm.tools`` and tool spans, OpenLLMetry ``llm.request.functions``); when
    the run recorded several different schemas of one tool, arguments fitting any of them
    pass. ``format`` is an annotation, not checked, and no ``$ref`` is ever fetched.

    A call of a tool with no known schema is still checked for JSON validity, and its run is
    counted as unverifiable for the schema; so is a run with a tool call whose arguments were
    not recorded.

    Why it matters
    --------------
    Malformed arguments make the tool fail or, worse, do something else: a missing account id
    looked up as null, an amount sent as text. Their rate per tool and per model is a
    tool-reliability metric, and a schema change that the prompt did not follow shows up here
    first.

    Options
    -------
    tools : list of tool names, optional
        Only check calls of these tools (default: every tool).

    Example
    -------
    - id: tool-schemas
      type: argument_schema
      severity: high
    - id: lookup-arguments
      type: argument_schema
      tools: [lookup_account]
    """

    type = "argument_schema"
    kinds = ("malformed_arguments",)
    tool_fields = ("tools",)

    tools: tuple[str, ...] | None = None

    def check(self, ctx: CheckContext) -> pl.DataFrame:
        calls = ctx.tool_calls.select("run_id", "call_no", "tool", "span", "arguments")
        if self.tools is not None:
            calls = calls.filter(pl.col("tool").is_in(list(self.tools)))
        ctx.mark(
            calls.filter(pl.col("arguments").is_null()).get_column("run_id").unique(),
            "unverifiable",
            "tool call arguments not recorded",
        )
        calls = calls.filter(pl.col("arguments").is_not_null())
        judge = _Judge()
        keys = _schema_keys(ctx, calls, judge)
        calls = calls.join(keys, on=["run_id", "tool"], how="left", maintain_order="left")
        calls = calls.with_columns(pl.col("_key").fill_null(_NO_SCHEMA))

        # Each distinct (schema, arguments) pair is judged once: agents repeat their calls.
        # Without a schema only the JSON syntax is judged.
        pairs = calls.select("_key", "arguments").unique(maintain_order=True)
        verdicts = [judge.verdict(k, a) for k, a in pairs.iter_rows()]
        bad = pairs.with_columns(
            pl.Series("_detail", [v[0] for v in verdicts], dtype=pl.String),
            pl.Series("_argument", [v[1] for v in verdicts], dtype=pl.String),
        ).filter(pl.col("_detail").is_not_null())
        self._mark_unchecked(ctx, calls, judge)
        return findings(
            calls.join(bad, on=["_key", "arguments"], maintain_order="left"),
            "malformed_arguments",
            pl.format("{} {}", pl.col("tool").fill_null("(unnamed tool)"), "_detail"),
            tool="tool",
            argument="_argument",
            spans="span",
            pos="call_no",
        )

    @staticmethod
    def _mark_unchecked(ctx: CheckContext, calls: pl.DataFrame, judge: _Judge) -> None:
        """Runs with a call no schema could judge are unverifiable, with the reason per tool."""
        unusable = {k: why for k, why in judge.unusable.items() if why}
        reasons = pl.DataFrame(
            {"_key": list(unusable), "_why": list(unusable.values())},
            schema={"_key": pl.String, "_why": pl.String},
        )
        unchecked = (
            calls.join(reasons, on="_key", how="left")
            .filter((pl.col("_key") == _NO_SCHEMA) | pl.col("_why").is_not_null())
            .select(
                "run_id",
                pl.when(pl.col("tool").is_null())
                .then(pl.lit("a tool call recorded no tool name"))
                .when(pl.col("_key") == _NO_SCHEMA)
                .then(pl.format("no JSON Schema known for {}", "tool"))
                .otherwise(pl.format("the JSON Schema of {} {}", "tool", "_why"))
                .alias("_reason"),
            )
            .unique()
        )
        # marks are sets of runs: only the order of the reasons is kept (stable marks)
        for (reason,), group in sorted(unchecked.partition_by("_reason", as_dict=True).items()):
            ctx.mark(group.get_column("run_id"), "unverifiable", str(reason))


def _canonical(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS).decode()


def _schema_keys(ctx: CheckContext, calls: pl.DataFrame, judge: _Judge) -> pl.DataFrame:
    """run_id, tool -> _key: a JSON array of the candidate schemas of that tool in that run.

    The pack's schema when it has one for the tool, else the distinct schemas recorded in the
    run's tool definitions (sorted, so that equal sets give equal keys). The pack's schemas
    go to ``judge`` as written: the order of their keywords decides which error comes first.
    """
    pairs = calls.select("run_id", "tool").unique().filter(pl.col("tool").is_not_null())
    pack = {name: "[" + _canonical(schema) + "]" for name, schema in ctx.tools.items()}
    for name, key in pack.items():
        judge.documents.setdefault(key, [ctx.tools[name]])
    from_pack = pairs.filter(pl.col("tool").is_in(list(pack))).with_columns(
        _key=pl.col("tool").replace_strict(pack, return_dtype=pl.String)
    )
    runs = ctx.runs
    if "tool_definitions" not in runs.columns:
        return from_pack
    defs = (
        runs.select("run_id", pl.col("tool_definitions").alias("_defs"))
        .join(pairs.filter(~pl.col("tool").is_in(list(pack))), on="run_id", how="semi")
        .explode("_defs")
        .drop_nulls("_defs")
    )
    # Definition texts are few (one per agent configuration): each is parsed once.
    rows: list[tuple[str, str, str]] = []
    for text in defs.get_column("_defs").unique().sort().to_list():
        for name, schema in _definitions(text):
            rows.append((text, name, schema))
    parsed = pl.DataFrame(
        rows, schema={"_defs": pl.String, "tool": pl.String, "_schema": pl.String}, orient="row"
    )
    from_trace = (
        defs.join(parsed, on="_defs")
        .join(pairs, on=["run_id", "tool"], how="semi")
        .filter(~pl.col("tool").is_in(list(pack)))
        .select("run_id", "tool", "_schema")
        .unique()
        .sort("run_id", "tool", "_schema")
        .group_by("run_id", "tool", maintain_order=True)
        .agg(pl.format("[{}]", pl.col("_schema").str.join(",")).alias("_key"))
    )
    return pl.concat([from_pack, from_trace])


def _definitions(text: str) -> list[tuple[str, str]]:
    """(tool name, canonical schema) pairs of a normalized tool-definitions array."""
    try:
        items = orjson.loads(text)
    except orjson.JSONDecodeError:
        return []
    out = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, Mapping) and isinstance(item.get("name"), str):
            params = item.get("parameters")
            if isinstance(params, dict | bool):  # a null schema is no schema
                out.append((item["name"], _canonical(params)))
    return out


class _NoRemote(Exception):
    pass


def _refuse(uri: str) -> Any:
    # Schemas recorded in traces may name any URL: agenttrace never reaches the network.
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(ref=uri)


def _refuse_rs(uri: str) -> Any:
    raise _NoRemote(f"{uri} is not fetched")


class _Schema:
    """One schema ready to judge arguments: jsonschema-rs says whether they are valid (fast),
    jsonschema says why not (its wording), each only where needed (jsonschema is imported
    then: a pool's workers that judge no schema never import it)."""

    def __init__(self, document: Any):
        self.document = document
        self.fast: Any = None
        if jsonschema_rs is not None:
            try:
                self.fast = jsonschema_rs.Draft202012Validator(
                    document, validate_formats=False, retriever=_refuse_rs
                )
            except Exception:  # what Rust cannot compile, Python still judges
                self.fast = None

    @functools.cached_property
    def python(self) -> Any:
        from referencing import Registry

        text = json.dumps(self.document)
        if '"unevaluatedProperties"' in text and '"patternProperties"' in text:
            # jsonschema would match these patterns with Python's re: not judged
            raise linear_regex.UnsupportedPattern(
                "unevaluatedProperties beside patternProperties is not judged"
            )
        return _linear_validator()(self.document, registry=Registry(retrieve=_refuse))  # type: ignore[call-arg]

    def errors(self, doc: Any) -> tuple[str, str | None] | None:
        """None when ``doc`` is valid, else (detail, top-level argument at fault)."""
        if self.fast is not None and self.fast.is_valid(doc):
            return None
        from jsonschema.exceptions import best_match

        errors = list(self.python.iter_errors(doc))
        culprit = None
        if errors:
            top = best_match(errors)
            path, message, count = list(top.absolute_path), top.message, len(errors)
            culprit = _culprit(top)
        elif self.fast is not None:  # the two engines disagree: Rust's word stands
            rs_errors = list(self.fast.iter_errors(doc))
            if not rs_errors:
                return None
            path, message, count = list(rs_errors[0].instance_path), rs_errors[0].message, 1
        else:
            return None
        argument = path[0] if path and isinstance(path[0], str) else culprit
        where = f" at {json_path(path)}" if path else ""
        return f"arguments fail schema{where}: {schema_message(message, count)}", argument


@functools.cache
def _linear_validator() -> Any:
    """Draft 2020-12 as jsonschema words it, its regular expressions run by RE2 in linear time.

    A schema recorded in a trace is hostile input: ``"pattern": "^(a+)+$"`` against 40 a's
    and a "!" keeps Python's ``re`` busy for minutes. ``pattern``, ``patternProperties`` and
    ``additionalProperties`` (which skips the names ``patternProperties`` match) match with
    `analyzer.linear_regex` here; a pattern RE2 cannot compile (backreferences, lookaround)
    raises `UnsupportedPattern`, so the schema is reported as not applied. (jsonschema matches
    ``patternProperties`` itself inside ``unevaluatedProperties``: `_Schema.python` refuses a
    schema using both.)
    """
    from jsonschema import Draft202012Validator, ValidationError, validators
    from jsonschema._utils import extras_msg

    def pattern(validator, patrn, instance, schema):
        if validator.is_type(instance, "string") and not linear_regex.search(patrn, instance):
            yield ValidationError(f"{instance!r} does not match {patrn!r}")

    def pattern_properties(validator, patterns, instance, schema):
        if not validator.is_type(instance, "object"):
            return
        for patrn, subschema in patterns.items():
            for k, v in instance.items():
                if linear_regex.search(patrn, k):
                    yield from validator.descend(v, subschema, path=k, schema_path=patrn)

    def additional_properties(validator, ap, instance, schema):
        if not validator.is_type(instance, "object"):
            return
        extras = set(_extra_keys(instance, schema))
        if validator.is_type(ap, "object"):
            for extra in extras:
                yield from validator.descend(instance[extra], ap, path=extra)
        elif not ap and extras:
            if "patternProperties" in schema:
                verb = "does" if len(extras) == 1 else "do"
                joined = ", ".join(repr(each) for each in sorted(extras))
                patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
                yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
            else:
                error = "Additional properties are not allowed (%s %s unexpected)"
                yield ValidationError(error % extras_msg(sorted(extras, key=str)))

    return validators.extend(
        Draft202012Validator,
        {
            "pattern": pattern,
            "patternProperties": pattern_properties,
            "additionalProperties": additional_properties,
        },
    )


def _culprit(error: Any) -> str | None:
    """The argument a top-level error is about: the first required one missing, or the first
    one not allowed."""
    instance, schema = error.instance, error.schema
    if not isinstance(instance, dict) or not isinstance(schema, dict):
        return None
    if error.validator == "required":
        missing = [k for k in error.validator_value if k not in instance]
        return missing[0] if missing and isinstance(missing[0], str) else None
    if error.validator == "additionalProperties":
        extra = _extra_keys(instance, schema)
        return extra[0] if extra else None
    return None


def _extra_keys(instance: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """The keys of ``instance`` that neither ``properties`` nor ``patternProperties`` name."""
    known = schema.get("properties") or {}
    patterns = list(schema.get("patternProperties") or {})
    return [
        k
        for k in instance
        if k not in known and not any(linear_regex.search(p, k) for p in patterns)
    ]


class _Constant(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _Constant(name)


def _parse(text: str) -> tuple[Any, str | None]:
    """(value, None), or (None, why the text is not JSON)."""
    try:
        return orjson.loads(text), None
    except orjson.JSONDecodeError:
        pass
    try:  # the standard library's message says what is wrong in plain words
        return json.loads(text, parse_constant=_no_constant), None
    except json.JSONDecodeError as err:
        return None, f"line {err.lineno} col {err.colno}: {err.msg}"
    except _Constant as err:
        return None, f"{err} is not a JSON value"


class _Judge:
    """Verdicts on arguments against schema keys (see `_schema_keys`), schemas compiled once.

    ``unusable`` maps a key to why it could not judge (null when it could).
    """

    def __init__(self) -> None:
        self.documents: dict[str, list[Any]] = {}  # schemas as written, when known
        self.schemas: dict[str, list[_Schema]] = {}
        self.unusable: dict[str, str | None] = {}

    def _compile(self, key: str) -> list[_Schema]:
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        if key not in self.schemas:
            compiled = []
            for document in self.documents.get(key) or json.loads(key):
                try:
                    Draft202012Validator.check_schema(document)
                except SchemaError:
                    continue
                compiled.append(_Schema(document))
            self.schemas[key] = compiled
            self.unusable[key] = None if compiled else "recorded in the trace is not valid"
        return self.schemas[key]

    def verdict(self, key: str, text: str) -> tuple[str | None, str | None]:
        """(detail, argument) for bad arguments, (None, None) for good or unjudged ones."""
        doc, problem = _parse(text)
        if problem is not None:
            return f"arguments are not valid JSON ({problem})", None
        if key == _NO_SCHEMA:
            return None, None
        schemas = self._compile(key)
        first: tuple[str, str | None] | None = None
        try:
            for schema in schemas:
                found = schema.errors(doc)
                if found is None:
                    return None, None
                first = first or found
        except Exception as err:  # a schema from a trace that cannot be applied (bad regex...)
            self.unusable[key] = f"could not be applied ({err or type(err).__name__})"
            return None, None
        return first if first is not None else (None, None)
