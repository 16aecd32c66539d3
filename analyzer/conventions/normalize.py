"""Span table -> normalized-span table: what each span is, and its canonical fields.

`normalize(spans)` returns one `NORMALIZED_SCHEMA` row per input span, in the same order, as a
polars frame (what the run model reads).

How: the attribute lists are flattened once; only keys `semconv` knows are kept (keys are
classified once per distinct key, not per attribute); each kept key is scattered into one column;
the canonical columns are polars coalesce expressions in precedence order (the precedence lists
live in `semconv`). Python runs only over the content that must be parsed as JSON (messages,
requested tool calls), for the spans that carry it, and over distinct values of low-cardinality
columns (finish reasons, tool definitions).
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from analyzer.conventions import content as ct
from analyzer.conventions import semconv as sc
from analyzer.conventions.schema import (
    MESSAGE,
    NORMALIZED_COLUMNS,
    NORMALIZED_SCHEMA,
    REQUESTED_CALL,
)
from analyzer.scatter import scatter

__all__ = ["normalize"]

#: Rows normalized together; bounds memory and keeps Arrow string offsets far from 2 GiB.
SLICE_ROWS = 262_144
#: Chunks of a column are concatenated (fewer, larger Arrow calls) up to this size.
COMBINE_MAX_BYTES = 1 << 30

_EXACT = sorted(sc.EXACT_KEYS)
_EXACT_CODE = {k: i for i, k in enumerate(_EXACT)}
_FAMILIES = sorted(set(sc.PREFIX_FAMILIES.values()))
_FAMILY_CODE = {tag: len(_EXACT) + i for i, tag in enumerate(_FAMILIES)}
assert len(_EXACT) + len(_FAMILIES) < 1 << 15  # codes are sorted as 16-bit integers
_PREFIX_ORDER = sorted(sc.PREFIX_FAMILIES, key=len, reverse=True)


def _key_code(key: str | None) -> int | None:
    """Code of an attribute key: its index among exact keys (an alias's: its key's, see
    `semconv.KEY_ALIASES`), a family code, or None (ignored)."""
    if key is None:
        return None
    key = sc.KEY_ALIASES.get(key, key)
    if key in _EXACT_CODE:
        return _EXACT_CODE[key]
    for prefix in _PREFIX_ORDER:
        # an index must follow the prefix: gen_ai.prompt.0.role, not gen_ai.prompt.name
        if key.startswith(prefix) and key[len(prefix) : len(prefix) + 1].isdigit():
            return _FAMILY_CODE[sc.PREFIX_FAMILIES[prefix]]
    return None


# -------------------------------------------------------------------------------------------------
# Flattening and pivoting the attribute lists
# -------------------------------------------------------------------------------------------------


def _chunks(col: pa.ChunkedArray) -> Iterator[tuple[int, pa.Array]]:
    """(row offset, array) pieces of a column: one piece when it is small enough, else its chunks
    (Arrow string offsets are 32-bit: more than 2 GiB of text cannot be one piece)."""
    if col.num_chunks == 1:
        yield 0, col.chunk(0)
        return
    if col.nbytes <= COMBINE_MAX_BYTES:  # well below 2 GiB: cannot overflow
        yield 0, col.combine_chunks()
        return
    offset = 0
    for chunk in col.chunks:
        yield offset, chunk
        offset += len(chunk)


def _attr_entries(arr: pa.Array, row_offset: int) -> tuple[pl.DataFrame, list[str]]:
    """Attributes of a list<ATTR> array: row, code (null: ignored key), key index into the
    returned key list, and the typed value fields."""
    rows = pc.list_parent_indices(arr)
    flat = pc.list_flatten(arr)
    fields = dict(zip([f.name for f in flat.type], flat.flatten(), strict=True))
    enc = pc.dictionary_encode(fields["key"])
    keys = enc.dictionary.to_pylist()
    lookup = pa.array([_key_code(k) for k in keys], pa.int32())
    frame = pl.from_arrow(
        pa.table(
            {
                "row": rows,
                "code": lookup.take(enc.indices),
                "k": enc.indices,
                "s": fields["str"],
                "i": fields["int"],
                "f": fields["float"],
                "b": fields["bool"],
                "j": fields["json"],
            }
        )
    )
    assert isinstance(frame, pl.DataFrame)
    return (frame.with_columns(pl.col("row") + row_offset) if row_offset else frame), keys


_VALUE_FIELDS = ("s", "j", "i", "f", "b")


def _group_value(group: pl.DataFrame, numeric: bool) -> pl.Series:
    """Values of the entries of `group` as text (or numbers), from the value fields set."""
    used = [f for f in _VALUE_FIELDS if group.get_column(f).null_count() < group.height]
    if not used:
        return pl.repeat(None, group.height, dtype=pl.Float64 if numeric else pl.String, eager=True)
    if numeric:
        parts = {  # in precedence order
            "f": pl.col("f"),
            "i": pl.col("i").cast(pl.Float64),
            "s": pl.col("s").str.strip_chars().cast(pl.Float64, strict=False),
            "b": pl.col("b").cast(pl.Float64),
            "j": pl.col("j").str.strip_chars().cast(pl.Float64, strict=False),
        }
    else:
        parts = {f: pl.col(f).cast(pl.String) for f in _VALUE_FIELDS}
    value = group.select(pl.coalesce([e for f, e in parts.items() if f in used])).to_series()
    if numeric:
        return value
    return value.set((value == "").fill_null(False), None)  # an empty attribute records nothing


def _event_attributes(col: pa.ChunkedArray, n: int) -> pa.ChunkedArray | None:
    """The attributes of the span events in `semconv.ATTRIBUTE_EVENTS`, one list per span (a
    list<ATTR> column like the attributes), each key named `<event name>.<key>`; None when no
    span has such an event."""
    pieces = []
    for off, arr in _chunks(col):
        flat = pc.list_flatten(arr)
        hit = pc.fill_null(
            pc.is_in(flat.field("name"), value_set=pa.array(sorted(sc.ATTRIBUTE_EVENTS))), False
        )
        if not pc.any(hit).as_py():
            continue
        rows = pc.add(pc.filter(pc.list_parent_indices(arr), hit), off)
        lists = pc.filter(flat.field("attributes"), hit)
        attrs, event = pc.list_flatten(lists), pc.list_parent_indices(lists)
        names = pc.take(pc.filter(flat.field("name"), hit), event)
        keys = pc.binary_join_element_wise(names, attrs.field("key"), ".")
        fields = [keys if f.name == "key" else attrs.field(f.name) for f in attrs.type]
        pieces.append(
            (pc.take(rows, event), pa.StructArray.from_arrays(fields, fields=list(attrs.type)))
        )
    if not pieces:
        return None
    rows = np.concatenate([r.to_numpy() for r, _ in pieces])
    offsets = np.searchsorted(rows, np.arange(n + 1)).astype(np.int32)
    values = pa.concat_arrays([v for _, v in pieces])
    return pa.chunked_array([pa.ListArray.from_arrays(pa.array(offsets), values)])


def _pivot(cols: list[pa.ChunkedArray], n: int) -> tuple[dict[str, pl.Series], pl.DataFrame]:
    """One column per known key present in the attribute columns `cols` (text under the key,
    numbers under '#key'), and the entries of the flattened families (row, family, key, text)."""
    columns: dict[str, pl.Series] = {}
    families: list[pl.DataFrame] = []
    n_exact = len(_EXACT)
    for off, arr in (piece for col in cols for piece in _chunks(col)):
        entries, keys = _attr_entries(arr, off)
        known = entries.filter(pl.col("code").is_not_null()).partition_by("code", as_dict=True)
        for (code,), group in sorted(known.items()):  # each group in position order
            rows = group.get_column("row")
            if code >= n_exact:
                families.append(
                    pl.DataFrame(
                        {
                            "row": rows,
                            "family": pl.repeat(
                                code - n_exact, len(rows), dtype=pl.Int32, eager=True
                            ),
                            "key": pl.Series(keys, dtype=pl.String).gather(group.get_column("k")),
                            "text": _group_value(group, numeric=False),
                        }
                    )
                )
                continue
            numeric = _EXACT[code] in sc.NUMERIC_KEYS
            name = ("#" if numeric else "") + _EXACT[code]
            column = columns.get(name)
            if column is None:
                dtype = pl.Float64 if numeric else pl.String
                column = pl.repeat(None, n, dtype=dtype, eager=True).alias(name)
            # a key recorded twice in one span: the last value wins
            columns[name] = scatter(column, rows, _group_value(group, numeric))
    for key in sc.PLACEHOLDERS.keys() & set(columns):
        text = columns[key]
        columns[key] = text.set(text.is_in(list(sc.PLACEHOLDERS[key])).fill_null(False), None)
    if families:
        prefixed = pl.concat(families).sort("row", maintain_order=True)
    else:
        prefixed = pl.DataFrame(
            schema={"row": pl.Int64, "family": pl.Int32, "key": pl.String, "text": pl.String}
        )
    return columns, prefixed


def _events(
    col: pa.ChunkedArray, n: int
) -> tuple[pl.Series, pl.Series, dict[int, list[tuple[str, dict]]]]:
    """(has exception event, first exception.type, content events per row)."""
    has_exc = pl.repeat(False, n, dtype=pl.Boolean, eager=True)
    exc_type = pl.repeat(None, n, dtype=pl.String, eager=True)
    content: dict[int, list[tuple[str, dict]]] = {}
    for off, arr in _chunks(col):
        rows = pc.list_parent_indices(arr)
        if len(rows) == 0:
            continue
        flat = pc.list_flatten(arr)
        fields = dict(zip([f.name for f in flat.type], flat.flatten(), strict=True))
        names = fields["name"]
        is_exc = pc.fill_null(pc.equal(names, sc.EXCEPTION_EVENT), False)
        if pc.any(is_exc).as_py():
            exc_rows = pc.add(pc.filter(rows, is_exc), off)
            has_exc.scatter(pl.Series(exc_rows), True)
            exc_attrs = pc.filter(fields["attributes"], is_exc)
            attrs, event = pc.list_flatten(exc_attrs), pc.list_parent_indices(exc_attrs)
            hit = pc.fill_null(pc.equal(attrs.field("key"), sc.EXCEPTION_TYPE), False)
            event = pc.filter(event, hit)
            text = pc.coalesce(attrs.field("str"), attrs.field("json"))
            found = pl.DataFrame(
                {
                    "event": pl.Series(event),
                    "row": pl.Series(pc.take(exc_rows, event)),
                    "t": pl.Series(pc.filter(text, hit)),
                }
            )
            # the first exception.type of each event (text or JSON), then of each span
            found = found.unique("event", keep="first", maintain_order=True).drop_nulls()
            found = found.unique("row", keep="first", maintain_order=True)
            if found.height:
                exc_type = scatter(exc_type, found["row"], found["t"])
        is_content = pc.is_in(names, value_set=pa.array(sorted(sc.CONTENT_EVENTS)))
        if pc.any(is_content).as_py():
            c_rows = pc.add(pc.filter(rows, is_content), off).to_pylist()
            c_names = pc.filter(names, is_content).to_pylist()
            c_attrs = pc.filter(fields["attributes"], is_content).to_pylist()
            for row, name, attrs in zip(c_rows, c_names, c_attrs, strict=True):
                content.setdefault(row, []).append((name, _attr_dict(attrs)))
    return has_exc, exc_type, content


def _attr_dict(attrs: list[dict[str, Any]] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in attrs or ():
        value = a["str"]
        if value is None:
            if a["json"] is not None:
                value = ct.load_json(a["json"])
            elif a["int"] is not None:
                value = a["int"]
            elif a["float"] is not None:
                value = a["float"]
            else:
                value = a["bool"]
        out[a["key"]] = value
    return out


# -------------------------------------------------------------------------------------------------
# Expressions
# -------------------------------------------------------------------------------------------------


class _Cols:
    """Expression helpers that read a key's column, or a null literal when no span has it."""

    def __init__(self, present: set[str]) -> None:
        self.present = present

    def t(self, key: str) -> pl.Expr:
        """Text of `key` (empty values and placeholders were nulled by the pivot)."""
        if key in self.present:
            return pl.col(key)
        return pl.lit(None, dtype=pl.String)

    def n(self, key: str) -> pl.Expr:
        if "#" + key in self.present:
            return pl.col("#" + key)
        return pl.lit(None, dtype=pl.Float64)

    def first(self, keys: tuple[str, ...] | list[str]) -> pl.Expr:
        return pl.coalesce([self.t(k) for k in keys])

    def first_num(self, keys: tuple[str, ...]) -> pl.Expr:
        return pl.coalesce([self.n(k) for k in keys])


def _lookup(expr: pl.Expr, mapping: dict[str, str], upper: bool = False) -> pl.Expr:
    norm = expr.str.strip_chars()
    norm = norm.str.to_uppercase() if upper else norm.str.to_lowercase()
    return norm.replace_strict(mapping, default=None, return_dtype=pl.String)


def _name_facts(names: pl.Series) -> pl.DataFrame:
    """The name-only parts of `_role_exprs` and `_scalars` (``_n_*`` columns), computed once
    per distinct span name (spans share a few names) and joined to the spans."""
    name = pl.col("span_name")
    generic_tool_names = [
        sc.ADK_EXECUTE_TOOL_PREFIX.strip(),
        sc.PYDANTIC_RUNNING_TOOL,
        sc.PYDANTIC_RUNNING_OUTPUT_FUNCTION,
        *[k for k, v in sc.VERCEL_OPERATION_ROLES.items() if v == sc.TOOL_CALL],
        *[k for k, v in sc.CLAUDE_CODE_ROLES.items() if v == sc.TOOL_CALL],
        sc.CLAUDE_CODE_BLOCKED,  # a call when its permission was refused
    ]
    event_stem = name.str.extract(sc.EVENT_SPAN_NAME, 1)  # "tool.search.wikipedia" of "...start-12"
    model_prefix = pl.any_horizontal([name.str.starts_with(p) for p in sc.LOGFIRE_MODEL_PREFIXES])
    other_prefix = pl.any_horizontal([name.str.starts_with(p) for p in sc.LOGFIRE_OTHER_PREFIXES])
    return (
        names.unique()
        .to_frame("span_name")
        .filter(name.is_not_null())
        .select(
            "span_name",
            _n_vercel=pl.when(name.str.starts_with(sc.VERCEL_PREFIX)).then(name),
            _n_adk_merged=name == sc.ADK_MERGED_SPAN,
            _n_adk=pl.when(name == sc.ADK_CALL_LLM)
            .then(pl.lit(sc.MODEL_CALL))
            .when(name.str.starts_with(sc.ADK_EXECUTE_TOOL_PREFIX))
            .then(pl.lit(sc.TOOL_CALL))
            .when(
                name.str.starts_with(sc.ADK_AGENT_RUN_PREFIX)
                | name.str.starts_with(sc.ADK_INVOKE_AGENT_PREFIX + " ")
                | (name == sc.ADK_INVOKE_AGENT_PREFIX)
            )
            .then(pl.lit(sc.AGENT)),
            _n_pydantic=pl.when(name == sc.PYDANTIC_AGENT_RUN)
            .then(pl.lit(sc.AGENT))
            .when(name.is_in([sc.PYDANTIC_RUNNING_TOOL, sc.PYDANTIC_RUNNING_OUTPUT_FUNCTION]))
            .then(pl.lit(sc.TOOL_CALL))
            .when(name == sc.PYDANTIC_RUNNING_TOOLS)
            .then(pl.lit(sc.OTHER)),
            _n_pydantic_chat=name.str.starts_with(sc.PYDANTIC_CHAT_PREFIX),
            _n_oi_handoff=name.str.starts_with(sc.OPENINFERENCE_HANDOFF_PREFIX),
            _n_oi_prepare=name.str.ends_with(sc.OPENINFERENCE_LLAMAINDEX_PREPARE_SUFFIX),
            _n_claude_code=pl.when(name.str.starts_with(sc.CLAUDE_CODE_PREFIX)).then(
                name.replace_strict(sc.CLAUDE_CODE_ROLES, default=sc.OTHER)
            ),
            _n_logfire=pl.when(name.str.starts_with(sc.LOGFIRE_AGENT_PREFIX))
            .then(pl.lit(sc.AGENT))
            .when(name.str.starts_with(sc.LOGFIRE_FUNCTION_PREFIX))
            .then(pl.lit(sc.TOOL_CALL))
            .when(model_prefix)
            .then(pl.lit(sc.MODEL_CALL))
            .when(other_prefix)
            .then(pl.lit(sc.OTHER)),
            _n_adk_tool=pl.when(name.str.starts_with(sc.ADK_EXECUTE_TOOL_PREFIX)).then(
                name.str.strip_prefix(sc.ADK_EXECUTE_TOOL_PREFIX).str.strip_chars()
            ),
            _n_dspy_tool=name.str.extract(sc.OPENINFERENCE_DSPY_TOOL_SPAN, 1),
            _n_traceloop_tool=pl.when(name.str.ends_with(sc.TRACELOOP_TOOL_SUFFIX)).then(
                name.str.strip_suffix(sc.TRACELOOP_TOOL_SUFFIX)
            ),
            _n_plain_tool=pl.when(
                ~name.is_in(generic_tool_names) & ~name.str.starts_with(sc.LOGFIRE_FUNCTION_PREFIX)
            ).then(pl.coalesce(event_stem, name)),
            _n_traceloop_agent=pl.when(name.str.ends_with(sc.TRACELOOP_AGENT_SUFFIX)).then(
                name.str.strip_suffix(sc.TRACELOOP_AGENT_SUFFIX)
            ),
            _n_event_call=pl.concat_str(
                event_stem, pl.lit("#"), name.str.extract(sc.EVENT_SPAN_NAME, 2)
            ),
            _n_running_tools=name.str.contains(sc.PYDANTIC_RUNNING_N_TOOLS),
            _n_agent_named=name.str.contains(_AGENT_FROM_NAME.pattern),
            _n_agent=name.str.extract(_AGENT_FROM_NAME.pattern, 1),
        )
    )


def _role_exprs(c: _Cols) -> list[tuple[str, pl.Expr, pl.Expr]]:
    """(convention, role or null, marker present) per family, in precedence order (the name's
    parts read from `_name_facts`)."""
    vercel_op = pl.coalesce(
        c.t(sc.AI_OPERATION_ID),
        pl.when(c.t(sc.VERCEL_OPERATION_NAME).str.starts_with(sc.VERCEL_PREFIX)).then(
            c.t(sc.VERCEL_OPERATION_NAME).str.split(" ").list.first()
        ),
        pl.col("_n_vercel"),
    )
    merged = (c.t(sc.GEN_AI_TOOL_NAME) == sc.ADK_MERGED_TOOL_NAME) | pl.col("_n_adk_merged")
    adk_evidence = pl.any_horizontal(
        [c.t(sc.GEN_AI_SYSTEM) == sc.ADK_SYSTEM] + [c.t(k).is_not_null() for k in sc.ADK_EVIDENCE]
    ).fill_null(False)
    adk = pl.col("_n_adk")
    adk = pl.when((adk != sc.MODEL_CALL) | adk_evidence).then(adk)
    genai_attrs = c.t(sc.GEN_AI_REQUEST_MODEL).is_not_null() | c.t(sc.GEN_AI_SYSTEM).is_not_null()
    named_run = pl.col("span_name") == pl.concat_str(
        c.first(sc.AGENT_NAME_KEYS), pl.lit(sc.PYDANTIC_NAMED_AGENT_RUN_SUFFIX)
    )
    pydantic = (
        pl.when(pl.col("_n_pydantic").is_not_null())
        .then("_n_pydantic")
        .when(named_run)
        .then(pl.lit(sc.AGENT))
        .when(pl.col("_n_running_tools"))
        .then(pl.lit(sc.OTHER))
        .when(pl.col("_n_pydantic_chat") & genai_attrs)
        .then(pl.lit(sc.MODEL_CALL))
    )
    logfire = pl.col("_n_logfire")
    monocle = c.t(sc.MONOCLE_VERSION).is_not_null()
    promptflow = (c.t(sc.PROMPTFLOW_FRAMEWORK) == sc.PROMPTFLOW).fill_null(False)
    monocle_roles = sc.MONOCLE_SPAN_TYPE_ROLES
    # a span naming a tool and its call id is that tool's execution, operation name or not
    # (Koog writes none: langfuse koog-2025-08-26)
    genai_tool = c.t(sc.GEN_AI_TOOL_NAME).is_not_null() & c.t(sc.GEN_AI_TOOL_CALL_ID).is_not_null()
    traceloop = pl.coalesce(
        _lookup(c.t(sc.TRACELOOP_SPAN_KIND), sc.TRACELOOP_KIND_ROLES),
        _lookup(c.t(sc.LLM_REQUEST_TYPE), sc.LLM_REQUEST_TYPE_ROLES),
    )

    # OpenAI Agents' handoff is a TOOL span named for it, with no tool name: a handoff, not a
    # tool's run (the requested transfer_to_* stays a call no span ran, as in other stacks)
    oi_role = _lookup(c.t(sc.OPENINFERENCE_SPAN_KIND), sc.OPENINFERENCE_KIND_ROLES, True)
    oi_handoff = (oi_role == sc.TOOL_CALL) & pl.col("_n_oi_handoff") & c.t(sc.TOOL_NAME).is_null()
    oi_prepare = (oi_role == sc.MODEL_CALL) & pl.col("_n_oi_prepare")
    oi_role = pl.when(oi_handoff | oi_prepare).then(pl.lit(sc.OTHER)).otherwise(oi_role)

    claude_code = (
        pl.when(_claude_code_rejected(c)).then(pl.lit(sc.TOOL_CALL)).otherwise("_n_claude_code")
    )

    def kind(conv: str, key: str, roles: dict[str, str], upper: bool = False) -> tuple:
        """A family whose marker is one attribute naming the span's kind."""
        return (conv, _lookup(c.t(key), roles, upper), c.t(key).is_not_null())

    # a tool span that is no call: CrewAI's report of a failure, a call paused for an approval
    report = c.t(sc.CREWAI_EVENT_NAME).is_in(sc.CREWAI_REPORT_EVENTS).fill_null(False)
    no_call = report | _paused_call(c)
    return [
        # ADK's merged parallel-tool span also says execute_tool: it is not one more call
        (sc.ADK, pl.when(merged).then(pl.lit(sc.OTHER)), merged),
        (sc.GENAI, pl.when(no_call).then(pl.lit(sc.OTHER)), no_call),
        # LangSmith derives gen_ai.operation.name from its own kind, lossily (prompt -> chat)
        kind(sc.LANGSMITH, sc.LANGSMITH_SPAN_KIND, sc.LANGSMITH_KIND_ROLES),
        kind(sc.GENAI, sc.GEN_AI_OPERATION_NAME, sc.GENAI_OPERATION_ROLES),
        (sc.GENAI, pl.when(_maf_workflow(c)).then(pl.lit(sc.AGENT)), _maf_workflow(c)),
        (sc.OPENINFERENCE, oi_role, c.t(sc.OPENINFERENCE_SPAN_KIND).is_not_null()),
        (
            sc.OPENLLMETRY,
            traceloop,
            c.t(sc.TRACELOOP_SPAN_KIND).is_not_null() | c.t(sc.LLM_REQUEST_TYPE).is_not_null(),
        ),
        (
            sc.VERCEL,
            vercel_op.replace_strict(
                sc.VERCEL_OPERATION_ROLES, default=None, return_dtype=pl.String
            ),
            vercel_op.is_not_null(),
        ),
        (sc.ADK, adk, adk.is_not_null()),
        (sc.PYDANTIC_AI, pydantic, pydantic.is_not_null()),
        (sc.LOGFIRE, logfire, logfire.is_not_null()),
        (sc.CLAUDE_CODE, claude_code, pl.col("_n_claude_code").is_not_null()),
        (
            sc.MONOCLE,
            pl.when(monocle).then(_lookup(c.t(sc.MONOCLE_SPAN_TYPE), monocle_roles)),
            monocle,
        ),
        (
            sc.PROMPTFLOW,
            pl.when(promptflow).then(
                _lookup(c.t(sc.PROMPTFLOW_SPAN_TYPE), sc.PROMPTFLOW_SPAN_TYPE_ROLES)
            ),
            promptflow,
        ),
        # what no family decided, a GenAI tool name and call id still do (before the type a
        # Langfuse export gives every observation, its weakest word)
        (sc.GENAI, pl.when(genai_tool).then(pl.lit(sc.TOOL_CALL)), genai_tool),
        kind(sc.LANGFUSE, sc.LANGFUSE_TYPE, sc.LANGFUSE_TYPE_ROLES, upper=True),
    ]


def _maf_workflow(c: _Cols) -> pl.Expr:
    """A Microsoft Agent Framework workflow run (`semconv.MAF_WORKFLOW_RUN`)."""
    return (pl.col("span_name") == sc.MAF_WORKFLOW_RUN) & c.t(sc.MAF_WORKFLOW_ID).is_not_null()


def _paused_call(c: _Cols) -> pl.Expr:
    """A tool span whose call waited for a person's approval (or a result from outside) and did
    not run: Pydantic AI's deferral, a Strands interrupt. The call is no tool call of its own: the
    model's request stays a call that never ran, unless a resumed run's span runs it."""
    deferred = c.t(sc.PYDANTIC_TOOL_DEFERRAL).is_not_null() | pl.col("_exception_type").is_in(
        sc.PYDANTIC_DEFERRALS
    )
    interrupted = (
        (c.first(sc.PROVIDER_KEYS) == sc.STRANDS_SYSTEM)
        & c.first(sc.TOOL_STATUS_KEYS).is_null()
        & (pl.col("status_code").str.to_lowercase() != "error")
        & ~pl.col("_has_exception")
    )
    return (c.t(sc.GEN_AI_TOOL_NAME).is_not_null() & (deferred | interrupted)).fill_null(False)


def _claude_code_rejected(c: _Cols) -> pl.Expr:
    """Claude Code's wait for a permission that was refused: the call, which never ran."""
    return (pl.col("span_name") == sc.CLAUDE_CODE_BLOCKED) & (
        c.t(sc.CLAUDE_CODE_DECISION) == sc.CLAUDE_CODE_REJECTED
    ).fill_null(False)


def _classify(df: pl.LazyFrame, c: _Cols) -> pl.LazyFrame:
    families = _role_exprs(c)
    role = pl.coalesce([r for _, r, _ in families]).fill_null(pl.lit(sc.OTHER))
    # the family that decided; else the first whose marker is there (an unknown value)
    decided = [pl.when(r.is_not_null()).then(pl.lit(conv)) for conv, r, _ in families]
    marked = [pl.when(m).then(pl.lit(conv)) for conv, _, m in families]
    return df.with_columns(role.alias("role"), pl.coalesce(decided + marked).alias("convention"))


_AGENT_FROM_NAME = re.compile(r"^(?:invoke_agent|create_agent|agent_run)\s+\[?(.+?)\]?$")


def _scalars(df: pl.LazyFrame, c: _Cols) -> pl.LazyFrame:
    role = pl.col("role")
    conv = pl.col("convention")
    name = pl.col("span_name")
    is_tool = role == sc.TOOL_CALL
    is_agent = role == sc.AGENT
    logfire = conv == sc.LOGFIRE
    monocle = conv == sc.MONOCLE
    claude = conv == sc.CLAUDE_CODE
    # Prompt flow has no tool type: a function span is the run of a tool when a model asked
    # for it by that name (`analyzer.calls.mark_requested_tools`), its inputs the arguments
    promptflow_function = (conv == sc.PROMPTFLOW) & (role == sc.OTHER)
    entity = c.t(sc.MONOCLE_ENTITY_1_NAME)
    # a list of one text (an MCP request's input): that text; CrewAI's keyword arguments: the
    # list, read by `_fix_arguments`
    monocle_input = c.t(sc.MONOCLE_INPUT)
    monocle_input = (
        pl.when(
            monocle_input.str.starts_with("[")
            & ~monocle_input.str.contains(sc.MONOCLE_KEYWORD_INPUT)
        )
        .then(monocle_input.str.json_path_match("$[0]"))
        .otherwise(monocle_input)
    )

    # status: span status, error.type, an exception event, a Langfuse ERROR level, a tool
    # that returned an error result (Strands), or one whose permission was refused (Claude Code)
    error_type = c.t(sc.ERROR_TYPE)
    status_code = pl.col("status_code").str.to_lowercase()
    failed = (
        (status_code == "error")
        | error_type.is_not_null()
        | pl.col("_has_exception")
        | (c.t(sc.LANGFUSE_LEVEL).str.to_uppercase() == sc.LANGFUSE_ERROR_LEVEL)
        | (is_tool & (c.first(sc.TOOL_STATUS_KEYS).str.to_lowercase() == "error"))
        | _claude_code_rejected(c)
    )
    provider = c.first(sc.PROVIDER_KEYS).str.strip_chars().str.to_lowercase()
    provider = provider.replace(sc.PROVIDER_RENAMES)

    def json_num(key: str, paths: tuple[str, ...]) -> pl.Expr:
        return pl.coalesce(
            [
                c.t(key).str.json_path_match(p).str.strip_chars().cast(pl.Float64, strict=False)
                for p in paths
            ]
        )

    temperature = pl.coalesce(
        c.n(sc.GEN_AI_REQUEST_TEMPERATURE),
        json_num(sc.LLM_INVOCATION_PARAMETERS, (sc.TEMPERATURE_PATH,)),
        c.n(sc.AI_SETTINGS_TEMPERATURE),
        json_num(sc.LANGFUSE_MODEL_PARAMETERS, (sc.TEMPERATURE_PATH,)),
    )

    def langchain_usage(paths: tuple[str, ...]) -> pl.Expr:
        present = [k for k in sc.LANGCHAIN_RESULT_KEYS if k in c.present]
        if not present:
            return pl.lit(None, dtype=pl.Float64)
        return pl.when(role == sc.MODEL_CALL).then(
            pl.coalesce([json_num(k, paths) for k in present])
        )

    def langfuse_usage(paths: tuple[str, ...], parts: tuple[str, ...]) -> pl.Expr:
        details = sc.LANGFUSE_USAGE_DETAILS
        base = json_num(details, paths)
        return base + pl.sum_horizontal([json_num(details, (p,)).fill_null(0) for p in parts])

    claude_in = (
        c.n(sc.CLAUDE_CODE_INPUT_TOKENS)
        + c.n(sc.CLAUDE_CODE_CACHE_READ_TOKENS).fill_null(0)
        + c.n(sc.CLAUDE_CODE_CACHE_CREATION_TOKENS).fill_null(0)
    )
    recorded_in = pl.coalesce(c.first_num(sc.INPUT_TOKEN_KEYS), pl.when(claude).then(claude_in))
    recorded_out = pl.coalesce(
        c.first_num(sc.OUTPUT_TOKEN_KEYS),
        pl.when(claude).then(c.n(sc.CLAUDE_CODE_OUTPUT_TOKENS)),
    )
    backend_in = langfuse_usage(sc.LANGFUSE_USAGE_INPUT_PATHS, sc.LANGFUSE_USAGE_INPUT_PARTS)
    backend_out = langfuse_usage(sc.LANGFUSE_USAGE_OUTPUT_PATHS, sc.LANGFUSE_USAGE_OUTPUT_PARTS)
    tokens_in = pl.coalesce(
        recorded_in, backend_in, langchain_usage(sc.LANGCHAIN_USAGE_INPUT_PATHS)
    )
    tokens_out = pl.coalesce(
        recorded_out, backend_out, langchain_usage(sc.LANGCHAIN_USAGE_OUTPUT_PATHS)
    )
    # usage the exporting backend filled in (its own count or estimate), not the span's
    backend_usage = (
        recorded_in.is_null()
        & recorded_out.is_null()
        & (backend_in.is_not_null() | backend_out.is_not_null())
    )
    tokens_cached = pl.coalesce(
        c.first_num(sc.CACHED_TOKEN_KEYS),
        pl.when(claude).then(c.n(sc.CLAUDE_CODE_CACHE_READ_TOKENS)),
        json_num(sc.LANGFUSE_USAGE_DETAILS, sc.LANGFUSE_USAGE_CACHED_PATHS),
    )
    in_cost, out_cost = c.n(sc.ANY_AGENT_INPUT_COST), c.n(sc.ANY_AGENT_OUTPUT_COST)
    cost = pl.coalesce(
        c.first_num(sc.COST_KEYS),
        pl.when(in_cost.is_not_null() | out_cost.is_not_null()).then(
            in_cost.fill_null(0) + out_cost.fill_null(0)
        ),
        json_num(sc.LANGFUSE_COST_DETAILS, (sc.LANGFUSE_COST_TOTAL_PATH,)),
    )

    traceloop_kind = c.t(sc.TRACELOOP_SPAN_KIND).str.to_lowercase()
    adk_tool, traceloop_tool = pl.col("_n_adk_tool"), pl.col("_n_traceloop_tool")
    dspy_tool = pl.col("_n_dspy_tool")
    tool_from_name = (
        pl.when(adk_tool.is_not_null())
        .then(adk_tool)
        .when(traceloop_tool.is_not_null() & (conv == sc.OPENLLMETRY))
        .then(traceloop_tool)
        .when(dspy_tool.is_not_null() & (conv == sc.OPENINFERENCE))
        .then(dspy_tool)
        .otherwise(pl.col("_n_plain_tool"))
    )
    tool_name = pl.coalesce(
        c.first(sc.TOOL_NAME_KEYS),
        pl.when(traceloop_kind.is_in(sc.TRACELOOP_TOOL_KINDS)).then(c.t(sc.TRACELOOP_ENTITY_NAME)),
        pl.when(logfire).then(c.t(sc.LOGFIRE_NAME)),
        pl.when(monocle).then(entity),
        pl.when(claude).then(c.t(sc.CLAUDE_CODE_TOOL_NAME)),
        c.t(sc.TOOL_CALL_FUNCTION_NAME),
        tool_from_name,
    )
    tool_schema = c.first(sc.TOOL_SCHEMA_KEYS)
    arguments = pl.coalesce(
        c.first(sc.ARGUMENT_KEYS),
        pl.when(logfire).then(c.t(sc.LOGFIRE_INPUT)),
        pl.when(monocle).then(monocle_input),
        pl.when(promptflow_function).then(c.t(sc.PROMPTFLOW_INPUTS)),
        c.first(sc.ARGUMENT_FALLBACK_KEYS),
    )
    result = pl.coalesce(
        c.first(sc.RESULT_KEYS),
        pl.when(logfire).then(c.t(sc.LOGFIRE_OUTPUT)),
        pl.when(monocle).then(pl.coalesce(c.t(sc.MONOCLE_RESPONSE), c.t(sc.MONOCLE_OUTPUT))),
        pl.when(promptflow_function).then(c.t(sc.PROMPTFLOW_OUTPUT)),
        pl.when(claude).then(c.t(sc.CLAUDE_CODE_TOOL_OUTPUT)),
        c.first(sc.RESULT_FALLBACK_KEYS),
    )
    # a tool that reports its own failure in its result, the span ending ok (MCP, ADK's retry
    # plugin); only a result that names the key is parsed (`then` reads the rows `when` keeps)
    result_error = pl.any_horizontal(
        pl.when(result.str.contains(key, literal=True)).then(
            result.str.json_path_match("$." + key) == value
        )
        for key, value in sc.RESULT_ERROR_MARKERS.items()
    )
    result_error = (is_tool & result_error).fill_null(False)
    failed = failed | result_error
    error_type = pl.coalesce(
        error_type,
        pl.when(result_error).then(result.str.json_path_match("$." + sc.RESULT_ERROR_TYPE)),
    )
    status = (
        pl.when(failed)
        .then(pl.lit("error"))
        .when(status_code.is_in(["ok", "unset"]))
        .then(status_code)
        .otherwise(pl.lit("unset"))
    )

    traceloop_agent = pl.col("_n_traceloop_agent")
    agent_from_name = (
        pl.when(traceloop_agent.is_not_null() & (conv == sc.OPENLLMETRY))
        .then(traceloop_agent)
        .when(pl.col("_n_agent_named"))
        .then(pl.col("_n_agent"))
        .when(conv.is_in([sc.OPENINFERENCE, sc.LANGFUSE]))
        .then(name)
    )
    agent_name = pl.coalesce(
        c.first(sc.AGENT_NAME_KEYS),
        pl.when(is_agent & traceloop_kind.is_in(sc.TRACELOOP_AGENT_KINDS)).then(
            c.t(sc.TRACELOOP_ENTITY_NAME)
        ),
        pl.when(is_agent & (conv == sc.VERCEL)).then(c.t(sc.AI_TELEMETRY_FUNCTION_ID)),
        pl.when(is_agent & logfire).then(c.t(sc.LOGFIRE_NAME)),
        pl.when(is_agent & monocle).then(entity),
        pl.when(is_agent & _maf_workflow(c)).then(c.t(sc.MAF_WORKFLOW_NAME)),
        pl.when(is_agent).then(agent_from_name),
    )
    agent_version = pl.coalesce(
        c.t(sc.GEN_AI_AGENT_VERSION),
        pl.when(is_agent & traceloop_kind.is_in(sc.TRACELOOP_AGENT_KINDS)).then(
            c.t(sc.TRACELOOP_ENTITY_VERSION)
        ),
    )
    prompt_name = c.first(sc.PROMPT_NAME_KEYS)
    prompt_version = c.first(sc.PROMPT_VERSION_KEYS)
    prompt_template = c.first(sc.PROMPT_TEMPLATE_KEYS)
    prompt_name_version = (
        pl.when(prompt_name.is_not_null() & prompt_version.is_not_null())
        .then(pl.concat_str([prompt_name, pl.lit("@"), prompt_version]))
        .otherwise(pl.coalesce(prompt_name, prompt_version))
    )
    # a managed prompt's identity: name@version, then its template's text, as recorded
    prompt_id = pl.when(prompt_name_version.is_not_null() | prompt_template.is_not_null()).then(
        pl.concat_str([prompt_name_version, prompt_template], separator="\n", ignore_nulls=True)
    )
    model = pl.coalesce(
        c.first(sc.MODEL_KEYS),
        pl.when(conv == sc.PYDANTIC_AI).then(c.t(sc.PYDANTIC_MODEL_NAME)),
        c.t(sc.LANGFUSE_MODEL),
        pl.when(role == sc.MODEL_CALL).then(c.t(sc.TRACELOOP_LS_MODEL_NAME)),
        pl.when(claude).then(c.t(sc.CLAUDE_CODE_MODEL)),
        pl.when(
            monocle & c.t(sc.MONOCLE_ENTITY_2_TYPE).str.starts_with(sc.MONOCLE_MODEL_TYPE_PREFIX)
        ).then(c.t(sc.MONOCLE_ENTITY_2_NAME)),
    )
    return df.with_columns(
        status.alias("status"),
        pl.when(failed)
        .then(pl.coalesce(error_type, pl.col("_exception_type")))
        .alias("error_type"),
        model.alias("model"),
        provider.alias("provider"),
        temperature.alias("temperature"),
        tokens_in.round().cast(pl.Int64, strict=False).alias("input_tokens"),
        tokens_out.round().cast(pl.Int64, strict=False).alias("output_tokens"),
        tokens_cached.round().cast(pl.Int64, strict=False).alias("cached_input_tokens"),
        backend_usage.alias("backend_usage"),
        cost.alias("recorded_cost_usd"),
        pl.when(is_tool).then(tool_name).alias("tool_name"),
        c.first(sc.TOOL_NAME_KEYS).alias("named_tool"),
        pl.when(role.is_in([sc.MODEL_CALL, sc.TOOL_CALL]))
        .then("_n_event_call")
        .alias("event_call"),
        pl.when(is_tool)
        .then(
            pl.coalesce(
                c.first(sc.TOOL_CALL_ID_KEYS),
                pl.when(claude).then(c.t(sc.CLAUDE_CODE_TOOL_USE_ID)),
            )
        )
        .alias("tool_call_id"),
        pl.when(is_tool | promptflow_function).then(arguments).alias("arguments"),
        pl.when(is_tool | promptflow_function).then(result).alias("result"),
        agent_name.alias("agent_name"),
        agent_version.alias("agent_version"),
        prompt_id.alias("prompt_id"),
        c.n(sc.HTTP_REQUEST_RESEND_COUNT)
        .round()
        .cast(pl.Int64, strict=False)
        .alias("http_resend_count"),
        c.first(sc.CONVERSATION_KEYS).alias("conversation_id"),
        pl.coalesce(
            pl.when(claude).then(c.t(sc.CLAUDE_CODE_STOP_REASON)), c.first(sc.FINISH_REASON_KEYS)
        ).alias("_finish_text"),
        c.first(sc.TOOL_DEFINITION_KEYS).alias("_tooldefs_text"),
        # a tool span's own definition (OpenInference, Strands), parsed once per distinct value
        pl.when(is_tool & (tool_schema.is_not_null() | c.t(sc.TOOL_PARAMETERS).is_not_null()))
        .then(
            pl.struct(
                name=tool_name,
                json_schema=tool_schema,
                parameters=c.t(sc.TOOL_PARAMETERS),
            ).struct.json_encode()
        )
        .alias("_tool_span_defs"),
    )


# -------------------------------------------------------------------------------------------------
# Python over content (only rows that carry it) and over distinct values
# -------------------------------------------------------------------------------------------------


def _patch(series: pl.Series, mask: pl.Series, fn: Any) -> pl.Series:
    """`series` with `fn` applied to the values where `mask` is true."""
    idx = mask.arg_true()
    if not len(idx):
        return series
    values = [fn(v) for v in series.gather(idx).to_list()]
    return scatter(series, idx, values)


def _fix_arguments(df: pl.DataFrame, c: _Cols) -> pl.Series:
    """Tool arguments with emitters' wrappers removed (`content.normalize_arguments`), parsing
    only the values that can hold one: JSON strings, `kwargs` objects, LangSmith raw inputs,
    Python reprs (`content.python_literal_json`)."""
    args = df["arguments"]
    langsmith = df.with_columns(_ls=c.t(sc.LANGSMITH_SPAN_KIND).is_not_null())["_ls"]
    trimmed = args.str.strip_chars_start()
    wrapped = trimmed.str.starts_with('"') | args.str.contains('"kwargs"', literal=True)
    args = _patch(args, (wrapped & ~langsmith).fill_null(False), ct.normalize_arguments)
    # a tool that ran was given its arguments parsed: a Python repr of them is how its
    # instrumentation wrote them (Monocle, OpenInference's LangChain tools); those of a tool
    # that failed may be why it failed, and a model's requests are its own text: kept
    ran = (df["role"] == sc.TOOL_CALL) & (df["status"] != "error")
    keywords = (df["convention"] == sc.MONOCLE) & args.str.contains(sc.MONOCLE_KEYWORD_INPUT)
    args = _patch(args, (ran & keywords).fill_null(False), ct.keyword_arguments)
    literal = args.str.contains(r"^\s*[\[{]") & args.str.contains("'|None|True|False")
    args = _patch(args, (ran & literal).fill_null(False), ct.python_literal_json)
    return _patch(
        args,
        (langsmith & (wrapped | trimmed.str.starts_with("{"))).fill_null(False),
        lambda v: ct.normalize_arguments(v, langsmith=True),
    )


def _parse_finish(text: str) -> list[str]:
    value = ct.load_json(text)
    if isinstance(value, list):
        return [v.strip() for v in value if isinstance(v, str) and v.strip()]
    if isinstance(value, str):
        # LangSmith joins the reasons with ", "
        return [p.strip() for p in value.split(",") if p.strip()]
    return []


def _map_distinct(df: pl.DataFrame, col: str, fn: Any, dtype: pl.DataType) -> pl.Series:
    """fn applied once per distinct non-null value of `col`, mapped back to every row."""
    keys = df.get_column(col)
    distinct = keys.drop_nulls().unique(maintain_order=True)
    if not len(distinct):
        return pl.repeat(None, df.height, dtype=dtype, eager=True)
    mapping = pl.DataFrame(
        {"k": distinct, "v": pl.Series([fn(k) for k in distinct.to_list()], dtype=dtype)}
    )
    joined = pl.DataFrame({"k": keys}).join(mapping, on="k", how="left", maintain_order="left")
    return joined["v"]


#: Per side (input, output): the GenAI messages key, the OpenInference and OpenLLMetry
#: flattened families (tag, prefix), the keys read before a family's generic content key
#: (`FAMILY_CONTENT_KEYS`) and those read after it.
_SOURCE_KEYS = {
    "input": (
        sc.GEN_AI_INPUT_MESSAGES,
        ("oi_input", sc.LLM_INPUT_MESSAGES_PREFIX),
        ("tl_prompt", sc.GEN_AI_PROMPT_PREFIX),
        (
            sc.PYDANTIC_ALL_MESSAGES_EVENTS,
            sc.PYDANTIC_ALL_MESSAGES,
            sc.AI_PROMPT_MESSAGES,
            sc.AI_PROMPT,
            sc.GEN_AI_PROMPT,
        ),
        (sc.TRACELOOP_ENTITY_INPUT, sc.INPUT_VALUE, sc.ADK_LLM_REQUEST, sc.LANGFUSE_INPUT),
    ),
    "output": (
        sc.GEN_AI_OUTPUT_MESSAGES,
        ("oi_output", sc.LLM_OUTPUT_MESSAGES_PREFIX),
        ("tl_completion", sc.GEN_AI_COMPLETION_PREFIX),
        (sc.ANY_AGENT_OUTPUT, sc.PYDANTIC_FINAL_RESULT, sc.GEN_AI_COMPLETION),
        (
            sc.TRACELOOP_ENTITY_OUTPUT,
            sc.OUTPUT_VALUE,
            sc.ADK_LLM_RESPONSE,
            sc.LANGFUSE_OUTPUT,
            sc.CREWAI_CREW_RESULT,
        ),
    ),
}


def _split_events(events: list[tuple[str, dict]]) -> tuple[list[Any], list[Any]]:
    """Content span events as (input message bodies, output bodies)."""
    ev_in: list[Any] = []
    ev_out: list[Any] = []
    for name, attrs in events:
        if name == sc.EVENT_CONTENT_PROMPT:
            ev_in.append(ct.load_json(attrs.get(sc.GEN_AI_PROMPT)))
        elif name == sc.EVENT_CONTENT_COMPLETION:
            completion = ct.load_json(attrs.get(sc.GEN_AI_COMPLETION))
            if isinstance(completion, list):
                ev_out.extend(completion)  # a list of output messages
            elif isinstance(completion, str):
                ev_out.append({"role": "assistant", "content": completion})  # OpenLIT: plain text
            else:
                ev_out.append(completion)
        else:
            body = ct.load_json(attrs.get(sc.GEN_AI_EVENT_CONTENT))
            if not isinstance(body, dict):
                body = {k: ct.load_json(v) for k, v in attrs.items() if k != sc.GEN_AI_SYSTEM}
            body = {**body, sc.EVENT_NAME_FIELD: name}
            (ev_out if name == sc.EVENT_CHOICE else ev_in).append(body)
    return ev_in, ev_out


def _sources(
    side: str,
    t: Any,
    flat: dict[str, list[tuple[str, str]]],
    events: list[Any],
    pyd_events: Any,
    conv: str | None,
) -> Iterator[Any]:
    """The input-message or output sources of a span in precedence order, built only as far
    as they are needed (Vercel's output text and calls come as one ready Output)."""
    genai, (oi, oi_prefix), (tl, tl_prefix), keys, late = _SOURCE_KEYS[side]
    yield t(genai)
    if flat.get(oi):
        yield ct.openinference_messages(flat[oi], oi_prefix)
    if flat.get(tl):
        yield ct.openllmetry_messages(flat[tl], tl_prefix)
    if events:
        yield events
    if isinstance(pyd_events, list) and side == "input":
        yield pyd_events  # its choice events are skipped by the message parser
    elif isinstance(pyd_events, list):
        choice = sc.EVENT_CHOICE
        yield [
            e for e in pyd_events if isinstance(e, dict) and e.get(sc.EVENT_NAME_FIELD) == choice
        ] or None
    if side == "input" and t(sc.MONOCLE_INPUT) is not None:
        yield ct.monocle_messages(t(sc.MONOCLE_INPUT))
    elif t(sc.MONOCLE_RESPONSE) is not None:
        yield ct.monocle_output(t(sc.MONOCLE_RESPONSE))
    if side == "output":
        text = t(sc.AI_RESPONSE_TEXT) or t(sc.AI_RESPONSE_OBJECT)
        calls = t(sc.AI_RESPONSE_TOOL_CALLS)
        calls = ct.parse_output(calls).calls if calls else []
        if text is not None or calls:
            yield ct.Output(text=text, calls=calls, recognized=True)
    for key in keys:
        yield t(key)
    if conv in sc.FAMILY_CONTENT_KEYS:
        yield t(sc.FAMILY_CONTENT_KEYS[conv][side == "output"])
    for key in late:
        yield t(key)


def _content_of_row(
    role: str,
    conv: str | None,
    texts: dict[str, str | None],
    flat: dict[str, list[tuple[str, str]]],
    events: list[tuple[str, dict]],
) -> tuple[list[ct.Message], ct.Output, str | None]:
    """Input messages, output and flattened tool definitions of one span, by source precedence."""
    t = texts.get
    ev_in, ev_out = _split_events(events) if events else ([], [])
    pyd_events = ct.load_json(t(sc.PYDANTIC_EVENTS)) if t(sc.PYDANTIC_EVENTS) else None

    messages: list[ct.Message] = []
    for src in _sources("input", t, flat, ev_in, pyd_events, conv):
        if src is not None:
            messages = ct.parse_messages(src)
            if messages:
                break
    system = t(sc.GEN_AI_SYSTEM_INSTRUCTIONS)
    if system and not any(m[0] == "system" for m in messages):
        messages = ct.parse_system_instructions(system) + messages

    output = ct.Output()
    outputs = _sources("output", t, flat, ev_out, pyd_events, conv)
    for src in outputs:
        if src is not None:
            output = _as_output(src)
            if not output.empty():
                break
    if role != sc.MODEL_CALL:
        output.calls = []  # only a model call requests tools; agent outputs repeat them
    elif any(call_id and args is None for call_id, _, args in output.calls):
        output.calls = _fill_arguments(output.calls, outputs)

    tooldefs = None
    if flat.get("oi_tools") or flat.get("tl_functions"):
        tooldefs = ct.flattened_tool_definitions(
            flat.get("oi_tools", []), flat.get("tl_functions", [])
        )
    return messages, output, tooldefs


def _as_output(src: Any) -> ct.Output:
    """An output source as parsed (Vercel's comes ready)."""
    return src if isinstance(src, ct.Output) else ct.parse_output(src)


def _fill_arguments(calls: list[ct.Call], later: Iterator[Any]) -> list[ct.Call]:
    """`calls` with the arguments they leave out taken, by call id, from the later output
    sources (OpenInference writes no ``function.arguments`` for ``{}``; the raw response in
    ``output.value`` has them). Arguments a call records are kept."""
    missing = {call_id for call_id, _, args in calls if call_id and args is None}
    found: dict[str, str] = {}
    for src in later:
        if src is None:
            continue
        for call_id, _, args in _as_output(src).calls:
            if call_id in missing and args is not None:
                found.setdefault(call_id, args)
        if len(found) == len(missing):
            break
    return [(i, name, found.get(i) if args is None and i else args) for i, name, args in calls]


_EMPTY_CONTENT: tuple[list[ct.Message], ct.Output, str | None] = ([], ct.Output(), None)


def _content(
    df: pl.DataFrame,
    c: _Cols,
    prefixed: pl.DataFrame,
    events: dict[int, list[tuple[str, dict]]],
) -> dict[str, Any]:
    """Content columns: parsed in Python, only for non-tool spans that carry content."""
    n = df.height
    content_keys = [k for k in sc.CONTENT_KEYS if k in c.present]
    family_keys = {
        (conv, k) for conv, keys in sc.FAMILY_CONTENT_KEYS.items() for k in keys if k in c.present
    }
    flat_or_events = pl.concat(
        [prefixed["row"].cast(pl.Int64), pl.Series(list(events), dtype=pl.Int64)]
    )
    carries = pl.any_horizontal(
        [pl.col(k).is_not_null() for k in content_keys]
        + [pl.col(k).is_not_null() & (pl.col("convention") == conv) for conv, k in family_keys]
        + [pl.int_range(pl.len()).is_in(flat_or_events.implode())]
    )
    rows = df.select(((pl.col("role") != sc.TOOL_CALL) & carries).arg_true()).to_series()

    flat_by_row: dict[int, dict[str, list[tuple[str, str]]]] = {}
    for row, fam, key, text in prefixed.iter_rows():
        if text is not None:
            flat_by_row.setdefault(row, {}).setdefault(_FAMILIES[fam], []).append((key, text))

    def parsed(row: int, rec: dict[str, Any]) -> tuple[list[ct.Message], ct.Output, str | None]:
        try:
            flat, span_events = flat_by_row.get(row, {}), events.get(row, [])
            return _content_of_row(rec["role"], rec["convention"], rec, flat, span_events)
        except (RecursionError, ValueError, TypeError, AttributeError, KeyError):
            # content we cannot make sense of is not an error of the trace: keep the span
            return _EMPTY_CONTENT

    generic = sorted({k for _, k in family_keys} - set(content_keys))
    sub = df.select(["role", "convention", *content_keys, *generic]).gather(rows)
    found = [parsed(*args) for args in zip(rows.to_list(), sub.iter_rows(named=True), strict=True)]
    outputs = [output for _, output, _ in found]

    def scattered(values: list[Any], dtype: pl.DataType, fill: Any = None) -> pl.Series:
        s = pl.repeat(fill, n, dtype=dtype, eager=True)
        return scatter(s, rows, values) if len(rows) else s

    def lists(lengths: list[int], values: pa.Array) -> pa.Array:
        return _list_array(scattered(lengths, pl.Int64, 0), values)

    n_msgs = scattered([len(messages) for messages, _, _ in found], pl.Int64, 0)
    messages = [m for ms, _, _ in found for m in ms]
    calls = [call for output in outputs for call in output.calls]
    reasons = [r for output in outputs for r in output.finish_reasons]
    return {
        "input_messages": _list_array(n_msgs, _structs(MESSAGE, messages)),
        "requested_calls": lists([len(o.calls) for o in outputs], _structs(REQUESTED_CALL, calls)),
        "_n_messages": n_msgs,
        "_n_call_args": scattered(
            [sum(1 for c in o.calls if c[2] is not None) for o in outputs], pl.Int64, 0
        ),
        "_output_text": scattered([o.text for o in outputs], pl.String),
        "_output_reasoning": scattered([o.reasoning for o in outputs], pl.Boolean, False),
        "_content_finish": pl.Series(
            lists([len(o.finish_reasons) for o in outputs], pa.array(reasons, pa.string()))
        ),
        "_flat_tooldefs": scattered([tooldefs for _, _, tooldefs in found], pl.String),
    }


def _tool_events(
    df: pl.DataFrame, events: dict[int, list[tuple[str, dict]]]
) -> tuple[pl.Series, pl.Series]:
    """The arguments and result a tool span records as events only (Strands: the content of a
    `gen_ai.tool.message` is the arguments, the message of a `gen_ai.choice` the result). A
    tool message is read as the arguments only beside a choice: alone, it may be the result."""
    with_events = list(events)
    roles = df["role"].gather(with_events).to_list() if with_events else []
    rows = [row for row, role in zip(with_events, roles, strict=True) if role == sc.TOOL_CALL]
    args: list[str | None] = []
    results: list[str | None] = []
    for row in rows:
        ev_in, ev_out = _split_events(events[row])
        sent = [
            b["content"]
            for b in ev_in
            if b.get(sc.EVENT_NAME_FIELD) == sc.EVENT_TOOL_MESSAGE and b.get("content") is not None
        ]
        args.append(ct.arguments_text(sent[-1]) if sent and ev_out else None)
        results.append(ct.parse_output(ev_out).text if ev_out else None)
    empty = pl.repeat(None, df.height, dtype=pl.String, eager=True)
    if not rows:
        return empty, empty
    index = pl.Series(rows, dtype=pl.Int64)
    return scatter(empty, index, args), scatter(empty, index, results)


def _list_array(counts: pl.Series, values: pa.Array) -> pa.Array:
    """A list per row, of `counts` of the `values` in order."""
    offsets = pl.concat([pl.Series([0], dtype=pl.Int64), counts.cum_sum()]).cast(pl.Int32)
    return pa.ListArray.from_arrays(offsets.to_arrow(), values)


def _structs(struct: pa.StructType, rows: list[tuple]) -> pa.Array:
    """A struct array of text fields from rows of tuples."""
    columns = [list(col) for col in zip(*rows, strict=True)] if rows else [[]] * len(struct)
    return pa.StructArray.from_arrays(
        [pa.array(col, pa.string()) for col in columns], fields=list(struct)
    )


# -------------------------------------------------------------------------------------------------
# Driver
# -------------------------------------------------------------------------------------------------


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic collector: it would walk every object built so far every few
    thousand rows of content (a cost growing with the input), and nothing built here forms
    cycles."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


#: Columns copied from the span table unchanged (never through the polars plan).
_PASSTHROUGH = ["trace_id", "span_id", "parent_span_id", "name", "start_ns", "end_ns"]


def _normalize_slice(table: pa.Table) -> pl.DataFrame:
    n = table.num_rows
    from_events = _event_attributes(table.column("events"), n)
    attributes = [table.column("attributes")] + ([from_events] if from_events is not None else [])
    columns, prefixed = _pivot(attributes, n)
    has_exc, exc_type, content_events = _events(table.column("events"), n)
    base = pl.from_arrow(table.select(["name", "status_code"]))
    assert isinstance(base, pl.DataFrame)
    df = base.rename({"name": "span_name"}).with_columns(
        pl.col("status_code").fill_null("unset"),
        has_exc.alias("_has_exception"),
        exc_type.alias("_exception_type"),
        *columns.values(),
    )
    c = _Cols(set(columns))
    # each span's `_name_facts` (null for a span without a name)
    facts = _name_facts(df.get_column("span_name"))
    df = df.join(facts, on="span_name", how="left", maintain_order="left")
    # one plan: what the families share (an attribute read, lowered, looked up) computed once
    df = _scalars(_classify(df.lazy(), c), c).collect(engine="in-memory")

    args = _fix_arguments(df, c)
    # a result recorded as a JSON string is read as its text, a LangChain message as its content
    # (and, serialized by OpenInference, the id of the call it answers, which the span lacks)
    raw = df["result"]
    wrapped = raw.str.strip_chars_start().str.starts_with('"')
    wrapped = wrapped | raw.str.contains('"lc"', literal=True)
    answers = raw.str.contains(f'"{ct.LANGCHAIN_TOOL_CALL_ID}"', literal=True).fill_null(False)
    result = _patch(raw, (wrapped | answers).fill_null(False), ct.normalize_result)
    lc_message = pl.lit(raw).str.json_path_match("$.type") == "tool"
    answered = pl.select(
        pl.when(pl.lit(answers)).then(
            pl.when(lc_message).then(
                pl.lit(raw).str.json_path_match(f"$.data.{ct.LANGCHAIN_TOOL_CALL_ID}")
            )
        )
    ).to_series()

    found = _content(df, c, prefixed, content_events)
    event_args, event_result = _tool_events(df, content_events)
    args = pl.coalesce(args, event_args)
    result = pl.coalesce(result, event_result)
    attr_finish = _map_distinct(df, "_finish_text", _parse_finish, pl.List(pl.String))
    attr_tooldefs = _map_distinct(
        df, "_tooldefs_text", lambda v: ct.parse_tool_definitions([v]), pl.String
    )
    span_tooldefs = _map_distinct(df, "_tool_span_defs", ct.tool_span_definition, pl.String)
    df = df.with_columns(
        args.alias("arguments"),
        result.alias("result"),
        pl.coalesce("tool_call_id", pl.when(pl.col("role") == sc.TOOL_CALL).then(answered)),
        found["_output_text"].alias("output_text"),
        found["_output_reasoning"].alias("output_reasoning_apart"),
        pl.when(attr_finish.list.len() > 0)
        .then(attr_finish)
        .otherwise(found["_content_finish"])
        .alias("finish_reasons"),
        pl.coalesce(attr_tooldefs, found["_flat_tooldefs"], span_tooldefs).alias(
            "tool_definitions"
        ),
    )
    has_content = (
        (found["_n_messages"] > 0)
        | (found["_n_call_args"] > 0)
        | df["output_text"].is_not_null()
        | df["arguments"].is_not_null()
        | df["result"].is_not_null()
    )
    df = df.with_columns(has_content.alias("has_content"))

    passthrough = pl.DataFrame(table.select(_PASSTHROUGH)).rename({"name": "span_name"})
    # the Arrow list arrays `_content` built
    content = pl.DataFrame({name: found[name] for name in ("input_messages", "requested_calls")})
    out = pl.concat([passthrough, content, df.drop("span_name")], how="horizontal")
    return out.select(NORMALIZED_SCHEMA.names).cast(NORMALIZED_COLUMNS)  # type: ignore[arg-type]


def normalize(spans: pa.Table) -> pl.DataFrame:
    """The normalized spans of a span table: one row per span, same order, the columns of
    `NORMALIZED_SCHEMA` (`NORMALIZED_COLUMNS`).

    Each span is classified (model_call, tool_call, agent, other) by the first convention family
    that recognises it, and its canonical fields are read from every family's attributes in
    precedence order (see `semconv`). Bad content never raises: what cannot be parsed is left out.
    """
    if spans.num_rows == 0:
        return pl.DataFrame(schema=NORMALIZED_COLUMNS)
    with _collector_paused():
        parts = [
            _normalize_slice(spans.slice(off, SLICE_ROWS))
            for off in range(0, spans.num_rows, SLICE_ROWS)
        ]
    return pl.concat(parts) if len(parts) > 1 else parts[0]
