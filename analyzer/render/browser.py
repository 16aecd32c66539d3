"""report.html's run browser: every run, searchable, filterable and sortable, and one run's
span tree, timeline, arguments, results, outputs, prompt messages, findings and label verdicts.

The data is embedded in the page as JSON, deflated (zlib, fixed level) and base64-encoded in
``<script type="application/octet-stream">`` blocks (inert: a data block is never run), and
decoded in the page with ``DecompressionStream('deflate')``. The one script that runs is the
fixed text of ``browser.js``, allowed by its SHA-256 in the page's Content-Security-Policy.
The script puts trace text on the page as text nodes only.

Scale: the index of every run (a few short columns) is decoded when the page opens; each
run's detail (steps with full arguments and results, the prompt messages of its model calls,
findings, label fields) sits in chunks of
`CHUNK_RUNS` runs, decoded when one of their runs is opened. Steps are embedded for the runs
with a finding, wrong label fields or no answer (at most `DETAIL_FAILING`) and for at most
`DETAIL_OTHERS` other runs; the page says so when runs are left without. A run's prompt
messages are embedded once each (a model call's prompt repeats the conversation so far): the
run lists its distinct messages, each model call the positions of its own in that list.
"""

from __future__ import annotations

import base64
import hashlib
import html
import zlib
from collections.abc import Sequence
from importlib import resources
from typing import Any

import orjson
import polars as pl

from analyzer.runs import cut_text

__all__ = [
    "CHUNK_RUNS",
    "DETAIL_FAILING",
    "DETAIL_OTHERS",
    "SCRIPT",
    "SCRIPT_HASH",
    "STEPS_PER_RUN",
    "TEXT_CAP",
    "browser_section",
    "ordered_findings",
]

#: Runs per detail chunk (decoded together when one of them is opened).
CHUNK_RUNS = 400
#: Runs whose detail is built at once (a multiple of CHUNK_RUNS): bounds the memory it takes.
DETAIL_BATCH = 2_000
#: At most this many failing runs (finding, wrong label, no answer) get their steps embedded.
DETAIL_FAILING = 10_000
#: At most this many other runs get their steps embedded (the first by run id).
DETAIL_OTHERS = 1_000
#: Steps embedded per run.
STEPS_PER_RUN = 400
#: Characters kept of one argument, result, output or message text (the full text is in
#: steps.parquet; runs.parquet keeps answers to ANSWER_CAP).
TEXT_CAP = 20_000
#: Characters of each run's answer in the index (searched, shown in the run list).
ANSWER_INDEX = 120
#: zlib level of the embedded data: fixed, so the same data gives the same bytes.
_LEVEL = 3

SCRIPT = resources.files("analyzer.render").joinpath("browser.js").read_text(encoding="utf-8")
#: The CSP source that allows exactly `SCRIPT` to run.
SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode()

#: The runs table's columns the browser reads (those the table has).
_RUN_COLUMNS = (
    "run_id",
    "case_id",
    "agent",
    "models",
    "temperature",
    "has_answer",
    "answer",
    "findings",
    "score",
    "cost_usd",
    "duration_s",
    "started_ns",
    "model_calls",
    "tool_calls",
)
_STEP_COLUMNS = (
    "run_id",
    "index",
    "kind",
    "span_id",
    "parent_span_id",
    "name",
    "start_ns",
    "end_ns",
    "status",
    "error_type",
    "executed",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "arguments",
    "result",
    "output_text",
    "requested_calls",
)
#: `RunSet.messages`' columns the browser reads.
_MESSAGE_COLUMNS = ("run_id", "index", "position", "role", "content", "tool_call_id", "name")
_MESSAGE_KEYS = ["run_id", "role", "content", "tool_call_id", "name"]
_RUN_MESSAGES = pl.Struct(
    {
        "role": pl.List(pl.String),
        "content": pl.List(pl.String),
        "call": pl.List(pl.String),
        "name": pl.List(pl.String),
    }
)


def _pack(raw: bytes) -> str:
    return base64.b64encode(zlib.compress(raw, _LEVEL)).decode("ascii")


def _code(column: str, values: Sequence[Any]) -> pl.Expr:
    """`column`'s position in `values` (null when absent)."""
    return pl.col(column).replace_strict(
        list(values), list(range(len(values))), default=None, return_dtype=pl.Int64
    )


def browser_section(
    runset,
    findings: pl.DataFrame | None,
    ranks: pl.DataFrame,
    label_fields: pl.DataFrame | None = None,
) -> str:
    """The run browser's section: its fixed markup, data blocks and script.

    `ranks`: run_id, _rank (worst first); `label_fields`: `LabelScores.fields` (run_id,
    field, critical, status, expected, actual) when labels were given.
    """
    runs = runset.select("runs", _RUN_COLUMNS)
    for name, dtype in (
        ("case_id", pl.String),
        ("agent", pl.String),
        ("temperature", pl.Float64),
        ("answer", pl.String),
        ("score", pl.Float64),
        ("cost_usd", pl.Float64),
        ("duration_s", pl.Float64),
        ("started_ns", pl.Int64),
        ("model_calls", pl.Int64),
        ("tool_calls", pl.Int64),
    ):
        if name not in runs.columns:
            runs = runs.with_columns(pl.lit(None, dtype).alias(name))
    if "findings" not in runs.columns:
        runs = runs.with_columns(pl.lit(0, pl.Int64).alias("findings"))
    if "has_answer" not in runs.columns:
        runs = runs.with_columns(pl.col("answer").is_not_null().alias("has_answer"))
    if "models" not in runs.columns:
        runs = runs.with_columns(pl.lit([], pl.List(pl.String)).alias("models"))
    runs = runs.join(ranks.select("run_id", "_rank"), on="run_id", how="left").sort("run_id")
    runs = runs.with_columns(
        pl.col("findings").fill_null(0),
        pl.col("has_answer").fill_null(False),
        pl.col("temperature").round(6),
    )
    n = runs.height

    agents = runs.get_column("agent").drop_nulls().unique().sort().to_list()
    models = runs.get_column("models").explode().drop_nulls().unique().sort().to_list()
    temperatures: list[Any] = runs.get_column("temperature").drop_nulls().unique().sort().to_list()
    if runs.get_column("temperature").null_count():
        temperatures.append(None)

    # per run: the distinct (rule, severity, kind) of its findings, as codes
    rules: list[str] = []
    kinds: list[str] = []
    severities = ["critical", "high", "medium", "low"]
    found = pl.DataFrame(schema={"run_id": pl.String, "found": pl.List(pl.List(pl.Int64))})
    if findings is not None and not findings.is_empty():
        rules = findings.get_column("rule_id").drop_nulls().unique().sort().to_list()
        kinds = findings.get_column("kind").drop_nulls().unique().sort().to_list()
        extra = findings.get_column("severity").drop_nulls().unique().sort().to_list()
        severities = severities + [x for x in extra if x not in severities]
        codes = findings.select(
            "run_id",
            pl.concat_list(
                _code("rule_id", rules), _code("severity", severities), _code("kind", kinds)
            ).alias("_triple"),
        ).unique(maintain_order=False)
        found = (
            codes.sort("run_id", "_triple")
            .group_by("run_id", maintain_order=True)
            .agg(pl.col("_triple").alias("found"))
        )

    labelled = None
    verdicts = pl.DataFrame(schema={"run_id": pl.String, "label": pl.Int64})
    if label_fields is not None and not label_fields.is_empty():
        labelled = label_fields.sort("run_id", "field")
        verdicts = labelled.group_by("run_id").agg(
            (pl.col("status") == "correct").all().cast(pl.Int64).alias("label")
        )
    runs = runs.join(found, on="run_id", how="left").join(verdicts, on="run_id", how="left")

    failing_runs = runs.filter(
        (pl.col("findings") > 0) | (pl.col("label") == 0) | ~pl.col("has_answer")
    )
    failing_all = failing_runs.height
    # the failing runs worst first, when there are more than the cap
    failing = (
        failing_runs.sort("_rank", "run_id", nulls_last=True)
        .get_column("run_id")
        .head(DETAIL_FAILING)
    )
    others = (
        runs.join(failing_runs.select("run_id"), on="run_id", how="anti")
        .get_column("run_id")
        .head(DETAIL_OTHERS)
    )
    with_steps = pl.concat([failing, others]).sort().to_list()

    # every run with findings or labels has a detail entry; steps only for `with_steps`
    parts = [pl.Series("run_id", with_steps, dtype=pl.String)]
    if findings is not None:
        parts.append(findings.get_column("run_id"))
    if labelled is not None:
        parts.append(labelled.get_column("run_id"))
    detail_ids = pl.concat(parts).unique().sort()
    chunks = pl.DataFrame(
        {"run_id": detail_ids, "chunk": pl.int_range(len(detail_ids), eager=True) // CHUNK_RUNS}
    )
    runs = runs.join(chunks, on="run_id", how="left")
    # the steps of those runs, read at once (a partitioned result's from its spill: one pass),
    # then the detail built a batch of runs at a time, each chunk deflated as soon as it is written
    all_steps = runset.select("steps", _STEP_COLUMNS, run_ids=with_steps) if with_steps else None
    # the prompt messages of their model calls (those of the steps embedded)
    all_messages = (
        runset.select("messages", _MESSAGE_COLUMNS, run_ids=with_steps).filter(
            pl.col("index") < STEPS_PER_RUN
        )
        if with_steps
        else None
    )
    packed_detail = []
    batch = max(1, DETAIL_BATCH // CHUNK_RUNS) * CHUNK_RUNS
    for start in range(0, len(detail_ids), batch):
        frame = detail_ids.slice(start, batch).to_frame("run_id")
        detail = _detail(
            frame,
            all_steps.join(frame, on="run_id", how="semi") if all_steps is not None else None,
            all_messages.join(frame, on="run_id", how="semi") if all_messages is not None else None,
            runs.join(frame, on="run_id", how="semi"),
            findings.join(frame, on="run_id", how="semi") if findings is not None else None,
            labelled.join(frame, on="run_id", how="semi") if labelled is not None else None,
        )
        for at in range(0, detail.height, CHUNK_RUNS):
            packed_detail.append(_pack(_json_rows(detail.slice(at, CHUNK_RUNS))))
        del detail

    no_steps = n - len(with_steps)
    scope = (
        f"{n:,} runs. Steps are embedded for {len(with_steps):,} of them: "
        + (
            f"the {len(failing):,} worst of the {failing_all:,} runs with a finding, "
            "a wrong label field or no answer"
            if failing_all > len(failing)
            else "every run with a finding, a wrong label field or no answer"
        )
        + (f", and {len(others):,} other runs (the first by run id)" if len(others) else "")
        + "."
        + (
            f" The other {no_steps:,} runs are listed with their figures (and findings); "
            "`agenttrace show RUN_ID PATH` prints their steps."
            if no_steps
            else ""
        )
        + f" Texts longer than {TEXT_CAP:,} characters are cut (steps.parquet has them whole)."
    )
    columns = runs.select(
        pl.col("run_id").alias("id"),
        pl.col("case_id").alias("case"),
        _code("agent", agents).alias("agent"),
        pl.col("models")
        .fill_null([])
        .list.eval(pl.element().replace_strict(models, list(range(len(models))), default=None))
        .list.drop_nulls()
        .alias("models"),
        pl.col("temperature").alias("temp"),
        pl.col("has_answer").alias("answered"),
        pl.col("answer").str.slice(0, ANSWER_INDEX).alias("answer"),
        "findings",
        pl.col("score").round(6),
        pl.col("cost_usd").round(9).alias("cost"),
        pl.col("duration_s").round(6).alias("duration"),
        "model_calls",
        "tool_calls",
        "found",
        "label",
        pl.col("chunk").fill_null(-1),
    )
    # the runs worst first (lowest score, most findings, run id): the list's first order
    order = runs.with_row_index("_pos").sort("_rank", "run_id", nulls_last=True).get_column("_pos")
    index = {
        "agents": agents,
        "models": models,
        "temperatures": temperatures,
        "rules": rules,
        "kinds": kinds,
        "severities": severities,
        "notes": {
            "scope": scope,
            "no_detail": "This run has no finding and its steps are not embedded in this page "
            "(see the note at the top of the browser); `agenttrace show RUN_ID PATH` prints "
            "them.",
            "no_steps": "Steps of this run are not embedded in this page (over the cap); "
            "`agenttrace show RUN_ID PATH` prints them.",
        },
    }
    index_json = (
        b'{"runs":'
        + _json_rows(columns.select(pl.all().implode()))[1:-1]
        + b',"order":'
        + _json_rows(pl.DataFrame({"o": order}).select(pl.all().implode()))[6:-2]
        + b","
        + orjson.dumps(index)[1:]
    )
    blocks = [_block("ab-index", _pack(index_json))]
    blocks += [_block(f"ab-detail-{c}", data) for c, data in enumerate(packed_detail)]
    return _markup(n, "\n".join(blocks))


def _block(block_id: str, data: str) -> str:
    return f'<script type="application/octet-stream" id="{block_id}">{data}</script>'


def _json_rows(frame: pl.DataFrame) -> bytes:
    """The rows of `frame` as a JSON array of objects (polars' writer: fast, deterministic)."""
    return frame.write_json().encode("utf-8")


def ordered_findings(findings: pl.DataFrame, *first: str) -> pl.DataFrame:
    """`findings` sorted by the columns `first`, then by kind, tool, argument, span ids (the
    added column ``_spans``) and detail, nulls last: the order the page lists them in."""
    return findings.with_columns(_spans=pl.col("span_ids").list.join(" ")).sort(
        [*first, "kind", "tool", "argument", "_spans", "detail"], nulls_last=True
    )


def _capped(col: str | pl.Expr) -> pl.Expr:
    """A text column cut to TEXT_CAP characters, saying how many more the full text has."""
    return cut_text(pl.col(col) if isinstance(col, str) else col, TEXT_CAP, "steps.parquet")


def _detail(
    ids: pl.DataFrame,
    steps: pl.DataFrame | None,
    messages: pl.DataFrame | None,
    runs: pl.DataFrame,
    findings: pl.DataFrame | None,
    labelled: pl.DataFrame | None,
) -> pl.DataFrame:
    """One row per run of `ids` (each with a finding, label fields or embedded steps), by run
    id: run_id, answer, findings, labels, span_ms, steps (null when not embedded), steps_cut,
    messages (where some run of `steps` has prompt messages)."""
    finding_rows = None
    if findings is not None:
        ordered = ordered_findings(findings, "run_id", "pack", "rule_id")
        finding_rows = ordered.group_by("run_id", maintain_order=True).agg(
            pl.struct(
                pl.col("rule_id").alias("rule"),
                "severity",
                "kind",
                "tool",
                "argument",
                "detail",
                pl.col("span_ids").fill_null([]).alias("spans"),
            ).alias("findings")
        )
    label_rows = None
    if labelled is not None:
        label_rows = labelled.group_by("run_id", maintain_order=True).agg(
            pl.struct(
                "field",
                "critical",
                "status",
                _capped("expected").alias("expected"),
                _capped("actual").alias("actual"),
            ).alias("labels")
        )
    out = ids.join(
        runs.select(
            "run_id",
            pl.when(pl.col("has_answer")).then(_capped("answer")).alias("answer"),
            "started_ns",
            "duration_s",
        ),
        on="run_id",
        how="left",
    )
    if finding_rows is not None:
        out = out.join(finding_rows, on="run_id", how="left")
    if label_rows is not None:
        out = out.join(label_rows, on="run_id", how="left")
    steps = _steps(steps, messages, out.select("run_id", "started_ns", "duration_s"))
    out = out.join(steps, on="run_id", how="left")
    return out.drop("started_ns", "duration_s").sort("run_id")


_NO_STEPS = {
    "run_id": pl.String,
    "span_ms": pl.Float64,
    "steps": pl.List(pl.Struct({"index": pl.Int64})),
    "steps_cut": pl.Int64,
}


def _prompts(messages: pl.DataFrame | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Of `messages` (`_MESSAGE_COLUMNS`): each run's distinct messages, in the order they
    first appear (run_id, messages: one array per field), and each model call's prompt as
    positions in that list (run_id, index, prompt)."""
    if messages is None or messages.is_empty():
        return (
            pl.DataFrame(schema={"run_id": pl.String, "messages": _RUN_MESSAGES}),
            pl.DataFrame(
                schema={"run_id": pl.String, "index": pl.Int64, "prompt": pl.List(pl.Int64)}
            ),
        )
    ordered = messages.sort("run_id", "index", "position")
    distinct = (
        ordered.select(_MESSAGE_KEYS)
        .unique(_MESSAGE_KEYS, keep="first", maintain_order=True)
        .with_columns(_m=pl.int_range(pl.len(), dtype=pl.Int64).over("run_id"))
    )
    prompts = (
        ordered.join(
            distinct, on=_MESSAGE_KEYS, how="left", nulls_equal=True, maintain_order="left"
        )
        .group_by("run_id", "index", maintain_order=True)
        .agg(pl.col("_m").alias("prompt"))
        .with_columns(pl.col("index").cast(pl.Int64))
    )
    per_run = (
        distinct.group_by("run_id", maintain_order=True)
        .agg(
            "role",
            "content",  # cut at `runs.MESSAGE_CAP` already
            pl.col("tool_call_id").alias("call"),
            "name",
        )
        .select("run_id", pl.struct("role", "content", "call", "name").alias("messages"))
    )
    return per_run, prompts


def _steps(
    steps: pl.DataFrame | None, messages: pl.DataFrame | None, runs: pl.DataFrame
) -> pl.DataFrame:
    """run_id, span_ms, steps (each field one array, in step order), steps_cut, and where
    some run has prompt messages, messages (the run's distinct ones; a step's ``prompt`` lists
    its own): of the runs `steps` has (its `_STEP_COLUMNS`; `messages`: `_MESSAGE_COLUMNS`)."""
    if steps is None or steps.is_empty():
        return pl.DataFrame(schema=_NO_STEPS)
    for name, dtype in (
        ("parent_span_id", pl.String),
        ("error_type", pl.String),
        ("executed", pl.Boolean),
        ("output_text", pl.String),
        ("cost_usd", pl.Float64),
    ):
        if name not in steps.columns:
            steps = steps.with_columns(pl.lit(None, dtype).alias(name))
    if "requested_calls" not in steps.columns:
        steps = steps.with_columns(
            pl.lit(None, pl.List(pl.Struct({"name": pl.String}))).alias("requested_calls")
        )
    # the run's time origin: its start, or its first step's when that is earlier
    bounds = (
        runs.join(
            steps.group_by("run_id").agg(
                pl.col("start_ns").min().alias("_first"),
                pl.col("end_ns").max().alias("_last"),
                pl.len().alias("_steps"),
            ),
            on="run_id",
            how="inner",
        )
        .with_columns(_t0=pl.min_horizontal("started_ns", "_first"))
        .with_columns(
            span_ms=(
                (
                    pl.max_horizontal(
                        pl.coalesce("_last", "_t0"),
                        pl.col("_t0") + (pl.col("duration_s").fill_null(0) * 1e9).cast(pl.Int64),
                    )
                    - pl.col("_t0")
                )
                / 1e6
            ).round(3),
            steps_cut=pl.when(pl.col("_steps") > STEPS_PER_RUN).then(
                pl.col("_steps").cast(pl.Int64)
            ),
        )
        .select("run_id", "_t0", "span_ms", "steps_cut")
    )
    tool = pl.col("kind") == "tool_call"
    run_messages, prompts = _prompts(messages)
    steps = (
        steps.filter(pl.col("index") < STEPS_PER_RUN)
        .join(bounds.select("run_id", "_t0"), on="run_id", how="left")
        .with_columns(pl.col("index").cast(pl.Int64))
        .join(prompts, on=["run_id", "index"], how="left")
        .sort("run_id", "index")
    )
    step = pl.struct(
        pl.col("index").cast(pl.Int64),
        "kind",
        pl.col("span_id").alias("span"),
        pl.col("parent_span_id").alias("parent"),
        "name",
        ((pl.col("start_ns") - pl.col("_t0")) / 1e6).round(3).alias("start"),
        ((pl.col("end_ns") - pl.col("start_ns")) / 1e6).round(3).alias("dur"),
        "status",
        pl.col("error_type").alias("error"),
        "executed",
        pl.col("input_tokens").alias("in_tokens"),
        pl.col("output_tokens").alias("out_tokens"),
        pl.col("cost_usd").round(9).alias("cost"),
        pl.when(tool).then(_capped("arguments")).alias("arguments"),
        _capped(pl.when(tool).then(pl.col("result")).otherwise(pl.col("output_text"))).alias(
            "result"
        ),
        pl.col("requested_calls").alias("requested"),
        # only where some run of the batch has prompt messages (else no field: no bytes)
        *(["prompt"] if prompts.height else []),
    )
    # per run, each field as one array (the page turns them back into steps): the names are
    # written once a run, not once a step
    per_run = (
        steps.select("run_id", step.alias("_step"))
        .unnest("_step")
        .group_by("run_id", maintain_order=True)
        .agg(pl.all())
    )
    per_run = per_run.select("run_id", pl.struct(pl.exclude("run_id")).alias("steps"))
    out = bounds.drop("_t0").join(per_run, on="run_id", how="left")
    if not run_messages.height:
        return out.select("run_id", "span_ms", "steps", "steps_cut")
    return out.join(run_messages, on="run_id", how="left").select(
        "run_id", "span_ms", "steps", "steps_cut", "messages"
    )


_HEADS = (
    ("run", "Run"),
    ("case", "Case"),
    ("agent", "Agent"),
    ("model", "Models"),
    ("temp", "Temp."),
    ("status", "Status"),
    ("findings", "Findings"),
    ("score", "Score"),
    ("cost", "Cost"),
    ("duration", "Duration"),
)


def _markup(n: int, blocks: str) -> str:
    e = html.escape
    heads = "".join(
        f'<th data-key="{key}" title="sort"><span>{e(label)}</span>'
        '<span class="ab-dir"></span></th>'
        for key, label in _HEADS
    )
    selects = "".join(
        f'<label>{e(label)} <select id="{sid}"></select></label> '
        for sid, label in (
            ("ab-rule", "Rule"),
            ("ab-sev", "Severity"),
            ("ab-kind", "Kind"),
            ("ab-agent", "Agent"),
            ("ab-model", "Model"),
            ("ab-temp", "Temperature"),
        )
    )
    return (
        '<section id="browser">\n<h2>Run browser</h2>\n'
        f'<p class="muted" id="ab-status">Every run ({n:,}) with search, filters, sorting and '
        "each run's steps: this part of the page needs script; the sections below need none."
        "</p>\n"
        '<div id="ab-controls" class="ab-controls" hidden>'
        '<label>Search <input id="ab-q" type="search" size="32" '
        'placeholder="run id, case id, agent, model, answer, rule"></label> '
        f"{selects}"
        '<label><input id="ab-fail" type="checkbox"> failures only</label></div>\n'
        '<div id="ab-table" hidden><p class="muted"><span id="ab-count"></span> '
        '<button type="button" id="ab-prev">previous</button> '
        '<button type="button" id="ab-next">next</button> '
        "(worst first until a column is clicked; click a column to sort, again to reverse)</p>\n"
        f'<table id="ab-runs" class="ab"><thead><tr>{heads}</tr></thead>'
        '<tbody id="ab-body"></tbody></table></div>\n'
        '<div id="ab-run" class="ab-run" hidden></div>\n'
        f"{blocks}\n</section>"
    )


#: The browser's styles (added to the page's style sheet).
CSS = """
.ab-controls { display: flex; flex-wrap: wrap; gap: 8px 14px; margin: 8px 0; font-size: 0.9em; }
table.ab, .ab-run table { border-collapse: collapse; width: 100%; font-size: 13px; }
table.ab th, table.ab td, .ab-run th, .ab-run td { border-bottom: 1px solid #e5e5e5;
  padding: 3px 6px; text-align: left; vertical-align: top; }
table.ab th { cursor: pointer; user-select: none; background: #f6f6f6; }
td.num { text-align: right; white-space: nowrap; }
button.ab-open, button.ab-span { border: 0; background: none; color: #1f4e79; cursor: pointer;
  padding: 0 4px 0 0; text-decoration: underline; text-align: left; }
.ab-st-findings, .ab-st-labels-wrong, .ab-st-no-answer { color: #c0392b; }
.ab-run { border: 1px solid #ccc; border-radius: 6px; padding: 8px 16px; margin: 16px 0; }
.ab-run h4 { margin: 16px 0 4px; }
.ab-answer { white-space: pre-wrap; }
tr.ab-step { cursor: pointer; }
tr.ab-step:hover { background: #f4f8fc; }
tr.cited td { background: #fff6e5; }
tr.hl td { background: #ffe08a !important; outline: 2px solid #b9770e; }
.ab-flag { color: #c0392b; }
.ab-kind { font-size: 0.8em; border-radius: 3px; padding: 0 4px; color: #fff; }
.ab-kind.ab-model_call { background: #1f4e79; } .ab-kind.ab-tool_call { background: #2e8b57; }
td.ab-lane { width: 32%; min-width: 160px; }
.ab-bar { height: 10px; border-radius: 2px; min-width: 2px; }
.ab-bar.ab-model_call { background: #5b8fc7; } .ab-bar.ab-tool_call { background: #5fb585; }
.ab-more pre, .ab-text pre { white-space: pre-wrap; word-break: break-word; background: #f7f7f7;
  padding: 6px; margin: 2px 0 6px; max-height: 480px; overflow: auto; font-size: 12px; }
.ab-role { font-weight: 600; font-size: 0.85em; color: #555; }
.ab-prompt .ab-msg { margin-top: 4px; }
.ab-label-wrong td, .ab-label-missing td { color: #8b0000; }
"""
