"""The rule types (REGISTRY: every module here that defines one) and the runner that applies
rule packs to a RunSet.

Each rule checks all the runs it applies to at once, column-wise (or run by run:
`Check.check_run`); a rule that crashes is re-run on halves of its runs until the runs that
make it crash are found, and each of those gets a `CheckError` (kept apart from findings)
while the others keep their findings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import polars as pl

from analyzer.checks.base import (
    CHECK_SCHEMA,
    COVERAGE_STATUSES,
    Check,
    CheckContext,
    CheckError,
    Pack,
    RunFinding,
    When,
    _Shared,
    empty_findings,
    rule_types,
)
from analyzer.checks.plugin import PluginCheck, PluginTimeout, guarded, plugin_seconds
from analyzer.checks.retries import RetryScan, all_retries
from analyzer.runs import RunTables

if TYPE_CHECKING:
    from analyzer.runs import RunSet

__all__ = [
    "COVERAGE_SCHEMA",
    "FINDING_SCHEMA",
    "REGISTRY",
    "Check",
    "CheckContext",
    "CheckError",
    "Evaluation",
    "RunFinding",
    "evaluate",
]

#: Rule type name (the ``type:`` of a pack) -> its class (`rule_types`). Plugins are not listed.
REGISTRY: dict[str, type[Check]] = rule_types()

#: The rule classes whose code is agenttrace's (any other is a plugin deriving from Check).
_BUILT_IN = frozenset([*REGISTRY.values(), PluginCheck])

#: Columns of the findings frame, in order (findings.jsonl / findings.parquet).
FINDING_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String(),
    "rule_id": pl.String(),
    "kind": pl.String(),
    "severity": pl.String(),
    "tool": pl.String(),
    "argument": pl.String(),
    "detail": pl.String(),
    "span_ids": pl.List(pl.String()),
    "case_id": pl.String(),
    "pack": pl.String(),
}

#: One row per (rule, run the rule applies to): whether the rule could judge the run.
COVERAGE_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String(),
    "rule_id": pl.String(),
    "pack": pl.String(),
    "status": pl.String(),  # one of COVERAGE_STATUSES
    "reason": pl.String(),
}

#: Check calls a rule may spend finding the runs it crashes on before giving up isolating.
_ISOLATION_BUDGET = 256


@dataclass
class Evaluation(RunTables):
    """What applying rule packs to a RunSet gives."""

    findings: pl.DataFrame  # FINDING_SCHEMA, sorted by run, rule, position in the run
    errors: list[CheckError]  # sorted by run, rule
    coverage: pl.DataFrame  # COVERAGE_SCHEMA, sorted by run, rule


def evaluate(
    packs: Sequence[Pack], runset: RunSet, *, retries: RetryScan | None = None
) -> Evaluation:
    """Findings, check errors and per-run coverage of every rule of ``packs``.

    ``retries``: `scan_retries` of the runset's steps, when the caller already has it.
    """
    shared = _Shared(runset, None if retries is None else {all_retries: retries})
    runs = runset.runs
    selections: dict[When | None, pl.DataFrame] = {}
    findings: list[pl.DataFrame] = []
    errors: list[CheckError] = []
    coverage: list[pl.DataFrame] = []
    for pack in packs:
        for rule in pack.rules:
            if rule.when not in selections:
                chosen = runs if rule.when is None else runs.filter(rule.when.mask())
                selections[rule.when] = chosen.select("run_id").sort("run_id")
            ids = selections[rule.when]
            if ids.is_empty():
                continue
            found, marks, errs = _run_rule(rule, pack, shared, ids, everything=rule.when is None)
            tag = [pl.lit(rule.id).alias("rule_id"), pl.lit(pack.name).alias("pack")]
            findings.append(found.with_columns(*tag, pl.lit(rule.severity).alias("severity")))
            errors.extend(errs)
            coverage.append(_coverage(ids, marks, errs).with_columns(*tag))
    return Evaluation(
        findings=_final_findings(findings, runs),
        errors=sorted(errors, key=lambda e: (e.run_id, e.rule_id, e.pack)),
        coverage=(
            pl.concat(coverage).select(list(COVERAGE_SCHEMA)).sort("run_id", "rule_id", "pack")
            if coverage
            else pl.DataFrame(schema=COVERAGE_SCHEMA)
        ),
    )


def _run_rule(
    rule: Check, pack: Pack, shared: _Shared, ids: pl.DataFrame, *, everything: bool
) -> tuple[pl.DataFrame, list[pl.DataFrame], list[CheckError]]:
    """Apply one rule; isolate the runs it crashes on by bisection."""
    outputs: list[pl.DataFrame] = []
    marks: list[pl.DataFrame] = []
    errors: list[CheckError] = []
    queue: list[pl.DataFrame | None] = [None if everything else ids]
    spent = 0
    plugin = type(rule) not in _BUILT_IN
    while queue:
        chunk = queue.pop(0)
        spent += 1
        row_errors: list[CheckError] = []
        ctx = CheckContext(
            shared,
            chunk,
            tools=pack.tools,
            on_error=lambda run_id, exc, sink=row_errors: sink.append(
                CheckError.from_exception(run_id, rule.id, pack.name, exc)
            ),
        )
        try:
            if plugin:  # plugin code: bounded in time, cannot end the process
                checked = guarded(lambda ctx=ctx: rule.check(ctx), plugin_seconds(), rule.type)
            else:
                checked = rule.check(ctx)
            out = _conform(checked, ids if chunk is None else chunk)
        except Exception as exc:
            members = ids if chunk is None else chunk
            if (
                members.height == 1
                or spent + len(queue) >= _ISOLATION_BUDGET
                or isinstance(exc, PluginTimeout)  # another try would time out again
            ):
                n = members.height
                note = f" [failed on a batch of {n} runs, not isolated further]" if n > 1 else ""
                for run_id in members.get_column("run_id"):
                    err = CheckError.from_exception(run_id, rule.id, pack.name, exc)
                    errors.append(replace(err, error=err.error + note))
            else:
                half = members.height // 2
                queue += [members.slice(0, half), members.slice(half)]
            continue
        outputs.append(out)
        marks.extend(ctx.marks)
        errors.extend(row_errors)
    found = pl.concat(outputs) if outputs else empty_findings()
    if errors:
        # A run that errored inside a per-run loop keeps no findings of this rule.
        failed = pl.DataFrame({"run_id": [e.run_id for e in errors]}, schema={"run_id": pl.String})
        found = found.join(failed, on="run_id", how="anti")
    return found, marks, errors


def _conform(out: Any, ids: pl.DataFrame) -> pl.DataFrame:
    """A check's output (a frame, or a list of them) as CHECK_SCHEMA, limited to the runs it
    was given."""
    frames = []
    for part in out if isinstance(out, list | tuple) else [out]:
        if not isinstance(part, pl.DataFrame):
            raise TypeError(f"check returned {type(part).__name__}, not a polars DataFrame")
        if "_pos" not in part.columns:
            part = part.with_columns(_pos=pl.lit(0, pl.Int64))
        missing = [c for c in CHECK_SCHEMA if c not in part.columns]
        if missing:
            raise ValueError(f"check output lacks columns {missing}")
        frames.append(part.select(list(CHECK_SCHEMA)).cast(CHECK_SCHEMA))  # type: ignore[arg-type]
    found = pl.concat(frames) if frames else empty_findings()
    return found.join(ids, on="run_id", how="semi")


def _coverage(
    ids: pl.DataFrame, marks: list[pl.DataFrame], errors: list[CheckError]
) -> pl.DataFrame:
    rank = {s: i for i, s in enumerate(COVERAGE_STATUSES)}
    rows = [*marks]
    if errors:
        rows.append(
            pl.DataFrame(
                {
                    "run_id": [e.run_id for e in errors],
                    "status": ["error"] * len(errors),
                    "reason": [e.error for e in errors],
                }
            )
        )
    if not rows:
        return ids.with_columns(status=pl.lit("checked"), reason=pl.lit(None, pl.String))
    top = (  # each run's marks of its gravest status
        pl.concat(rows)
        .with_columns(_rank=pl.col("status").replace_strict(rank, return_dtype=pl.Int8))
        .filter(pl.col("_rank") == pl.col("_rank").max().over("run_id"))
    )
    reasons = top.group_by("run_id").agg(
        pl.col("status").first(), pl.col("reason").unique().sort().str.join("; ")
    )
    return ids.join(reasons, on="run_id", how="left").with_columns(
        pl.col("status").fill_null("checked")
    )


def _final_findings(parts: list[pl.DataFrame], runs: pl.DataFrame) -> pl.DataFrame:
    if not parts:
        return pl.DataFrame(schema=FINDING_SCHEMA)
    found = pl.concat(parts, how="vertical")
    found = found.join(runs.select("run_id", "case_id"), on="run_id", how="left")
    found = found.sort(
        ["run_id", "rule_id", "pack", "_pos", "kind", "tool", "argument", "detail"],
        nulls_last=True,
    )
    return found.select(list(FINDING_SCHEMA)).cast(FINDING_SCHEMA)  # type: ignore[arg-type]
