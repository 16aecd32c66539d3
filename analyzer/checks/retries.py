"""retries: model calls redone, failed tool calls repeated, HTTP resends (`retry_steps`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import polars as pl

from analyzer.checks.base import Check, CheckContext, findings
from analyzer.runs import _requests_tools, canonical_arguments, run_codes

if TYPE_CHECKING:
    from analyzer.runs import RunSet

__all__ = [
    "RETRY_PATTERNS",
    "RETRY_STEPS_SCHEMA",
    "Retries",
    "RetryScan",
    "all_retries",
    "retry_steps",
    "scan_retries",
]

#: What made a step a retry, in the order details name them.
RETRY_PATTERNS = ("model_after_failure", "model_after_answer", "tool_repeat", "http_resend")

#: Columns of `retry_steps`: one row per superseded attempt, in run order.
RETRY_STEPS_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String(),
    "index": pl.Int32(),  # the retrying step's index in the run
    "span_id": pl.String(),  # the superseded attempt (null for HTTP resends: not a span)
    "pattern": pl.String(),  # one of RETRY_PATTERNS
    "count": pl.Int64(),  # retries the row stands for: 1, or the span's HTTP resend count
    "retry_span_id": pl.String(),  # the retrying span (a requested call: its model call)
    "tool": pl.String(),  # the tool, for tool_repeat
}


@dataclass(frozen=True, kw_only=True)
class Retries(Check):
    """The run did not retry more than allowed.

    Flags
    -----
    ``retry``: one finding for a run whose retries exceed ``max``; the detail counts them by
    pattern and the evidence is the retrying spans. A retry is:

    - a model call after a failed model call (status error), or after a model call that gave
      an answer (succeeded and requested no tool), with no tool call in between; the earlier
      call is superseded;
    - a tool call repeating the name and arguments (compared as canonical JSON: key order and
      spacing do not matter) of the previous call of that tool with those arguments, when that
      call failed; a call the model requested that no tool span recorded counts too;
    - each HTTP resend recorded on a model or tool call span (``http.request.resend_count``).

    Not retries: a model call after a tool call (the agent loop going on), a model call that
    starts before the previous one ended (calls in parallel), a repeated call with other
    arguments or of a call that succeeded, steps in different traces (a conversation
    grouped into one run by ``--run-key`` starts each turn in a new trace), and model calls of
    different agents (the innermost agent span, or tool call, holding each: a sub-agent's
    answer followed by its caller's next call), and a model call holding another conversation:
    both calls recorded their prompt and the later one's does not begin with the earlier one's
    messages (a retry sends its conversation again, extended at most; another agent's first
    call where no agent span tells the agents apart, or the same instructions given the next
    document, start their own). A model call whose
    outcome was not recorded (no content, no finish reason) followed by another, and a failed
    tool call followed by a call of the same tool where either call's arguments were not
    recorded, make the run ``partial``: a retry may have been missed there.

    Why it matters
    --------------
    Retries are paid twice and hide in averages: a provider returning errors, an output
    validator rejecting answers, a tool the agent calls again with the same failing arguments.
    The report sums them per run with their cost (the cost of the superseded attempts).

    Options
    -------
    max : integer, default 0
        Most retries allowed in a run.

    Example
    -------
    - id: retries
      type: retries
      max: 1
      severity: low
    """

    type = "retries"
    kinds = ("retry",)

    max: int = 0

    def check(self, ctx: CheckContext) -> pl.DataFrame:
        scan = ctx.shared(all_retries)
        found, unknown_outcome, unrecorded_args = (
            scan if ctx.run_ids is None else scan.restrict(ctx.run_ids)
        )
        ctx.mark(unknown_outcome, "partial", "a model call's outcome was not recorded")
        ctx.mark(unrecorded_args, "partial", "arguments of a failed tool call not recorded")
        n = pl.col("count")
        per_run = (
            found.group_by("run_id", maintain_order=True)
            .agg(
                n.sum().alias("_n"),
                *(n.filter(pl.col("pattern") == p).sum().alias(p) for p in RETRY_PATTERNS),
                pl.col("tool").drop_nulls().unique().sort().str.join(", ").alias("_tools"),
                pl.col("retry_span_id").unique(maintain_order=True).alias("_spans"),
            )
            .filter(pl.col("_n") > self.max)
        )
        parts = [
            _counted("model_after_failure", "model call", " after failure"),
            _counted("model_after_answer", "model call", " after an answer"),
            _counted("tool_repeat", "repeated tool call", pl.format(" {}", "_tools")),
            _counted("http_resend", "HTTP resend", ""),
        ]
        return findings(
            per_run,
            "retry",
            pl.format(
                "{} {} > max {}: {}",
                "_n",
                pl.when(pl.col("_n") == 1).then(pl.lit("retry")).otherwise(pl.lit("retries")),
                pl.lit(self.max),
                pl.concat_str(parts, separator=", ", ignore_nulls=True),
            ),
            spans="_spans",
        )


def _counted(column: str, noun: str, suffix: str | pl.Expr) -> pl.Expr:
    """'2 model calls after failure' for a positive count, else null (left out of the detail)."""
    n = pl.col(column)
    plural = pl.when(n == 1).then(pl.lit("")).otherwise(pl.lit("s"))
    suffix = pl.lit(suffix) if isinstance(suffix, str) else suffix
    return pl.when(n > 0).then(pl.format("{} {}{}{}", n, pl.lit(noun), plural, suffix))


def retry_steps(runset: RunSet) -> pl.DataFrame:
    """Every retry of every run (see `Retries`), one row per superseded attempt.

    Columns of `RETRY_STEPS_SCHEMA`, sorted by run and index of the retrying step. A run's
    retries are the sum of ``count``; its retry cost is the cost of the ``span_id`` steps. An
    HTTP resend row has a null ``span_id``: the resent requests are not spans of their own,
    and what they cost is not recorded apart from their span's.
    """
    return all_retries(runset).found


def all_retries(runset: RunSet) -> RetryScan:
    """`scan_retries` of every step of ``runset`` (what the retries rules share)."""
    return scan_retries(runset.steps, runset.messages)


class RetryScan(NamedTuple):
    """Every retry of some runs, and the runs where one may have been missed."""

    found: pl.DataFrame  # `retry_steps` rows
    unknown_outcome: pl.Series  # run ids: a model call's outcome was not recorded
    unrecorded_args: pl.Series  # run ids: arguments of a failed tool call not recorded

    def restrict(self, run_ids: pl.DataFrame) -> RetryScan:
        """The scan of the runs in ``run_ids`` only (each run's retries depend on it alone)."""

        def among(ids: pl.Series) -> pl.Series:
            frame = ids.to_frame("run_id").join(run_ids, on="run_id", how="semi")
            return frame.get_column("run_id")

        return RetryScan(
            self.found.join(run_ids, on="run_id", how="semi"),
            among(self.unknown_outcome),
            among(self.unrecorded_args),
        )


#: The step columns a retry scan reads.
_SCANNED = (
    "run_id",
    "index",
    "kind",
    "span_id",
    "trace_id",
    "agent_span_id",
    "requested_by",
    "start_ns",
    "end_ns",
    "status",
    "tool_name",
    "arguments",
    "http_resend_count",
    "has_content",
    "finish_reasons",
    "requested_calls",
)


def scan_retries(steps: pl.DataFrame, messages: pl.DataFrame) -> RetryScan:
    """Retries of the runs in ``steps`` (their prompts in ``messages``, as `RunSet.messages`),
    and the runs where a model call's outcome, or the arguments of a failed tool call, were not
    recorded (a retry may have been missed).

    Done once per analysis: the pipeline prices the superseded attempts with it and hands it
    to `evaluate`, whose retries rules all read it."""
    steps = steps.select(_SCANNED).sort("run_id", "index")
    if steps.get_column("trace_id").has_nulls():
        # A requested call with no tool span records no trace: it is in its model call's.
        traces = (
            steps.filter(pl.col("span_id").is_not_null())
            .select(
                "run_id", pl.col("span_id").alias("requested_by"), pl.col("trace_id").alias("_rt")
            )
            .unique(["run_id", "requested_by"], keep="first", maintain_order=True)
        )
        steps = (
            steps.join(traces, on=["run_id", "requested_by"], how="left", maintain_order="left")
            .with_columns(pl.coalesce("trace_id", "_rt").alias("trace_id"))
            .drop("_rt")
        )
    # run ids as codes (`run_codes`): joined and grouped as integers, not as texts
    steps = steps.with_columns(pl.col("run_id").cast(run_codes()))
    models, unknown = _model_retries(steps, messages)
    tools, unrecorded = _tool_retries(steps)
    unknown, unrecorded = unknown.cast(pl.String), unrecorded.cast(pl.String)
    resends = steps.filter(pl.col("http_resend_count") > 0).select(
        "run_id",
        "index",
        pl.lit(None, pl.String).alias("span_id"),
        pl.lit("http_resend").alias("pattern"),
        pl.col("http_resend_count").cast(pl.Int64).alias("count"),
        pl.col("span_id").alias("retry_span_id"),
        pl.lit(None, pl.String).alias("tool"),
    )
    order = {p: i for i, p in enumerate(RETRY_PATTERNS)}
    found = (
        pl.concat([f.cast(RETRY_STEPS_SCHEMA) for f in (models, tools, resends)])  # type: ignore[arg-type]
        .with_columns(_p=pl.col("pattern").replace_strict(order, return_dtype=pl.Int8))
        .sort("run_id", "index", "_p")
        .drop("_p")
    )
    return RetryScan(found, unknown, unrecorded)


def _prev(column: str) -> pl.Expr:
    return pl.col(column).shift(1)


def _model_retries(steps: pl.DataFrame, messages: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    asks = _requests_tools(steps.lazy()).collect(engine="in-memory")
    rows = steps.select(
        "run_id",
        "index",
        "kind",
        "span_id",
        "trace_id",
        "agent_span_id",
        "start_ns",
        "end_ns",
        "status",
        # an outcome is known from content, or from a finish reason (recorded without content)
        (
            pl.col("has_content").fill_null(False)
            | (pl.col("finish_reasons").list.len().fill_null(0) > 0)
        ).alias("_known"),
    ).join(asks, on=["run_id", "index"], how="left", maintain_order="left")
    # Steps are only model and tool calls: "no tool call in between" is "the previous step of
    # the run is a model call".
    after_model = (
        (pl.col("run_id") == _prev("run_id"))
        & (pl.col("kind") == "model_call")
        & (_prev("kind") == "model_call")
        & (pl.col("trace_id") == _prev("trace_id"))
        & pl.col("agent_span_id").eq_missing(_prev("agent_span_id"))
        & (pl.col("start_ns") >= _prev("end_ns"))
    ).fill_null(False)
    prev_ok = (_prev("status") != "error").fill_null(True)
    prev_answered = prev_ok & ~_prev("asks_tools").fill_null(False)
    flagged = rows.with_columns(
        pl.when(after_model & ~prev_ok)
        .then(pl.lit("model_after_failure"))
        .when(after_model & prev_answered & _prev("_known"))
        .then(pl.lit("model_after_answer"))
        .alias("pattern"),
        (after_model & prev_answered & ~_prev("_known")).alias("_unknown"),
        _prev("span_id").alias("_superseded"),
        _prev("index").alias("_earlier"),
    )
    candidates = flagged.filter(pl.col("pattern").is_not_null() | pl.col("_unknown"))
    flagged = candidates.with_columns(_run=pl.col("run_id").cast(pl.String)).join(
        _other_conversations(candidates, messages),
        left_on=["_run", "index"],
        right_on=["run_id", "index"],
        how="anti",
    )
    found = flagged.filter(pl.col("pattern").is_not_null()).select(
        "run_id",
        "index",
        pl.col("_superseded").alias("span_id"),
        "pattern",
        pl.lit(1, pl.Int64).alias("count"),
        pl.col("span_id").alias("retry_span_id"),
        pl.lit(None, pl.String).alias("tool"),
    )
    unknown = flagged.filter("_unknown").get_column("run_id").unique(maintain_order=True)
    return found, unknown


def _other_conversations(candidates: pl.DataFrame, messages: pl.DataFrame) -> pl.DataFrame:
    """The (run_id, index) of the ``candidates`` (model calls with the ``_earlier`` model call
    they may retry) that hold another conversation: both calls recorded their prompt, and the
    later one's does not begin with the earlier one's messages (same role, content and call id,
    in order). A retry re-sends its conversation, extended at most; another agent's call,
    where no agent span tells the agents apart, starts its own."""
    pairs = candidates.select(
        pl.col("run_id").cast(pl.String),
        pl.col("index").cast(pl.Int64),
        pl.col("_earlier").cast(pl.Int64),
    )
    messages = messages.join(pairs.select("run_id").unique(), on="run_id", how="semi")
    same = ["role", "content", "tool_call_id"]
    sizes = messages.group_by("run_id", "index").agg(pl.len().alias("_n"))
    earlier = messages.select("run_id", pl.col("index").alias("_earlier"), "position", *same)
    later = messages.select(
        "run_id", "index", "position", *[pl.col(c).alias(f"_{c}") for c in same]
    )
    matched = (
        pairs.join(earlier, on=["run_id", "_earlier"])
        .join(later, on=["run_id", "index", "position"])
        .filter(pl.all_horizontal(pl.col(c).eq_missing(pl.col(f"_{c}")) for c in same))
        .group_by("run_id", "index")
        .agg(pl.len().alias("_matched"))
    )
    return (
        pairs.join(sizes, on=["run_id", "index"])
        .join(sizes.rename({"index": "_earlier", "_n": "_n_earlier"}), on=["run_id", "_earlier"])
        .join(matched, on=["run_id", "index"], how="left")
        .filter(pl.col("_matched").fill_null(0) < pl.col("_n_earlier"))
        .select(pl.col("run_id"), pl.col("index").cast(candidates.schema["index"]))
    )


def _tool_retries(steps: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    calls = (
        steps.lazy()
        .filter(pl.col("kind") == "tool_call")
        .select(
            "run_id",
            "index",
            "trace_id",
            "tool_name",
            "status",
            "arguments",
            "span_id",
            pl.coalesce("span_id", "requested_by").alias("_span"),
        )
        .collect(engine="in-memory")
    )
    # Only a call of a tool that failed in its run (and trace) can repeat a failed call, or
    # leave unknown whether it does: only those calls are read. Arguments repeat run after
    # run: each distinct text is put in canonical form once.
    group = ["run_id", "trace_id", "tool_name"]
    failing = calls.filter(pl.col("status") == "error").select(group).unique()
    calls = calls.join(failing, on=group, how="semi", maintain_order="left")
    distinct = calls.get_column("arguments").drop_nulls().unique()
    canon = pl.DataFrame(
        {"arguments": distinct, "_canon": [canonical_arguments(t) for t in distinct.to_list()]},
        schema={"arguments": pl.String, "_canon": pl.String},
    )
    calls = calls.join(canon, on="arguments", how="left", maintain_order="left").with_columns(
        pl.coalesce("_canon", "arguments").alias("_canon")
    )
    key = [*group, "_canon"]
    keyed = calls.filter(pl.col("tool_name").is_not_null() & pl.col("_canon").is_not_null())
    same = pl.all_horizontal([pl.col(k) == _prev(k) for k in key]).fill_null(False)
    prev_failed = (_prev("status") == "error").fill_null(False)
    found = (
        keyed.sort([*key, "index"])
        .with_columns(_prev_span=_prev("span_id"))
        .filter(same & prev_failed)
        .select(
            "run_id",
            "index",
            pl.col("_prev_span").alias("span_id"),
            pl.lit("tool_repeat").alias("pattern"),
            pl.lit(1, pl.Int64).alias("count"),
            pl.col("_span").alias("retry_span_id"),
            pl.col("tool_name").alias("tool"),
        )
    )
    # A failed call and a later call of the same tool, one of them with arguments not recorded:
    # whether the later one repeats the failed one cannot be told.
    later = calls.select(*group, "index", "_canon")
    failed = calls.filter(pl.col("status") == "error").select(
        *group, pl.col("index").alias("_f"), pl.col("_canon").alias("_fc")
    )
    unrecorded = (
        failed.join(later, on=group)
        .filter(
            (pl.col("index") > pl.col("_f"))
            & (pl.col("_fc").is_null() | pl.col("_canon").is_null())
        )
        .get_column("run_id")
        .unique(maintain_order=True)
    )
    return found, unrecorded
