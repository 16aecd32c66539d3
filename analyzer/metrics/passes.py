"""The per-run figures of a summary, read from the runs' facts part by part, in one pass.

The facts of a big analysis come in parts (`analyzer.metrics.facts`). `RunFigures` reads a few
parts at a time (`BATCH_RUNS` runs at most, unless one part holds more) and keeps of them only
counts, exact sums (`ExactSum`) and, for quantiles, one column per metric: a float per run
(and a group number per run and breakdown), sorted once at the end. The figures are exact and
the same however the runs are split into parts.

Quantiles are type 7 (as polars' ``interpolation="linear"``), with the distribution-free
intervals of `metrics.quantile_interval` for the tails; totals and means are exact sums
rounded once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from analyzer.metrics import stats as m

if TYPE_CHECKING:
    from analyzer.metrics.facts import RunsPart

__all__ = ["STEP_CAP", "ExactSum", "RunFigures", "StepFigures"]

#: Run columns added up for the "runs" section (null when no run has a value).
TOTALS = (
    "model_calls",
    "tool_calls",
    "unexecuted_tool_calls",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
)
#: Float columns summed exactly: the cost section reads them.
SUMS = ("cost_usd", "recorded_cost_usd", "retry_cost_usd")


#: Runs read at a time: consecutive parts are read together, up to this many runs. Each batch
#: costs some 50 polars queries whatever its size, so small parts are best read together.
BATCH_RUNS = 50_000


class ExactSum:
    """The exact sum of finite floats added in any order and grouping, as a few floats whose
    exact sum it is: the correctly rounded sum (`math.fsum`), then the correctly rounded rest,
    and so on until nothing is left."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[float] = []

    def add(self, values: Iterable[float] | np.ndarray) -> None:
        """Add the finite ``values`` (NaN and infinities are left out)."""
        array = np.asarray(values, dtype=np.float64)
        terms = [*self._parts, *array[np.isfinite(array)].tolist()]
        parts: list[float] = []
        while rest := math.fsum(terms):  # -0.0 and 0.0: nothing left
            parts.append(rest)
            terms.append(-rest)
        self._parts = parts

    def total(self) -> float:
        """The sum, correctly rounded."""
        return self._parts[0] if self._parts else 0.0

    def mean(self, n: int) -> float:
        """The sum divided by ``n``, correctly rounded."""
        return float(sum(map(Fraction, self._parts), Fraction(0)) / n)


def _batches(parts: Sequence[RunsPart]) -> Iterator[pl.DataFrame]:
    """The runs of `parts`, in order, consecutive parts read together up to `BATCH_RUNS` runs
    (one part alone may hold more); a part whose columns differ from the batch's starts a
    new one."""
    batch: list[pl.DataFrame] = []
    runs = 0
    for part in parts:
        frame = part.read()
        if batch and (runs + frame.height > BATCH_RUNS or frame.columns != batch[0].columns):
            yield pl.concat(batch, how="vertical_relaxed")
            batch, runs = [], 0
        batch.append(frame)
        runs += frame.height
    if batch:
        yield pl.concat(batch, how="vertical_relaxed")


def _column(frame: pl.DataFrame, name: str) -> np.ndarray:
    return frame.get_column(name).cast(pl.Float64).fill_null(np.nan).to_numpy()


def _sorted(values: np.ndarray) -> np.ndarray:
    """The values without NaN, ascending (-0.0 read as 0.0: a sort finds them equal, and the
    order of equal values must not depend on how the runs were split)."""
    return np.sort(values[~np.isnan(values)] + 0.0)


def _quantile(values: np.ndarray, q: float) -> float | None:
    """The type-7 q-quantile of sorted ``values`` (None when there are none)."""
    n = len(values)
    if not n:
        return None
    h = (n - 1) * q
    low = math.floor(h)
    a, b = float(values[low]), float(values[min(low + 1, n - 1)])
    return a + (h - low) * (b - a)


def _by_group(groups: np.ndarray, values: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """Each group number and its values, ascending within a group (NaN left out)."""
    keep = ~np.isnan(values)
    groups, values = groups[keep], values[keep] + 0.0
    order = np.lexsort((values, groups))
    groups, values = groups[order], values[order]
    if not len(groups):
        return
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    for start, end in zip(starts, [*starts[1:], len(groups)], strict=True):
        yield int(groups[start]), values[start:end]


def _add_by_group(sums: dict[int, ExactSum], groups: np.ndarray, values: np.ndarray) -> None:
    """Add each group's finite values to its sum."""
    keep = np.isfinite(values)
    for g, part in _by_group(groups[keep], values[keep]):
        sums.setdefault(g, ExactSum()).add(part)


class RunFigures:
    """The figures of the runs in ``parts``: run totals, tails, cost, content coverage,
    scores, breakdowns, and the runs with a case id (for trials).

    ``blocking`` holds the ids of the runs with a finding at or above the correctness
    threshold; ``passed`` (run_id, passed), from labels, judges the runs instead for the cost
    section and adds the ``label_*`` columns to the breakdowns. ``breakdowns`` maps each
    breakdown's name to the column it groups by.
    """

    def __init__(
        self,
        parts: Sequence[RunsPart],
        *,
        metrics: Sequence[str],
        breakdowns: dict[str, str],
        blocking: pl.Series,
        passed: pl.DataFrame | None = None,
    ) -> None:
        self.metrics = list(metrics)
        self.breakdown_metrics = list(m.TAIL_METRICS)  # those of `metrics.breakdown`
        self.breakdowns = breakdowns
        self._names = list(dict.fromkeys([*self.metrics, *self.breakdown_metrics]))
        self._blocking = blocking.implode()
        self._passed = passed
        self._runs = 0
        self._counts: dict[str, int] = {}
        self._sums: dict[str, ExactSum] = {}
        self._agents: dict[str, int] = {}
        self._models: set[str] = set()
        self._max: dict[str, float] = {}
        self._score_min: float | None = None
        self._has_score = False
        self._groups: dict[str, dict[Any, dict[str, int]]] = {b: {} for b in breakdowns}
        self._group_sums: dict[tuple[str, str], dict[int, ExactSum]] = {}
        self._group_dtype: dict[str, pl.DataType] = {}
        self._group_values: dict[int, Any] = {}  # group number -> its value
        self._numbers: dict[tuple[str, Any], int] = {}  # (breakdown, value) -> group number
        # per metric, its value for each run (NaN: none); per breakdown, its (run, group) rows
        # (int32: a run number and a group number fit)
        values: dict[str, list[np.ndarray]] = {name: [] for name in self._names}
        members: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {b: [] for b in breakdowns}
        self.steps = StepFigures()
        cases = []
        for runs in _batches(parts):
            frame = self._prepared(runs)
            for name in self._names:
                values[name].append(_column(frame, f"_m_{name}"))
            for name in self.breakdowns:
                rows, number = self._grouped(frame, name)
                self._count_groups(name, rows, number)
                run = rows.get_column("_r").to_numpy().astype(np.int64) + self._runs
                members[name].append((run.astype(np.int32), number.astype(np.int32)))
            self._count(frame)
            # `StepFigures` reads ``correct``: by the labels (null: not labelled), else by the
            # findings
            label = "_label_passed" if self._passed is not None else "passed"
            self.steps.add(frame.with_columns(correct=pl.col(label)))
            cases.append(frame.filter(pl.col("case_id").is_not_null()))
        self.case_runs = pl.concat(cases, how="vertical_relaxed") if cases else None
        self._values = {name: np.concatenate(v) if v else np.zeros(0) for name, v in values.items()}
        none = [np.zeros(0, dtype=np.int32)]
        self._members = {
            name: (
                np.concatenate([r for r, _ in rows] or none),
                np.concatenate([g for _, g in rows] or none),
            )
            for name, rows in members.items()
        }
        self._tails = {metric: _sorted(self._values[metric]) for metric in self.metrics}

    def _prepared(self, runs: pl.DataFrame) -> pl.DataFrame:
        """The part's runs with their metric values (Float64), outcome and score."""
        has = set(runs.columns)
        frame = runs.with_columns(
            *m.metric_values(runs, self._names, prefix="_m_"),
            pl.col("findings").fill_null(0)
            if "findings" in has
            else pl.lit(0, pl.Int64).alias("findings"),
            pl.col("score").fill_null(100.0) if "score" in has else pl.lit(100.0).alias("score"),
            (~pl.col("run_id").is_in(self._blocking)).alias("passed"),
            *m.metric_values(runs, SUMS),
        ).with_row_index("_r")
        self._has_score = self._has_score or "score" in has
        if self._passed is not None:
            frame = frame.join(
                self._passed.select("run_id", pl.col("passed").alias("_label_passed")),
                on="run_id",
                how="left",
                maintain_order="left",  # ``_r`` stays each run's row
            )
        return frame

    def _grouped(self, frame: pl.DataFrame, name: str) -> tuple[pl.DataFrame, np.ndarray]:
        """The (run, group) rows of breakdown `name` (``_r``: the run's row in `frame`), and
        each row's group number."""
        by = self.breakdowns[name]
        columns = ["_r", "cost_usd", "passed", "findings", "score"]
        if self._passed is not None:
            columns.append("_label_passed")
        rows, _ = m.run_groups(frame, by, [pl.col(c) for c in columns])
        self._group_dtype.setdefault(name, rows.schema[by])
        values = rows.get_column(by).unique(maintain_order=True).to_list()
        numbers = [self._group_number(name, v) for v in values]
        keyed = pl.DataFrame(
            {by: pl.Series(values, dtype=rows.schema[by]), "_g": pl.Series(numbers, dtype=pl.Int64)}
        )
        number = rows.select(by).join(
            keyed, on=by, how="left", nulls_equal=True, maintain_order="left"
        )
        return rows, number.get_column("_g").to_numpy()

    def _group_number(self, name: str, value: Any) -> int:
        key = (name, value)
        if key not in self._numbers:
            self._numbers[key] = len(self._numbers)
            self._group_values[self._numbers[key]] = value
        return self._numbers[key]

    def _count(self, frame: pl.DataFrame) -> None:
        """The counts and sums of one batch of runs."""
        self._runs += frame.height
        add = self._add
        add("with_answer", int(frame.get_column("has_answer").sum()))
        add("without_answer", int((~frame.get_column("has_answer")).sum()))
        add("with_content", int(frame.get_column("has_content").sum()))
        for col in TOTALS:
            if col in frame.columns:
                series = frame.get_column(col)
                add(f"known:{col}", len(series) - series.null_count())
                add(f"sum:{col}", int(series.sum()))
        for agent, n in frame.group_by(pl.col("agent").fill_null("-")).len().iter_rows():
            self._agents[agent] = self._agents.get(agent, 0) + n
        self._models.update(frame.get_column("models").explode().drop_nulls().to_list())
        for col in SUMS:
            series = frame.get_column(col)
            add(f"known:{col}", len(series) - series.null_count())
            self._sum(col, _column(frame, col))
        add("passed", int(frame.get_column("passed").sum()))
        if self._passed is not None:
            labelled = frame.filter(pl.col("_label_passed").is_not_null())
            cost = labelled.get_column("cost_usd")
            add("labelled_priced", len(cost) - cost.null_count())
            self._sum("labelled_cost", _column(labelled, "cost_usd"))
        for metric in self.metrics:
            values = frame.get_column(f"_m_{metric}")
            top = values.max()
            if top is not None and (metric not in self._max or top > self._max[metric]):
                self._max[metric] = float(top)  # type: ignore[arg-type]
        if self._has_score:  # the scores section: the runs' own scores
            low = frame.get_column("_m_score").min()
            if low is not None and (self._score_min is None or low < self._score_min):
                self._score_min = float(low)  # type: ignore[arg-type]
            self._sum("score", _column(frame, "_m_score"))

    def _count_groups(self, name: str, rows: pl.DataFrame, gid: np.ndarray) -> None:
        groups = self._groups[name]
        keyed = rows.with_columns(_gid=pl.Series(gid))
        aggs = [
            pl.len().alias("runs"),
            pl.col("passed").sum().alias("passed_runs"),
            (pl.col("findings") > 0).sum().alias("runs_with_findings"),
            pl.col("cost_usd").null_count().alias("unpriced_runs"),
            pl.col("score").count().alias("scored"),
        ]
        if self._passed is not None:
            judged = pl.col("_label_passed").is_not_null()
            aggs += [
                judged.sum().alias("label_runs"),
                pl.col("_label_passed").fill_null(False).sum().alias("label_correct_runs"),
                (judged & pl.col("cost_usd").is_null()).sum().alias("label_unpriced"),
            ]
        for row in keyed.group_by("_gid").agg(aggs).iter_rows(named=True):
            counts = groups.setdefault(row.pop("_gid"), {})
            for key, n in row.items():
                counts[key] = counts.get(key, 0) + int(n)
        for column, key in (("cost_usd", "cost"), ("score", "score_sum")):
            _add_by_group(self._group_sums.setdefault((name, key), {}), gid, _column(rows, column))
        if self._passed is not None:
            judged = rows.get_column("_label_passed").is_not_null().to_numpy()
            _add_by_group(
                self._group_sums.setdefault((name, "label_cost"), {}),
                gid[judged],
                _column(rows, "cost_usd")[judged],
            )

    def _add(self, key: str, n: int) -> None:
        self._counts[key] = self._counts.get(key, 0) + n

    def _sum(self, key: str, values: np.ndarray) -> None:
        self._sums.setdefault(key, ExactSum()).add(values)

    def _group_sum(self, name: str, key: str, group: int) -> float:
        found = self._group_sums.get((name, key), {}).get(group)
        return found.total() if found is not None else 0.0

    @property
    def runs(self) -> int:
        """How many runs."""
        return self._runs

    def count(self, key: str) -> int:
        """A count over all runs: ``with_answer``, ``without_answer``, ``with_content``,
        ``passed`` (no blocking finding), ``known:<column>`` (runs with a value in that
        column)."""
        return self._counts.get(key, 0)

    def total(self, column: str) -> int | None:
        """The sum of an integer run column; None when no run has a value."""
        return self._counts.get(f"sum:{column}", 0) if self.count(f"known:{column}") else None

    def _exact(self, key: str) -> float:
        found = self._sums.get(key)
        return found.total() if found is not None else 0.0

    def float_total(self, column: str) -> float | None:
        """The exact sum of a float column (cost_usd, recorded_cost_usd, retry_cost_usd),
        rounded once; None when no run has a value."""
        return self._exact(column) if self.count(f"known:{column}") else None

    def labelled_cost(self, labelled: int) -> float | None:
        """The exact total cost of the runs judged by labels; None unless all ``labelled``
        runs were found with a cost."""
        if not labelled or self.count("labelled_priced") != labelled:
            return None
        return self._exact("labelled_cost")

    @property
    def agents(self) -> dict[str, int]:
        return dict(sorted(self._agents.items()))

    @property
    def models(self) -> list[str]:
        return sorted(self._models)

    def tails(self) -> list[dict[str, Any]]:
        """Rows of `metrics.tails` over all runs (none without runs)."""
        if not self._runs:
            return []
        rows = []
        for metric in self.metrics:
            values = self._tails[metric]
            n = len(values)
            row: dict[str, Any] = {
                "metric": metric,
                "runs": self._runs,
                "n": n,
                "missing": self._runs - n,
                "max": self._max.get(metric),
            }
            for q in m.QUANTILES:
                name = m._qname(q)
                row[name] = _quantile(values, q)
                bounds = m.quantile_interval(n, q) if n else None
                row[f"{name}_lo"] = float(values[bounds[0] - 1]) if bounds else None
                row[f"{name}_hi"] = float(values[bounds[1] - 1]) if bounds else None
            rows.append(row)
        return rows

    def scores(self) -> dict[str, Any]:
        """The runs' scores (the tail metric ``score``): mean, p50, min, how many."""
        if not self._has_score:
            return {"mean": None, "p50": None, "min": None, "runs": 0}
        values = self._tails["score"]
        n = len(values)
        return {
            "mean": self._sums["score"].mean(n) if n else None,
            "p50": _quantile(values, 0.5),
            "min": self._score_min,
            "runs": n,
        }

    def _group_quantiles(self, name: str) -> dict[str, dict[int, float | None]]:
        """Per breakdown column ``{metric}_p50`` (`metrics.BREAKDOWN_QUANTILES`), each group's
        quantile (groups without a value left out)."""
        run, number = self._members[name]
        out = {}
        for metric in self.breakdown_metrics:
            by_group = dict(_by_group(number, self._values[metric][run]))
            for q in m.BREAKDOWN_QUANTILES:
                out[f"{metric}_{m._qname(q)}"] = {g: _quantile(v, q) for g, v in by_group.items()}
        return out

    def breakdown(self, name: str) -> pl.DataFrame:
        """Rows of `metrics.breakdown` for breakdown `name` (its group column ``group``), with
        the ``label_*`` columns when runs are judged by labels."""
        groups = self._groups[name]
        gids = list(groups)
        dtype = self._group_dtype.get(name, pl.String)
        rows: dict[str, list] = {"group": [self._group_values[g] for g in gids]}
        counts = ["runs", "passed_runs", "runs_with_findings", "unpriced_runs"]
        for key in counts:
            rows[key] = [groups[g].get(key, 0) for g in gids]
        score_sums = self._group_sums.get((name, "score_sum"), {})
        rows["mean_score"] = [
            (score_sums[g].mean(groups[g]["scored"]) if g in score_sums else 0.0)
            if groups[g].get("scored")
            else None
            for g in gids
        ]
        rows["_total"] = [
            self._group_sum(name, "cost", g) if not groups[g].get("unpriced_runs") else None
            for g in gids
        ]
        schema: dict[str, Any] = {"group": dtype, "mean_score": pl.Float64, "_total": pl.Float64}
        schema |= {k: pl.Int64 for k in counts}
        for column, by_group in self._group_quantiles(name).items():
            rows[column] = [by_group.get(g) for g in gids]
            schema[column] = pl.Float64
        if self._passed is not None:  # for `with_label_rates`
            for key in ("label_runs", "label_correct_runs"):
                rows[key] = [groups[g].get(key, 0) for g in gids]
            rows["_cost"] = [
                self._group_sum(name, "label_cost", g)
                if not groups[g].get("label_unpriced")
                else None
                for g in gids
            ]
            schema |= {"label_runs": pl.Int64, "label_correct_runs": pl.Int64, "_cost": pl.Float64}
        out = pl.DataFrame(rows, schema=schema)
        out = out.with_columns(total_cost_usd=pl.col("_total").round(12)).drop("_total")
        out = out.with_columns(
            *m.wilson_columns("passed_runs", "runs", "pass_rate"), m.COST_PER_CORRECT
        )
        if self._passed is not None:
            out = with_label_rates(out)
        cols = ["group", *m.breakdown_columns(self.breakdown_metrics)]
        if self._passed is not None:
            cols += LABEL_COLUMNS
        return out.select(cols).sort("group", nulls_last=True)


#: The columns a breakdown row has with labels, after `metrics.breakdown_columns`.
LABEL_COLUMNS = [
    "label_runs",
    "label_correct_runs",
    "label_correct_rate",
    "label_correct_rate_lo",
    "label_correct_rate_hi",
    "label_cost_per_correct_run",
]


def with_label_rates(rows: pl.DataFrame) -> pl.DataFrame:
    """Breakdown rows with ``label_runs``, ``label_correct_runs`` and ``_cost`` (the cost of
    their labelled runs, null when one is unpriced): their labelled correct rate with its
    Wilson interval and cost per correct run, ``_cost`` dropped."""
    return rows.with_columns(
        *m.wilson_columns("label_correct_runs", "label_runs", "label_correct_rate"),
        label_cost_per_correct_run=pl.when(pl.col("label_correct_runs") > 0).then(
            pl.col("_cost") / pl.col("label_correct_runs")
        ),
    ).drop("_cost")


#: A run's model calls at this position or later are counted as one step (its last row).
STEP_CAP = 10


class StepFigures:
    """Cost versus quality per step: the model calls of the runs grouped by (agent of the run,
    step, model), where a call's step is its position among its run's model calls (1, 2...,
    `STEP_CAP` and later as one). Per group: calls, priced calls, the mean and p95 cost of a
    call (priced calls), and the runs the calls belong to with how many were judged and
    correct (Wilson interval).

    Fed the runs part by part (`add`, then `rows`), or `of` one frame: the figures are exact
    and the same however the runs are split. The costs of the priced calls are kept (a float
    each) for the p95. A part's frame has ``agent``, ``call_models``, ``call_costs``
    (`facts._with_calls`; without them the part adds nothing) and ``correct`` (bool; null: a
    run not judged).
    """

    def __init__(self) -> None:
        self._numbers: dict[tuple[Any, int, Any], int] = {}  # (agent, step, model) -> group
        self._counts: dict[int, dict[str, int]] = {}
        self._costs: dict[int, list[np.ndarray]] = {}  # group -> its priced calls' costs

    @classmethod
    def of(cls, frame: pl.DataFrame) -> StepFigures:
        """The figures of the runs of one frame."""
        figures = cls()
        figures.add(frame)
        return figures

    def add(self, frame: pl.DataFrame) -> None:
        """Count the model calls of one part's runs and keep their costs."""
        if "call_models" not in frame.columns or not frame.height:
            return
        n = pl.col("call_models").list.len()
        calls = (
            frame.select(
                pl.int_range(pl.len(), dtype=pl.Int64).alias("_run"),
                "agent",
                "correct",
                pl.col("call_models").alias("model"),
                pl.col("call_costs").alias("cost_usd"),
                pl.int_ranges(1, n + 1, dtype=pl.Int64).alias("step"),
                (n > 0).alias("_some"),
            )
            .filter("_some")
            .drop("_some")
            .explode("model", "cost_usd", "step")
            .with_columns(pl.col("step").clip(upper_bound=STEP_CAP))
        )
        if not calls.height:
            return
        # a run's calls at STEP_CAP and later share a group: each run counted once per group
        once = pl.col("_run").is_first_distinct()
        groups = calls.group_by("agent", "step", "model").agg(
            pl.len().alias("calls"),
            pl.col("cost_usd").count().alias("priced_calls"),
            once.sum().alias("runs"),
            pl.col("correct").filter(once).count().alias("judged_runs"),
            pl.col("correct").filter(once).fill_null(False).sum().alias("correct_runs"),
            pl.col("cost_usd").drop_nulls(),
        )
        numbers = [self._number(key) for key in groups.select("agent", "step", "model").iter_rows()]
        flat = _column(groups.select(pl.col("cost_usd").explode(empty_as_null=False)), "cost_usd")
        sizes = groups.get_column("cost_usd").list.len().to_numpy()
        costs = np.split(flat, np.cumsum(sizes)[:-1])
        counts = groups.drop("agent", "step", "model", "cost_usd").iter_rows(named=True)
        for g, row, cost in zip(numbers, counts, costs, strict=True):
            total = self._counts.setdefault(g, {})
            for key, value in row.items():
                total[key] = total.get(key, 0) + int(value)
            self._costs.setdefault(g, []).append(cost)

    def _number(self, key: tuple[Any, int, Any]) -> int:
        if key not in self._numbers:
            self._numbers[key] = len(self._numbers)
        return self._numbers[key]

    def rows(self) -> list[dict[str, Any]]:
        """One row per (agent, step, model), sorted by them (nulls last)."""
        out = []
        for (agent, step, model), g in self._numbers.items():
            c = self._counts.get(g, {})
            priced = c.get("priced_calls", 0)
            costs = np.concatenate(self._costs.get(g, [np.zeros(0)]))
            mean = ExactSum()
            mean.add(costs)
            judged, correct = c.get("judged_runs", 0), c.get("correct_runs", 0)
            rate = m.rate(correct, judged)
            out.append(
                {
                    "agent": agent,
                    "step": step,
                    "model": model,
                    "calls": c.get("calls", 0),
                    "priced_calls": priced,
                    "mean_cost_usd": mean.mean(priced) if priced else None,
                    "p95_cost_usd": _quantile(_sorted(costs), 0.95),
                    "runs": c.get("runs", 0),
                    "judged_runs": judged,
                    "correct_runs": correct,
                    "correct_rate": rate["rate"],
                    "correct_rate_lo": rate["lo"],
                    "correct_rate_hi": rate["hi"],
                }
            )
        return sorted(
            out,
            key=lambda r: (
                r["agent"] is None,
                "" if r["agent"] is None else str(r["agent"]),
                r["step"],
                r["model"] is None,
                r["model"] or "",
            ),
        )
