"""Gate files: limits on the deltas of a diff, and the verdict that sets the exit code.

A gate is YAML validated by ``schemas/gate.schema.json``: one key per metric of the diff, each
holding a limit (delta = candidate - baseline, in the metric's unit: rates as fractions 0-1,
score in points /100, cost in USD)::

    omission_rate: {max_increase: 0.0}          # no tool omitted more often
    cost_p95_usd: {max_increase_pct: 10}        # p95 cost at most 10 % above the baseline
    score: {min_gain: 8, no_regression_on: [automatic]}
    fail_on_unchecked: true                     # no rule of the candidate judged nothing

``score: {min_gain: 8, no_regression_on: [automatic]}`` is the protocol "+8 points or it does
not count, and nothing automatic gets worse": the mean score must gain at least 8 points and no
automatic criterion may regress. Every agenttrace rule is an automatic criterion (a
deterministic check, like the protocol's grep for forbidden markers), so ``automatic`` means
every rule of the packs; rule ids name a subset. A rule regresses when its failure rate (runs
with a finding / runs it judged) is higher on the candidate.

Limits judge the point estimates (the interval is shown beside them), unless the limit says
``significant: true``: a limit on the delta is then broken only when its 95 % interval
excludes no change (a 0 -> 13 % rate over a handful of runs, interval [-0.6, +29.7] points,
does not break ``max_increase: 0``), and ``min_gain`` also needs a significant gain.
``min_n: N`` judges only the keys with at least N runs (cases, pairs) on both sides, and lists
the others as not judged. A limit whose metric was not measured on both sides, or that has
nothing to judge, is broken: a gate never passes by checking nothing. Problems in the file
(schema, unknown rule ids or keys) are a `GateError` naming the file, the line and the path
inside it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from jsonschema import ValidationError

from analyzer.errors import GateError
from analyzer.metrics.compare import Diff, MetricDelta
from analyzer.metrics.fmt import amount_text, delta_text, label, value_text
from analyzer.pricing import parse_yaml, read_text, schema_problems, unknown_keys
from analyzer.yamlplace import problems_text, show

__all__ = ["AUTOMATIC", "Gate", "GateCheck", "judge", "load_gate"]

#: The name, in ``no_regression_on``, of every rule of the packs.
AUTOMATIC = "automatic"
#: The gate key that breaks when the candidate's rules checked nothing or less than they name.
UNCHECKED = "fail_on_unchecked"
#: Keys of a limit that only qualify the limits beside them.
_QUALIFIERS = frozenset({"significant", "min_n", "only"})
#: Float slack: a delta of 1e-15 is no increase.
_EPS = 1e-9


@dataclass(frozen=True)
class Gate:
    """A validated gate file."""

    limits: dict[str, dict[str, Any]]  # metric -> limit, in file order
    source: str
    sha256: str | None = None
    root: yaml.Node | None = None  # for line numbers in later problems


@dataclass(frozen=True)
class GateCheck:
    """One limit applied to one row of the diff."""

    metric: str
    key: str | None
    limit: str  # e.g. "max_increase"
    threshold: Any
    observed: float | None
    passed: bool
    message: str

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# --- loading -------------------------------------------------------------------------------------


def load_gate(path: str | Path) -> Gate:
    """The gate in ``path``; `GateError` lists every problem (file:line: path: what)."""
    shown = str(path)
    raw, text = read_text(path, "gate file", GateError)
    data, root = parse_yaml(text, shown, GateError)
    return gate_from_mapping(data, shown, root=root, sha256=hashlib.sha256(raw).hexdigest())


def gate_from_mapping(
    data: Any, source: str = "<gate>", *, root: yaml.Node | None = None, sha256: str | None = None
) -> Gate:
    """A gate from already-parsed data (same validation as `load_gate`)."""
    problems: list[tuple[tuple[str | int, ...], str]] = []
    if not isinstance(data, dict):
        problems.append(((), "a gate is a mapping of metric names to limits"))
    else:
        problems.extend(schema_problems(data, "gate.schema.json", _explain))
        for metric, limit in data.items():
            if isinstance(limit, dict) and limit and set(limit) <= _QUALIFIERS:
                problems.append(
                    ((metric,), f"no limit to apply: {', '.join(sorted(limit))} only qualify "
                     "the limits beside them")
                )  # fmt: skip
    _raise(problems, source, root)
    assert isinstance(data, dict)
    return Gate(limits=dict(data), source=source, sha256=sha256, root=root)


def _raise(
    problems: list[tuple[tuple[str | int, ...], str]], source: str, root: yaml.Node | None
) -> None:
    if problems:
        raise GateError(problems_text(problems, root, source, "gate file"))


def _explain(err: ValidationError) -> list[tuple[tuple[str | int, ...], str]]:
    where = tuple(err.path)
    value = err.instance
    sch = err.schema if isinstance(err.schema, dict) else {}
    if err.validator == "additionalProperties" and isinstance(value, dict):
        known = sorted(sch.get("properties", {}))
        return unknown_keys(where, value, known, "metric" if not where else "limit")
    if err.validator == "type":
        names = {
            "number": "a number",
            "object": "a mapping",
            "array": "a list",
            "string": "a text",
            "integer": "an integer",
        }
        types = (
            err.validator_value if isinstance(err.validator_value, list) else [err.validator_value]
        )
        wanted = " or ".join(names.get(str(t), str(t)) for t in types)
        return [(where, f"expected {wanted}, got {show(value)}")]
    if err.validator == "minProperties":
        return [(where, "an empty limit judges nothing; give at least one limit")]
    if err.validator == "minimum":
        return [(where, f"{show(value)} is negative; give a value >= 0")]
    if err.validator == "minItems":
        return [(where, "list at least one item")]
    if err.validator == "uniqueItems":
        return [(where, "lists an item more than once")]
    return [(where, err.message)]


# --- judging -------------------------------------------------------------------------------------

_ORDER = (
    "min_gain",
    "max_increase",
    "max_increase_pct",
    "max_decrease",
    "max_decrease_pct",
    "max",
    "min",
)


def judge(gate: Gate, diff: Diff) -> list[GateCheck]:
    """Every check of ``gate`` on ``diff``: broken ones first, then in file order."""
    problems: list[tuple[tuple[str | int, ...], str]] = []
    checks: list[GateCheck] = []
    for metric, limit in gate.limits.items():
        if metric == UNCHECKED:
            if limit:
                checks.append(_unchecked(diff))
            continue
        rows = diff.rows(metric)
        only = [str(k) for k in limit.get("only") or []]
        if only:
            keys = {r.key for r in rows}
            for i, key in enumerate(only):
                if key not in keys:
                    listing = ", ".join(sorted(str(k) for k in keys if k is not None)) or "none"
                    message = f"{metric} has no key {key!r} in this diff (keys: {listing})"
                    problems.append(((metric, "only", i), message))
            rows = [r for r in rows if r.key in set(only)]
        bounds = [(name, limit[name]) for name in _ORDER if name in limit]
        significant = bool(limit.get("significant"))
        min_n = limit.get("min_n")
        if min_n and bounds:
            few = [r for r in rows if min(r.n_baseline, r.n_candidate) < min_n]
            checks.extend(_too_few(r, bounds[0], min_n) for r in few)
            rows = [r for r in rows if r not in few]
        if bounds and not rows:
            with_n = f" with n >= {min_n} on both sides" if min_n else ""
            message = f"{metric}: nothing to judge in this diff{with_n}"
            checks.append(_broken(metric, None, *bounds[0], message))
        for row in rows:
            for name, threshold in bounds:
                checks.append(_check(row, name, threshold, significant=significant))
        if "no_regression_on" in limit:
            checks.extend(
                _no_regression(
                    diff, metric, limit["no_regression_on"], problems, significant=significant
                )
            )
    _raise(problems, gate.source, gate.root)
    return [c for c in checks if not c.passed] + [c for c in checks if c.passed]


def _broken(metric: str, key: str | None, limit: str, threshold: Any, message: str) -> GateCheck:
    """A limit broken for want of anything to judge (nothing observed)."""
    return GateCheck(metric, key, limit, threshold, None, False, message)


def _unchecked(diff: Diff) -> GateCheck:
    """Broken when a rule of the candidate applied to or judged no run, or names what no trace
    holds: its clean results prove nothing."""
    problems = diff.unchecked.get("candidate") or []
    names = sorted({f"{u['pack']}/{u['rule_id']}" for u in problems})
    message = (
        f"{UNCHECKED}: {len(problems)} problem(s) in the candidate's rules ({', '.join(names)})"
        if problems
        else f"{UNCHECKED}: every rule of the candidate judged runs"
    )
    return GateCheck(UNCHECKED, None, UNCHECKED, True, len(problems), not problems, message)


def _too_few(row: MetricDelta, bound: tuple[str, Any], min_n: int) -> GateCheck:
    """A key left out by ``min_n``: listed as passed, not judged."""
    name, threshold = bound
    return GateCheck(
        row.metric,
        row.key,
        name,
        threshold,
        None,
        True,
        f"{label(row)} not judged: n = {row.n_baseline:,} / {row.n_candidate:,} "
        f"(baseline / candidate), fewer than min_n {min_n:,}",
    )


def _significance(row: MetricDelta) -> str:
    if row.lo is None or row.hi is None:
        return "no interval to judge its significance"
    interval = f"[{delta_text(row.metric, row.lo)}, {delta_text(row.metric, row.hi)}]"
    if row.excludes_zero:
        return f"significant: 95 % interval {interval}"
    return f"not significant: 95 % interval {interval} includes no change"


def _check(
    row: MetricDelta, name: str, threshold: float, *, significant: bool = False
) -> GateCheck:
    """One limit on one row; with `significant`, a breach of a limit on the delta counts only
    when the row's interval excludes no change (min_gain: the gain must be significant)."""
    checked = _check_point(row, name, threshold)
    if not significant or name in ("max", "min"):
        return checked
    note = _significance(row)
    if name == "min_gain":
        ok = checked.passed and row.excludes_zero is True
    else:  # a breach that is not significant is no breach; without an interval, it stands
        ok = checked.passed or row.excludes_zero is False
    return dataclasses.replace(checked, passed=ok, message=f"{checked.message} ({note})")


def _check_point(row: MetricDelta, name: str, threshold: float) -> GateCheck:
    what = label(row)
    m = row.metric
    base, cand, delta = row.baseline, row.candidate, row.delta

    def result(observed: float | None, ok: bool, message: str) -> GateCheck:
        return GateCheck(m, row.key, name, threshold, observed, ok, f"{what} {message}")

    if name in ("max", "min"):
        if cand is None:
            return result(None, False, "is not measured on the candidate")
        ok = cand <= threshold + _EPS if name == "max" else cand >= threshold - _EPS
        word = "at most" if name == "max" else "at least"
        return result(
            cand, ok, f"is {value_text(m, cand)}; must be {word} {value_text(m, threshold)}"
        )
    if delta is None or base is None:
        return result(None, False, "is not measured on both sides: cannot be judged")
    moved = f"changed by {delta_text(m, delta, precise=True)}"
    if name == "min_gain":
        ok = delta >= threshold - _EPS
        return result(
            delta, ok, f"{moved}; must change by at least {delta_text(m, threshold, precise=True)}"
        )
    if name == "max_increase":
        ok = delta <= threshold + _EPS
        rule = (
            f"may increase by at most {amount_text(m, threshold)}"
            if threshold >= 0
            else f"must decrease by at least {amount_text(m, threshold)}"
        )
        return result(delta, ok, f"{moved}; {rule}")
    if name == "max_decrease":
        ok = -delta <= threshold + _EPS
        return result(delta, ok, f"{moved}; may decrease by at most {amount_text(m, threshold)}")
    # percentages of the baseline
    up = name == "max_increase_pct"
    word = "increase" if up else "decrease"
    if abs(base) < 1e-15:
        ok = (delta if up else -delta) <= _EPS
        return result(
            None,
            ok,
            f"went from {value_text(m, base)} to {value_text(m, cand)}; may {word} by at most "
            f"{threshold:g} % of the baseline",
        )
    pct = round(100.0 * delta / abs(base), 9)
    ok = (pct if up else -pct) <= threshold + _EPS
    return result(pct, ok, f"changed by {pct:+.4g} %; may {word} by at most {threshold:g} %")


def _no_regression(
    diff: Diff,
    metric: str,
    names: list[str],
    problems: list[tuple[tuple[str | int, ...], str]],
    *,
    significant: bool = False,
) -> list[GateCheck]:
    rules = {r.key: r for r in diff.rows("rule_rate")}
    chosen: list[tuple[str, str]] = []  # (rule id, the name that chose it)
    for i, name in enumerate(names):
        if name == AUTOMATIC:
            chosen.extend((k, name) for k in sorted(k for k in rules if k is not None))
        elif name in rules:
            chosen.append((name, name))
        else:
            listing = ", ".join(sorted(k for k in rules if k is not None)) or "none"
            message = (
                f"{name!r} is neither {AUTOMATIC!r} nor a rule of this diff (rules: {listing})"
            )
            problems.append(((metric, "no_regression_on", i), message))
    out = []
    seen: set[str] = set()
    for rule, why in chosen:
        if rule in seen:
            continue
        seen.add(rule)
        row = rules[rule]
        if row.delta is None:
            message = f"rule {rule}: failure rate not measured on both sides"
            out.append(_broken(metric, rule, "no_regression_on", why, message))
            continue
        ok = row.delta <= _EPS
        message = (
            f"rule {rule} failure rate went from {value_text('rule_rate', row.baseline)} "
            f"to {value_text('rule_rate', row.candidate)}; must not increase"
        )
        if significant and not ok:
            ok = row.excludes_zero is False
            message += f" ({_significance(row)})"
        out.append(GateCheck(metric, rule, "no_regression_on", why, row.delta, ok, message))
    if not rules and names:
        message = "no rule was applied: no automatic criterion to judge"
        out.append(_broken(metric, None, "no_regression_on", AUTOMATIC, message))
    return out
