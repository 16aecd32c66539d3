"""Baseline against candidate: load each side, pair runs by case id, and every headline delta.

**Sides.** A side is a trace path (file or folder, analyzed with the packs and prices given)
or a folder written by ``agenttrace report --out`` (its ``runs.parquet``, ``findings.parquet``,
``coverage.parquet`` and ``manifest.json`` are read back; nothing is re-analyzed).

**Pairing.** When every run of both sides has a case id and the sides share at least one, the
comparison is paired: only runs whose case id is on both sides count (the others are reported
as left out), and both sides' figures are computed on those runs. Otherwise the sides are two
samples, every run counted.

**Intervals** (see `analyzer.metrics.intervals`): rates with Newcombe's method 10, paired when each
shared case has exactly one run on each side (the pairs judged on both sides), independent for
two samples; when some case has several runs (trials) on a side, rates too get the paired
bootstrap that resamples cases. Scores, costs, tokens, model calls and pass^k always get the
bootstrap: paired (cases resampled, one draw for both sides) or two-sample (each side's runs,
or cases for pass^k, resampled on their own).

**Metrics** (delta = candidate - baseline):

=========================== ===============================================================
``omission_rate`` TOOL      runs that omitted the tool / runs a required_tools rule judged
``kind_rate`` KIND          runs with a finding of that kind / runs judged by a rule that
                            can yield it
``rule_rate`` RULE          runs with a finding of the rule / runs it judged
``pass_hat_k`` K            pass^k over cases (a run is correct: see below)
``score``                   mean run score /100
``cost_p50_usd``,           median and 95th percentile of run cost (priced runs)
``cost_p95_usd``
``cost_per_correct_run_usd`` total cost of the judged runs / correct runs
``tokens``                  mean input + output tokens per run
``model_calls``             mean model calls per run
=========================== ===============================================================

A run is *correct* when it has no finding at or above high, or, with labels (both sides
scored with the same file), when all its label fields are right; unlabelled runs are then
left out of pass^k and cost per correct run, as in the report.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from analyzer.checks import COVERAGE_SCHEMA, FINDING_SCHEMA
from analyzer.errors import InputError
from analyzer.metrics import intervals as stats
from analyzer.metrics.stats import (
    kind_rates,
    metric_values,
    omission_rates,
    pass_ratios,
    required_tools_of,
    rule_kinds_of,
    rule_rates,
    run_outcomes,
    unchecked_of,
)

__all__ = [
    "LOWER_IS_BETTER",
    "METRICS",
    "Diff",
    "MetricDelta",
    "Side",
    "analysis_side",
    "compare",
    "is_report_dir",
    "report_side",
]

#: Metric names in the order they are shown, each with its unit.
METRICS: dict[str, str] = {
    "omission_rate": "rate",
    "kind_rate": "rate",
    "rule_rate": "rate",
    "all_fields_correct": "rate",
    "pass_hat_k": "rate",
    "score": "points",
    "cost_p50_usd": "USD",
    "cost_p95_usd": "USD",
    "cost_per_correct_run_usd": "USD",
    "tokens": "tokens",
    "model_calls": "calls",
}
#: Metrics where a decrease is an improvement.
LOWER_IS_BETTER = frozenset(
    {
        "omission_rate",
        "kind_rate",
        "rule_rate",
        "cost_p50_usd",
        "cost_p95_usd",
        "cost_per_correct_run_usd",
        "tokens",
        "model_calls",
    }
)
_PASS_KS = (1, 2, 4, 8)


@dataclass
class Side:
    """One side of a diff: its runs (with score and cost), findings and coverage."""

    source: str  # the path as given
    kind: str  # "traces" or "report"
    runs: pl.DataFrame
    findings: pl.DataFrame
    coverage: pl.DataFrame
    packs: list[dict[str, Any]]  # name, sha256 of each rule pack applied
    prices: dict[str, Any] | None  # PriceTable.describe()
    required: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    rule_kinds: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    labelled: pl.DataFrame | None = None  # run_id, passed (all label fields correct)
    labels_sha256: str | None = None  # of the labels file that scored them, when known
    #: what makes its clean results unreadable as clean (`metrics.unchecked_rules`)
    unchecked: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class MetricDelta:
    """One row of a diff."""

    metric: str
    key: str | None  # tool, kind, rule id or k; None for a metric of the whole set
    baseline: float | None
    candidate: float | None
    delta: float | None
    lo: float | None
    hi: float | None
    method: str  # how the interval was computed
    n_baseline: int  # runs (or cases, pairs) behind the baseline figure
    n_candidate: int
    counts: tuple[int, int, int, int] | None = None  # rates: (k_base, n_base, k_cand, n_cand)

    @property
    def excludes_zero(self) -> bool | None:
        """Whether the 95 % interval leaves out 0 (a significant change)."""
        return stats.excludes_zero(self.lo, self.hi)

    @property
    def change(self) -> str:
        """``better``, ``worse``, ``no significant change`` or ``not measured``."""
        if self.delta is None:
            return "not measured"
        if not self.excludes_zero:
            return "no significant change"
        up = self.delta > 0
        return "worse" if up == (self.metric in LOWER_IS_BETTER) else "better"

    def as_dict(self) -> dict[str, Any]:
        out = {
            "metric": self.metric,
            "key": self.key,
            "unit": METRICS[self.metric],
            "baseline": self.baseline,
            "candidate": self.candidate,
            "delta": self.delta,
            "ci_low": self.lo,
            "ci_high": self.hi,
            "excludes_zero": self.excludes_zero,
            "change": self.change,
            "method": self.method,
            "n_baseline": self.n_baseline,
            "n_candidate": self.n_candidate,
        }
        if self.counts is not None:
            kb, nb, kc, nc = self.counts
            out["counts"] = {"baseline": [kb, nb], "candidate": [kc, nc]}
        return out


@dataclass
class Diff:
    """What `compare` gives: both sides described, the pairing, and the metric rows."""

    baseline: dict[str, Any]
    candidate: dict[str, Any]
    config_changes: list[str]
    pairing: dict[str, Any]
    metrics: list[MetricDelta]
    correct_by: str = "findings"  # what makes a run correct: "findings" or "labels"
    #: each side's problems that make its clean results unreadable as clean
    unchecked: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: paired diffs: the cases that passed less often on the candidate (``regressed``) and
    #: more often (``fixed``), by case id (`_case_changes`); None for two samples
    cases: dict[str, list[dict[str, Any]]] | None = None

    def rows(self, metric: str) -> list[MetricDelta]:
        """The rows of one metric, in key order."""
        return [m for m in self.metrics if m.metric == metric]

    def as_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "candidate": self.candidate,
            "config_changes": self.config_changes,
            "pairing": self.pairing,
            "correct_by": self.correct_by,
            "unchecked": self.unchecked,
            "cases": self.cases,
            "metrics": [m.as_dict() for m in self.metrics],
        }


# --- loading a side ------------------------------------------------------------------------------


def is_report_dir(path: Path) -> bool:
    """Whether `path` is a folder written by ``agenttrace report --out``."""
    return path.is_dir() and (path / "runs.parquet").is_file()


def report_side(path: Path, packs: Sequence[Any] = (), labels: Any = None) -> Side:
    """A side read back from a report folder (`is_report_dir`); ``labels`` (an
    `analyzer.metrics.labels.LabelSet`) scores its runs for ``all_fields_correct`` (without it, a
    folder written with ``--labels`` keeps the label results it holds, ``labels.parquet``)."""
    missing = [n for n in ("findings.parquet", "coverage.parquet") if not (path / n).is_file()]
    if missing:
        raise InputError(
            f"{path}: report folder without {', '.join(missing)} (written by `agenttrace report "
            "--out` from this version on); run the report again"
        )
    try:
        runs = pl.read_parquet(path / "runs.parquet")
        findings = pl.read_parquet(path / "findings.parquet")
        coverage = pl.read_parquet(path / "coverage.parquet")
        manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, pl.exceptions.PolarsError) as err:
        raise InputError(f"{path}: unreadable report folder: {err}") from err
    used = manifest.get("packs") or []
    known = _reload_packs(used, packs)
    summary = path / "summary.json"
    try:
        checks = json.loads(summary.read_text(encoding="utf-8")).get("checks") or {}
    except (OSError, ValueError):
        checks = {}
    labelled, labels_sha256 = None, (manifest.get("labels") or {}).get("sha256")
    if labels is not None:
        labelled = _label_outcomes(labels, runs, _read(path, "steps.parquet"))
        labels_sha256 = labels.sha256
    elif (path / "labels.parquet").is_file():
        # a run is correct when every label field it was scored on is right
        labelled = (
            _read(path, "labels.parquet")
            .group_by("run_id")
            .agg((pl.col("status") == "correct").all().alias("passed"))
            .sort("run_id")
        )
    return Side(
        source=str(path),
        kind="report",
        runs=runs,
        findings=findings,
        coverage=coverage,
        packs=[{"name": p.get("name"), "sha256": p.get("sha256")} for p in used],
        prices=manifest.get("prices"),
        required=required_tools_of(known),
        rule_kinds=rule_kinds_of(known),
        labelled=labelled,
        labels_sha256=labels_sha256,
        unchecked=list(checks.get("unchecked") or []),
    )


def analysis_side(path: Path, analysis: Any, labels: Any = None) -> Side:
    """A side from the `Analysis` of the traces at `path` (``labels``: see `report_side`)."""
    if analysis.runs.runs.is_empty():
        raise InputError(f"{path}: no run found in the traces")
    evaluation = analysis.evaluation
    labelled = (
        _label_outcomes(labels, analysis.runs.runs, analysis.runs.steps)
        if labels is not None
        else None
    )
    return Side(
        source=str(path),
        kind="traces",
        runs=analysis.runs.runs,
        findings=evaluation.findings if evaluation else pl.DataFrame(schema=FINDING_SCHEMA),
        coverage=evaluation.coverage if evaluation else pl.DataFrame(schema=COVERAGE_SCHEMA),
        packs=[{"name": p.name, "sha256": p.sha256} for p in analysis.packs],
        prices=analysis.prices.describe() if analysis.prices is not None else None,
        required=required_tools_of(analysis.packs),
        rule_kinds=rule_kinds_of(analysis.packs),
        labelled=labelled,
        labels_sha256=labels.sha256 if labels is not None else None,
        unchecked=unchecked_of(analysis.packs, analysis.runs.runs, evaluation.coverage)
        if evaluation
        else [],
    )


def _label_outcomes(labels: Any, runs: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    from analyzer.metrics.labels import score_labels

    return score_labels(labels, runs, steps).passed()


def _read(path: Path, name: str) -> pl.DataFrame:
    try:
        return pl.read_parquet(path / name)
    except (OSError, pl.exceptions.PolarsError) as err:
        raise InputError(f"{path}: unreadable {name} in the report folder: {err}") from err


def _reload_packs(used: list[dict[str, Any]], given: Sequence[Any]) -> list[Any]:
    """The packs a report applied, where they can be found again with the same bytes.

    Needed only for the tools and kinds that never failed (listed at rate 0); without them a
    report folder shows the tools and kinds found on either side.
    """
    from analyzer.errors import AgentTraceError
    from analyzer.pack import load_default_pack, load_packs

    by_sha = {p.sha256: p for p in given if p.sha256}
    out = []
    for entry in used:
        sha, where = entry.get("sha256"), entry.get("path")
        if sha in by_sha:
            out.append(by_sha[sha])
            continue
        try:
            default = load_default_pack()
            if sha and default.sha256 == sha:
                out.append(default)
            elif sha and where and Path(where).is_file():
                pack = load_packs([where])[0]
                if pack.sha256 == sha:
                    out.append(pack)
        except AgentTraceError:
            continue
    return out


# --- side descriptions and config ----------------------------------------------------------------


def _tool_definitions(definitions: list[str] | None, into: dict[str, str]) -> None:
    """Add each tool's definition (canonical JSON, by name) found in ``definitions``."""
    for raw in definitions or []:
        try:
            parsed = json.loads(raw)
        except ValueError:
            continue
        for tool in parsed if isinstance(parsed, list) else [parsed]:
            if isinstance(tool, dict):
                fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
                if isinstance(fn.get("name"), str):
                    text = json.dumps(tool, sort_keys=True, ensure_ascii=False)
                    # Several versions of one tool: keep them all, in a stable order.
                    known = into.get(fn["name"])
                    into[fn["name"]] = (
                        text
                        if known is None
                        else "\n".join(sorted(set(known.split("\n")) | {text}))
                    )


def _describe(side: Side, runs: pl.DataFrame) -> dict[str, Any]:
    """What a side holds and how it was configured (over the runs compared, `runs`)."""
    hashes = (
        runs.group_by(pl.col("config_hash").fill_null("-"))
        .len()
        .sort(["len", "config_hash"], descending=[True, False])
    )
    agents = sorted(
        {
            f"{a or '-'} {v}" if v else (a or "-")
            for a, v in runs.select("agent", "agent_version").iter_rows()
        }
    )
    models = sorted({m for ms in runs.get_column("models").to_list() for m in ms or []})
    temps = sorted(
        {t for ts in runs.get_column("temperatures").to_list() for t in ts or [] if t is not None}
    )
    tools: dict[str, str] = {}
    if "tool_definitions" in runs.columns:
        for defs in runs.get_column("tool_definitions").to_list():
            _tool_definitions(defs, tools)
    definitions = json.dumps(sorted(tools.items()), ensure_ascii=False)
    return {
        "source": side.source,
        "kind": side.kind,
        "runs": side.runs.height,
        "runs_compared": runs.height,
        "config_hashes": [{"config_hash": h, "runs": n} for h, n in hashes.iter_rows()],
        "agents": agents,
        "models": models,
        "temperatures": [_num(t) for t in temps],
        "tools": sorted(tools),
        # what the tools were told they take: changes when a definition does, names or not
        "tool_definitions_sha256": hashlib.sha256(definitions.encode()).hexdigest()[:12]
        if tools
        else None,
        "packs": side.packs,
        "prices": side.prices,
    }


def _num(value: float) -> float | int:
    return int(value) if float(value).is_integer() else float(value)


_CONFIG_PARTS = (
    "config_hashes",
    "agents",
    "models",
    "temperatures",
    "tools",
    "tool_definitions_sha256",
    "packs",
    "prices",
)


def _config_changes(base: dict[str, Any], cand: dict[str, Any]) -> list[str]:
    """The parts of the configuration that differ between the sides."""
    out = []
    for part in _CONFIG_PARTS:
        b, c = base[part], cand[part]
        if part == "config_hashes":
            b, c = sorted(h["config_hash"] for h in b), sorted(h["config_hash"] for h in c)
        if part == "prices":
            b, c = (b or {}).get("sha256"), (c or {}).get("sha256")
        if b != c:
            out.append(part)
    return out


# --- per-run indicators --------------------------------------------------------------------------


def _rate_indicators(
    side: Side,
    runs: pl.DataFrame,
    required: dict[tuple[str, str], tuple[str, ...]],
    kinds: dict[tuple[str, str], tuple[str, ...]],
) -> pl.DataFrame:
    """One row per (metric, key, run) the rate applies to: ``judged`` and ``hit`` (0/1)."""
    ids = runs.select("run_id")
    findings = side.findings.join(ids, on="run_id", how="semi")
    coverage = side.coverage.join(ids, on="run_id", how="semi")
    per_run = runs.select("run_id", pl.col("run_id").alias("_unit"))

    def part(metric: str, frame: pl.DataFrame, key: pl.Expr, judged: str, hit: str) -> pl.DataFrame:
        """The rows of one rate: its table per run (``_unit``), the columns of key, judged, hit."""
        return frame.select(
            pl.lit(metric, pl.String).alias("metric"),
            key.cast(pl.String).alias("key"),
            pl.col("_unit").cast(pl.String).alias("run_id"),
            pl.col(judged).cast(pl.Int64).alias("judged"),
            pl.col(hit).cast(pl.Int64).alias("hit"),
        )

    om = omission_rates(findings, coverage, required=required, runs=per_run, by="_unit")
    kr = kind_rates(findings, coverage, rule_kinds=kinds, runs=per_run, by="_unit")
    rr = rule_rates(findings, coverage, runs=per_run, by="_unit")
    # a rule id two packs share is named pack/id
    rule_key = (
        pl.when(pl.col("pack").n_unique().over("rule_id") > 1)
        .then(pl.concat_str("pack", pl.lit("/"), "rule_id"))
        .otherwise("rule_id")
    )
    parts = [
        part("omission_rate", om, pl.col("tool"), "required_runs", "omitted_runs"),
        part("kind_rate", kr, pl.col("kind"), "judged", "failed"),
        part("rule_rate", rr, rule_key, "judged", "failed"),
    ]
    if side.labelled is not None:
        labelled = side.labelled.join(ids, on="run_id", how="semi").with_columns(
            _unit=pl.col("run_id"), judged=pl.lit(1)
        )
        parts.append(part("all_fields_correct", labelled, pl.lit(None), "judged", "passed"))
    out = pl.concat(parts)
    # A run the rate does not judge is in no denominator (and counts no hit).
    return out.filter(pl.col("judged") > 0).with_columns(pl.col("hit").clip(0, 1))


def _run_values(side: Side, runs: pl.DataFrame) -> pl.DataFrame:
    """run_id, case_id, score, cost_usd, tokens, model_calls, passed (Float64; NaN = unknown).

    ``passed``: all label fields correct when the side has labels (NaN for unlabelled runs, as
    in the report), else no finding at or above high.
    """
    if side.labelled is not None:
        outcome = side.labelled
    else:
        findings = side.findings.join(runs.select("run_id"), on="run_id", how="semi")
        outcome = run_outcomes(runs, findings).select("run_id", "passed")
    values = metric_values(runs, ("score", "cost_usd", "tokens", "model_calls"))
    frame = runs.select("run_id", "case_id", *values).join(
        outcome.select("run_id", pl.col("passed").cast(pl.Float64)), on="run_id", how="left"
    )
    return frame.with_columns(
        pl.col("score", "cost_usd", "tokens", "model_calls", "passed").fill_null(np.nan)
    )


# --- the comparison ------------------------------------------------------------------------------


def _case_ids(runs: pl.DataFrame) -> set[str]:
    return (
        set(runs.get_column("case_id").drop_nulls().to_list())
        if "case_id" in runs.columns
        else set()
    )


def _all_have_case(runs: pl.DataFrame) -> bool:
    return "case_id" in runs.columns and runs.get_column("case_id").null_count() == 0


def compare(
    baseline: Side,
    candidate: Side,
    *,
    resamples: int = stats.BOOTSTRAP_RESAMPLES,
    seed: int = stats.BOOTSTRAP_SEED,
) -> Diff:
    """Every headline metric of both sides, its delta and 95 % interval (see the module doc)."""
    shared = sorted(_case_ids(baseline.runs) & _case_ids(candidate.runs))
    # Paired only when every run can be: a set where some runs have no case id is compared
    # whole, as two samples, rather than cut down to its runs with a case id.
    paired = bool(shared) and _all_have_case(baseline.runs) and _all_have_case(candidate.runs)
    if paired:
        cases = pl.DataFrame({"case_id": shared, "_u": list(range(len(shared)))})
        runs_b = baseline.runs.join(cases, on="case_id", how="inner").sort("run_id")
        runs_c = candidate.runs.join(cases, on="case_id", how="inner").sort("run_id")
        one_to_one = all(r.get_column("_u").is_unique().all() for r in (runs_b, runs_c))
    else:
        runs_b, runs_c = (
            side.runs.sort("run_id").with_row_index("_u").with_columns(pl.col("_u").cast(pl.Int64))
            for side in (baseline, candidate)
        )
        one_to_one = False
    units = {"b": runs_b.select("run_id", "_u"), "c": runs_c.select("run_id", "_u")}
    pairing = {
        "mode": "paired" if paired else "two samples",
        "cases": len(shared) if paired else None,
        "one_run_per_case": one_to_one if paired else None,
        "runs_compared": {"baseline": runs_b.height, "candidate": runs_c.height},
        "runs_left_out": {
            "baseline": baseline.runs.height - runs_b.height,
            "candidate": candidate.runs.height - runs_c.height,
        },
    }
    desc_b, desc_c = _describe(baseline, runs_b), _describe(candidate, runs_c)
    labelled = baseline.labelled is not None and candidate.labelled is not None
    if (baseline.labelled is None) != (candidate.labelled is None):
        without = candidate if candidate.labelled is None else baseline
        raise InputError(
            f"labels on one side only: {without.source} has no label results; give --labels "
            "to score both sides with the same file"
        )
    shas = {baseline.labels_sha256, candidate.labels_sha256}
    if labelled and None not in shas and len(shas) > 1:
        raise InputError(
            "the sides were scored with different labels files; give --labels to score both "
            "sides with the same file"
        )
    ctx = _Context(paired, one_to_one, units, resamples, seed)
    required = _merge(baseline.required, candidate.required)
    kinds = _merge(baseline.rule_kinds, candidate.rule_kinds)
    rows: list[MetricDelta] = []
    rows += _rates(
        ctx,
        _rate_indicators(baseline, runs_b, required, kinds),
        _rate_indicators(candidate, runs_c, required, kinds),
    )
    values_b, values_c = _run_values(baseline, runs_b), _run_values(candidate, runs_c)
    rows += _pass_hat_k(ctx, values_b, values_c)
    rows += _scalars(ctx, values_b, values_c)
    order = {name: i for i, name in enumerate(METRICS)}
    rows.sort(key=lambda r: (order[r.metric], _key_order(r.key)))
    return Diff(
        baseline=desc_b,
        candidate=desc_c,
        config_changes=_config_changes(desc_b, desc_c),
        pairing=pairing,
        metrics=rows,
        correct_by="labels" if labelled else "findings",
        unchecked={"baseline": baseline.unchecked, "candidate": candidate.unchecked},
        cases=_case_changes(values_b, values_c, baseline, candidate) if paired else None,
    )


def _case_changes(
    values_b: pl.DataFrame, values_c: pl.DataFrame, baseline: Side, candidate: Side
) -> dict[str, list[dict[str, Any]]]:
    """The cases judged on both sides whose runs passed less often on the candidate
    (``regressed``) or more often (``fixed``), by case id: each with its runs passed / judged
    on each side and the findings (``rule: kind``) of its runs on each side."""

    def per_case(values: pl.DataFrame, side: Side) -> pl.DataFrame:
        judged = values.filter(pl.col("passed").is_not_nan())
        counts = judged.group_by("case_id").agg(
            pl.len().cast(pl.Int64).alias("runs"),
            pl.col("passed").sum().cast(pl.Int64).alias("passed"),
        )
        found = (
            side.findings.select("run_id", "rule_id", "kind")
            .join(judged.select("run_id", "case_id"), on="run_id")
            .group_by("case_id")
            .agg(pl.format("{}: {}", "rule_id", "kind").unique().sort().alias("findings"))
        )
        return counts.join(found, on="case_id", how="left").with_columns(
            pl.col("findings").fill_null([])
        )

    both = per_case(values_b, baseline).join(
        per_case(values_c, candidate), on="case_id", suffix="_candidate"
    )
    before = pl.col("passed") / pl.col("runs")
    after = pl.col("passed_candidate") / pl.col("runs_candidate")

    def listed(frame: pl.DataFrame) -> list[dict[str, Any]]:
        return [
            {
                "case_id": r["case_id"],
                "baseline": {"passed": r["passed"], "runs": r["runs"], "findings": r["findings"]},
                "candidate": {
                    "passed": r["passed_candidate"],
                    "runs": r["runs_candidate"],
                    "findings": r["findings_candidate"],
                },
            }
            for r in frame.sort("case_id").iter_rows(named=True)
        ]

    return {
        "regressed": listed(both.filter(after < before)),
        "fixed": listed(both.filter(after > before)),
    }


def _key_order(key: str | None) -> tuple[int, float, str]:
    if key is None:
        return (0, 0.0, "")
    return (1, float(key), "") if key.isdigit() else (2, 0.0, key)


def _merge(
    a: dict[tuple[str, str], tuple[str, ...]], b: dict[tuple[str, str], tuple[str, ...]]
) -> dict[tuple[str, str], tuple[str, ...]]:
    out = {k: tuple(v) for k, v in a.items()}
    for k, v in b.items():
        out[k] = tuple(sorted(set(out.get(k, ())) | set(v)))
    return out


@dataclass(frozen=True)
class _Context:
    paired: bool
    one_to_one: bool
    units: dict[str, pl.DataFrame]
    resamples: int
    seed: int

    def unit_counts(self) -> tuple[int, int]:
        """Resampling units of each side: shared cases (paired) or each side's runs."""
        b, c = (self.units[s].get_column("_u").max() for s in ("b", "c"))
        return (int(b) + 1 if b is not None else 0, int(c) + 1 if c is not None else 0)

    def intervals(
        self, tasks: Sequence[stats.Task], units: tuple[int, int] | None = None
    ) -> list[tuple[float | None, float | None]]:
        """`intervals.bootstrap_intervals` of ``tasks`` over the resampling units of the diff
        (`unit_counts`), or over ``units``."""
        return stats.bootstrap_intervals(
            tasks,
            units=units if units is not None else self.unit_counts(),
            paired=self.paired,
            resamples=self.resamples,
            seed=self.seed,
        )


def _point(stat: stats.Statistic, values: np.ndarray) -> float | None:
    if values.shape[0] == 0:
        return None
    out = float(stat(values, np.ones((1, values.shape[0])))[0])
    return None if math.isnan(out) else round(out, 12)


def _known(values: np.ndarray) -> int:
    """How many values are known (not NaN); rows of two columns count by their first."""
    return int((~np.isnan(values if values.ndim == 1 else values[:, 0])).sum())


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 12)


def _delta(b: float | None, c: float | None) -> float | None:
    return None if b is None or c is None else round(c - b, 12)


def _rates(ctx: _Context, ind_b: pl.DataFrame, ind_c: pl.DataFrame) -> list[MetricDelta]:
    keys = (
        pl.concat([ind_b.select("metric", "key"), ind_c.select("metric", "key")])
        .unique()
        .sort("metric", "key", nulls_last=True)
        .rows()
    )
    out = []
    for metric, key in keys:
        same = (pl.col("metric") == metric) & pl.col("key").eq_missing(pl.lit(key, pl.String))
        b, c = ind_b.filter(same), ind_c.filter(same)
        counts = (
            int(b.get_column("hit").sum()),
            b.height,
            int(c.get_column("hit").sum()),
            c.height,
        )
        if ctx.paired and ctx.one_to_one:
            out.append(_paired_rate(ctx, metric, key, b, c))
        elif ctx.paired:
            out.append(_boot_rate(ctx, metric, key, b, c, counts))
        else:
            kb, nb, kc, nc = counts
            iv = stats.newcombe_independent(kc, nc, kb, nb)
            method = "Newcombe hybrid score (method 10), independent"
            out.append(_rate_delta(metric, key, counts, iv, method))
    return out


def _rate_delta(
    metric: str,
    key: str,
    counts: tuple[int, int, int, int],
    iv: stats.Interval,
    method: str,
) -> MetricDelta:
    """The row of a rate from its counts (k_base, n_base, k_cand, n_cand) and interval."""
    kb, nb, kc, nc = counts
    return MetricDelta(
        metric,
        key,
        round(kb / nb, 12) if nb else None,
        round(kc / nc, 12) if nc else None,
        _round(iv.delta),
        _round(iv.lo),
        _round(iv.hi),
        method,
        nb,
        nc,
        counts,
    )


def _paired_rate(
    ctx: _Context, metric: str, key: str, b: pl.DataFrame, c: pl.DataFrame
) -> MetricDelta:
    """Pairs judged on both sides: the 2x2 table and Newcombe's paired interval."""
    pb = b.join(ctx.units["b"], on="run_id").select("_u", pl.col("hit").alias("hb"))
    pc = c.join(ctx.units["c"], on="run_id").select("_u", pl.col("hit").alias("hc"))
    pairs = pb.join(pc, on="_u", how="inner")
    hb, hc = pairs.get_column("hb"), pairs.get_column("hc")
    both = int(((hb == 1) & (hc == 1)).sum())
    cand_only = int(((hb == 0) & (hc == 1)).sum())
    base_only = int(((hb == 1) & (hc == 0)).sum())
    neither = int(((hb == 0) & (hc == 0)).sum())
    n = pairs.height
    iv = stats.newcombe_paired(both, cand_only, base_only, neither)
    counts = (both + base_only, n, both + cand_only, n)
    return _rate_delta(
        metric, key, counts, iv, "Newcombe paired (method 10), pairs judged on both sides"
    )


def _boot_rate(
    ctx: _Context,
    metric: str,
    key: str,
    b: pl.DataFrame,
    c: pl.DataFrame,
    counts: tuple[int, int, int, int],
) -> MetricDelta:
    """Several runs per case: hits / judged runs, cases resampled (paired bootstrap)."""

    def arrays(frame: pl.DataFrame, side: str) -> tuple[np.ndarray, np.ndarray]:
        joined = frame.join(ctx.units[side], on="run_id")
        values = joined.select(pl.col("hit", "judged").cast(pl.Float64)).to_numpy()
        return values, joined.get_column("_u").to_numpy().astype(np.int64)

    xb, xc = arrays(b, "b"), arrays(c, "c")
    vb, vc = _point(stats.weighted_ratio, xb[0]), _point(stats.weighted_ratio, xc[0])
    lo, hi = (None, None)
    if len(xb[0]) and len(xc[0]):
        lo, hi = ctx.intervals([(stats.weighted_ratio, xb, xc)])[0]
    method = "paired bootstrap over cases"
    return MetricDelta(
        metric, key, vb, vc, _delta(vb, vc), lo, hi, method, b.height, c.height, counts
    )


#: Scalar metrics: (name, statistic, column(s) of the run values).
_SCALARS: tuple[tuple[str, stats.Statistic, tuple[str, ...]], ...] = (
    ("score", stats.weighted_mean, ("score",)),
    ("cost_p50_usd", stats.weighted_quantile(0.5), ("cost_usd",)),
    ("cost_p95_usd", stats.weighted_quantile(0.95), ("cost_usd",)),
    ("cost_per_correct_run_usd", stats.weighted_ratio, ("cost_usd", "passed")),
    ("tokens", stats.weighted_mean, ("tokens",)),
    ("model_calls", stats.weighted_mean, ("model_calls",)),
)


def _scalars(ctx: _Context, values_b: pl.DataFrame, values_c: pl.DataFrame) -> list[MetricDelta]:
    joined = {
        "b": values_b.join(ctx.units["b"], on="run_id").sort("run_id"),
        "c": values_c.join(ctx.units["c"], on="run_id").sort("run_id"),
    }
    # One unit array per side and row set, so that the bootstrap gathers each weight block once.
    unit_of: dict[tuple[str, bool], np.ndarray] = {}
    rows = []
    tasks: list[stats.Task] = []
    for name, stat, cols in _SCALARS:
        judged_only = "passed" in cols
        arrays = {}
        for side, frame in joined.items():
            if judged_only:  # runs neither correct nor wrong (unlabelled) are left out
                frame = frame.filter(pl.col("passed").is_not_nan())
            x = np.column_stack([frame.get_column(c).to_numpy() for c in cols])
            if (side, judged_only) not in unit_of:
                unit_of[side, judged_only] = frame.get_column("_u").to_numpy().astype(np.int64)
            arrays[side] = (x[:, 0] if len(cols) == 1 else x, unit_of[side, judged_only])
        vb, vc = _point(stat, arrays["b"][0]), _point(stat, arrays["c"][0])
        task = None
        if vb is not None and vc is not None:
            task = len(tasks)
            tasks.append((stat, arrays["b"], arrays["c"]))
        rows.append((name, vb, vc, task, _known(arrays["b"][0]), _known(arrays["c"][0])))
    intervals = ctx.intervals(tasks)
    method = "paired bootstrap over cases" if ctx.paired else "bootstrap, two samples"
    out = []
    for name, vb, vc, task, nb, nc in rows:
        lo, hi = intervals[task] if task is not None else (None, None)
        out.append(MetricDelta(name, None, vb, vc, _delta(vb, vc), lo, hi, method, nb, nc))
    return out


def _case_values(values: pl.DataFrame, k: int) -> pl.DataFrame:
    """case_id -> pass^k of the case (null when it has fewer than k runs)."""
    cases = (
        values.filter(pl.col("case_id").is_not_null() & pl.col("passed").is_not_nan())
        .group_by("case_id")
        .agg(pl.len().cast(pl.Int64).alias("_n"), pl.col("passed").sum().cast(pl.Int64).alias("_c"))
    )
    ratios = pass_ratios(cases, [k])
    return cases.join(ratios, on=["_n", "_c"], how="left").select("case_id", v="_v")


def _pass_hat_k(ctx: _Context, values_b: pl.DataFrame, values_c: pl.DataFrame) -> list[MetricDelta]:
    """pass^k per k over cases: paired over the shared cases, else each side's own cases."""
    method = "paired bootstrap over cases" if ctx.paired else "bootstrap over cases, two samples"
    shared = values_b.join(ctx.units["b"], on="run_id").select("case_id", "_u").unique()
    out = []
    for k in _PASS_KS:
        arrays = {}
        for side, values in (("b", values_b), ("c", values_c)):
            per_case = _case_values(values, k)
            if ctx.paired:
                per_case = shared.join(per_case, on="case_id", how="left")
            else:
                per_case = per_case.sort("case_id").with_row_index("_u")
            per_case = per_case.sort("_u")
            arrays[side] = (
                per_case.get_column("v").fill_null(np.nan).to_numpy().astype(np.float64),
                per_case.get_column("_u").to_numpy().astype(np.int64),
            )
        (xb, ub), (xc, uc) = arrays["b"], arrays["c"]
        pb, pc = _point(stats.weighted_mean, xb), _point(stats.weighted_mean, xc)
        if pb is None and pc is None:
            continue
        lo, hi = (None, None)
        if pb is not None and pc is not None:
            task = (stats.weighted_mean, (xb, ub), (xc, uc))
            lo, hi = ctx.intervals([task], units=(len(xb), len(xc)))[0]
        known = _known(xb), _known(xc)
        out.append(
            MetricDelta("pass_hat_k", str(k), pb, pc, _delta(pb, pc), lo, hi, method, *known)
        )
    return out
