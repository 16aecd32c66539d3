"""From normalized spans to runs: run keys, ordered steps, answers, sources, totals, config hash.

The run model of the contract (section 2), computed column-wise with polars:

- **run**: one per trace; where a trace holds several top-level agent spans (agent spans with no
  agent above them), one per such span, ``run_id = TRACEID:SPANID``. A conversation or workflow
  root (GenAI ``invoke_workflow``, AG2 ``conversation``, Traceloop ``workflow``, Strands
  ``invoke_swarm`` and ``invoke_graph``) is an agent span: the agents under it are one run; so
  is a framework's span over two or more of its own agent spans (`_framework_roots`). A
  top-level agent span whose chain of parents breaks joins the run that holds it in time
  (`_linked_agents`). With ``run_key`` the value of that attribute (first found on the trace's
  spans, root first, then the resource) groups traces into runs; traces without it keep the
  default. Only groups holding at least one agent, model-call or tool-call span are runs.
- **calls**: spans that record the same call are one step (`analyzer.calls`: a model span
  nested in another of the same request, a wrapper tool span over the instrumented one, the
  event spans of one call, a detached span of another instrumentation within the call's
  time); the step keeps the outer span's id and lists the others in
  ``merged_span_ids`` with a ``merge_reason``. An unclassified span named after a tool that a
  model call requested before it is that tool's call.
- **steps**: model calls and tool calls in start order (ties: end, then span id). A tool call a
  model requested in its output and that no tool-execution span ran is still a step
  (``executed = False``); requests and executions are joined by tool call id, else by tool
  name and arguments (`_pair_by_arguments`), else by tool name in order. An output tool's call
  (`semconv.OUTPUT_TOOL_NAMES`: structured-output frameworks return their answer through it)
  is a step of kind ``output``, not a tool call.
- **answer**: see `_answers` (a tool-free final model call, or an output tool called last).
- **sources**: one row per text the run had seen, with the time from which it was available
  (`sources_before` selects those of a step).
- **messages**: the prompt (input) messages of each model-call step, one row a message, each
  text cut at `MESSAGE_CAP` (report.html shows them; `RunSet.messages`).
- **primary model**: the model of most tokens in the run (`_primary_model`); the config hash
  covers the system prompt or the managed prompt's identity (`_config_hash`).
- **provenance**: each run lists the convention families that classified its spans
  (``conventions``) and the instrumentation scopes that wrote them (``instrumentations``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from analyzer.calls import mark_requested_tools, merge_same_calls, unmark_wrapper_generations
from analyzer.conventions.semconv import OUTPUT_TOOL_NAMES, OUTPUT_TOOL_PREFIXES
from analyzer.ingest.accounting import IngestLog
from analyzer.jsonpath import key_path
from analyzer.scatter import scatter
from analyzer.spans import attribute_lists, shared_resources
from analyzer.spantree import nearest_marked_ancestor, parent_index, roots, topmost

__all__ = [
    "ANSWER_CAP",
    "DEFAULT_CASE_KEYS",
    "MESSAGE_CAP",
    "TOOL_FINISH_REASONS",
    "RunSet",
    "build_runs",
    "canonical_arguments",
    "cut_text",
    "empty_messages",
    "root_first",
    "sources_before",
    "span_attribute",
]

#: Characters of the answer kept in runs.parquet (the full text stays in the span table).
ANSWER_CAP = 4000
#: Characters kept of one prompt message's content in `RunSet.messages` (the page shows them;
#: the full text stays in the span table).
MESSAGE_CAP = 20_000
#: Run attributes read as the case id when no --case-key is given, first found wins.
DEFAULT_CASE_KEYS = ("app.case_id", "case_id", "case.id")
#: Finish reasons meaning "the model asked for tools" (providers spell it several ways).
TOOL_FINISH_REASONS = ("tool_calls", "tool_call", "function_call", "tool_use", "tool-calls")


def frame_batches(frame: pl.DataFrame) -> pa.RecordBatchReader:
    """The rows of `frame` as Arrow record batches, in order."""
    table = frame.to_arrow()
    return pa.RecordBatchReader.from_batches(table.schema, table.to_batches())


class RunTables:
    """Per-run tables held as frame attributes, also readable a record batch at a time
    (`batches`) or narrowly (`select`): a partitioned result overrides both to read its tables
    from the spill without loading them whole."""

    def batches(self, name: str) -> pa.RecordBatchReader:
        """The rows of table `name`, in order, a record batch at a time."""
        return frame_batches(getattr(self, name))

    def select(
        self,
        name: str,
        columns: Sequence[str] | None = None,
        run_ids: Sequence[str] | None = None,
    ) -> pl.DataFrame:
        """Those of `columns` (default: all) that table `name` has, its rows in order; only
        the rows of `run_ids` when given."""
        frame = getattr(self, name)
        if run_ids is not None:
            frame = frame.filter(pl.col("run_id").is_in(list(run_ids)))
        return frame if columns is None else frame.select(c for c in columns if c in frame.columns)


@dataclass
class RunSet(RunTables):
    """Runs, their steps and the texts each run had seen, as polars frames."""

    runs: pl.DataFrame  # one row per run
    steps: pl.DataFrame  # one row per step, ordered by run_id, index
    sources: pl.DataFrame  # run_id, available_ns, origin, span_id, text
    #: trace_id, span_id, run_id for every span that belongs to a run, in the span table's
    #: order (`ingest.reader.SPAN_ORDER`)
    span_runs: pl.DataFrame
    #: the prompt (input) messages of model-call steps, one row a message: run_id, index (the
    #: step's), position, role, content (cut at MESSAGE_CAP), tool_call_id, name; ordered by
    #: run_id, index, position. Read by report.html, and by the tool_requests rule (the tool
    #: messages' call ids: calls a resumed run's conversation had requested).
    messages: pl.DataFrame = field(default_factory=lambda: empty_messages())

    def run(self, run_id: str) -> tuple[dict, pl.DataFrame]:
        """One run's row (as a dict) and its steps."""
        row = self.runs.filter(pl.col("run_id") == run_id)
        if row.is_empty():
            raise KeyError(run_id)
        return row.row(0, named=True), self.steps.filter(pl.col("run_id") == run_id)


def sources_before(sources: pl.DataFrame, run_id: str, at_ns: int) -> list[str]:
    """The texts run `run_id` had seen at time `at_ns` (inputs and tool results ended by then)."""
    return (
        sources.filter((pl.col("run_id") == run_id) & (pl.col("available_ns") <= at_ns))
        .get_column("text")
        .to_list()
    )


def build_runs(
    spans: pa.Table,
    normalized: pl.DataFrame,
    *,
    run_key: str | None = None,
    case_key: str | None = None,
    parents: pa.Array | None = None,
    span_rows: pa.Array | None = None,
    log: IngestLog | None = None,
) -> RunSet:
    """Reconstruct every run from the span table and its normalized rows (same order:
    `analyzer.conventions.normalize`).

    `parents`: the row of each span's parent (`Ingested.parents`), else looked up here.
    `span_rows`: the row of `spans` of each normalized row, when `spans` are in another order
    (a partition's spans as read, duplicates included: `analyzer.engine`).
    `log`: where each file's reading notes go (spans merged into the call they repeat, spans
    with a model, usage or content that no convention recognised), and the count of spans in
    no run (``outside_runs``)."""
    if span_rows is not None and run_key is not None:  # the run key is read from every span
        from analyzer.ingest.reader import gather

        spans, span_rows = gather(spans, span_rows), None
    frame = normalized.with_row_index("_i")
    rows = _rows_of_spans(frame.get_column("_i"), span_rows)
    frame = frame.with_columns(_scope=pl.Series(pc.take(spans.column("scope_name"), rows)))
    if parents is None:
        parents = parent_index(frame)
    frame = mark_requested_tools(unmark_wrapper_generations(frame, parents))
    was_step = frame.get_column("role").is_in(["model_call", "tool_call"])
    frame = merge_same_calls(frame, parents)
    if log is not None:
        absorbed = was_step & (frame.get_column("role") == "other")
        _note_reading(log, frame, absorbed, pc.take(spans.column("source_file"), rows))
    frame = _roll_up_resends(frame, parents)
    role = frame.get_column("role")
    is_agent = pa.array((role == "agent").to_arrow())
    nearest = nearest_marked_ancestor(parents, is_agent)
    roots = _framework_roots(frame, parents, is_agent, nearest)
    if roots is not None:  # runs are cut at them as at agent spans
        is_agent = pc.or_(is_agent, roots)
        nearest = nearest_marked_ancestor(parents, is_agent)
    # the agent a step belongs to: the innermost agent span holding it, or the tool call whose
    # execution holds it (a model call inside a tool's run is that tool's own work: a subagent
    # run as a tool, like Claude Code's Agent tool, which has no agent span)
    holder = nearest_marked_ancestor(
        parents, pa.array(role.is_in(["agent", "tool_call"]).to_arrow())
    )
    frame = frame.with_columns(
        run_id=_run_ids(frame, parents, spans, run_key, is_agent, nearest),
        agent_span_id=frame.get_column("span_id").gather(pl.Series(holder)),
    )
    in_run = frame.select(
        pl.col("run_id").is_not_null()
        & pl.col("role").is_in(["agent", "model_call", "tool_call"]).any().over("run_id")
    ).to_series()
    # every span, in a run or not: the root of a trace split into runs per agent span is in none
    spans_of_traces = frame.select("trace_id", "parent_span_id", "start_ns", "span_id", "_i")
    if not in_run.all():  # else no copy: most inputs are runs only
        frame = frame.filter(in_run)
    if log is not None:
        log.outside_runs += in_run.len() - frame.height
    steps = _steps(frame)
    sources = _sources(frame, steps)
    runs = _runs(frame, steps, sources, spans, case_key, span_rows, spans_of_traces)
    span_runs = frame.select("trace_id", "span_id", "run_id")  # in span order: no sort
    messages = _messages(frame, steps)
    return RunSet(runs=runs, steps=steps, sources=sources, span_runs=span_runs, messages=messages)


# --- run assignment ---------------------------------------------------------------------------


def _run_ids(
    frame: pl.DataFrame,
    parent: pa.Array,
    spans: pa.Table,
    run_key: str | None,
    is_agent: pa.Array,
    nearest: pa.Array,
) -> pl.Series:
    """The run id of every span (null for spans of traces that hold no run); `is_agent` and
    `nearest` (its nearest agent ancestor): `spantree.nearest_marked_ancestor` of the agents."""
    top = pl.Series(topmost(nearest, is_agent), dtype=pl.Int64)
    is_top = pl.Series(pc.and_(is_agent, pc.is_null(nearest)))
    linked = _linked_agents(frame, parent, is_top)
    if linked.height:
        moved = top.to_frame("_top").join(linked, on="_top", how="left", maintain_order="left")
        top = moved.select(pl.coalesce("_host", "_top")).to_series()
        is_top = is_top.scatter(linked.get_column("_top"), False)
    frame = frame.select(
        "trace_id",
        _top_span=frame.get_column("span_id").gather(top),
        _is_top=is_top,
    ).with_columns(_tops=pl.col("_is_top").sum().over("trace_id"))
    default = (
        pl.when((pl.col("_tops") >= 2) & pl.col("_top_span").is_not_null())
        .then(pl.concat_str("trace_id", pl.lit(":"), "_top_span"))
        .otherwise(pl.col("trace_id"))
    )
    ids = frame.select(default.alias("run_id")).get_column("run_id")
    if run_key is None:
        return ids
    keyed = _trace_attribute(spans, run_key)
    per_trace = frame.select("trace_id").join(keyed, on="trace_id", how="left").get_column("_value")
    return pl.select(pl.coalesce(per_trace, ids)).to_series().alias("run_id")


def _framework_roots(
    frame: pl.DataFrame, parent: pa.Array, is_agent: pa.Array, nearest: pa.Array
) -> pa.Array | None:
    """The spans that hold one framework invocation's agent spans: a span that is no agent,
    recorded by the same instrumentation (scope) as two or more top-level agent spans it is
    the parent of (a LangGraph graph whose nodes OpenInference marks as agents, Google ADK's
    ``invocation``). Their agents are one run, as under a workflow root; None when there are
    none. The application's own span holding several agent runs (another scope) is none."""
    is_top = pc.and_(is_agent, pc.is_null(nearest))
    tops = frame.select("_scope", _p=pl.Series(parent, dtype=pl.Int64)).filter(
        pl.Series(is_top) & pl.col("_p").is_not_null()
    )
    if tops.height < 2:
        return None
    scopes = frame.get_column("_scope")
    holders = (
        tops.filter(  # a scope not recorded is no instrumentation known to be the same
            (pl.col("_scope") != "") & (pl.col("_scope") == scopes.gather(tops.get_column("_p")))
        )
        .group_by("_p")
        .len()
        .filter(pl.col("len") >= 2)
        .get_column("_p")
    )
    if holders.is_empty():
        return None
    marked = pl.Series(values=[False] * frame.height).scatter(holders, True)
    return marked.to_arrow()


def _linked_agents(frame: pl.DataFrame, parent: pa.Array, is_top: pl.Series) -> pl.DataFrame:
    """(_top, _host): top-level agent spans whose link to the run above them was not exported,
    and the top-level agent span of the same trace they join.

    An agent span whose chain of parents breaks (it, or an ancestor, names a parent that is
    missing: the remote side of an agent-to-agent call whose client span was not exported)
    belongs to the run of the top-level agent span of its trace with an unbroken chain that
    holds it in time, the earliest such span; where both record a conversation id, only if it
    is the same one."""
    none = pl.DataFrame(schema={"_top": pl.Int64, "_host": pl.Int64})
    broken = frame.get_column("parent_span_id").is_not_null() & pl.Series(parent).is_null()
    if not broken.any():
        return none
    # the root each span's parent chain reaches, and whether that root lost its parent
    root = pl.Series(roots(parent), dtype=pl.Int64)
    tops = frame.select(
        pl.col("_i").cast(pl.Int64).alias("_top"),
        "trace_id",
        "span_id",
        "start_ns",
        "end_ns",
        "conversation_id",
        _orphan=broken.gather(root),
    ).filter(is_top)
    orphans = tops.filter("_orphan")
    if orphans.is_empty():
        return none
    hosts = tops.filter(~pl.col("_orphan")).select(
        "trace_id",
        pl.col("_top").alias("_host"),
        pl.col("span_id").alias("_host_span"),
        pl.col("start_ns").alias("_host_start"),
        pl.col("end_ns").alias("_host_end"),
        pl.col("conversation_id").alias("_host_conv"),
    )
    conv, host_conv = pl.col("conversation_id"), pl.col("_host_conv")
    return (
        orphans.join(hosts, on="trace_id")
        .filter(
            (pl.col("_host_start") <= pl.col("start_ns"))
            & (pl.col("end_ns") <= pl.col("_host_end"))
            & (conv.is_null() | host_conv.is_null() | (conv == host_conv))
        )
        .sort("_top", "_host_start", "_host_span")
        .group_by("_top", maintain_order=True)
        .first()
        .select("_top", "_host")
    )


def _roll_up_resends(frame: pl.DataFrame, parent: pa.Array) -> pl.DataFrame:
    """Give each step the HTTP resends recorded below it (``http.request.resend_count``).

    HTTP client instrumentations record a resent request as a child span of the model or tool
    call; the step keeps the highest count found on itself or a non-step descendant (a
    resend count numbers the attempts of one request, so counts are not added up).
    """
    if frame.get_column("http_resend_count").drop_nulls().is_empty():
        return frame
    is_step = pa.array(frame.get_column("role").is_in(["model_call", "tool_call"]).to_arrow())
    step = nearest_marked_ancestor(parent, is_step)
    below = (
        frame.select(pl.Series("_step", step).cast(pl.UInt32), "http_resend_count", "role")
        .filter(
            pl.col("_step").is_not_null()
            & pl.col("http_resend_count").is_not_null()
            & ~pl.col("role").is_in(["model_call", "tool_call", "agent"])
        )
        .group_by("_step")
        .agg(pl.col("http_resend_count").max().alias("_below"))
    )
    return (
        frame.join(below, left_on="_i", right_on="_step", how="left")
        .sort("_i")
        .with_columns(
            http_resend_count=pl.max_horizontal("http_resend_count", "_below").cast(pl.Int64)
        )
        .drop("_below")
    )


def _trace_attribute(spans: pa.Table, key: str) -> pl.DataFrame:
    """trace_id -> the first value of attribute `key` on the trace (root spans first)."""
    values = span_attribute(spans, key)
    frame = pl.from_arrow(spans.select(["trace_id", "parent_span_id", "start_ns", "span_id"]))
    assert isinstance(frame, pl.DataFrame)
    frame = frame.with_columns(_value=values).filter(pl.col("_value").is_not_null())
    return root_first(frame, "trace_id").select("trace_id", "_value")


def root_first(frame: pl.DataFrame, by: str) -> pl.DataFrame:
    """Per value of `by`, one span of `frame`: a root first, then the earliest, then the
    lowest span id."""
    order = [by, pl.col("parent_span_id").is_not_null(), "start_ns", "span_id"]
    return frame.sort(order).group_by(by, maintain_order=True).first()


def span_attribute(spans: pa.Table, key: str) -> pl.Series:
    """The value of attribute `key` on each span as text, else on its resource, else null."""
    own = _list_attribute(spans.column("attributes").combine_chunks(), key)
    # read once per resource (plain resource lists are one a span)
    shared = shared_resources(spans).column("resource_attributes").chunk(0)
    of_resource = _list_attribute(shared.dictionary, key).gather(pl.Series(shared.indices))
    return pl.select(pl.coalesce(own, of_resource)).to_series().alias("_value")


def _list_attribute(lists: pa.Array, key: str) -> pl.Series:
    """The value of attribute `key` in each list of `lists` (`ATTRS`) as text, else null."""
    flat = pc.list_flatten(lists)
    owner = pc.list_parent_indices(lists)
    hit = pc.equal(flat.field("key"), key)
    rows = pc.filter(owner, hit)
    vals = pc.filter(flat, hit)
    text = pc.coalesce(
        vals.field("str"),
        pc.cast(vals.field("int"), pa.string()),
        pc.cast(vals.field("float"), pa.string()),
        pc.cast(vals.field("bool"), pa.string()),
        vals.field("json"),
    )
    found = pl.DataFrame({"_row": pl.Series(rows), "_v": pl.Series(text)})
    found = found.unique("_row", keep="first")
    values = pl.repeat(None, len(lists), dtype=pl.String, eager=True).alias("_v")
    return scatter(values, found["_row"], found["_v"]) if found.height else values


# --- steps -------------------------------------------------------------------------------------

_STEP_ORDER = ["run_id", "start_ns", "end_ns", "span_id", "_req_pos"]
#: The columns of `RunSet.steps`, in order.
_STEP_COLUMNS = (
    "run_id",
    "index",
    "kind",
    "span_id",
    "name",
    "start_ns",
    "end_ns",
    "status",
    "error_type",
    "executed",
    "model",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "recorded_cost_usd",
    "temperature",
    "tool_name",
    "tool_call_id",
    "arguments",
    "result",
    "requested_by",
    "requested_calls",
    "finish_reasons",
    "output_text",
    "http_resend_count",
    "has_content",
    "trace_id",
    "parent_span_id",
    "agent_span_id",
    "merged_span_ids",
    "merge_reason",
)


def _steps(frame: pl.DataFrame) -> pl.DataFrame:
    calls = frame.select("role", *(c for c in _STEP_COLUMNS if c in frame.columns))
    model = calls.filter(pl.col("role") == "model_call")
    tools = calls.filter(pl.col("role") == "tool_call")
    requests = (
        model.select(
            "run_id",
            pl.col("span_id").alias("requested_by"),
            pl.col("start_ns").alias("_req_start"),
            pl.col("end_ns").alias("_req_end"),
            pl.col("agent_span_id").alias("_req_agent"),
            "requested_calls",
        )
        .with_columns(pl.int_ranges(0, pl.col("requested_calls").list.len()).alias("_req_pos"))
        .explode("requested_calls", "_req_pos")
        .filter(pl.col("requested_calls").is_not_null())
        .unnest("requested_calls")
        .rename({"id": "_req_id", "name": "_req_name", "arguments": "_req_args"})
        .with_row_index("_r")
    )
    execs = tools.select(
        "run_id", "span_id", "tool_call_id", "tool_name", "start_ns", "arguments"
    ).with_row_index("_t")

    by_id = (
        requests.filter(pl.col("_req_id").is_not_null())
        .join(
            execs.filter(pl.col("tool_call_id").is_not_null()),
            left_on=["run_id", "_req_id"],
            right_on=["run_id", "tool_call_id"],
        )
        .unique("_r", keep="first", maintain_order=True)
        .unique("_t", keep="first", maintain_order=True)
        .select("_r", "_t")
    )
    left_req = requests.join(by_id, on="_r", how="anti")
    if left_req.is_empty():  # every request matched by id, or none recorded (no content)
        pairs = by_id
    else:
        left_exec = execs.join(by_id, on="_t", how="anti")
        by_args = _pair_by_arguments(left_req, left_exec)
        left_req = (
            left_req.join(by_args, on="_r", how="anti")
            .sort("run_id", "_req_start", "_req_pos")
            .with_columns(_rank=pl.int_range(pl.len()).over("run_id", "_req_name"))
        )
        left_exec = (
            left_exec.join(by_args, on="_t", how="anti")
            .sort("run_id", "start_ns", "span_id")
            .with_columns(_rank=pl.int_range(pl.len()).over("run_id", "tool_name"))
        )
        by_name = (
            left_req.join(
                left_exec,
                left_on=["run_id", "_req_name", "_rank"],
                right_on=["run_id", "tool_name", "_rank"],
            )
            .filter(pl.col("start_ns") >= pl.col("_req_start"))
            .select("_r", "_t")
        )
        pairs = pl.concat([by_id, by_args, by_name])
    matched = pairs.join(requests.select("_r", "requested_by", "_req_args"), on="_r").join(
        execs.select("_t", "run_id", "span_id"), on="_t"
    )

    # span ids are unique within a trace only: copies of one run under other trace ids share them
    executed = tools.join(
        matched.select("run_id", "span_id", "requested_by", "_req_args"),
        on=["run_id", "span_id"],
        how="left",
    )
    # the span's arguments, unless it recorded a bare value where the model asked with an
    # object (OpenInference writes a one-argument tool's input as that argument's value)
    bare = ~pl.col("arguments").str.strip_chars_start().str.starts_with("{")
    asked = pl.col("_req_args").str.strip_chars_start().str.starts_with("{")
    executed = executed.with_columns(
        arguments=pl.when(bare & asked)
        .then("_req_args")
        .otherwise(pl.coalesce("arguments", "_req_args")),
        executed=pl.lit(True),
    ).drop("_req_args")

    unmatched = requests.join(pairs.select("_r"), on="_r", how="anti")
    synthetic = unmatched.select(
        "run_id",
        pl.lit(None, dtype=pl.String).alias("span_id"),
        pl.col("_req_name").alias("tool_name"),
        pl.col("_req_id").alias("tool_call_id"),
        pl.col("_req_args").alias("arguments"),
        pl.col("_req_end").alias("start_ns"),
        pl.lit(None, dtype=pl.Int64).alias("end_ns"),
        pl.lit("unset").alias("status"),
        "requested_by",
        pl.col("_req_agent").alias("agent_span_id"),  # its model call's agent
        pl.lit(False).alias("executed"),
        pl.col("_req_pos").cast(pl.Int64),
        pl.lit("tool_call").alias("role"),
    )
    models = model.with_columns(executed=pl.lit(True))
    # a column a part lacks (a model call's requested_by, _req_pos) is null in its rows
    steps = pl.concat([models, executed, synthetic], how="diagonal_relaxed").select(
        "role", "_req_pos", *(c for c in _STEP_COLUMNS if c not in ("index", "kind", "name"))
    )
    # single-threaded: polars' parallel sort costs more CPU on these keys
    steps = steps.sort(_STEP_ORDER, nulls_last=True, multithreaded=False)
    name = pl.col("tool_name")
    is_output_tool = name.is_in(list(OUTPUT_TOOL_NAMES))
    for prefix in OUTPUT_TOOL_PREFIXES:
        is_output_tool = is_output_tool | name.str.starts_with(prefix)
    steps = steps.with_columns(
        index=position_in_run().cast(pl.Int32),
        # an output tool returns the answer: a step of its own kind, not a tool the agent ran
        kind=pl.when((pl.col("role") == "tool_call") & is_output_tool.fill_null(False))
        .then(pl.lit("output"))
        .otherwise("role"),
        name=pl.when(pl.col("role") == "model_call").then("model").otherwise("tool_name"),
    )
    return steps.select(_STEP_COLUMNS)


def _pair_by_arguments(requests: pl.DataFrame, execs: pl.DataFrame) -> pl.DataFrame:
    """Tool spans without a call id paired (``_r``, ``_t``) with the request of the same tool
    and the same arguments (as JSON values: key order and spacing aside), in order. Where one
    response's calls were recorded as several model spans, or a framework refused a request,
    the order of names alone pairs a span with another call's request."""

    def keyed(frame: pl.DataFrame, args: str, order: list[str], name: str) -> pl.DataFrame:
        """The rows that record arguments, with their canonical text and rank among equals."""
        canonical = pl.col(args).map_elements(canonical_arguments, return_dtype=pl.String)
        return (
            frame.filter(pl.col(args).is_not_null())
            .sort(order)
            .with_columns(_key=canonical)
            .with_columns(_rank=pl.int_range(pl.len()).over("run_id", name, "_key"))
        )

    requests = keyed(requests, "_req_args", ["run_id", "_req_start", "_req_pos"], "_req_name")
    execs = keyed(execs, "arguments", ["run_id", "start_ns", "span_id"], "tool_name")
    return (
        requests.join(
            execs,
            left_on=["run_id", "_req_name", "_key", "_rank"],
            right_on=["run_id", "tool_name", "_key", "_rank"],
        )
        .filter(pl.col("start_ns") >= pl.col("_req_start"))
        .select("_r", "_t")
    )


def canonical_arguments(text: str) -> str:
    """Arguments as canonical JSON (sorted keys, no spaces); text that is not JSON stays as is,
    stripped. Two calls with the same arguments written otherwise have the same text."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text.strip()
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def position_in_run() -> pl.Expr:
    """0, 1, 2... within each run, for rows already grouped by ``run_id`` (where a window
    over the run id would hash every row)."""
    run_ids = pl.col("run_id")
    start = (run_ids != run_ids.shift(1)).fill_null(True)
    pos = pl.int_range(0, pl.len(), dtype=pl.Int64)
    return pos - pl.when(start).then(pos).forward_fill()


# --- sources -----------------------------------------------------------------------------------


def _sources(frame: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """Every text a run had seen, with the time it became available to the agent.

    Input messages (system, user, and tool results fed back) of model calls and agent spans are
    available from the span's start; a tool result from the end of its execution. The model's
    own (assistant) messages are not sources: an id the model made up does not ground itself.
    """
    messages = (
        frame.lazy()
        .filter(pl.col("role").is_in(["model_call", "agent"]))
        .select("run_id", pl.col("start_ns").alias("available_ns"), "span_id", "input_messages")
        .explode("input_messages")
        .filter(pl.col("input_messages").is_not_null())
        .unnest("input_messages")
        .filter(pl.col("role").is_in(["system", "user", "tool"]) & pl.col("content").is_not_null())
        .select(
            "run_id",
            "available_ns",
            pl.concat_str(pl.lit("message:"), "role").alias("origin"),
            "span_id",
            pl.col("content").alias("text"),
        )
    )
    results = (
        steps.lazy()
        .filter(
            (pl.col("kind") == "tool_call") & pl.col("executed") & pl.col("result").is_not_null()
        )
        .select(
            "run_id",
            pl.coalesce("end_ns", "start_ns").alias("available_ns"),
            pl.lit("tool_result").alias("origin"),
            "span_id",
            pl.col("result").alias("text"),
        )
    )
    both = pl.concat([messages, results], how="vertical_relaxed")
    return (
        both.sort("run_id", "available_ns", "origin", "span_id", "text")
        .unique(["run_id", "text"], keep="first", maintain_order=True)
        .sort("run_id", "available_ns", "origin", "span_id")
        .collect(engine="in-memory")
    )


# --- prompt messages ---------------------------------------------------------------------------

_MESSAGES_SCHEMA = {
    "run_id": pl.String,
    "index": pl.Int64,
    "position": pl.Int64,
    "role": pl.String,
    "content": pl.String,
    "tool_call_id": pl.String,
    "name": pl.String,
}


def empty_messages() -> pl.DataFrame:
    """The (empty) messages frame of a RunSet that has none."""
    return pl.DataFrame(schema=_MESSAGES_SCHEMA)


def cut_text(text: pl.Expr, cap: int, whole_in: str) -> pl.Expr:
    """`text` cut to `cap` characters, ending with how many more there are in `whole_in`."""
    n = text.str.len_chars()
    note = pl.concat_str(
        text.str.slice(0, cap),
        pl.lit("\n… ("),
        (n - cap).cast(pl.String),
        pl.lit(f" more characters in {whole_in})"),
    )
    return pl.when(n > cap).then(note).otherwise(text)


def _messages(frame: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """The input messages of each model-call step (of the call's span, merged spans' longest
    list: `analyzer.calls`), one row a message, its content cut at `MESSAGE_CAP` characters."""
    calls = steps.lazy().filter(pl.col("kind") == "model_call").select("run_id", "span_id", "index")
    cut = cut_text(pl.col("content"), MESSAGE_CAP, "the trace")
    return (
        frame.lazy()
        .filter((pl.col("role") == "model_call") & (pl.col("input_messages").list.len() > 0))
        .select("run_id", "span_id", "input_messages")
        .join(calls, on=["run_id", "span_id"], how="inner")
        .with_columns(position=pl.int_ranges(0, pl.col("input_messages").list.len()))
        .explode("input_messages", "position")
        .unnest("input_messages")
        .select(
            "run_id",
            pl.col("index").cast(pl.Int64),
            pl.col("position").cast(pl.Int64),
            "role",
            cut.alias("content"),
            "tool_call_id",
            "name",
        )
        .sort("run_id", "index", "position")
        .collect(engine="in-memory")
        .cast(_MESSAGES_SCHEMA)
    )


# --- runs --------------------------------------------------------------------------------------


def _requests_tools(steps: pl.LazyFrame) -> pl.LazyFrame:
    """The model-call steps (run_id, index) with ``asks_tools``: whether the call asked for
    tools. `steps` are in (run_id, index) order, as `RunSet.steps`.

    A call asked for tools when its output requested any, when its finish reason says so, or,
    where it recorded no content at all, when a tool ran after it and before the next model call.
    """
    model = steps.filter(pl.col("kind") == "model_call").select(
        "run_id",
        "index",
        "span_id",
        "end_ns",
        pl.when(pl.col("run_id").shift(-1) == pl.col("run_id"))
        .then(pl.col("start_ns").shift(-1))
        .alias("_next_model"),
        (
            (pl.col("requested_calls").list.len().fill_null(0) > 0)
            | pl.col("finish_reasons")
            .list.eval(pl.element().str.to_lowercase().is_in(TOOL_FINISH_REASONS))
            .list.any()
            .fill_null(False)
        ).alias("_said"),
        pl.col("has_content").fill_null(False).alias("_content"),
    )
    matched = (
        steps.filter(pl.col("requested_by").is_not_null())
        .select("run_id", pl.col("requested_by").alias("span_id"), pl.lit(True).alias("_matched"))
        .unique()
    )
    model = model.join(matched, on=["run_id", "span_id"], how="left", maintain_order="left")
    said = pl.col("_said") | pl.col("_matched").fill_null(False)
    # only a call that said nothing and recorded no content is judged by the tools after it
    tools = steps.filter(pl.col("kind") == "tool_call").select(
        "run_id", pl.col("start_ns").alias("_tool_start")
    )
    followed = (
        model.filter(~said & ~pl.col("_content"))
        .select("run_id", "index", "end_ns", "_next_model")
        .join(tools, on="run_id")
        .filter(
            (pl.col("_tool_start") >= pl.col("end_ns"))
            & (pl.col("_next_model").is_null() | (pl.col("_tool_start") < pl.col("_next_model")))
        )
        .select("run_id", "index", pl.lit(True).alias("_followed"))
        .unique()
    )
    model = model.join(followed, on=["run_id", "index"], how="left", maintain_order="left")
    return model.select(
        "run_id", "index", (said | pl.col("_followed").fill_null(False)).alias("asks_tools")
    )


def _answers(frame: pl.LazyFrame, steps: pl.LazyFrame) -> pl.LazyFrame:
    """run_id -> has_answer, answer, answer_ns, answer_span_id.

    The answer is the output of the last successful model call that requested no tool, at that
    call's end; its text is the output of the run's last outer agent span (the last to end of
    those with no agent above) where recorded (``null``, a serialized None, records none). A
    run whose last model call requested tools, or with no successful tool-free call, has no
    answer. A run with no model call answers with its agent span's recorded output, at the
    agent span's end.

    Except for output tools (`semconv.OUTPUT_TOOL_NAMES`): frameworks that return a structured
    answer have the model call such a tool and stop. When a successful output-tool call comes
    after the run's last model call, its arguments are the answer (the agent span output where
    recorded), at the end of its execution span, or of the requesting call if none ran it.
    """
    model = (
        steps.filter(pl.col("kind") == "model_call")
        .select("run_id", "index", "span_id", "end_ns", "status", "output_text")
        .join(_requests_tools(steps), on=["run_id", "index"], how="left", maintain_order="left")
    )
    # steps are in (run_id, index) order: the last of a run is its last row
    last = (
        model.group_by("run_id")
        .last()
        .select("run_id", pl.col("asks_tools").alias("_last_asks"), pl.col("index").alias("_m_i"))
    )
    final = (
        model.filter(~pl.col("asks_tools") & (pl.col("status") != "error"))
        .group_by("run_id")
        .last()
        .select(
            "run_id",
            pl.col("span_id").alias("_a_span"),
            pl.col("end_ns").alias("_a_end"),
            pl.col("output_text").alias("_a_text"),
        )
    )
    output_tool = (
        steps.filter((pl.col("kind") == "output") & (pl.col("status") != "error"))
        .group_by("run_id")
        .last()
        .select(
            "run_id",
            pl.col("index").alias("_o_i"),
            pl.coalesce("span_id", "requested_by").alias("_o_span"),
            pl.coalesce("end_ns", "start_ns").alias("_o_end"),
            pl.col("arguments").alias("_o_text"),
        )
    )
    # a run of several turns (a run key, a resumed invocation) answers in its last one
    last_agent = _outer_agents(frame).sort("run_id", "end_ns", "span_id")
    agent = (
        last_agent.group_by("run_id", maintain_order=True)
        .last()
        .select(
            "run_id",
            pl.col("span_id").alias("_g_span"),
            pl.col("end_ns").alias("_g_end"),
            # a framework's serialized None ("null", CrewAI's flow result) records no answer
            pl.when(~pl.col("output_text").str.strip_chars().is_in(["null", ""]))
            .then("output_text")
            .alias("_g_text"),
            pl.col("status").alias("_g_status"),
        )
    )
    runs = frame.select("run_id").unique()
    out = runs.join(last, on="run_id", how="left").join(final, on="run_id", how="left")
    out = out.join(output_tool, on="run_id", how="left").join(agent, on="run_id", how="left")
    has_model = pl.col("_last_asks").is_not_null()
    via_tool = pl.col("_o_i").is_not_null() & (~has_model | (pl.col("_o_i") > pl.col("_m_i")))
    via_model = ~via_tool & has_model & ~pl.col("_last_asks") & pl.col("_a_span").is_not_null()
    via_agent = (
        ~via_tool & ~has_model & pl.col("_g_text").is_not_null() & (pl.col("_g_status") != "error")
    )
    picked = {  # what each way answers with: (via_tool, via_model, via_agent)
        "answer": (pl.coalesce("_g_text", "_o_text"), pl.coalesce("_g_text", "_a_text"), "_g_text"),
        "answer_ns": ("_o_end", "_a_end", "_g_end"),
        "answer_span_id": ("_o_span", "_a_span", "_g_span"),
    }
    return out.select(
        "run_id",
        (via_tool | via_model | via_agent).fill_null(False).alias("has_answer"),
        *(
            pl.when(via_tool).then(t).when(via_model).then(m).when(via_agent).then(a).alias(name)
            for name, (t, m, a) in picked.items()
        ),
    )


def run_codes() -> pl.DataType:
    """A categorical type for run ids where many joins and groupings read them: a code is
    hashed and compared as an integer, a 32-character id as a string. Categories of their own
    where polars has them (no other query shares their mapping); cast back to text before the
    ids leave the computation."""
    return pl.Categorical(pl.Categories.random()) if hasattr(pl, "Categories") else pl.Categorical


def _seconds(ns: pl.Expr) -> pl.Expr:
    """Whole nanoseconds (not negative) as seconds, the same float on every path.

    Polars divides by multiplying with 1e-9 in some batch shapes, which can move the quotient
    by its last bit; rounded to 9 decimals it is the same again, as long as a float holds the
    nanoseconds (2^53 ns, some 104 days). Past that (a span that starts at 0, the epoch), the
    whole seconds are added to the nanoseconds left, rounded the same way."""
    rounded = (ns / 1e9).round(9)
    split = (ns // 1_000_000_000).cast(pl.Float64) + ((ns % 1_000_000_000) / 1e9).round(9)
    return pl.when(ns < 2**53).then(rounded).otherwise(split)


def _outer_agents(frame: pl.LazyFrame) -> pl.LazyFrame:
    """The agent spans with no agent above them."""
    agents = frame.filter(pl.col("role") == "agent")
    parent_agents = agents.select("trace_id", pl.col("span_id").alias("parent_span_id"))
    return agents.join(parent_agents, on=["trace_id", "parent_span_id"], how="anti")


def _top_agent(frame: pl.LazyFrame) -> pl.LazyFrame:
    """The outermost agent span of each run (earliest start among those with no agent above)."""
    outer = _outer_agents(frame).sort("run_id", "start_ns", "span_id")
    return outer.group_by("run_id", maintain_order=True).first()


def _agent_extent(frame: pl.LazyFrame) -> pl.LazyFrame:
    """`_agent_ns`: from the first start to the last end of each run's outermost agent spans (all
    the turns of a run grouped by a run key, not only the first), null if they end before they
    start (clock skew)."""
    extent = pl.col("end_ns").max() - pl.col("start_ns").min()
    return _outer_agents(frame).group_by("run_id").agg(_agent_ns=pl.when(extent >= 0).then(extent))


def _runs(
    frame: pl.DataFrame,
    steps: pl.DataFrame,
    sources: pl.DataFrame,
    spans: pa.Table,
    case_key: str | None,
    span_rows: pa.Array | None,
    spans_of_traces: pl.DataFrame,
) -> pl.DataFrame:
    # One plan, run by the in-memory engine (what two parts share runs once); run ids as codes
    # (`run_codes`) while joining, cast back at the end.
    as_codes = pl.col("run_id").cast(run_codes())
    lazy_frame = frame.lazy().with_columns(as_codes)
    lazy_steps = steps.lazy().with_columns(as_codes)
    model = lazy_steps.filter(pl.col("kind") == "model_call")
    tool = lazy_steps.filter(pl.col("kind") == "tool_call")

    def total(col: str) -> pl.Expr:
        """The sum of `col`, null where no step recorded one."""
        return pl.when(pl.col(col).is_not_null().any()).then(pl.col(col).sum()).alias(col)

    model_totals = model.group_by("run_id").agg(
        pl.len().alias("model_calls"),
        total("input_tokens"),
        total("output_tokens"),
        total("cached_input_tokens"),
        total("recorded_cost_usd"),
        pl.col("model").drop_nulls().unique().sort().alias("models"),
        pl.col("temperature").drop_nulls().unique().sort().alias("temperatures"),
        (pl.col("status") == "error").sum().alias("failed_model_calls"),
    )
    tool_totals = tool.group_by("run_id").agg(
        pl.len().alias("tool_calls"),
        (~pl.col("executed")).sum().alias("unexecuted_tool_calls"),
        (pl.col("status") == "error").sum().alias("failed_tool_calls"),
        pl.col("tool_name").drop_nulls().alias("tool_sequence"),
    )
    extent = lazy_frame.group_by("run_id").agg(
        pl.col("trace_id").min().alias("trace_id"),
        pl.col("start_ns").min().alias("started_ns"),
        pl.col("end_ns").max().alias("_last_end"),
        pl.col("has_content").any().alias("has_content"),
        pl.col("agent_name").drop_nulls().first().alias("_any_agent"),
        pl.col("agent_version").drop_nulls().first().alias("agent_version"),
        pl.col("prompt_id").drop_nulls().unique().sort().alias("_prompts"),
        pl.col("tool_definitions").drop_nulls().unique().sort().alias("_tool_defs"),
        pl.col("conversation_id").drop_nulls().first().alias("conversation_id"),
        pl.col("trace_id").n_unique().alias("traces"),
        pl.col("convention").drop_nulls().unique().sort().alias("conventions"),
        pl.col("_scope").drop_nulls().unique().sort().alias("instrumentations"),
    )
    top = _top_agent(lazy_frame).select(
        "run_id",
        pl.col("span_id").alias("agent_span_id"),
        pl.col("agent_name").alias("_top_name"),
        pl.col("span_name").alias("_top_span_name"),
    )
    runs = (
        extent.join(model_totals, on="run_id", how="left")
        .join(tool_totals, on="run_id", how="left")
        .join(top, on="run_id", how="left")
        .join(_agent_extent(lazy_frame), on="run_id", how="left")
        .join(_answers(lazy_frame, lazy_steps), on="run_id", how="left")
    )
    counts = ("model_calls", "tool_calls", "unexecuted_tool_calls", "failed_model_calls")
    runs = runs.with_columns(
        pl.col(*counts, "failed_tool_calls").fill_null(0),
        pl.col("models", "tool_sequence").fill_null([]),
        agent=pl.coalesce("_top_name", "_any_agent"),
        temperature=pl.when(pl.col("temperatures").list.len() == 1).then(
            pl.col("temperatures").list.first()
        ),
        duration_s=_seconds(
            pl.coalesce(
                "_agent_ns",
                pl.when(pl.col("_last_end") >= pl.col("started_ns")).then(
                    pl.col("_last_end") - pl.col("started_ns")
                ),
            )
        ),
        answer=pl.col("answer").str.slice(0, ANSWER_CAP),
        run_id=pl.col("run_id").cast(pl.String),
    ).collect(engine="in-memory")
    attrs = _run_attributes(frame, spans, runs, span_rows, spans_of_traces)
    runs = runs.join(attrs, on="run_id", how="left")
    runs = runs.with_columns(
        agent=pl.coalesce("agent", "service_name"),
        case_id=_case_id(runs.get_column("attributes"), case_key),
    )
    system = (
        sources.filter(pl.col("origin") == "message:system")
        .group_by("run_id")
        .agg(pl.col("text").unique().sort().alias("_system"))
    )
    runs = runs.join(system, on="run_id", how="left")
    runs = runs.with_columns(
        config_hash=_config_hash(runs), primary_model=_primary_model(runs, steps)
    )
    return runs.select(
        "run_id",
        "trace_id",
        "traces",
        "case_id",
        "agent",
        "agent_version",
        "agent_span_id",
        "service_name",
        "service_version",
        "conversation_id",
        "models",
        "primary_model",
        "temperature",
        "temperatures",
        "config_hash",
        "has_answer",
        "answer",
        "answer_ns",
        "answer_span_id",
        "model_calls",
        "tool_calls",
        "unexecuted_tool_calls",
        "failed_model_calls",
        "failed_tool_calls",
        "tool_sequence",
        "input_tokens",
        "output_tokens",
        "cached_input_tokens",
        "recorded_cost_usd",
        "duration_s",
        "started_ns",
        "has_content",
        # the convention families that classified its spans, and the instrumentation scopes
        # that wrote them
        "conventions",
        "instrumentations",
        "attributes",
        # distinct JSON arrays of the tools offered in the run (argument_schema reads them)
        pl.col("_tool_defs").alias("tool_definitions"),
    ).sort("run_id")


def _note_reading(
    log: IngestLog, frame: pl.DataFrame, absorbed: pl.Series, files: pa.Array
) -> None:
    """A warning per file for the spans merged into a call another span of it records, for
    the spans with a model, usage or content that no convention recognised (kept, as `other`),
    and for the model calls whose only usage is the one the exporting backend filled in;
    `files`: the file of each row of `frame`."""
    counts = (
        pl.DataFrame(
            {
                "file": pl.Series(files),
                "absorbed": absorbed,
                # plain HTTP or database spans are not the concern
                "unknown": frame.select(
                    pl.col("convention").is_null()
                    & (
                        pl.col("model").is_not_null()
                        | pl.col("input_tokens").is_not_null()
                        | pl.col("output_tokens").is_not_null()
                        | pl.col("has_content").fill_null(False)
                    )
                ).to_series(),
                "backend": frame.select(
                    (pl.col("role") == "model_call") & pl.col("backend_usage").fill_null(False)
                ).to_series(),
            }
        )
        .group_by("file")
        .agg(pl.col("absorbed", "unknown", "backend").sum())
        .filter(pl.any_horizontal(pl.col("absorbed", "unknown", "backend") > 0))
    )
    by_path = {f.path: f for f in log.files}
    for path, absorbed_n, unknown_n, backend_n in counts.sort("file").iter_rows():
        file_log = by_path.get(path)
        if file_log is None:
            continue
        if absorbed_n:
            file_log.warn(
                "file",
                f"{absorbed_n:,} spans record a call another span already records (nested "
                "instrumentations, or one span per event): merged into it, see the steps' "
                "merged_span_ids",
                spans=absorbed_n,
            )
        if unknown_n:
            file_log.warn(
                "file",
                f"{unknown_n:,} spans record a model, usage or content but match no known "
                "convention: kept, as kind other",
                spans=unknown_n,
            )
        if backend_n:
            file_log.warn(
                "file",
                f"{backend_n:,} model calls record no usage of their own: their tokens are the "
                "usage the exporting backend stored (what an SDK sent it, or its own estimate)",
                spans=backend_n,
            )


def _rows_of_spans(rows: pl.Series, span_rows: pa.Array | None) -> pa.Array:
    """The row of the span table of each of `rows` (of the normalized frame)."""
    rows = pa.array(rows.cast(pl.Int64).to_arrow())
    return rows if span_rows is None else pc.take(span_rows, rows)


def _run_attributes(
    frame: pl.DataFrame,
    spans: pa.Table,
    runs: pl.DataFrame,
    span_rows: pa.Array | None,
    spans_of_traces: pl.DataFrame,
) -> pl.DataFrame:
    """run_id -> attributes (JSON object: resource attributes overlaid by the root span's).

    A run split per agent span (`TRACE:SPAN`) has that agent span as its root; the attributes
    of its trace's root (the application's span around the agent runs) come in between, so a
    case id or a rule's ``when`` attribute set there applies to each run of the trace."""
    members = frame.select("run_id", "parent_span_id", "start_ns", "span_id", "_i")
    roots = root_first(members, "run_id").select("run_id", "_i")
    top = runs.select("run_id", "trace_id", "agent_span_id").join(
        frame.select(pl.col("span_id").alias("agent_span_id"), "run_id", pl.col("_i").alias("_ai")),
        on=["run_id", "agent_span_id"],
        how="left",
    )
    split = pl.col("run_id").str.contains(":")
    split_traces = top.filter(split).select("trace_id").unique()
    trace_roots = root_first(spans_of_traces.join(split_traces, on="trace_id"), "trace_id")
    roots = (
        roots.join(top.select("run_id", "trace_id", "_ai"), on="run_id", how="left")
        .join(trace_roots.select("trace_id", pl.col("_i").alias("_ti")), on="trace_id", how="left")
        .with_columns(
            _row=pl.when(split).then(pl.coalesce("_ai", "_i")).otherwise("_i"),
            _outer=pl.when(split & (pl.col("_ti") != pl.coalesce("_ai", "_i"))).then("_ti"),
        )
    )
    own = _rows_of_spans(roots.get_column("_row"), span_rows)
    outer = _rows_of_spans(roots.get_column("_outer"), span_rows)
    attributes = spans.column("attributes")
    picked = pa.table(
        {
            "resource_attributes": spans.column("resource_attributes").take(own),
            "outer_attributes": attributes.take(outer),
            "attributes": attributes.take(own),
        }
    )
    attributes, names, versions = _attributes_json(picked)
    return pl.DataFrame(
        {
            "run_id": roots.get_column("run_id"),
            "attributes": attributes,
            "service_name": names,
            "service_version": versions,
        }
    )


#: A character JSON escapes inside quotes (a quote, a backslash, a control character).
_ESCAPED = r'["\\\x00-\x1f]'


def _attributes_json(picked: pa.Table) -> tuple[pl.Series, pl.Series, pl.Series]:
    """Per row of `picked` (columns of attribute lists, each overlaid by the next: a span's
    ``resource_attributes`` then its ``attributes``): its attributes as one JSON object (the
    text of ``json.dumps(..., sort_keys=True, ensure_ascii=False)``), and ``service.name`` and
    ``service.version`` as text.

    Rows whose attributes are plain (text without quotes, backslashes or control characters,
    integers, booleans) are written by polars; the others (doubles, JSON values, escapes) by
    `_python_attributes`, whose output the columnar one equals byte for byte.
    """
    n = picked.num_rows
    parts = []
    for column in picked.column_names:  # the last column's win: read after
        lists = attribute_lists(picked.column(column))
        values = lists.flatten()
        table = pa.table(
            {"_row": pc.list_parent_indices(lists)}
            | {field.name: values.field(i) for i, field in enumerate(values.type)}
        )
        parts.append(pl.from_arrow(table))
    items = pl.concat(parts)
    plain = ~pl.col("key").str.contains(_ESCAPED) & (
        ~pl.col("str").str.contains(_ESCAPED)
        | (pl.col("str").is_null() & (pl.col("int").is_not_null() | pl.col("bool").is_not_null()))
    )
    odd_rows = items.filter(~plain.fill_null(False)).get_column("_row").unique().sort()
    row, key = pl.col("_row"), pl.col("key")
    final = (
        items.filter(~row.is_in(odd_rows.implode()))
        # of the items of a key (a stable sort keeps them in reading order), the last wins:
        # the span's own over its resource's
        .sort("_row", "key", maintain_order=True)
        .filter(row.ne_missing(row.shift(-1)) | key.ne_missing(key.shift(-1)))
        .with_columns(
            _json=pl.when(pl.col("str").is_not_null())
            .then(pl.format('"{}"', "str"))
            .when(pl.col("int").is_not_null())
            .then(pl.col("int").cast(pl.String))
            .otherwise(pl.when(pl.col("bool")).then(pl.lit("true")).otherwise(pl.lit("false"))),
            _text=pl.coalesce(
                "str",
                pl.col("int").cast(pl.String),
                pl.when(pl.col("bool")).then(pl.lit("True")).otherwise(pl.lit("False")),
            ),
        )
    )
    rows = (
        final.group_by("_row", maintain_order=True)
        .agg(
            _object=pl.format('"{}": {}', "key", "_json").str.join(", "),
            _name=pl.col("_text").filter(pl.col("key") == "service.name").last(),
            _version=pl.col("_text").filter(pl.col("key") == "service.version").last(),
        )
        .with_columns(_object=pl.concat_str(pl.lit("{"), "_object", pl.lit("}")))
    )
    out = pl.DataFrame({"_row": pl.arange(0, n, eager=True, dtype=pl.UInt32)}).join(
        rows.with_columns(pl.col("_row").cast(pl.UInt32)), on="_row", how="left"
    )
    attributes = out.get_column("_object").fill_null("{}")
    names, versions = out.get_column("_name"), out.get_column("_version")
    if odd_rows.len():
        odd = odd_rows.cast(pl.UInt32)
        texts, odd_names, odd_versions = _python_attributes(picked.take(odd.to_arrow()))
        attributes = scatter(attributes, odd, texts)
        names = scatter(names, odd, odd_names)
        versions = scatter(versions, odd, odd_versions)
    return attributes, names, versions


def _python_attributes(picked: pa.Table) -> tuple[list[str], list[str | None], list[str | None]]:
    """`_attributes_json` in Python, a dict per row: the reference, and the way for odd rows.
    An attribute's value is the first set of str, int, float, bool, else the parsed json (its
    text if it does not parse)."""
    records: list[dict] = [{} for _ in range(picked.num_rows)]
    # a later column's attributes win: set after the earlier ones
    for column in picked.column_names:
        lists = attribute_lists(picked.column(column)).to_pylist()
        for record, attrs in zip(records, lists, strict=True):
            for a in attrs or ():
                typed = [a[f] for f in ("str", "int", "float", "bool") if a[f] is not None]
                record[a["key"]] = typed[0] if typed else _json_value(a["json"])

    def text(record: dict, key: str) -> str | None:
        return str(record[key]) if record.get(key) is not None else None

    return (
        [json.dumps(r, sort_keys=True, ensure_ascii=False, default=str) for r in records],
        [text(r, "service.name") for r in records],
        [text(r, "service.version") for r in records],
    )


def _json_value(raw: str | None) -> object:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _case_id(attributes: pl.Series, case_key: str | None) -> pl.Series:
    """The case id of each run: the first case key found in its attributes (JSON objects).

    Only the objects that hold a key are parsed: its name written as a JSON object key
    (``"key": ``) cannot appear elsewhere in the text, where quotes are escaped.
    """
    found = pl.repeat(None, attributes.len(), dtype=pl.String, eager=True)
    for key in (case_key,) if case_key else DEFAULT_CASE_KEYS:
        named = attributes.str.contains(json.dumps(key, ensure_ascii=False) + ": ", literal=True)
        rows = (named & found.is_null()).arg_true()
        if len(rows):
            values = attributes.gather(rows).str.json_path_match(key_path(key))
            found = scatter(found, rows, values)
    return found.alias("case_id")


def _primary_model(runs: pl.DataFrame, steps: pl.DataFrame) -> pl.Series:
    """The model of most tokens (input + output) in each run, then of most calls, then the
    first by name; null for a run that names no model."""
    picked = (
        steps.filter((pl.col("kind") == "model_call") & pl.col("model").is_not_null())
        .group_by("run_id", "model")
        .agg(
            (pl.col("input_tokens").fill_null(0) + pl.col("output_tokens").fill_null(0))
            .sum()
            .alias("_tokens"),
            pl.len().alias("_calls"),
        )
        .sort(["_tokens", "_calls", "model"], descending=[True, True, False])
        .group_by("run_id", maintain_order=True)
        .first()
    )
    found = runs.select("run_id").join(picked, on="run_id", how="left", maintain_order="left")
    return found.get_column("model").alias("primary_model")


def _config_hash(runs: pl.DataFrame) -> pl.Series:
    """A short stable hash of (agent, version, service version, prompts, system prompt, tool
    definitions, models, temperatures).

    A managed prompt counts by its recorded identity (name, version, template): one
    configuration whatever case data was rendered into it. A run that records no identity
    counts by the text of its system prompts, so an agent that writes case data into an
    unmanaged system prompt gets one configuration per distinct text; a run that recorded no
    content, by none."""
    runs = runs.with_columns(
        _system_text=pl.when(pl.col("_prompts").list.len() == 0).then(
            pl.col("_system").list.join("\x00")
        )
    )
    parts = [
        "agent",
        "agent_version",
        "_prompts",
        "_tool_defs",
        "models",
        "temperatures",
        "service_version",
        "_system_text",
    ]
    # runs of one agent mostly share their configuration: each distinct one is hashed once
    configs = runs.select(parts).unique()
    hashes = []
    for row in configs.iter_rows():
        payload = json.dumps(
            {
                "agent": row[0],
                "agent_version": row[1],
                "prompts": row[2] or [],
                "tools": _tool_signature(row[3] or []),
                "models": row[4] or [],
                "temperatures": row[5] or [],
                "service_version": row[6],
                "system_prompt": row[7] and hashlib.sha256(row[7].encode()).hexdigest(),
            },
            sort_keys=True,
            ensure_ascii=False,
        )
        hashes.append(hashlib.sha256(payload.encode()).hexdigest()[:12])
    table = configs.with_columns(pl.Series("config_hash", hashes, dtype=pl.String))
    keyed = runs.select(parts).join(
        table, on=parts, how="left", nulls_equal=True, maintain_order="left"
    )
    return keyed.get_column("config_hash")


def _tool_signature(definitions: list[str]) -> list[object]:
    """Tool definitions reduced to a canonical, order-free form."""
    tools: dict[str, object] = {}
    for raw in definitions:
        try:
            parsed = json.loads(raw)
        except ValueError:
            tools[raw] = raw
            continue
        for tool in parsed if isinstance(parsed, list) else [parsed]:
            if isinstance(tool, dict):
                tools[str(tool.get("name"))] = tool
    return [tools[k] for k in sorted(tools)]
