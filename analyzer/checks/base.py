"""What every rule type shares: the Check base class, the check context, findings, check errors.

A rule type is a frozen dataclass whose fields are its YAML keys (plus the common ``id``,
``severity``, ``weight``, ``when``, ``description``). Either its ``check(ctx)`` looks at all the
runs the rule applies to at once and returns polars frames of findings (built by `findings`:
one row per finding, ``_pos`` orders findings within a run), or its ``check_run(run)`` looks at
one run in plain Python and yields `RunFinding` objects.

Where a rule cannot judge a run (no answer, message content not recorded, no cost computed) it
says so with `CheckContext.mark`; the runner turns those marks into the coverage table. A
per-run Python loop goes through `CheckContext.each` (or `each_distinct`, once per distinct
value) so that one run that breaks it becomes a check error for that run, not a crash of the
batch; keep such loops to the rows a column-wise pass could not settle.

Adding a rule type is adding a module to analyzer/checks with a `Check` subclass (``type``,
``kinds``, fields, a docstring with the `DOC_SECTIONS`) and a case file to tests/checks (see
docs/rule-types.md): the module is found by `rule_types`, the pack's JSON Schema is generated
from the fields and the docstring's Options (`analyzer.pack.pack_schema`). Load-time checks of
its options (tools named, files read) go in ``from_options``. What a check can read:
``ctx.runs`` (one row per run, ``attributes`` JSON text), ``ctx.tool_calls`` /
``ctx.model_calls`` (steps with ``call_no``, ``arguments``, ``start_ns``, ``has_content``),
``ctx.answers`` (full answer text), ``ctx.sources`` (what each run had seen and from when: join
on ``available_ns <= start_ns`` of a step), ``ctx.tools`` (the pack's tool specs: name -> JSON
Schema of the arguments).
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import pkgutil
import re
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cache, cached_property
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import orjson
import polars as pl
import pyarrow as pa

from analyzer.jsonpath import key_path
from analyzer.pricing import rust_regex_error
from analyzer.runs import ANSWER_CAP, position_in_run
from analyzer.scatter import scatter

if TYPE_CHECKING:
    from analyzer.runs import RunSet

__all__ = [
    "CHECK_SCHEMA",
    "COMMON_FIELDS",
    "COVERAGE_STATUSES",
    "DOC_SECTIONS",
    "INTERNAL",
    "SEVERITIES",
    "Check",
    "CheckContext",
    "CheckError",
    "LoadEnv",
    "Pack",
    "RunFinding",
    "When",
    "calls_over",
    "did_you_mean",
    "doc_sections",
    "empty_findings",
    "findings",
    "findings_frame",
    "fmt_num",
    "json_path",
    "patterns_ok",
    "quote",
    "quote_expr",
    "rule_types",
    "rust_regex_error",
    "schema_message",
]

_T = TypeVar("_T")

#: Severities, most severe first.
SEVERITIES = ("critical", "high", "medium", "low")
#: Keys every rule accepts whatever its type.
COMMON_FIELDS = ("id", "severity", "weight", "when", "description")
#: Sections every rule type's docstring must have (`agenttrace rules explain` prints them).
DOC_SECTIONS = ("Flags", "Why it matters", "Options", "Example")
#: What a rule could do with a run, weakest claim last wins in `CheckContext.mark`:
#: checked, not_applicable (nothing to judge, e.g. no answer), partial (some limits could not be
#: judged), unverifiable (the data needed was not recorded), error (the check crashed).
COVERAGE_STATUSES = ("checked", "not_applicable", "partial", "unverifiable", "error")

#: Columns a check returns. ``span_ids`` is the evidence; ``_pos`` orders findings in a run.
CHECK_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String(),
    "kind": pl.String(),
    "tool": pl.String(),
    "argument": pl.String(),
    "detail": pl.String(),
    "span_ids": pl.List(pl.String()),
    "_pos": pl.Int64(),
}


def empty_findings() -> pl.DataFrame:
    """A findings frame with no rows (what a check returns when it flags nothing)."""
    return pl.DataFrame(schema=CHECK_SCHEMA)


def findings(
    rows: pl.DataFrame,
    kind: str,
    detail: pl.Expr,
    *,
    tool: str | pl.Expr | None = None,
    argument: str | pl.Expr | None = None,
    spans: str | pl.Expr | Sequence[str | pl.Expr] = (),
    pos: int | str | pl.Expr = 0,
) -> pl.DataFrame:
    """One finding of ``kind`` per row of ``rows`` (which has ``run_id``), as `CHECK_SCHEMA`.

    The others are expressions over ``rows`` (a text names a column; ``pl.lit`` gives a
    constant): ``spans`` the evidence, span ids or lists of them (nulls dropped); ``pos`` the
    finding's place among the rule's findings of its run.
    """

    def expr(value: str | int | pl.Expr | None) -> pl.Expr:
        if value is None or isinstance(value, int):
            return pl.lit(value, pl.String if value is None else pl.Int64)
        return pl.col(value) if isinstance(value, str) else value

    given = isinstance(spans, str | pl.Expr) or len(spans) > 0
    evidence = pl.concat_list(spans).list.drop_nulls() if given else pl.lit([], pl.List(pl.String))
    return rows.select(
        "run_id",
        pl.lit(kind).alias("kind"),
        expr(tool).alias("tool"),
        expr(argument).alias("argument"),
        detail.alias("detail"),
        evidence.alias("span_ids"),
        expr(pos).cast(pl.Int64).alias("_pos"),
    ).cast(CHECK_SCHEMA)  # type: ignore[arg-type]


@dataclass(frozen=True)
class RunFinding:
    """One finding about one run, as a per-run check or a plugin yields it."""

    kind: str
    detail: str
    tool: str | None = None
    argument: str | None = None
    span_ids: Sequence[str] = ()
    pos: int = 0


@dataclass(frozen=True)
class CheckError:
    """A check that crashed on a run: recorded apart from findings, the batch goes on."""

    run_id: str
    rule_id: str
    pack: str
    error: str  # "ExceptionType: message"
    location: str | None = None  # innermost "module.py:line" of the traceback

    @classmethod
    def from_exception(cls, run_id: str, rule_id: str, pack: str, exc: BaseException):
        frames = traceback.extract_tb(exc.__traceback__)
        where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else None
        return cls(run_id, rule_id, pack, f"{type(exc).__name__}: {exc}", where)


@dataclass(frozen=True)
class When:
    """Which runs a rule applies to: every condition given must hold.

    ``attributes`` maps a run attribute (root span, then resource) to the accepted values, as
    text (``true``/``false`` for booleans); ``agents`` lists accepted agent names.
    """

    attributes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    agents: tuple[str, ...] = ()

    @classmethod
    def from_yaml(cls, raw: Mapping[str, Any]) -> When:
        attrs = []
        for key, value in sorted((raw.get("attributes") or {}).items()):
            values = value if isinstance(value, list) else [value]
            attrs.append((str(key), tuple(_attr_text(v) for v in values)))
        agents = raw.get("agent") or ()
        agents = (agents,) if isinstance(agents, str) else tuple(agents)
        return cls(attributes=tuple(attrs), agents=agents)

    def mask(self) -> pl.Expr:
        """A boolean expression over the runs frame, true for the runs selected."""
        cond = pl.lit(True)
        for key, values in self.attributes:
            found = pl.col("attributes").str.json_path_match(key_path(key))  # keys validated
            cond = cond & found.is_in(list(values)).fill_null(False)
        if self.agents:
            cond = cond & pl.col("agent").is_in(list(self.agents)).fill_null(False)
        return cond

    def describe(self) -> str:
        parts = [f"{k} in ({', '.join(v)})" for k, v in self.attributes]
        if self.agents:
            parts.append(f"agent in ({', '.join(self.agents)})")
        return " and ".join(parts) or "every run"


def _attr_text(value: Any) -> str:
    # json_path_match renders booleans as JSON does.
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass
class LoadEnv:
    """What a rule type may need while a pack loads: its folder, tool specs, a problem sink."""

    base_dir: Path
    tools: Mapping[str, Any]
    report: Callable[[tuple[str | int, ...], str], None]
    allow_plugins: bool = False


@dataclass(frozen=True, kw_only=True)
class Check:
    """Base of every rule type; subclasses add their YAML keys as fields (a field's
    ``metadata={"schema": {...}}`` adds JSON Schema keywords to those of its type)."""

    id: str
    severity: str = "medium"
    weight: float | None = None
    when: When | None = None
    description: str | None = None

    #: The name used as ``type:`` in packs (set by every registered subclass).
    type: ClassVar[str] = ""
    #: The finding kinds this rule type yields.
    kinds: ClassVar[tuple[str, ...]] = ()
    #: The fields naming tools the rule looks for in the runs (a list, or a mapping keyed by
    #: tool): a name that no trace holds means the rule judged nothing of it.
    tool_fields: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_options(cls, options: dict[str, Any], env: LoadEnv) -> Check | None:
        """Build the rule from its schema-valid YAML keys (minus ``type``).

        Semantic problems go to ``env.report(path, message)``; return None when the rule is
        unusable. Lists become tuples so the rule stays immutable.
        """
        kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}
        if isinstance(kwargs.get("when"), Mapping):
            kwargs["when"] = When.from_yaml(kwargs["when"])
        return cls(**kwargs)

    def check(self, ctx: CheckContext) -> pl.DataFrame | Sequence[pl.DataFrame]:
        """Findings over every run of ``ctx``: frames of `CHECK_SCHEMA` (see `findings`).

        By default `check_run` on each run in turn."""
        return ctx.per_run(self.check_run)

    def check_run(self, run: dict[str, Any]) -> Iterable[RunFinding]:
        """Findings of one run, for a rule written in plain Python rather than column-wise.

        ``run`` is the run's row as a dict (``answer`` holds the full answer text) and
        ``run["steps"]`` its steps in order, as dicts. A run on which it raises becomes a
        check error for that run.
        """
        raise NotImplementedError(f"{type(self).__name__} defines neither check nor check_run")

    def identity(self) -> str | None:
        """Everything the rule's findings depend on, as text (its type and keys); None when
        that is not known (a plugin's code). Rule results kept in a dataset are reused only
        for rules of the same identity (`analyzer.materialized`)."""
        cls = type(self)
        if not cls.__module__.startswith("analyzer."):
            return None  # a plugin's class: its code is not known here
        return f"{cls.__module__}.{cls.__qualname__} {self!r}"

    def expected_tools(self) -> tuple[str, ...]:
        """The tools this rule looks for in the runs (`tool_fields`), sorted."""
        names: set[str] = set()
        for name in self.tool_fields:
            value = getattr(self, name, None) or ()
            names.update(str(t) for t in (value.keys() if isinstance(value, Mapping) else value))
        return tuple(sorted(names))

    @classmethod
    def option_names(cls) -> list[str]:
        """The rule type's own YAML keys (not the common ones)."""
        return [
            f.name
            for f in fields(cls)
            if f.init and f.name not in COMMON_FIELDS and not f.metadata.get("internal")
        ]


@dataclass(frozen=True)
class Pack:
    """A loaded rule pack (`analyzer.pack.load_packs`)."""

    name: str
    rules: tuple[Check, ...]
    path: Path | None = None
    description: str | None = None
    tools: Mapping[str, Any] = field(default_factory=dict)  # tool name -> JSON Schema of args
    sha256: str | None = None  # of the pack file's bytes, for the manifest


@cache
def rule_types() -> dict[str, type[Check]]:
    """Rule type name (the ``type:`` of a pack) -> its class, sorted by name: every `Check`
    subclass with a ``type`` defined in a module of this package. Plugins are not listed."""
    found: dict[str, type[Check]] = {}
    for module in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if not module.name.startswith("_"):
            loaded = importlib.import_module(f"{__package__}.{module.name}")
            found.update(
                (cls.type, cls)
                for cls in vars(loaded).values()
                if isinstance(cls, type)
                and issubclass(cls, Check)
                and cls.__module__ == loaded.__name__
            )
    return {name: found[name] for name in sorted(found) if name not in ("", "plugin")}


# --- the context a check runs in ----------------------------------------------------------------


class _Shared:
    """Frames derived once from a RunSet and shared by every rule.

    ``derived``: results of `CheckContext.shared` functions the caller already has.
    """

    def __init__(
        self, runset: RunSet, derived: Mapping[Callable[[RunSet], Any], Any] | None = None
    ):
        self.runset = runset
        self.derived = dict(derived or {})

    @cached_property
    def _steps(self) -> pl.DataFrame:
        steps = self.runset.steps
        # The run model keeps steps ordered by run_id, index; sort only if a caller did not.
        run_ids = steps.get_column("run_id")
        if not (run_ids.is_sorted() and _index_ascending(steps)):
            steps = steps.sort("run_id", "index")
        return steps

    def _calls(self, kind: str, *columns: str | pl.Expr) -> pl.DataFrame:
        """The ``columns`` of the steps of `kind`, with ``call_no``; only those columns are read."""
        return (
            self._steps.lazy()
            .filter(pl.col("kind") == kind)
            .with_columns(call_no=position_in_run())
            .select(*columns)
            .collect(engine="in-memory")
        )

    @cached_property
    def tool_calls(self) -> pl.DataFrame:
        """Tool-call steps with their ordinal in the run and an evidence span id."""
        return self._calls(
            "tool_call",
            "run_id",
            "index",
            "call_no",
            pl.col("tool_name").alias("tool"),
            # A requested call that no tool span recorded: its requesting model call is the
            # evidence.
            pl.coalesce("span_id", "requested_by").alias("span"),
            "span_id",
            "tool_call_id",
            "requested_by",
            "executed",
            "start_ns",
            "end_ns",
            "status",
            "arguments",
            "has_content",
        )

    @cached_property
    def model_calls(self) -> pl.DataFrame:
        return self._calls(
            "model_call",
            "run_id",
            "index",
            "call_no",
            "span_id",
            "start_ns",
            "end_ns",
            "status",
            "output_text",
            "has_content",
        )

    @cached_property
    def answers(self) -> pl.DataFrame:
        """run_id, has_answer, answer_ns, answer_span_id, text (full), text_status.

        ``runs.answer`` is capped at ANSWER_CAP characters; a capped answer is recovered from
        the answering model call's output when that output is the answer. ``text_status``:
        ok, not_recorded (the run kept no content) or capped (the full text is not in the
        RunSet), null for runs with no answer.
        """
        runs = self.runset.runs
        capped = runs.filter(pl.col("answer").str.len_chars() >= ANSWER_CAP).select(
            "run_id", "answer_span_id", "answer"
        )
        outputs = (
            self.runset.steps.filter(
                pl.col("span_id").is_in(capped.get_column("answer_span_id").drop_nulls().implode())
            )
            .select("run_id", pl.col("span_id").alias("answer_span_id"), "output_text")
            .join(capped, on=["run_id", "answer_span_id"])
            .filter(pl.col("output_text").str.starts_with(pl.col("answer")))
            .select("run_id", pl.col("output_text").alias("_recovered"))
        )
        full = (
            pl.when(pl.col("answer").str.len_chars() < ANSWER_CAP)
            .then("answer")
            .otherwise("_recovered")
        )
        return (
            runs.select(
                "run_id", "has_answer", "answer_ns", "answer_span_id", "answer", "agent_span_id"
            )
            .join(outputs, on="run_id", how="left")
            .select(
                "run_id",
                "has_answer",
                "answer_ns",
                "answer_span_id",
                "agent_span_id",
                pl.when(pl.col("has_answer")).then(full).alias("text"),
                pl.when(~pl.col("has_answer"))
                .then(pl.lit(None, pl.String))
                .when(pl.col("answer").is_null())
                .then(pl.lit("not_recorded"))
                .when(full.is_null())
                .then(pl.lit("capped"))
                .otherwise(pl.lit("ok"))
                .alias("text_status"),
            )
        )

    def restrict(self, frame: pl.DataFrame, run_ids: pl.DataFrame | None) -> pl.DataFrame:
        return frame if run_ids is None else frame.join(run_ids, on="run_id", how="semi")


def _index_ascending(steps: pl.DataFrame) -> bool:
    same_run = pl.col("run_id") == pl.col("run_id").shift(1)
    return bool(
        steps.select((~same_run | (pl.col("index") > pl.col("index").shift(1))).all()).item()
    )


class CheckContext:
    """The runs one rule applies to, and the frames a check reads (see the module's docstring),
    restricted to those runs."""

    def __init__(
        self,
        shared: _Shared,
        run_ids: pl.DataFrame | None,
        *,
        tools: Mapping[str, Any] | None = None,
        on_error: Callable[[str, BaseException], None] | None = None,
    ):
        self._shared = shared
        #: run_id of the runs checked; None: every run of the RunSet
        self.run_ids = run_ids
        self.tools = tools or {}
        self._on_error = on_error
        self.marks: list[pl.DataFrame] = []

    @cached_property
    def runs(self) -> pl.DataFrame:
        return self._shared.restrict(self._shared.runset.runs, self.run_ids)

    @cached_property
    def steps(self) -> pl.DataFrame:
        return self._shared.restrict(self._shared.runset.steps, self.run_ids)

    @cached_property
    def sources(self) -> pl.DataFrame:
        """run_id, available_ns, origin, span_id, text: what each run had seen, and when."""
        return self._shared.restrict(self._shared.runset.sources, self.run_ids)

    @cached_property
    def tool_calls(self) -> pl.DataFrame:
        """Tool-call steps: run_id, index, call_no, tool, span, executed, arguments, ..."""
        return self._shared.restrict(self._shared.tool_calls, self.run_ids)

    @cached_property
    def model_calls(self) -> pl.DataFrame:
        """Model-call steps: run_id, index, call_no, span_id, start_ns, end_ns, status,
        output_text, has_content."""
        return self._shared.restrict(self._shared.model_calls, self.run_ids)

    @cached_property
    def answers(self) -> pl.DataFrame:
        """Each run's answer with its full text and ``text_status`` (see `_Shared.answers`)."""
        return self._shared.restrict(self._shared.answers, self.run_ids)

    def shared(self, compute: Callable[[RunSet], _T]) -> _T:
        """``compute(runset)`` over every run of the RunSet, once for all the rules of an
        evaluation (restrict it to `run_ids` where needed)."""
        if compute not in self._shared.derived:
            self._shared.derived[compute] = compute(self._shared.runset)
        return self._shared.derived[compute]

    def per_run(self, fn: Callable[[dict[str, Any]], Iterable[RunFinding] | None]) -> pl.DataFrame:
        """`each` over the runs, ``fn`` given a run as `Check.check_run` takes it."""
        runs = (
            self.runs.join(
                self.answers.select("run_id", pl.col("text").alias("_full")),
                on="run_id",
                how="left",
            )
            .with_columns(answer=pl.coalesce("_full", "answer"))
            .drop("_full")
        )
        steps = self.steps.sort("run_id", "index").to_dicts()
        by_run = {k: list(g) for k, g in groupby(steps, key=itemgetter("run_id"))}
        return self.each(runs, lambda row: fn({**row, "steps": by_run.get(row["run_id"], [])}))

    def mark(self, run_ids: pl.Series | pl.DataFrame | Iterable[str], status: str, reason: str):
        """Record that the rule could not fully judge these runs (see COVERAGE_STATUSES)."""
        if status not in COVERAGE_STATUSES:
            raise ValueError(f"unknown coverage status {status!r}")
        if isinstance(run_ids, pl.DataFrame):
            run_ids = run_ids.get_column("run_id")
        if not isinstance(run_ids, pl.Series):
            run_ids = pl.Series(list(run_ids), dtype=pl.String)
        if run_ids.len():
            self.marks.append(
                pl.DataFrame({"run_id": run_ids.cast(pl.String)}).with_columns(
                    status=pl.lit(status), reason=pl.lit(reason)
                )
            )

    def mark_answers(self) -> pl.DataFrame:
        """Mark runs whose answer cannot be judged; return the rows of those that can.

        No answer: not_applicable (required_tools reports it). Answer content not recorded, or
        capped beyond recovery: unverifiable. The rows returned have a non-null ``text``.
        """
        ans = self.answers
        self.mark(ans.filter(~pl.col("has_answer")), "not_applicable", "no answer")
        self.mark(
            ans.filter(pl.col("text_status") == "not_recorded"),
            "unverifiable",
            "answer content not recorded",
        )
        self.mark(
            ans.filter(pl.col("text_status") == "capped"),
            "unverifiable",
            f"answer longer than {ANSWER_CAP} characters and its full text was not kept",
        )
        return ans.filter(pl.col("text_status") == "ok")

    def each(
        self,
        frame: pl.DataFrame,
        fn: Callable[[dict[str, Any]], Iterable[RunFinding] | None],
    ) -> pl.DataFrame:
        """Call ``fn(row)`` for each row (which must have run_id); a row that raises becomes a
        check error for its run and the loop goes on. Returns the findings as a frame."""
        out: list[tuple[str, RunFinding]] = []
        for row in frame.iter_rows(named=True):
            try:
                found = list(fn(row) or ())
            except Exception as exc:
                if self._on_error is None:
                    raise
                self._on_error(row["run_id"], exc)
                continue
            out.extend((row["run_id"], f) for f in found)
        return findings_frame(out)

    def each_distinct(
        self,
        frame: pl.DataFrame,
        column: str,
        fn: Callable[[Any], Iterable[RunFinding] | None],
        *,
        evidence: str | None = None,
    ) -> pl.DataFrame:
        """Like `each`, but ``fn`` sees only the value of ``column`` and is called once per
        distinct value (answers repeat); its findings go to every run with that value, with
        the span in column ``evidence`` as their evidence. A value that makes ``fn`` raise is
        a check error for each of its runs."""
        values = frame.get_column(column).unique(maintain_order=True).drop_nulls().to_list()
        out: list[tuple[Any, RunFinding]] = []
        failed: dict[Any, BaseException] = {}
        for value in values:
            try:
                out.extend((value, f) for f in fn(value) or ())
            except Exception as exc:
                if self._on_error is None:
                    raise
                failed[value] = exc
        if failed:
            for run_id, value in frame.select("run_id", column).iter_rows():
                if value in failed:
                    self._on_error(run_id, failed[value])
        if not out:
            return empty_findings()
        per_value = findings_frame(out).rename({"run_id": column})
        cols = ["run_id", column] + ([evidence] if evidence else [])
        joined = frame.select(cols).join(per_value.drop("span_ids"), on=column, how="inner")
        spans = pl.concat_list(evidence).list.drop_nulls() if evidence else pl.lit([])
        return joined.select(
            "run_id", "kind", "tool", "argument", "detail", spans.alias("span_ids"), "_pos"
        ).cast(CHECK_SCHEMA)


#: CHECK_SCHEMA as Arrow types.
_CHECK_ARROW = pa.schema(
    {
        **dict.fromkeys(CHECK_SCHEMA, pa.string()),
        "span_ids": pa.list_(pa.string()),
        "_pos": pa.int64(),
    }
)


def findings_frame(found: Sequence[tuple[str, RunFinding]]) -> pl.DataFrame:
    """A findings frame from (run_id, RunFinding) pairs, built column-wise through Arrow
    (building it from Python dicts costs a Series per span list)."""
    if not found:
        return empty_findings()
    rows = [
        (run, f.kind, f.tool, f.argument, f.detail, [s for s in f.span_ids if s], f.pos)
        for run, f in found
    ]
    columns = [
        pa.array(c, t) for c, t in zip(zip(*rows, strict=True), _CHECK_ARROW.types, strict=True)
    ]
    frame = pl.from_arrow(pa.Table.from_arrays(columns, schema=_CHECK_ARROW))
    assert isinstance(frame, pl.DataFrame)
    return frame


# --- small helpers shared by checks and the loader ---------------------------------------------


def fmt_num(value: float | int | None) -> str:
    """A number as a person reads it: integers without a decimal point, others to 6 digits."""
    if value is None:
        return "?"
    if isinstance(value, bool):
        return str(value).lower()
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"


def with_decoded_answers(answers: pl.DataFrame) -> pl.DataFrame:
    """``answers`` with ``decoded``: the string values of a JSON answer as decoded text, one per
    line, in reading order (an escaped ``\\u2014`` is the em dash itself); null where the answer
    is no JSON, or a JSON object or list that writes no escape (its values then stand in its
    text as they are). An answer that is one JSON-encoded text is that text, decoded."""
    text = pl.col("text")
    maybe = text.str.contains(r'^\s*"') | (
        text.str.contains("\\", literal=True) & text.str.contains(r"^\s*[\[{]")
    )
    rows = answers.select(maybe.fill_null(False)).to_series().arg_true()
    decoded = pl.repeat(None, answers.height, dtype=pl.String, eager=True)
    if len(rows):
        texts = answers.get_column("text").gather(rows)
        strings = pl.Series([_json_strings(t) for t in texts], dtype=pl.String)
        decoded = scatter(decoded, rows, strings)
    return answers.with_columns(decoded.alias("decoded"))


def _json_strings(text: str) -> str | None:
    try:
        doc = orjson.loads(text)
    except ValueError:
        return None
    found: list[str] = []
    stack = [doc]
    while stack:  # depth first, in reading order
        value = stack.pop()
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            stack.extend(reversed(list(value.values())))
        elif isinstance(value, list):
            stack.extend(reversed(value))
    return "\n".join(found)


def json_path(parts: Iterable[Any]) -> str:
    """Where a JSON Schema error is, as ``$.lines[0].sku``."""
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def schema_message(message: str, count: int) -> str:
    """A JSON Schema error's message, cut at 120 characters, and how many errors are left."""
    if len(message) > 120:
        message = message[:119] + "…"
    return message + (f" (+{count - 1} more)" if count > 1 else "")


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_ESCAPE_TABLE = str.maketrans(_ESCAPES)


def quote(text: Any, limit: int = 60) -> str:
    """A value in single quotes on one line, clipped, for a finding's detail."""
    s = str(text).translate(_ESCAPE_TABLE)
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return f"'{s}'"


def quote_expr(expr: pl.Expr, limit: int = 60) -> pl.Expr:
    """`quote` as a polars expression, for details built column-wise."""
    s = expr
    for raw, shown in _ESCAPES.items():
        s = s.str.replace_all(raw, shown, literal=True)
    clipped = (
        pl.when(s.str.len_chars() > limit)
        .then(pl.concat_str(s.str.slice(0, limit - 1), pl.lit("…")))
        .otherwise(s)
    )
    return pl.concat_str(pl.lit("'"), clipped, pl.lit("'"))


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """'; did you mean X?' when a choice is close to ``word``, else ''."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def patterns_ok(env: LoadEnv, key: str, patterns: Iterable[Any], consequence: str) -> bool:
    """Whether each text of ``patterns`` (the option ``key``) is a usable pattern: valid
    (`rust_regex_error`) and not matching the empty text, which would mean ``consequence``.
    Each problem goes to ``env.report``; items that are not texts are left alone."""
    ok = True
    for i, pattern in enumerate(patterns):
        if not isinstance(pattern, str):
            continue
        problem = rust_regex_error(pattern)
        if problem is None and pl.select(pl.lit("").str.contains(pattern)).item():
            problem = f"it matches the empty text, so {consequence}"
        if problem:
            env.report((key, i), f"invalid pattern {pattern!r}: {problem}")
            ok = False
    return ok


def calls_over(calls: pl.DataFrame, limit: int, span: str) -> pl.DataFrame:
    """The runs with more than ``limit`` rows in ``calls`` (steps with ``call_no``): run_id,
    ``_n`` (their count) and ``_over`` (column ``span`` of the calls beyond the limit)."""
    return (
        calls.sort("run_id", "call_no")
        .group_by("run_id", maintain_order=True)
        .agg(pl.len().alias("_n"), pl.col(span).filter(pl.col("call_no") >= limit).alias("_over"))
        .filter(pl.col("_n") > limit)
    )


_SECTION = re.compile(r"^(?P<title>[A-Z][A-Za-z ]+)\n-{3,}$", re.MULTILINE)


def doc_sections(cls: type) -> dict[str, str]:
    """A rule type's docstring split into its summary (key "") and underlined sections."""
    doc = inspect.cleandoc(cls.__doc__ or "")
    parts: dict[str, str] = {}
    matches = list(_SECTION.finditer(doc))
    parts[""] = doc[: matches[0].start()].strip() if matches else doc.strip()
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(doc)
        parts[m.group("title")] = doc[m.end() : end].strip("\n").rstrip()
    return parts


#: Metadata of a dataclass field the loader fills (e.g. a parsed schema), not a YAML key:
#: ``field(default=None, repr=False, compare=False, metadata=INTERNAL)``.
INTERNAL = {"internal": True}
