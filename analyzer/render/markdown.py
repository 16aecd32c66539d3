"""`report --format markdown`: the summary as a CI step summary or pull-request comment.

GitHub-flavoured Markdown with no raw HTML: the headline (findings by severity, runs, what was
read and quarantined), rules that judged nothing, a table of every rule's failure rate with its
95% interval, the tails of cost, duration and tokens, and the runs with findings, worst first.
Every text taken from traces (case and run ids, rule names, tools) goes through
`analyzer.textsafe.markdown_safe`; the whole stays under GitHub's 64 KB, clipped with a count
of what was left out.
"""

from __future__ import annotations

from typing import Any

from analyzer.textsafe import clip_markdown, markdown_safe

__all__ = ["markdown_summary"]


def _pct(rate: float | None) -> str:
    return "–" if rate is None else f"{rate * 100:.1f}%"


def _interval(row: dict[str, Any]) -> str:
    if row.get("rate_lo") is None or row.get("rate_hi") is None:
        return ""
    return f" ({_pct(row['rate_lo'])}–{_pct(row['rate_hi'])})"


def _number(value: float | None, metric: str) -> str:
    if value is None:
        return "–"
    if metric.endswith("_usd"):
        return f"${value:,.6f}"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.1f}" if abs(value) >= 100 else f"{value:,.3f}"


def markdown_summary(summary: dict[str, Any], bad_runs=None, *, limit: int | None = None) -> str:
    """The Markdown of `summary` (`build_summary`'s document); `bad_runs`: the runs with a
    finding, worst first (`analyzer.render.terminal.finding_runs`), listed up to `limit`
    (None: all that fit in 64 KB)."""
    ing, runs, findings = summary["ingest"], summary["runs"], summary["findings"]
    severity = findings["by_severity"]
    lines = [
        "## agenttrace report",
        "",
        f"**{findings['total']:,} findings** ("
        + ", ".join(f"{severity.get(s, 0):,} {s}" for s in ("critical", "high", "medium", "low"))
        + f") over **{runs['count']:,} runs** ({runs['with_answer']:,} answered)",
        "",
        f"- read: {ing['files']:,} files, {ing['spans_read']:,} spans; kept "
        f"{ing['spans_kept']:,} ({ing['duplicate_spans']:,} duplicates dropped)",
    ]
    if ing.get("spans_outside_runs"):
        lines.append(
            f"- in no run: {ing['spans_outside_runs']:,} kept spans (no agent, model or tool "
            "span holds them)"
        )
    if ing["spans_quarantined"] or ing["records_quarantined"]:
        lines.append(
            f"- **quarantined**: {ing['records_quarantined']:,} records, "
            f"{ing['spans_quarantined']:,} spans (see quarantine.jsonl)"
        )
    errors = findings.get("check_errors") or []
    if errors:
        lines.append(f"- **check errors**: {len(errors):,} (a rule crashed on a run)")
    unchecked = summary["checks"]["unchecked"]
    if unchecked:
        lines += [
            "",
            f"**Unchecked rules: {len(unchecked):,}**: a clean result there proves nothing.",
        ]
        for u in unchecked:
            lines.append(
                f"- {markdown_safe(u['pack'])}/{markdown_safe(u['rule_id'])}: "
                f"{markdown_safe(u.get('detail') or u.get('problem') or '')}"
            )
    lines += _rule_table(summary)
    lines += _tails(summary)
    lines += _cost(summary)
    lines += _runs(bad_runs, limit)
    return clip_markdown("\n".join(lines) + "\n", whole="every run is in runs.parquet (--out)")


def _rule_table(summary: dict[str, Any]) -> list[str]:
    rates = summary["metrics"]["rule_rates"]
    if not rates:
        return []
    by_rule: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in summary["findings"]["by_rule"]:  # one row per finding kind of a rule
        by_rule.setdefault((row["pack"], row["rule_id"]), []).append(row)
    lines = [
        "",
        "| rule | findings | runs failed / judged | rate (95% interval) |",
        "|---|---:|---:|---|",
    ]
    for r in rates:
        by = by_rule.get((r["pack"], r["rule_id"]), [])
        found = sum(v["findings"] for v in by)
        sev = f" {by[0]['severity']}" if found else ""
        lines.append(
            f"| {markdown_safe(r['pack'])}/{markdown_safe(r['rule_id'])} | {found:,}{sev} | "
            f"{r['failed']:,} / {r['judged']:,} | {_pct(r['rate'])}{_interval(r)} |"
        )
    return lines


def _tails(summary: dict[str, Any]) -> list[str]:
    tails = summary["metrics"]["tails"]
    if not tails:
        return []
    lines = ["", "| per run | n | p50 | p95 | p99 | max |", "|---|---:|---:|---:|---:|---:|"]
    for t in tails:
        metric = t["metric"]
        cells = " | ".join(_number(t.get(q), metric) for q in ("p50", "p95", "p99", "max"))
        lines.append(f"| {markdown_safe(metric)} | {t['n']:,} | {cells} |")
    return lines


def _cost(summary: dict[str, Any]) -> list[str]:
    cost = summary["metrics"]["cost"]
    total = cost.get("total_usd")
    if total is None:
        return []
    per = cost.get("cost_per_correct_run_usd")
    correct = summary["metrics"]["methods"]["correct"]
    return [
        "",
        f"Cost: **${total:,.6f}** over {cost['priced_runs']:,} priced runs "
        f"({cost['unpriced_runs']:,} unpriced); per correct run "
        + (f"**${per:,.6f}**" if per is not None else "unknown")
        + f" ({cost['correct_runs']:,} of {cost['judged_runs']:,} runs correct: "
        f"{markdown_safe(correct)})",
    ]


def _runs(bad_runs, limit: int | None) -> list[str]:
    if bad_runs is None or bad_runs.is_empty():
        return []
    shown = bad_runs if limit is None else bad_runs.head(limit)
    more = "" if shown.height == bad_runs.height else f", the first {shown.height:,}"
    lines = [
        "",
        f"### Runs with findings: {bad_runs.height:,} (worst first{more})",
        "",
        "| case | run | score | findings | rules |",
        "|---|---|---:|---:|---|",
    ]
    for r in shown.iter_rows(named=True):
        score = "–" if r["score"] is None else f"{r['score']:.1f}"
        rules = ", ".join(markdown_safe(x) for x in r.get("failed_rules") or [])
        lines.append(
            f"| {markdown_safe(r['case_id'] or '–')} | {markdown_safe(r['run_id'])} | {score} | "
            f"{r['findings']:,} | {rules} |"
        )
    return lines
