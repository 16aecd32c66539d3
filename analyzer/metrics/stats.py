"""Run metrics: tails with order-statistic intervals, Wilson rates, coverage, scores, pass^k.

Pure functions on polars frames (the runs of a `RunSet`, with ``cost_usd`` once priced; the
findings and coverage of an `Evaluation`). Every result is sorted by its keys, nulls last.

Methods
-------
- **Quantiles** (`quantile`, `tails`): linear interpolation between order statistics, Hyndman
  & Fan type 7 (the default of R, numpy and polars ``interpolation="linear"``): with the ``n``
  values sorted ``x[0] <= ... <= x[n-1]`` and ``h = (n - 1) q``,
  ``Q(q) = x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h])``. Null values are left
  out and counted as ``missing`` (for cost: the runs with an unknown price).
- **Quantile intervals** (`quantile_interval`): distribution-free, from order statistics. With
  ``B ~ Binomial(n, q)``, ``[x_(l), x_(u)]`` (1-based ranks) covers the true q-quantile with
  probability ``P(l <= B <= u - 1)``. We take the largest ``l`` with ``P(B <= l - 1) <= a/2``
  and the smallest ``u`` with ``P(B >= u) <= a/2`` (``a = 1 - confidence``), so each tail
  misses with probability at most a/2 and the coverage is at least 95 %. When no such rank
  exists on one side the sample is too small and both bounds are null: at 95 % that is
  ``n < 6`` for p50, ``n < 72`` for p95 and ``n < 368`` for p99.
- **Rates** (`wilson`): Wilson score interval at 95 % (z = 1.959964), clipped to [0, 1]; null
  when the denominator is 0.
- **Judged runs**: a rule *judged* a run when its coverage status is ``checked`` or
  ``partial``, or when it found something there. Runs it could not judge (``unverifiable``,
  ``not_applicable``, ``error``) are in no denominator: they are shown by `rule_coverage`.
- **Passed run** (`run_outcomes`): a run with no finding at or above a severity (``high`` by
  default). Check errors are not findings and fail no run.
- **Run score** (`run_scores`): start at 100 and subtract, once per run, the weight of each rule
  that has at least one finding in the run (however many findings it has there); floor at 0.
  A rule's weight is its ``weight:`` in the pack, else `SEVERITY_WEIGHTS` of its severity
  (critical 40, high 20, medium 10, low 5).
- **pass^k** (`pass_hat_k`, tau-bench): for a case with ``n`` trials of which ``c`` passed,
  ``pass^k = C(c, k) / C(n, k)``, the chance that k trials drawn without replacement all
  pass; averaged over the cases with ``n >= k``. Runs with no case id are left out.
- **Breakdowns**: every function takes ``by`` (a run column, an alias such as ``model`` or
  ``service.version``, or any run attribute such as ``app.case_type``) and then also needs
  ``runs``. A list column (``models``) is exploded: a run that used two models counts in both
  groups. Runs lacking the value form a null group.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import polars as pl

from analyzer.checks import FINDING_SCHEMA
from analyzer.checks.base import SEVERITIES
from analyzer.jsonpath import key_path
from analyzer.scores import SCORE, SEVERITY_WEIGHTS, lost_points, rule_weights, run_scores

if TYPE_CHECKING:
    from analyzer.pack import Pack

__all__ = [
    "BREAKDOWN_QUANTILES",
    "COST_PER_CORRECT",
    "JUDGED",
    "QUANTILES",
    "ROUTING_MIN_RUNS",
    "SEVERITY_WEIGHTS",
    "TAIL_METRICS",
    "Z_95",
    "blocking_severities",
    "breakdown",
    "breakdown_columns",
    "content_coverage",
    "distinct_runs",
    "kind_rates",
    "metric_values",
    "omission_rates",
    "ordered_mean",
    "ordered_sum",
    "pass_hat_k",
    "pass_ratios",
    "quantile",
    "quantile_interval",
    "rate",
    "required_tools_of",
    "routing",
    "rule_coverage",
    "rule_kinds_of",
    "rule_rates",
    "rule_weights",
    "run_groups",
    "run_outcomes",
    "run_scores",
    "tails",
    "wilson",
    "wilson_columns",
    "with_group_column",
]

#: Normal quantile for a two-sided 95 % interval.
Z_95 = 1.959963984540054
#: The quantiles reported for tails.
QUANTILES = (0.5, 0.95, 0.99)
#: The quantiles of each metric in a breakdown row (those of `tails`, without intervals).
BREAKDOWN_QUANTILES = (0.5, 0.95)
#: Per-run quantities whose tails are reported (``tokens`` = input + output tokens).
TAIL_METRICS = ("cost_usd", "tokens", "model_calls", "tool_calls", "duration_s")
#: Coverage statuses under which a rule judged a run.
JUDGED = ("checked", "partial")
#: Short names accepted by ``by`` for run columns.
_ALIASES = {
    "model": "models",
    "case": "case_id",
    "service.version": "service_version",
    "service.name": "service_name",
}


# --- scalar statistics -------------------------------------------------------------------------


def quantile(values: Sequence[float | None] | pl.Series, q: float) -> float | None:
    """The q-quantile of the non-null ``values`` (type 7, linear); None when there are none."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} is not between 0 and 1")
    if not isinstance(values, pl.Series):
        values = pl.Series(values, dtype=pl.Float64, strict=False)
    kept = values.drop_nulls().cast(pl.Float64)
    # polars' linear interpolation is type 7
    return None if kept.is_empty() else float(kept.quantile(q, interpolation="linear"))


@lru_cache(maxsize=4096)
def quantile_interval(n: int, q: float, confidence: float = 0.95) -> tuple[int, int] | None:
    """1-based ranks ``(l, u)``: ``[x_(l), x_(u)]`` covers the q-quantile at ``confidence``.

    Equal tails, each of probability at most ``(1 - confidence) / 2`` under
    ``Binomial(n, q)``; None when ``n`` is too small for one of them (see the module doc).
    """
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile {q} is not strictly between 0 and 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence {confidence} is not strictly between 0 and 1")
    if n < 1:
        return None
    tail = (1.0 - confidence) / 2.0
    log_q, log_1q = math.log(q), math.log1p(-q)
    log_nf = math.lgamma(n + 1)

    def pmf(i: int) -> float:
        return math.exp(
            log_nf - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_q + (n - i) * log_1q
        )

    # Terms more than 12 standard deviations from the mean weigh < 1e-30: start there.
    mean, sd = n * q, math.sqrt(n * q * (1.0 - q))
    first = max(0, math.floor(mean - 12 * sd) - 1)
    last = min(n, math.ceil(mean + 12 * sd) + 1)
    lower = None
    cdf = 0.0  # P(B <= i - 1) before term i is added
    for i in range(first, n + 1):
        if i >= 1 and cdf <= tail:
            lower = i
        cdf += pmf(i)
        if cdf > tail:
            break
    upper = None
    sf = 0.0  # P(B >= i + 1) before term i is added
    for i in range(last, -1, -1):
        if i + 1 <= n and sf <= tail:
            upper = i + 1
        sf += pmf(i)
        if sf > tail:
            break
    if lower is None or upper is None:
        return None
    return lower, upper


def wilson(k: int, n: int) -> tuple[float, float] | None:
    """Wilson score 95 % interval of the rate ``k / n``; None when ``n`` is 0."""
    if n <= 0:
        return None
    if not 0 <= k <= n:
        raise ValueError(f"{k} successes out of {n}")
    p = k / n
    z2 = Z_95 * Z_95
    denom = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = Z_95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # At k = 0 and k = n the bounds are exactly 0 and 1; say so rather than 1 - 1e-16.
    lo = 0.0 if k == 0 else max(0.0, center - half)
    hi = 1.0 if k == n else min(1.0, center + half)
    return lo, hi


def rate(k: int, n: int) -> dict[str, Any]:
    """``{k, n, rate, lo, hi}``: a rate with its Wilson 95 % interval (nulls when n is 0)."""
    interval = wilson(k, n)
    return {
        "k": k,
        "n": n,
        "rate": k / n if n else None,
        "lo": interval[0] if interval else None,
        "hi": interval[1] if interval else None,
    }


def wilson_columns(k: str, n: str, prefix: str) -> list[pl.Expr]:
    """Columns ``{prefix}``, ``{prefix}_lo``, ``{prefix}_hi`` from count columns k and n."""
    kk, nn = pl.col(k).cast(pl.Float64), pl.col(n).cast(pl.Float64)
    ok = nn > 0
    p = kk / nn
    z2 = Z_95 * Z_95
    denom = 1.0 + z2 / nn
    center = (p + z2 / (2 * nn)) / denom
    half = Z_95 * (p * (1 - p) / nn + z2 / (4 * nn * nn)).sqrt() / denom
    return [
        pl.when(ok).then(p).alias(prefix),
        pl.when(ok & (kk == 0))
        .then(0.0)
        .when(ok)
        .then((center - half).clip(0.0, 1.0))
        .alias(f"{prefix}_lo"),
        pl.when(ok & (kk == nn))
        .then(1.0)
        .when(ok)
        .then((center + half).clip(0.0, 1.0))
        .alias(f"{prefix}_hi"),
    ]


# --- groups ------------------------------------------------------------------------------------


def run_groups(
    runs: pl.DataFrame, by: str | Sequence[str], columns: Sequence[pl.Expr] = ()
) -> tuple[pl.DataFrame, list[str]]:
    """``run_id`` and one column per name of ``by`` (lists exploded), and those names.

    A name is a run column, an alias (``model`` -> ``models``, ``case`` -> ``case_id``,
    ``service.version``, ``service.name``) or an attribute of the run (text from the
    ``attributes`` JSON). ``columns``: more columns of the runs to select along.
    """
    names = [by] if isinstance(by, str) else list(by)
    if not names:
        raise ValueError("by names no column")
    groups = runs.select("run_id", *(_group_expr(runs, name) for name in names), *columns)
    for name in names:
        if isinstance(groups.schema[name], pl.List):
            # A run with an empty list (no model recorded) stays, in the null group; a value
            # the list holds twice counts once.
            groups = groups.with_columns(pl.col(name).list.unique(maintain_order=True))
            groups = groups.explode(name, empty_as_null=True)
    return groups, names


def _group_expr(runs: pl.DataFrame, name: str) -> pl.Expr:
    column = name if name in runs.columns else _ALIASES.get(name)
    if column is not None and column in runs.columns:
        return pl.col(column).alias(name)
    if "attributes" in runs.columns:
        return pl.col("attributes").str.json_path_match(key_path(name)).alias(name)
    raise ValueError(f"runs have no column or attribute {name!r}")


def with_group_column(runs: pl.DataFrame, name: str) -> pl.DataFrame:
    """``runs`` with a column ``name`` holding the group `run_groups` reads for it: read the
    run attribute once where several breakdowns group by it."""
    if name in runs.columns:
        return runs
    return runs.with_columns(_group_expr(runs, name))


def _with_groups(
    frame: pl.DataFrame, runs: pl.DataFrame | None, by: str | Sequence[str] | None
) -> tuple[pl.DataFrame, list[str]]:
    """``frame`` (with run_id) joined to its runs' groups; no change when ``by`` is None."""
    if by is None:
        return frame, []
    if runs is None:
        raise ValueError("a breakdown (by=...) needs the runs frame")
    groups, names = run_groups(runs, by)
    clash = [n for n in names if n in frame.columns and n != "run_id"]
    if clash:
        frame = frame.drop(clash)
    return frame.join(groups, on="run_id", how="inner"), names


def _aggregate(rows: pl.DataFrame, keys: list[str], aggs: list[pl.Expr]) -> pl.DataFrame:
    """``aggs`` per group of ``keys``; without keys, one row over everything (even none)."""
    return rows.group_by(keys).agg(aggs) if keys else rows.select(aggs)


def distinct_runs(name: str, where: str | pl.Expr | None = None) -> pl.Expr:
    """The number of distinct runs (of the rows where ``where`` holds), as column ``name``."""
    run_ids = pl.col("run_id") if where is None else pl.col("run_id").filter(where)
    return run_ids.n_unique().cast(pl.Int64).alias(name)


def _rate_table(
    rows: pl.DataFrame, keys: list[str], counts: list[pl.Expr], rate: tuple[str, str, str]
) -> pl.DataFrame:
    """The ``counts`` per group of ``keys`` (`_aggregate`) and the Wilson rate ``rate``
    (successes, trials, name) of two of them, sorted by the keys."""
    return _sorted(_aggregate(rows, keys, counts).with_columns(wilson_columns(*rate)), keys)


def _sorted(frame: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    return frame.sort(list(keys), nulls_last=True) if keys else frame


# --- tails -------------------------------------------------------------------------------------


def _qname(q: float) -> str:
    return f"p{round(q * 100, 6):g}"


def metric_values(runs: pl.DataFrame, metrics: Sequence[str], prefix: str = "") -> list[pl.Expr]:
    """One Float64 column per metric, a run column or ``tokens`` (input + output tokens, null
    when both are), null where unknown or absent; each named ``{prefix}{metric}``."""
    exprs = []
    for metric in metrics:
        parts = [c for c in ("input_tokens", "output_tokens") if c in runs.columns]
        if metric in runs.columns:
            value = pl.col(metric)
        elif metric == "tokens" and parts:
            known = pl.any_horizontal([pl.col(c).is_not_null() for c in parts])
            value = pl.when(known).then(pl.sum_horizontal([pl.col(c).fill_null(0) for c in parts]))
        else:
            value = pl.lit(None)
        exprs.append(value.cast(pl.Float64).alias(prefix + metric))
    return exprs


def tails(
    runs: pl.DataFrame,
    *,
    by: str | Sequence[str] | None = None,
    metrics: Sequence[str] = TAIL_METRICS,
    quantiles: Sequence[float] = QUANTILES,
) -> pl.DataFrame:
    """Quantiles of per-run metrics with distribution-free intervals, one row per metric.

    Columns: [by...], ``metric``, ``runs``, ``n`` (non-null values), ``missing``, ``max``, and
    per quantile ``p50``, ``p50_lo``, ``p50_hi`` (likewise p95, p99). Metrics keep the order
    given; ``tokens`` is input + output tokens.
    """
    columns = metric_values(runs, metrics)
    values, keys = run_groups(runs, by, columns) if by is not None else (runs.select(columns), [])
    if not keys:  # one group of all runs (none without runs)
        values = values.with_columns(_all=pl.lit(0, pl.Int8))
    group = keys or ["_all"]
    cols = [*keys, "metric", "runs", "n", "missing", "max"]
    for q in quantiles:
        cols += [_qname(q), f"{_qname(q)}_lo", f"{_qname(q)}_hi"]
    parts = []
    for position, metric in enumerate(metrics):
        value = pl.col(metric)
        part = values.group_by(group).agg(
            pl.len().cast(pl.Int64).alias("runs"),
            value.count().cast(pl.Int64).alias("n"),
            value.null_count().cast(pl.Int64).alias("missing"),
            value.max().alias("max"),
            value.drop_nulls().sort().alias("_sorted"),
            *[value.quantile(q, interpolation="linear").alias(_qname(q)) for q in quantiles],
        )
        ranks = _rank_table(part.get_column("n").unique().to_list(), quantiles)
        part = part.join(ranks, on="n", how="left").with_columns(
            *[
                pl.col("_sorted")
                .list.get(pl.col(f"_{end}_{_qname(q)}") - 1, null_on_oob=True)
                .alias(f"{_qname(q)}_{bound}")
                for q in quantiles
                for end, bound in (("l", "lo"), ("u", "hi"))
            ],
            metric=pl.lit(metric, pl.String),
            _order=pl.lit(position, pl.Int64),
        )
        parts.append(part.select(*cols, "_order"))
    return _sorted(pl.concat(parts), [*keys, "_order"]).select(cols)


def _rank_table(ns: list[int], quantiles: Sequence[float]) -> pl.DataFrame:
    """Per ``n``: the ranks ``_l_<q>``, ``_u_<q>`` of each `quantile_interval`."""
    schema = {"n": pl.Int64} | {f"_{e}_{_qname(q)}": pl.Int64 for q in quantiles for e in "lu"}
    rows = []
    for n in sorted(ns):
        ranks = [quantile_interval(int(n), float(q)) if 0 < q < 1 else None for q in quantiles]
        rows.append((n, *[r for rank in ranks for r in (rank or (None, None))]))
    return pl.DataFrame(rows, schema=schema, orient="row")


# --- rule, kind and tool rates -----------------------------------------------------------------


def _findings(findings: pl.DataFrame | None) -> pl.DataFrame:
    return findings if findings is not None else pl.DataFrame(schema=FINDING_SCHEMA)


def _judged_rows(findings: pl.DataFrame, coverage: pl.DataFrame) -> pl.DataFrame:
    """One row per (run, pack, rule) the rule applied to: status, _hit, _judged."""
    rows = coverage.select("run_id", "pack", "rule_id", "status")
    rows = _flagged(rows, findings.select("run_id", "pack", "rule_id"), "_hit")
    return rows.with_columns(_judged=pl.col("status").is_in(list(JUDGED)) | pl.col("_hit"))


def _flagged(rows: pl.DataFrame, hits: pl.DataFrame, name: str) -> pl.DataFrame:
    """``rows`` with a column ``name``: whether their key (the columns of ``hits``) is in
    ``hits``."""
    flags = hits.unique().with_columns(pl.lit(True).alias(name))
    joined = rows.join(flags, on=hits.columns, how="left")
    return joined.with_columns(pl.col(name).fill_null(False))


def rule_rates(
    findings: pl.DataFrame | None,
    coverage: pl.DataFrame,
    *,
    runs: pl.DataFrame | None = None,
    by: str | Sequence[str] | None = None,
) -> pl.DataFrame:
    """Per rule: runs with at least one finding / runs the rule judged, with Wilson.

    Columns: [by...], pack, rule_id, applied (runs the rule applied to), judged, failed,
    rate, rate_lo, rate_hi.
    """
    rows, keys = _with_groups(_judged_rows(_findings(findings), coverage), runs, by)
    counts = [
        distinct_runs("applied"),
        distinct_runs("judged", "_judged"),
        distinct_runs("failed", "_hit"),
    ]
    return _rate_table(rows, [*keys, "pack", "rule_id"], counts, ("failed", "judged", "rate"))


def kind_rates(
    findings: pl.DataFrame | None,
    coverage: pl.DataFrame,
    *,
    rule_kinds: Mapping[tuple[str, str], Sequence[str]] | None = None,
    runs: pl.DataFrame | None = None,
    by: str | Sequence[str] | None = None,
) -> pl.DataFrame:
    """Per finding kind: runs with that kind / runs judged by a rule that can yield it.

    ``rule_kinds`` maps (pack, rule_id) to the kinds the rule can yield (`rule_kinds_of`);
    kinds actually found are added to it, so with None only kinds found appear. Columns:
    [by...], kind, judged, failed, rate, rate_lo, rate_hi.
    """
    findings = _findings(findings)
    kinds = _pairs(
        rule_kinds, findings.select("pack", "rule_id", "kind").unique(), value_name="kind"
    )
    run_rule = ["run_id", "pack", "rule_id"]
    judged = _judged_rows(findings, coverage).select(*run_rule, "_judged")
    rows, keys = _with_groups(judged, runs, by)  # the runs' groups read once, for every kind
    hits = findings.select(*run_rule, "kind").unique()
    aggs = [distinct_runs("judged", "_judged"), distinct_runs("failed", "_kind_hit")]
    parts = []
    # Kind by kind: joining each coverage row to every kind its rule can yield at once would
    # multiply the rows.
    for (kind,), rules in kinds.group_by("kind"):
        of_kind = rows.join(rules.select("pack", "rule_id"), on=["pack", "rule_id"], how="semi")
        if of_kind.is_empty():
            continue
        found = hits.filter(pl.col("kind") == kind).select(run_rule)
        of_kind = _flagged(of_kind, found, "_kind_hit")
        counts = _aggregate(of_kind, keys, aggs).with_columns(kind=pl.lit(kind, pl.String))
        parts.append(counts.select(*keys, "kind", "judged", "failed"))
    empty = {k: rows.schema[k] for k in keys} | {
        "kind": pl.String,
        "judged": pl.Int64,
        "failed": pl.Int64,
    }
    out = pl.concat(parts) if parts else pl.DataFrame(schema=empty)
    out = out.with_columns(wilson_columns("failed", "judged", "rate"))
    return _sorted(out, [*keys, "kind"])


def omission_rates(
    findings: pl.DataFrame | None,
    coverage: pl.DataFrame,
    *,
    required: Mapping[tuple[str, str], Sequence[str]] | None = None,
    runs: pl.DataFrame | None = None,
    by: str | Sequence[str] | None = None,
) -> pl.DataFrame:
    """Per tool: runs where it was omitted / runs where a judging rule required it, with Wilson.

    ``required`` maps (pack, rule_id) of required_tools rules to their tools
    (`required_tools_of`); omissions found are added to it, so with None only tools omitted at
    least once appear. A run the rule gave ``no_answer`` was not judged for omissions and is
    left out. Columns: [by...], tool, required_runs, omitted_runs, rate, rate_lo, rate_hi.
    """
    findings = _findings(findings)
    omissions = findings.filter((pl.col("kind") == "omission") & pl.col("tool").is_not_null())
    tools = _pairs(
        required, omissions.select("pack", "rule_id", "tool").unique(), value_name="tool"
    )
    no_answer = (
        findings.filter(pl.col("kind") == "no_answer").select("run_id", "pack", "rule_id").unique()
    )
    rows = (
        _judged_rows(findings, coverage)
        .filter("_judged")
        .join(no_answer, on=["run_id", "pack", "rule_id"], how="anti")
        .join(tools, on=["pack", "rule_id"], how="inner")
    )
    rows, keys = _with_groups(rows, runs, by)
    rows = _flagged(rows, omissions.select("run_id", "pack", "rule_id", "tool"), "_omitted")
    counts = [distinct_runs("required_runs"), distinct_runs("omitted_runs", "_omitted")]
    return _rate_table(rows, [*keys, "tool"], counts, ("omitted_runs", "required_runs", "rate"))


def _pairs(
    given: Mapping[tuple[str, str], Sequence[str]] | None,
    found: pl.DataFrame,
    *,
    value_name: str,
) -> pl.DataFrame:
    """(pack, rule_id, value) rows from a mapping, plus those found; unique."""
    rows = [
        (pack, rule_id, value)
        for (pack, rule_id), values in (given or {}).items()
        for value in values
    ]
    schema = {"pack": pl.String, "rule_id": pl.String, value_name: pl.String}
    listed = pl.DataFrame(rows, schema=schema, orient="row")
    return pl.concat([listed, found.select(list(schema)).cast(schema)]).unique()  # type: ignore[arg-type]


# --- coverage ----------------------------------------------------------------------------------


def rule_coverage(
    coverage: pl.DataFrame,
    *,
    runs: pl.DataFrame | None = None,
    by: str | Sequence[str] | None = None,
) -> pl.DataFrame:
    """Per rule: how many of the runs it applied to it could judge, by coverage status.

    Columns: [by...], pack, rule_id, applied, checked, partial, not_applicable, unverifiable,
    error, judged (checked + partial), judged_rate, judged_rate_lo, judged_rate_hi.
    """
    rows, keys = _with_groups(coverage.select("run_id", "pack", "rule_id", "status"), runs, by)
    statuses = ("checked", "partial", "not_applicable", "unverifiable", "error")
    out = rows.group_by([*keys, "pack", "rule_id"]).agg(
        distinct_runs("applied"), *[distinct_runs(s, pl.col("status") == s) for s in statuses]
    )
    out = out.with_columns((pl.col("checked") + pl.col("partial")).alias("judged"))
    out = out.with_columns(wilson_columns("judged", "applied", "judged_rate"))
    return _sorted(out, [*keys, "pack", "rule_id"])


def rule_reasons(coverage: pl.DataFrame) -> pl.DataFrame:
    """Per rule, status and reason: the runs it could not fully judge for that reason.

    Columns: pack, rule_id, status (partial, not_applicable, unverifiable, error), reason,
    runs; sorted.
    """
    return _sorted(
        coverage.filter(pl.col("status") != "checked")
        .group_by("pack", "rule_id", "status", "reason")
        .agg(distinct_runs("runs")),
        ["pack", "rule_id", "status", "reason"],
    )


def rule_reach(runs: pl.DataFrame, packs: Sequence[Pack]) -> pl.DataFrame:
    """Per rule, what in the runs its filter and its tools reach.

    One row per (pack, rule_id, what, name), counting runs:

    - ``rule``: ``present`` every run, ``matching`` the runs its ``when:`` selects;
    - ``attribute`` (a key of ``when: attributes``): ``present`` the runs that record the key,
      ``matching`` those whose value is one it accepts;
    - ``agent`` (``when: agent``, the names joined by ", "): runs with an agent, and with one
      of those;
    - ``tool`` (`Check.expected_tools`): runs that offer or call the tool (its quoted name in
      their tool definitions, or a call), and runs that call it.

    Columns: pack, rule_id, what, name, present, matching, match_rate (+ _lo, _hi): counts of
    disjoint runs add up (`analyzer.metrics.facts.RATE_TABLES`).
    """
    exprs: list[pl.Expr] = []
    rows: list[tuple[str, str, str, str]] = []

    def add(what: str, name: str, present: pl.Expr, match: pl.Expr) -> None:
        i = len(rows)
        rows.append((pack.name, rule.id, what, name))
        exprs.append(present.sum().cast(pl.Int64).alias(f"p{i}"))
        exprs.append(match.sum().cast(pl.Int64).alias(f"m{i}"))

    attributes = pl.col("attributes").fill_null("{}")
    calls = pl.col("tool_sequence").fill_null(pl.lit([], pl.List(pl.String)))
    offered = pl.col("tool_definitions").fill_null(pl.lit([], pl.List(pl.String))).list.join("\n")
    for pack in packs:
        for rule in pack.rules:
            when = rule.when
            chosen = pl.lit(True) if when is None else when.mask()
            every = pl.col("run_id").is_not_null()
            add("rule", "", every, every & chosen)
            for key, values in when.attributes if when is not None else ():
                quoted = json.dumps(key, ensure_ascii=False) + ": "
                value = attributes.str.json_path_match(key_path(key))
                has = attributes.str.contains(quoted, literal=True)
                add("attribute", key, has, value.is_in(list(values)).fill_null(False))
            if when is not None and when.agents:
                agent = pl.col("agent")
                matching = agent.is_in(list(when.agents)).fill_null(False)
                add("agent", ", ".join(when.agents), agent.is_not_null(), matching)
            for tool in rule.expected_tools():
                called = calls.list.contains(tool)
                quoted = offered.str.contains(json.dumps(tool, ensure_ascii=False), literal=True)
                add("tool", tool, called | quoted, called)
    schema = {
        "pack": pl.String,
        "rule_id": pl.String,
        "what": pl.String,
        "name": pl.String,
        "present": pl.Int64,
        "matching": pl.Int64,
    }
    counts = runs.select(exprs).row(0) if runs.height and exprs else (0,) * len(exprs)
    out = pl.DataFrame(
        [(*row, counts[2 * i], counts[2 * i + 1]) for i, row in enumerate(rows)],
        schema=schema,
        orient="row",
    )
    out = out.with_columns(wilson_columns("matching", "present", "match_rate"))
    return _sorted(out, ["pack", "rule_id", "what", "name"])


def rule_checks(
    packs: Sequence[Pack],
    coverage: pl.DataFrame,
    reach: pl.DataFrame,
    reasons: pl.DataFrame,
) -> list[dict[str, Any]]:
    """Per rule of ``packs``, in pack order, what it judged: ``runs_applied`` (its ``when:``
    selected them), ``runs_judged`` (checked or partial), ``runs_unverifiable``,
    ``runs_not_applicable``, ``runs_error``, and the reasons of what it could not judge.

    ``coverage``, ``reach`` and ``reasons`` are `rule_coverage`, `rule_reach` and
    `rule_reasons` of the same runs.
    """
    counts = {(r["pack"], r["rule_id"]): r for r in coverage.iter_rows(named=True)}
    selected = {
        (r["pack"], r["rule_id"]): r["matching"]
        for r in reach.filter(pl.col("what") == "rule").iter_rows(named=True)
    }
    why: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in reasons.sort("runs", descending=True, maintain_order=True).iter_rows(named=True):
        why.setdefault((r["pack"], r["rule_id"]), []).append(
            {"status": r["status"], "reason": r["reason"], "runs": r["runs"]}
        )
    out = []
    for pack in packs:
        for rule in pack.rules:
            key = (pack.name, rule.id)
            row = counts.get(key, {})
            out.append(
                {
                    "pack": pack.name,
                    "rule_id": rule.id,
                    "type": rule.type,
                    "when": rule.when.describe() if rule.when is not None else None,
                    "runs_applied": int(row.get("applied") or selected.get(key) or 0),
                    "runs_judged": int(row.get("judged") or 0),
                    "runs_unverifiable": int(row.get("unverifiable") or 0),
                    "runs_not_applicable": int(row.get("not_applicable") or 0),
                    "runs_error": int(row.get("error") or 0),
                    "reasons": why.get(key, []),
                }
            )
    return out


def unchecked_rules(rules: list[dict[str, Any]], reach: pl.DataFrame) -> list[dict[str, Any]]:
    """What makes a clean result unreadable as clean, per rule (`rule_checks` rows): a rule
    that applied to no run or judged none, a ``when:`` attribute or agent that no run has, a
    tool it looks for that no trace holds. Each: pack, rule_id, problem, detail."""
    by_rule: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in reach.filter(pl.col("what") != "rule").iter_rows(named=True):
        by_rule.setdefault((r["pack"], r["rule_id"]), []).append(r)
    out = []

    def add(rule: dict[str, Any], problem: str, detail: str) -> None:
        out.append(
            {"pack": rule["pack"], "rule_id": rule["rule_id"], "problem": problem, "detail": detail}
        )

    for rule in rules:
        rows = by_rule.get((rule["pack"], rule["rule_id"]), [])
        for r in rows:
            if r["what"] == "attribute" and r["present"] == 0:
                add(rule, "unknown_attribute", f"no run records the attribute {r['name']!r}")
            elif r["what"] == "agent" and r["matching"] == 0:
                add(rule, "unknown_agent", f"no run's agent is {r['name']}")
            elif r["what"] == "tool" and r["present"] == 0:
                add(rule, "unknown_tool", f"no trace calls or offers the tool {r['name']!r}")
        if rule["runs_applied"] == 0:
            add(
                rule,
                "applied_to_no_run",
                f"its filter ({rule['when'] or 'every run'}) selected none of the runs",
            )
        elif rule["runs_judged"] == 0:
            reasons = "; ".join(
                f"{r['runs']} {r['status']}" + (f": {r['reason']}" if r["reason"] else "")
                for r in rule["reasons"][:3]
            )
            add(
                rule,
                "judged_no_run",
                f"judged none of the {rule['runs_applied']} runs it applied to ({reasons})",
            )
    return out


def unchecked_of(
    packs: Sequence[Pack], runs: pl.DataFrame, coverage: pl.DataFrame
) -> list[dict[str, Any]]:
    """`unchecked_rules` of ``packs`` applied to ``runs`` (their ``coverage``), in one call."""
    reach = rule_reach(runs, packs)
    rules = rule_checks(packs, rule_coverage(coverage), reach, rule_reasons(coverage))
    return unchecked_rules(rules, reach)


def content_coverage(runs: pl.DataFrame, *, by: str | Sequence[str] | None = None) -> pl.DataFrame:
    """Runs that recorded message content (what grounding checks need), with Wilson.

    Columns: [by...], runs, with_content, rate, rate_lo, rate_hi.
    """
    rows, keys = _with_groups(
        runs.select("run_id", pl.col("has_content").fill_null(False).alias("_content")),
        runs,
        by,
    )
    counts = [distinct_runs("runs"), distinct_runs("with_content", "_content")]
    return _rate_table(rows, keys, counts, ("with_content", "runs", "rate"))


# --- outcomes, cost per correct run, scores ----------------------------------------------------


def run_outcomes(
    runs: pl.DataFrame, findings: pl.DataFrame | None, *, at_least: str = "high"
) -> pl.DataFrame:
    """Per run: ``findings`` (count), ``blocking`` (findings at or above ``at_least``),
    ``passed`` (no blocking finding). Sorted by run_id."""
    return _with_outcomes(runs.select("run_id"), findings, at_least).sort("run_id")


def blocking_severities(at_least: str) -> list[str]:
    """The severities at or above ``at_least``, those that fail a run; ValueError for a name
    that is not a severity."""
    if at_least not in SEVERITIES:
        raise ValueError(f"unknown severity {at_least!r}; expected one of {', '.join(SEVERITIES)}")
    return list(SEVERITIES[: SEVERITIES.index(at_least) + 1])


def _with_outcomes(
    rows: pl.DataFrame, findings: pl.DataFrame | None, at_least: str
) -> pl.DataFrame:
    """``rows`` (with run_id) and their run's ``findings``, ``blocking`` and ``passed``."""
    blocking = blocking_severities(at_least)
    counts = (
        _findings(findings)
        .group_by("run_id")
        .agg(
            pl.len().cast(pl.Int64).alias("findings"),
            pl.col("severity").is_in(blocking).sum().cast(pl.Int64).alias("blocking"),
        )
    )
    out = rows.join(counts, on="run_id", how="left", maintain_order="left")
    out = out.with_columns(pl.col("findings", "blocking").fill_null(0))
    return out.with_columns(passed=pl.col("blocking") == 0)


def ordered_sum(column: str) -> pl.Expr:
    """The sum of a float column over its values in ascending order (nulls left out).

    A polars group-by adds floats in an order that depends on how it splits the work, so its
    sum can differ in the last bits from one call to the next, and with the order of the
    rows; over sorted values it is the same for any order of the rows.
    """
    return pl.col(column).sort().sum()


def ordered_mean(column: str) -> pl.Expr:
    """The mean of a float column from `ordered_sum` (null when it has no value)."""
    return pl.col(column).sort().mean()


#: Per group of runs with ``cost_usd``: the unpriced runs, and the total cost when none is.
_COST_AGGS = (
    pl.col("cost_usd").null_count().cast(pl.Int64).alias("unpriced_runs"),
    pl.when(pl.col("cost_usd").null_count() == 0)
    .then(ordered_sum("cost_usd").round(12))
    .alias("total_cost_usd"),
)
#: The total cost over the runs that passed (null when none did or the total is unknown).
COST_PER_CORRECT = (
    pl.when(pl.col("passed_runs") > 0)
    .then(pl.col("total_cost_usd") / pl.col("passed_runs"))
    .alias("cost_per_correct_run")
)


def rule_kinds_of(packs: Sequence[Pack]) -> dict[tuple[str, str], tuple[str, ...]]:
    """(pack, rule_id) -> the finding kinds the rule's type can yield."""
    return {(pack.name, rule.id): tuple(rule.kinds) for pack in packs for rule in pack.rules}


def required_tools_of(packs: Sequence[Pack]) -> dict[tuple[str, str], tuple[str, ...]]:
    """(pack, rule_id) -> required tools, for the ``required_tools`` rules of ``packs``."""
    return {
        (pack.name, rule.id): tuple(getattr(rule, "tools", ()))
        for pack in packs
        for rule in pack.rules
        if rule.type == "required_tools"
    }


# --- pass^k ------------------------------------------------------------------------------------


def pass_hat_k(
    runs: pl.DataFrame,
    findings: pl.DataFrame | None = None,
    *,
    ks: Sequence[int] = (1, 2, 4, 8),
    at_least: str = "high",
    passed: pl.DataFrame | None = None,
    by: str | Sequence[str] | None = None,
) -> pl.DataFrame:
    """pass^k over trials sharing a case id (tau-bench), for each k of ``ks``.

    A trial passed when it has no finding at or above ``at_least``, unless ``passed``
    (run_id, passed) says otherwise, e.g. from labels. Columns: [by...], k, cases (cases with
    at least k trials), trials (their runs), pass_hat_k (null when no case has k trials).
    """
    if any(k < 1 for k in ks):
        raise ValueError("k must be at least 1")
    if passed is None:
        outcome = run_outcomes(runs, findings, at_least=at_least).select("run_id", "passed")
    else:
        outcome = passed.select("run_id", pl.col("passed").cast(pl.Boolean))
    trials = runs.select("run_id", "case_id").filter(pl.col("case_id").is_not_null())
    trials = trials.join(outcome, on="run_id", how="inner")
    trials, keys = _with_groups(trials, runs, by)
    cases = trials.group_by([*keys, "case_id"]).agg(
        pl.len().cast(pl.Int64).alias("_n"),
        pl.col("passed").sum().cast(pl.Int64).alias("_c"),
    )
    per_case = cases.join(pass_ratios(cases, ks), on=["_n", "_c"], how="inner")
    out = per_case.group_by([*keys, "k"]).agg(
        pl.len().cast(pl.Int64).alias("cases"),
        pl.col("_n").sum().cast(pl.Int64).alias("trials"),
        ordered_mean("_v").alias("pass_hat_k"),
    )
    # Every requested k appears, for every group: with no case of k trials it is null.
    ks_frame = pl.DataFrame({"k": sorted(set(ks))}, schema={"k": pl.Int64})
    groups = cases.select(keys).unique() if keys else None
    grid = groups.join(ks_frame, how="cross") if groups is not None else ks_frame
    out = grid.join(out, on=[*keys, "k"], how="left", nulls_equal=True).with_columns(
        pl.col("cases", "trials").fill_null(0)
    )
    return _sorted(out, [*keys, "k"]).select(*keys, "k", "cases", "trials", "pass_hat_k")


def pass_ratios(cases: pl.DataFrame, ks: Sequence[int]) -> pl.DataFrame:
    """``_n``, ``_c``, ``k``, ``_v``: pass^k = C(c, k) / C(n, k) for each pair of ``n`` trials
    and ``c`` passed (columns ``_n``, ``_c`` of ``cases``) and each k of ``ks`` up to ``n``."""
    pairs = cases.select("_n", "_c").unique().rows()
    return pl.DataFrame(
        [
            (n, c, k, math.comb(c, k) / math.comb(n, k))
            for n, c in sorted(pairs)
            for k in sorted(set(ks))
            if n >= k
        ],
        schema={"_n": pl.Int64, "_c": pl.Int64, "k": pl.Int64, "_v": pl.Float64},
        orient="row",
    )


# --- breakdown ---------------------------------------------------------------------------------


def breakdown(
    runs: pl.DataFrame,
    by: str | Sequence[str],
    *,
    findings: pl.DataFrame | None = None,
    weights: Mapping[tuple[str, str], float] | None = None,
    at_least: str = "high",
    metrics: Sequence[str] = TAIL_METRICS,
    per_run: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """One row per group of ``by``: the headline numbers of its runs.

    Columns: [by...], runs, passed_runs, pass_rate (+ _lo, _hi, Wilson), runs_with_findings,
    mean_score, unpriced_runs, total_cost_usd, cost_per_correct_run, and ``{metric}_p50``,
    ``{metric}_p95`` for each metric. The per-rule, per-kind, per-tool and tail tables take
    ``by`` too, for the full picture per group. ``per_run``: the `breakdown_runs` of these
    runs, findings, weights, threshold and metrics, where several breakdowns share them.
    """
    if per_run is None:
        per_run = breakdown_runs(
            runs, findings=findings, weights=weights, at_least=at_least, metrics=metrics
        )
    groups, keys = run_groups(runs, by)
    rows = groups.join(per_run, on="run_id", how="left", maintain_order="left")
    out = rows.group_by(keys).agg(
        pl.len().cast(pl.Int64).alias("runs"),
        pl.col("passed").sum().cast(pl.Int64).alias("passed_runs"),
        (pl.col("findings") > 0).sum().cast(pl.Int64).alias("runs_with_findings"),
        ordered_mean("score").alias("mean_score"),
        *_COST_AGGS,
        *[
            pl.col(f"_m_{metric}")
            .quantile(q, interpolation="linear")
            .alias(f"{metric}_{_qname(q)}")
            for metric in metrics
            for q in BREAKDOWN_QUANTILES
        ],
    )
    out = out.with_columns(*wilson_columns("passed_runs", "runs", "pass_rate"), COST_PER_CORRECT)
    return _sorted(out, keys).select(*keys, *breakdown_columns(metrics))


def breakdown_runs(
    runs: pl.DataFrame,
    *,
    findings: pl.DataFrame | None = None,
    weights: Mapping[tuple[str, str], float] | None = None,
    at_least: str = "high",
    metrics: Sequence[str] = TAIL_METRICS,
) -> pl.DataFrame:
    """Per run, in the order of `runs`, what a `breakdown` adds up over its groups: ``run_id``,
    ``cost_usd``, each metric as ``_m_<metric>``, ``findings``, ``blocking``, ``passed`` and
    ``score``."""
    values = [*metric_values(runs, ["cost_usd"]), *metric_values(runs, metrics, prefix="_m_")]
    rows = _with_outcomes(runs.select("run_id", *values), findings, at_least)
    lost = lost_points(findings, weights)
    return rows.join(lost, on="run_id", how="left", maintain_order="left").with_columns(SCORE)


def breakdown_columns(metrics: Sequence[str] = TAIL_METRICS) -> list[str]:
    """The columns of a `breakdown` row after its group columns, in order."""
    return [
        "runs",
        "passed_runs",
        "pass_rate",
        "pass_rate_lo",
        "pass_rate_hi",
        "runs_with_findings",
        "mean_score",
        "unpriced_runs",
        "total_cost_usd",
        "cost_per_correct_run",
        *[f"{m}_{_qname(q)}" for m in metrics for q in BREAKDOWN_QUANTILES],
    ]


#: Runs a model family needs before the routing pick considers it.
ROUTING_MIN_RUNS = 10


def routing(
    rows: Sequence[dict[str, Any]], *, min_runs: int = ROUTING_MIN_RUNS, by_labels: bool
) -> dict[str, Any]:
    """The routing pick from the ``model_family`` breakdown rows: the cheapest family (mean
    cost per run) whose Wilson upper bound of its correct rate reaches the best correct rate,
    among the families with at least ``min_runs`` judged runs and a known cost; ``reason``
    says why it was picked, or why none was.

    A run counts for its primary model's family; it is correct by its labels when
    ``by_labels`` (only labelled runs are judged), else by its findings (``passed_runs``).
    """
    n_key, k_key, rate_key = (
        ("label_runs", "label_correct_runs", "label_correct_rate")
        if by_labels
        else ("runs", "passed_runs", "pass_rate")
    )
    families = []
    for row in rows:
        n, total = row.get(n_key) or 0, row.get("total_cost_usd")
        mean = total / row["runs"] if total is not None and row["runs"] else None
        if row["group"] is None:
            why = "no model recorded"
        elif n < min_runs:
            why = f"{n} judged runs, fewer than {min_runs}"
        elif mean is None:
            why = "cost unknown (unpriced runs)"
        else:
            why = None
        families.append(
            {
                "model_family": row["group"],
                "runs": row["runs"],
                "judged_runs": n,
                "correct_runs": row.get(k_key) or 0,
                "correct_rate": row.get(rate_key),
                "correct_rate_lo": row.get(rate_key + "_lo"),
                "correct_rate_hi": row.get(rate_key + "_hi"),
                "mean_cost_usd": mean,
                "eligible": why is None,
                "not_eligible_because": why,
            }
        )
    eligible = [f for f in families if f["eligible"]]
    pick, reason = None, None
    if not eligible:
        reason = f"no model family has {min_runs} judged runs or more with a known cost"
    elif len(eligible) == 1:
        reason = (
            f"only {eligible[0]['model_family']} has {min_runs} judged runs or more with a "
            "known cost: no alternative to compare"
        )
    else:
        best = max(f["correct_rate"] for f in eligible)
        leader = min(
            (f for f in eligible if f["correct_rate_hi"] >= best),
            key=lambda f: (f["mean_cost_usd"], -f["correct_rate"], f["model_family"]),
        )
        pick = leader["model_family"]
        reason = (
            f"the cheapest of {len(eligible)} model families whose 95% interval reaches the "
            f"best correct rate ({best:.1%})"
        )
    return {
        "min_runs": min_runs,
        "correct_by": "labels" if by_labels else "findings",
        "families": families,
        "pick": pick,
        "reason": reason,
    }
