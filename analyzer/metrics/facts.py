"""What a summary reads of an analysis, in parts that merge: slim runs and rate counts.

A summary needs every run, but not every column of it, and it needs the coverage (one row per
run and rule) only through counts. `summary_facts` keeps just that: the runs without their
bulky columns (the case-class attribute read out of their attributes first; a trial's answer
and tool sequence only for runs with a case id) and the rule, kind, tool and coverage counts.
A partitioned analysis computes the facts of each partition where it is analyzed and merges
them (`merge_facts`): the rate counts are added, and the runs stay in their parts
(`RunsPart`: in memory, or a file) until the summary reads them side by side into one frame,
a few hundred bytes per run.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from analyzer.errors import InputError
from analyzer.metrics import stats as m
from analyzer.pricing import model_family

if TYPE_CHECKING:
    from analyzer.pipeline import Analysis

__all__ = ["RATE_TABLES", "RunsPart", "SummaryFacts", "facts_of", "merge_facts", "summary_facts"]

#: Run columns added up for the "runs" section (null when no run has a value).
TOTALS = (
    "model_calls",
    "tool_calls",
    "unexecuted_tool_calls",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
)
#: The run columns summary figures read (besides the case class). The others (attributes,
#: ids of spans and traces, tool definitions...) are most of a run's row.
_READ = (
    *TOTALS,
    "cost_usd",
    "recorded_cost_usd",
    "retry_cost_usd",
    "run_id",
    "case_id",
    "agent",
    "models",
    "model_family",
    "temperature",
    "config_hash",
    "service_version",
    "has_answer",
    "has_content",
    "duration_s",
    "retries",
    "findings",
    "score",
    "failed_rules",
    "answer",
    "tool_sequence",
)
#: Run columns the summary reads only for runs with a case id (trials compare them).
_TRIAL_ONLY = ("answer", "tool_sequence")
#: Each rate table: its key columns, its count columns (sums over disjoint runs), and the
#: (successes, trials, name) of its Wilson rate (None: counts only).
RATE_TABLES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, str, str] | None]] = {
    "rule_rates": (
        ("pack", "rule_id"),
        ("applied", "judged", "failed"),
        ("failed", "judged", "rate"),
    ),
    "kind_rates": (("kind",), ("judged", "failed"), ("failed", "judged", "rate")),
    "omission_rates": (
        ("tool",),
        ("required_runs", "omitted_runs"),
        ("omitted_runs", "required_runs", "rate"),
    ),
    "omission_rates_by_temperature": (
        ("temperature", "tool"),
        ("required_runs", "omitted_runs"),
        ("omitted_runs", "required_runs", "rate"),
    ),
    "rule_coverage": (
        ("pack", "rule_id"),
        ("applied", "checked", "partial", "not_applicable", "unverifiable", "error", "judged"),
        ("judged", "applied", "judged_rate"),
    ),
    "rule_reach": (
        ("pack", "rule_id", "what", "name"),
        ("present", "matching"),
        ("matching", "present", "match_rate"),
    ),
    "rule_reasons": (("pack", "rule_id", "status", "reason"), ("runs",), None),
}


@dataclass(frozen=True)
class RunsPart:
    """The facts of some runs (their summary columns): a frame, or a Parquet file."""

    height: int  # runs
    frame: pl.DataFrame | None = None
    path: str | None = None

    @classmethod
    def of(cls, frame: pl.DataFrame) -> RunsPart:
        return cls(frame.height, frame=frame)

    @classmethod
    def file(cls, path: str) -> RunsPart:
        """The part in the Parquet file `path` (its row count read now, its rows when used)."""
        try:
            height = pq.read_metadata(path).num_rows
        except (OSError, pa.ArrowException) as err:
            raise InputError(f"{path}: unreadable summary facts: {err}") from err
        return cls(height, path=path)

    def read(self) -> pl.DataFrame:
        """The runs of this part."""
        if self.frame is not None:
            return self.frame
        assert self.path is not None
        try:
            return pl.read_parquet(self.path)
        except (OSError, pl.exceptions.PolarsError) as err:
            raise InputError(f"{self.path}: unreadable summary facts: {err}") from err


@dataclass
class SummaryFacts:
    """The runs a summary reads, in disjoint parts, and its rate tables (None: no pack)."""

    case_class: str  # the run attribute read out into a column of that name
    parts: list[RunsPart]
    rates: dict[str, pl.DataFrame] | None
    keep: Any = field(default=None, repr=False, compare=False)  # what keeps the parts' files

    @property
    def height(self) -> int:
        """How many runs."""
        return sum(p.height for p in self.parts)

    def runs(self) -> pl.DataFrame:
        """All the runs, in one frame (the parts read side by side and put together)."""
        from analyzer.workers import default_jobs

        with ThreadPoolExecutor(default_jobs(), thread_name_prefix="agenttrace-facts") as pool:
            frames = list(pool.map(RunsPart.read, self.parts))
        return pl.concat(frames, how="vertical_relaxed") if frames else pl.DataFrame()


def summary_facts(analysis: Analysis, case_class: str) -> SummaryFacts:
    """The facts of `analysis`, whose runs carry ``case_class`` as a column."""
    runs = m.with_group_column(analysis.runs.runs, case_class)
    if "primary_model" in runs.columns:  # prebuilt runs of an older version have none
        runs = runs.with_columns(model_family=model_family(pl.col("primary_model")))
    has_case = pl.col("case_id").is_not_null()
    keep = [c for c in runs.columns if c in _READ or c == case_class]
    runs = runs.select(keep).with_columns(
        pl.when(has_case).then(pl.col(c)).alias(c) for c in _TRIAL_ONLY if c != case_class
    )
    runs = _with_calls(runs, analysis.runs.steps)
    evaluation = analysis.evaluation
    rates = None
    if evaluation is not None:
        findings, coverage = evaluation.findings, evaluation.coverage
        by_temperature = m.omission_rates(
            findings,
            coverage,
            required=m.required_tools_of(analysis.packs),
            runs=analysis.runs.runs,
            by="temperature",
        )
        rates = {
            "rule_rates": m.rule_rates(findings, coverage),
            "kind_rates": m.kind_rates(
                findings, coverage, rule_kinds=m.rule_kinds_of(analysis.packs)
            ),
            # a run has one temperature (null: none or several): the runs per tool add up
            "omission_rates": _merge_counts("omission_rates", [by_temperature.drop("temperature")]),
            "omission_rates_by_temperature": by_temperature,
            "rule_coverage": m.rule_coverage(coverage),
            "rule_reach": m.rule_reach(analysis.runs.runs, analysis.packs),
            "rule_reasons": m.rule_reasons(coverage),
        }
    return SummaryFacts(case_class=case_class, parts=[RunsPart.of(runs)], rates=rates)


def _with_calls(runs: pl.DataFrame, steps: pl.DataFrame | None) -> pl.DataFrame:
    """``runs`` with ``call_models`` and ``call_costs``: the model and the cost (null:
    unpriced) of each of its model calls, in the order of the run's steps (null for a run
    without model calls). The summary's cost per step reads them (`steps.step_rows`).
    `steps` are ordered by run and index (`RunSet.steps`), an order each run's lists keep."""
    if steps is None or "kind" not in steps.columns:
        return runs
    cost = pl.col("cost_usd") if "cost_usd" in steps.columns else pl.lit(None, pl.Float64)
    calls = (
        steps.select("run_id", "kind", "model", cost.cast(pl.Float64).alias("cost_usd"))
        .filter(pl.col("kind") == "model_call")
        .group_by("run_id")
        .agg(pl.col("model").alias("call_models"), pl.col("cost_usd").alias("call_costs"))
    )
    return runs.join(calls, on="run_id", how="left", maintain_order="left")


def facts_of(analysis: Analysis, case_class: str) -> SummaryFacts:
    """The facts `analysis` carries for `case_class` (a partitioned analysis has them), else
    those of its tables."""
    facts = analysis.facts
    if facts is not None and facts.case_class == case_class:
        return _recount_undeclared_kinds(facts, analysis)
    return summary_facts(analysis, case_class)


def _recount_undeclared_kinds(facts: SummaryFacts, analysis: Analysis) -> SummaryFacts:
    """`facts` merged from partitions, with the rates of the kinds found by rules that declare
    none (plugins) counted again over all runs: each partition knew only the kinds it found,
    so it counted as judged none of its runs for a kind found elsewhere."""
    evaluation = analysis.evaluation
    rule_kinds = m.rule_kinds_of(analysis.packs)
    undeclared = [key for key, kinds in rule_kinds.items() if not kinds]
    if facts.rates is None or evaluation is None or not undeclared:
        return facts
    keys = ["pack", "rule_id"]
    findings = evaluation.findings
    by_undeclared = findings.join(
        pl.DataFrame(undeclared, schema=keys, orient="row"), on=keys, how="semi"
    )
    kinds = set(by_undeclared.get_column("kind").to_list())
    if not kinds:
        return facts
    of_kinds = findings.filter(pl.col("kind").is_in(sorted(kinds)))
    rules = {k for k, declared in rule_kinds.items() if kinds & set(declared)}
    rules |= set(of_kinds.select(keys).unique().iter_rows())
    coverage = evaluation.coverage.join(
        pl.DataFrame(sorted(rules), schema=keys, orient="row"), on=keys, how="semi"
    )
    recounted = m.kind_rates(
        of_kinds, coverage, rule_kinds={k: rule_kinds.get(k, ()) for k in rules}
    ).filter(pl.col("kind").is_in(sorted(kinds)))
    old = facts.rates["kind_rates"]
    merged = pl.concat(
        [old.filter(~pl.col("kind").is_in(sorted(kinds))), recounted.select(old.columns)],
        how="vertical_relaxed",
    ).sort("kind", nulls_last=True)
    return dataclasses.replace(facts, rates={**facts.rates, "kind_rates": merged})


def merge_facts(parts: list[SummaryFacts]) -> SummaryFacts:
    """The facts of the union of disjoint sets of runs, from theirs (at least one; the list is
    emptied): rate counts added, run parts put side by side."""
    case_class = parts[0].case_class
    rates = None
    if parts[0].rates is not None:
        # a table no part has (facts kept by an earlier version of the same release) is left out
        found = {
            name: [p.rates[name] for p in parts if p.rates and name in p.rates]
            for name in RATE_TABLES
        }
        rates = {name: _merge_counts(name, frames) for name, frames in found.items() if frames}
    runs = [part for p in parts for part in p.parts]
    parts.clear()
    return SummaryFacts(case_class=case_class, parts=runs, rates=rates)


def _merge_counts(name: str, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """One rate table from those of disjoint runs: counts summed per key, rates recomputed."""
    keys, counts, wilson = RATE_TABLES[name]
    merged = pl.concat(frames, how="vertical_relaxed")
    out = merged.group_by(keys).agg(pl.col(c).sum().cast(pl.Int64) for c in counts)
    if wilson is not None:
        out = out.with_columns(m.wilson_columns(*wilson))
    return out.sort(list(keys), nulls_last=True).select(merged.columns)
