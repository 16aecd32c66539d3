"""`report --junit FILE`: the rule results as JUnit XML, the format CI systems show as tests.

One ``testsuite`` per rule (named ``pack/rule``) and in it one ``testcase`` per run the rule
applies to (named by the run's case id and run id). A run with findings of the rule is a
``failure`` (its message the first finding; its text every finding with severity, tool,
argument and evidence span ids); a check that crashed on the run is an ``error``; a run the
rule could not judge (``not_applicable``, ``unverifiable``) is ``skipped`` with the reason.
Test cases are sorted by pack, rule, case id and run id: the same results give the same bytes.
The file validates against the JUnit schema of Jenkins' xUnit plugin (junit-10.xsd).
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import polars as pl

from analyzer.outfiles import replacing

__all__ = ["write_junit"]

#: Characters XML 1.0 cannot hold, even escaped: shown as ``\xNN`` / ``\uNNNN`` text.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_MESSAGE_CHARS = 300
_SKIPPED = ("not_applicable", "unverifiable")


def _text(value: Any) -> str:
    s = "" if value is None else str(value)
    return _NOT_XML.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), s)


def _attr(value: Any) -> str:
    return quoteattr(_text(value), {"\n": "&#10;", "\r": "&#13;", "\t": "&#9;"})


def _message(value: Any) -> str:
    s = " ".join(_text(value).split())
    return s if len(s) <= _MESSAGE_CHARS else s[: _MESSAGE_CHARS - 1] + "…"


def write_junit(analysis, path: Path) -> None:
    """Write the rule results of `analysis` to `path` as JUnit XML (see the module)."""
    evaluation = analysis.evaluation
    runs = analysis.runs.select("runs", ["run_id", "case_id"])
    coverage = (
        pl.DataFrame(schema={"run_id": pl.String, "rule_id": pl.String, "pack": pl.String})
        if evaluation is None
        else pl.from_arrow(evaluation.batches("coverage").read_all())
    )
    assert isinstance(coverage, pl.DataFrame)
    if coverage.is_empty():
        coverage = coverage.with_columns(status=pl.lit(None, pl.String), reason=pl.lit(None))
    cases = (
        coverage.join(runs, on="run_id", how="left")
        .with_columns(pl.col("case_id").fill_null(""))
        .sort("pack", "rule_id", "case_id", "run_id")
    )
    findings: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    errors = {}
    if evaluation is not None:
        for f in evaluation.findings.iter_rows(named=True):
            findings[f["pack"], f["rule_id"], f["run_id"]].append(f)
        errors = {(e.pack, e.rule_id, e.run_id): e for e in evaluation.errors}

    suites: dict[tuple[str, str], list[str]] = {}
    counts: dict[tuple[str, str], list[int]] = {}
    for row in cases.iter_rows(named=True):
        key = (row["pack"], row["rule_id"])
        xml, outcome = _testcase(row, findings.get((*key, row["run_id"]), []), errors)
        suites.setdefault(key, []).append(xml)
        tally = counts.setdefault(key, [0, 0, 0, 0])  # tests, failures, errors, skipped
        tally[0] += 1
        if outcome is not None:
            tally[("failure", "error", "skipped").index(outcome) + 1] += 1
    totals = [sum(c[i] for c in counts.values()) for i in range(4)]
    with replacing(path) as tmp, tmp.open("w", encoding="utf-8") as fh:
        fh.write('<?xml version="1.0" encoding="UTF-8"?>\n')
        fh.write(
            f'<testsuites name="agenttrace" tests="{totals[0]}" failures="{totals[1]}" '
            f'errors="{totals[2]}">\n'
        )
        for (pack, rule), testcases in suites.items():
            tests, failures, errs, skipped = counts[pack, rule]
            fh.write(
                f'  <testsuite name={_attr(f"{pack}/{rule}")} tests="{tests}" '
                f'failures="{failures}" errors="{errs}" skipped="{skipped}">\n'
            )
            fh.writelines(testcases)
            fh.write("  </testsuite>\n")
        fh.write("</testsuites>\n")


def _testcase(row: dict, found: list[dict], errors: dict) -> tuple[str, str | None]:
    """One ``testcase`` element and its outcome (failure, error, skipped or None: passed)."""
    run_id, case_id = row["run_id"], row["case_id"]
    name = f"{case_id} (run {run_id})" if case_id else f"run {run_id}"
    classname = f"{row['pack']}.{row['rule_id']}"
    head = f"    <testcase name={_attr(name)} classname={_attr(classname)}"
    error = errors.get((row["pack"], row["rule_id"], run_id))
    if found:
        lines = [
            f"[{f['severity']}] {f['kind']}: {f['detail']}"
            + (f" (tool {f['tool']})" if f["tool"] else "")
            + (f" (argument {f['argument']})" if f["argument"] else "")
            + (f" [spans {', '.join(f['span_ids'])}]" if f["span_ids"] else "")
            for f in found
        ]
        first = found[0]
        body = (
            f"<failure type={_attr(first['kind'])} "
            f"message={_attr(_message(first['detail']))}>{escape(_text(chr(10).join(lines)))}"
            "</failure>"
        )
        return f"{head}>{body}</testcase>\n", "failure"
    if error is not None or row["status"] == "error":
        text = error.error if error is not None else row["reason"]
        where = f" at {error.location}" if error is not None and error.location else ""
        detail = escape(_text(f"{text}{where}"))
        body = f'<error type="check error" message={_attr(_message(text))}>{detail}</error>'
        return f"{head}>{body}</testcase>\n", "error"
    if row["status"] in _SKIPPED:
        reason = f"{row['status']}: {row['reason']}" if row["reason"] else row["status"]
        return f"{head}><skipped message={_attr(_message(reason))}/></testcase>\n", "skipped"
    if row["status"] == "partial" and row["reason"]:
        note = escape(_text(f"partial: {row['reason']}"))
        return f"{head}><system-out>{note}</system-out></testcase>\n", None
    return f"{head}/>\n", None
