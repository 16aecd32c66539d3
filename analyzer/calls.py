"""Spans that record the same call, merged into one model call or one tool call.

Several instrumentations often record one call each, or one framework records a call as
several spans. Counted as they are, one call becomes two or three (tokens and cost too), and
the tool a model requested appears twice, once with no tool span. Three shapes are recognised, with
no list of frameworks; in each, the two spans must record the same call: the times overlap,
the models agree (equal, or one a snapshot or a path of the other, or one unknown), and so
does the usage (equal, or one of them records none; usage an exporting backend filled in
counts as none), for tool calls the tool name and call id (or one unknown):

- **nested**: a step span whose nearest agent or step ancestor is a span of its role with no
  other such child (Google ADK's ``call_llm`` over OpenLLMetry's ``openai.chat``, three deep
  with ``generate_content``; a wrapper tool span over the instrumented one).
- **events**: spans named as the events of one call (`semconv.EVENT_SPAN_NAME`: BeeAI's
  ``backend.openai.chat.start-16`` and ``...success-16``), same trace, role and key.
- **overlap**: a model span of another instrumentation lying within a model span's time in
  the same trace, nested in no model or tool span: its context was lost on the way (the
  OpenAI client's ``ChatCompletion`` under the trace's root while LangChain's ``ChatOpenAI``
  runs under the chain). Each span pairs with one other at most.

A merged call is one row: the outermost (for events, the earliest) span's id, parent and name;
its start and end cover every member's; each other field is read from the members innermost
first (for events, latest first), keeping the first value recorded (usage: the first an
instrumentation recorded), and for the message and request lists the longest. It is an error if
any member is. ``merged_span_ids`` lists the other members' span ids (evidence),
``merge_reason`` the shapes (``nested``, ``events``, ``overlap``, joined by ``+``); the other
members stay in the run as role ``other``, so every span is still accounted for.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

from analyzer.conventions.semconv import LANGFUSE
from analyzer.spantree import nearest_marked_ancestor

__all__ = ["mark_requested_tools", "merge_same_calls", "unmark_wrapper_generations"]

_STEP_ROLES = ["model_call", "tool_call"]
#: Merge links followed at most from a span to its group's top (a call is recorded a few
#: times, not dozens; a longer chain is cut there).
_MAX_MERGE_DEPTH = 64
#: Usage, read from the first member whose instrumentation recorded it, else the first.
_USAGE = ("input_tokens", "output_tokens", "cached_input_tokens")
#: Fields read from the first member that records one.
_FIRST = (
    "model",
    "provider",
    "temperature",
    "recorded_cost_usd",
    "error_type",
    "tool_call_id",
    "arguments",
    "result",
    "agent_name",
    "agent_version",
    "prompt_id",
    "tool_definitions",
    "conversation_id",
)
#: List fields read from the member whose list is longest.
_LONGEST = ("input_messages", "requested_calls", "finish_reasons")


def _candidates(frame: pl.DataFrame) -> pl.DataFrame:
    """The step spans with what tells two calls apart, usage filled in by a backend read as
    none recorded (it tells no two calls apart)."""
    recorded = ~pl.col("backend_usage").fill_null(False)
    return frame.select(
        pl.col("_i").cast(pl.Int64),
        "trace_id",
        "span_id",
        "role",
        "start_ns",
        "end_ns",
        "tool_name",
        "tool_call_id",
        "_scope",
        pl.when(recorded).then("input_tokens").alias("input_tokens"),
        pl.when(recorded).then("output_tokens").alias("output_tokens"),
        # models compared loosely: lower case, the last path segment (models/x, openai/x)
        _model=pl.col("model").str.to_lowercase().str.split("/").list.last(),
    )


def _same_call() -> pl.Expr:
    """Whether a (span, p-prefixed outer span) pair of one role records one call: times that
    overlap, and models, usage, tool names and call ids that agree (one side unknown agrees);
    the outer span first (starts earlier, else ends later, else has the lower id), so that a
    cycle of parent ids (hostile input) cannot make a cycle of merges."""

    def agree(a: str) -> pl.Expr:
        mine, theirs = pl.col(a), pl.col("p" + a)
        return mine.is_null() | theirs.is_null() | (mine == theirs)

    overlap = (
        (pl.col("start_ns") <= pl.col("pend_ns")) & (pl.col("end_ns") >= pl.col("pstart_ns"))
    ).fill_null(True)
    model, p_model = pl.col("_model"), pl.col("p_model")
    same_model = (
        model.is_null()
        | p_model.is_null()
        | model.str.starts_with(p_model)  # a snapshot of the other: gpt-4o-2024-08-06
        | p_model.str.starts_with(model)
    )
    no_usage = pl.col("input_tokens").is_null() & pl.col("output_tokens").is_null()
    p_no_usage = pl.col("pinput_tokens").is_null() & pl.col("poutput_tokens").is_null()
    same_usage = pl.col("input_tokens").eq_missing(pl.col("pinput_tokens")) & pl.col(
        "output_tokens"
    ).eq_missing(pl.col("poutput_tokens"))
    same_model_call = (
        (pl.col("role") == "model_call") & same_model & (no_usage | p_no_usage | same_usage)
    )
    same_tool_call = (pl.col("role") == "tool_call") & agree("tool_name") & agree("tool_call_id")
    start, p_start = pl.col("start_ns").fill_null(0), pl.col("pstart_ns").fill_null(0)
    end, p_end = pl.col("end_ns").fill_null(0), pl.col("pend_ns").fill_null(0)
    outer_first = (p_start < start) | (
        (p_start == start)
        & ((p_end > end) | ((p_end == end) & (pl.col("pspan_id") < pl.col("span_id"))))
    )
    return outer_first & overlap & (same_model_call | same_tool_call)


def _outer(spans: pl.DataFrame) -> pl.DataFrame:
    """`spans` as the outer side of a pair: columns p-prefixed, the row as ``_into``."""
    return spans.rename(lambda c: "_into" if c == "_i" else "p" + c)


def _nested_pairs(spans: pl.DataFrame, nearest: pl.Series) -> pl.DataFrame:
    """(_i: inner row, _into: the row it merges into) for step spans nested in a step span of
    their role (`nearest`: each row's nearest agent or step ancestor) that records one call
    with them. A span with two nested calls of its role or more is left with them."""
    children = spans.with_columns(nearest.gather(spans.get_column("_i")).alias("_into")).filter(
        pl.col("role").is_in(_STEP_ROLES) & pl.col("_into").is_not_null()
    )
    pairs = children.join(_outer(spans).drop("ptrace_id"), on="_into")
    pairs = pairs.filter(pl.col("role") == pl.col("prole"))
    return pairs.filter((pl.len().over("_into") == 1) & _same_call()).select("_i", "_into")


def _detached_pairs(spans: pl.DataFrame, nearest_role: pl.Series) -> pl.DataFrame:
    """(_i, _into) among the model spans `spans`, of the **overlap** shape (module docstring;
    agent-prism's quo_tav_agent): each pairs with one other at most."""
    models = spans.filter(pl.col("_scope").n_unique().over("trace_id") > 1)
    loose = models.filter(
        ~nearest_role.gather(models.get_column("_i")).is_in(_STEP_ROLES).fill_null(False)
    )
    pairs = loose.join(_outer(models), left_on="trace_id", right_on="ptrace_id").filter(
        (pl.col("_i") != pl.col("_into"))
        & (pl.col("_scope") != pl.col("p_scope"))
        & (pl.col("pstart_ns") <= pl.col("start_ns"))
        & (pl.col("end_ns") <= pl.col("pend_ns"))
        & _same_call()
    )
    pairs = pairs.filter((pl.len().over("_i") == 1) & (pl.len().over("_into") == 1))
    return pairs.select("_i", "_into")


def _event_pairs(frame: pl.DataFrame) -> pl.DataFrame:
    """(_i, _into: the group's earliest span) for the event-style spans of one call."""
    events = frame.filter(pl.col("event_call").is_not_null()).select(
        pl.col("_i").cast(pl.Int64), "trace_id", "role", "event_call", "start_ns", "span_id"
    )
    keys = ["trace_id", "role", "event_call"]
    first = (
        events.sort("start_ns", "span_id", nulls_last=True)
        .group_by(keys, maintain_order=True)
        .agg(pl.col("_i").first().alias("_into"), pl.len().alias("_n"))
        .filter(pl.col("_n") > 1)
    )
    return events.join(first, on=keys).filter(pl.col("_i") != pl.col("_into")).select("_i", "_into")


def _name_event_tools(frame: pl.DataFrame, parents: pa.Array) -> pl.DataFrame:
    """Event-style tool spans that name no tool take the tool named on their nearest ancestor
    that names one (BeeAI: ``tool.name`` on the agent's update span), else their name's stem."""
    unnamed = (
        (pl.col("role") == "tool_call")
        & pl.col("event_call").is_not_null()
        & pl.col("named_tool").is_null()
    )
    if not frame.select(unnamed.any()).item():
        return frame
    names = pa.array(frame.get_column("named_tool").is_not_null().to_arrow())
    namer = pl.Series(nearest_marked_ancestor(parents, names), dtype=pl.Int64)
    inherited = frame.get_column("named_tool").gather(namer)  # a null row gathers null
    return frame.with_columns(
        tool_name=pl.when(unnamed).then(pl.coalesce(inherited, "tool_name")).otherwise("tool_name")
    )


def _groups(n: int, pairs: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Each row's group (the topmost row its merge links reach; itself when none) and its
    depth below that row."""
    into = np.full(n, -1, dtype=np.int64)
    into[pairs.get_column("_i").to_numpy()] = pairs.get_column("_into").to_numpy()
    top = np.arange(n, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int64)
    for _ in range(_MAX_MERGE_DEPTH):
        up = into[top]
        moved = up >= 0
        if not moved.any():
            break
        top = np.where(moved, up, top)
        depth += moved
    return top, depth


def mark_requested_tools(frame: pl.DataFrame) -> pl.DataFrame:
    """Spans that no convention classified (role ``other``) and that bear the name of a tool a
    model call of their trace requested before they started become that tool's calls: tracers
    that record a tool's run as a plain span named after it (LangChain's callback handler
    in Langfuse: langgraph-python-2025-08-22's ``Web-Search``)."""
    others = frame.filter(pl.col("role") == "other").select(
        pl.col("_i").cast(pl.Int64), "trace_id", "span_name", "start_ns"
    )
    if others.is_empty():
        return frame
    requested = (
        frame.filter((pl.col("role") == "model_call") & (pl.col("requested_calls").list.len() > 0))
        .select(
            "trace_id",
            "start_ns",
            pl.col("requested_calls")
            .list.eval(pl.element().struct.field("name"))
            .alias("span_name"),
        )
        .explode("span_name")
        .group_by("trace_id", "span_name")
        .agg(pl.col("start_ns").min().alias("_asked"))
    )
    named = (
        others.join(requested, on=["trace_id", "span_name"])
        .filter(pl.col("start_ns") >= pl.col("_asked"))
        .get_column("_i")
    )
    if named.is_empty():
        return frame
    is_named = pl.col("_i").cast(pl.Int64).is_in(named.implode())
    return frame.with_columns(
        role=pl.when(is_named).then(pl.lit("tool_call")).otherwise("role"),
        tool_name=pl.when(is_named).then("span_name").otherwise("tool_name"),
    )


def unmark_wrapper_generations(frame: pl.DataFrame, parents: pa.Array) -> pl.DataFrame:
    """`frame` with role ``other`` for the spans that are model calls only by the observation
    type of a Langfuse export (convention ``langfuse``), record no model and no usage, and hold
    another model call: an application's own wrapper typed a generation (agent-prism's
    langfuse-2: ``handle-chatbot-message`` over the Vercel AI SDK's agent and its calls)."""
    weak = (
        (pl.col("role") == "model_call")
        & (pl.col("convention") == LANGFUSE)
        & pl.col("model").is_null()
        & pl.col("input_tokens").is_null()
        & pl.col("output_tokens").is_null()
    )
    is_weak = frame.select(weak.fill_null(False)).to_series()
    if not is_weak.any():
        return frame
    holder = pl.Series(nearest_marked_ancestor(parents, pa.array(is_weak.to_arrow())))
    wrappers = holder.filter(frame.get_column("role") == "model_call").drop_nulls().unique()
    if wrappers.is_empty():
        return frame
    is_wrapper = pl.col("_i").cast(pl.Int64).is_in(wrappers.cast(pl.Int64).implode())
    return frame.with_columns(role=pl.when(is_wrapper).then(pl.lit("other")).otherwise("role"))


def merge_same_calls(frame: pl.DataFrame, parents: pa.Array) -> pl.DataFrame:
    """`frame` (normalized spans with a ``_i`` row index; `parents`: their parent rows) with
    the spans of one call merged (module docstring), rows in the same order, plus the columns
    ``merged_span_ids`` and ``merge_reason`` (null where nothing was merged)."""
    frame = _name_event_tools(frame, parents)
    events = _event_pairs(frame)
    # members of an event group are not calls of their own when nesting is judged
    event_members = pl.col("_i").cast(pl.Int64).is_in(events.get_column("_i").implode())
    judged = frame.with_columns(role=pl.when(event_members).then(pl.lit("other")).otherwise("role"))
    role = judged.get_column("role")
    marked = pa.array(role.is_in(["agent", *_STEP_ROLES]).to_arrow())
    nearest = pl.Series(nearest_marked_ancestor(parents, marked), dtype=pl.Int64)
    nearest_role = role.gather(nearest)
    is_step = role.is_in(_STEP_ROLES)
    # only the spans that can pair are read further: most traces have none
    inner = is_step & (nearest_role == role).fill_null(False)
    outer = pl.repeat(False, judged.height, eager=True).scatter(nearest.filter(inner), True)
    nested = _nested_pairs(_candidates(judged.filter(inner | outer)), nearest)
    is_model = role == "model_call"
    if judged.filter(is_model).get_column("_scope").n_unique() > 1:
        models = _candidates(judged.filter(is_model))
        detached = _detached_pairs(models.join(nested, on="_i", how="anti"), nearest_role)
    else:  # one instrumentation wrote every model span
        detached = nested.clear()
    pairs = pl.concat(
        [
            events.with_columns(_why=pl.lit("events")),
            nested.with_columns(_why=pl.lit("nested")),
            detached.with_columns(_why=pl.lit("overlap")),
        ]
    )
    if pairs.is_empty():
        return frame.with_columns(
            merged_span_ids=pl.lit(None, dtype=pl.List(pl.String)),
            merge_reason=pl.lit(None, dtype=pl.String),
        )
    return _merge(frame, pairs)


def _merge(frame: pl.DataFrame, pairs: pl.DataFrame) -> pl.DataFrame:
    top, depth = _groups(frame.height, pairs)
    merged = np.zeros(frame.height, dtype=bool)
    merged[pairs.get_column("_i").to_numpy()] = True
    rows = frame.with_columns(
        _top=pl.Series(top), _depth=pl.Series(depth), _merged=pl.Series(merged)
    )
    tops = pl.Series(np.unique(top[merged]))
    members = rows.filter(pl.col("_top").is_in(tops.implode()))
    reasons = (
        pairs.with_columns(_top=pl.Series(top).gather(pairs.get_column("_i")))
        .group_by("_top")
        .agg(pl.col("_why").unique().sort().str.join("+").alias("merge_reason"))
    )
    # innermost first; among events, latest first (success and finish carry the output)
    ordered = members.sort(
        ["_top", "_depth", "end_ns", "span_id"],
        descending=[False, True, True, False],
        nulls_last=True,
    )
    backend = pl.col("backend_usage").fill_null(False)
    apart = pl.col("output_reasoning_apart").fill_null(False)
    combined = (
        ordered.group_by("_top", maintain_order=True)
        .agg(
            *[pl.col(c).drop_nulls().first() for c in _FIRST],
            # a record that marked the call's reasoning apart tells its answer from its thoughts;
            # another (an instrumentation that wrote thoughts as text) does not
            pl.when(apart.any())
            .then(pl.col("output_text").filter(apart).first())
            .otherwise(pl.col("output_text").drop_nulls().first())
            .alias("output_text"),
            apart.any().alias("output_reasoning_apart"),
            *[pl.col(c).sort_by(backend, maintain_order=True).drop_nulls().first() for c in _USAGE],
            backend.all().alias("backend_usage"),
            *[
                pl.col(c).sort_by(pl.col(c).list.len().fill_null(-1), descending=True).first()
                for c in _LONGEST
            ],
            pl.col("tool_name").drop_nulls().first(),
            pl.col("start_ns").min(),
            pl.col("end_ns").max(),
            pl.col("has_content").any(),
            pl.col("http_resend_count").max(),
            pl.when((pl.col("status") == "error").any())
            .then(pl.lit("error"))
            .when((pl.col("status") == "ok").any())
            .then(pl.lit("ok"))
            .otherwise(pl.lit("unset"))
            .alias("status"),
            pl.col("span_id")
            .filter("_merged")
            .sort_by(pl.col("start_ns").filter("_merged"), pl.col("span_id").filter("_merged"))
            .alias("merged_span_ids"),
        )
        .join(reasons, on="_top")
    )
    fields = [c for c in combined.columns if c != "_top"]
    at_top = rows.select("_i", "_merged").with_columns(pl.col("_i").cast(pl.Int64).alias("_top"))
    at_top = at_top.join(combined, on="_top", how="left", maintain_order="left")
    is_top = at_top.get_column("merge_reason").is_not_null()
    return frame.with_columns(
        *[
            pl.when(is_top)
            .then(at_top.get_column(c))
            .otherwise(pl.col(c) if c in frame.columns else None)
            .alias(c)
            for c in fields
        ],
        role=pl.when(at_top.get_column("_merged")).then(pl.lit("other")).otherwise("role"),
    )
