"""The terminal summary of a report: short, plain, safe for any terminal."""

from __future__ import annotations

from typing import Any

from analyzer.textsafe import clip

__all__ = ["terminal_summary"]


def terminal_summary(analysis, summary: dict[str, Any]) -> list[str]:
    """Lines (at most 100 columns) summing up the ingest and the runs."""
    ing, runs = summary["ingest"], summary["runs"]
    lines = [
        f"agenttrace {summary['agenttrace_version']}",
        f"input    {ing['files']} files, {ing['records_read']:,} records, "
        f"{ing['spans_read']:,} spans read",
        f"kept     {ing['spans_kept']:,} spans; {ing['duplicate_spans']:,} duplicates dropped; "
        f"{ing['orphan_spans']:,} orphans",
    ]
    if ing["spans_quarantined"] or ing["records_quarantined"]:
        lines.append(
            f"QUARANTINED {ing['spans_quarantined']:,} spans and {ing['records_quarantined']:,} "
            "records (see quarantine.jsonl):"
        )
        for q in ing["quarantine"][:5]:
            lines.append(clip(f"  {q['file']} {q['position']}: {q['reason']}", 100))
    if ing["files_skipped"]:
        lines.append(f"skipped  {len(ing['files_skipped'])} non-trace files by name")
    tokens = "-"
    if runs["input_tokens"] is not None:
        tokens = f"{runs['input_tokens']:,} in / {runs['output_tokens'] or 0:,} out"
    lines += [
        f"runs     {runs['count']:,} ({runs['with_answer']:,} answered, "
        f"{runs['without_answer']:,} without answer)",
        f"calls    {runs['model_calls']:,} model calls, {runs['tool_calls']:,} tool calls "
        f"({runs['unexecuted_tool_calls']:,} requested but never run)",
        f"tokens   {tokens}",
        clip(f"models   {', '.join(runs['models']) or '-'}", 100),
        clip("agents   " + ", ".join(f"{a} ({n})" for a, n in runs["agents"].items()), 100),
    ]
    return lines + _findings_lines(summary)


def _findings_lines(summary: dict[str, Any]) -> list[str]:
    found = summary["findings"]
    packs = ", ".join(p["name"] for p in summary["packs"]) or "none"
    sev = found["by_severity"]
    lines = [
        "",
        clip(f"rules    {packs}", 100),
        f"findings {found['total']:,} ({', '.join(f'{n} {s}' for s, n in sev.items())})",
    ]
    rows = [r for r in found["by_rule"] if r["findings"]]
    if rows:
        lines.append(f"  {'RULE':<28} {'KIND':<22} {'SEVERITY':<9} {'FINDINGS':>8} {'RUNS':>10}")
        for r in rows:
            runs = f"{r['runs']}/{r['runs_applied']}"
            lines.append(
                f"  {clip(r['rule_id'], 28):<28} {clip(r['kind'], 22):<22} {r['severity']:<9} "
                f"{r['findings']:>8,} {runs:>10}"
            )
    unverifiable = [r for r in found["by_rule"] if r["runs_unverifiable"]]
    seen: set[tuple[str, str]] = set()
    for r in unverifiable:
        if (r["pack"], r["rule_id"]) not in seen:
            seen.add((r["pack"], r["rule_id"]))
            lines.append(clip(f"  {r['rule_id']}: {r['runs_unverifiable']} runs unverifiable", 100))
    if found["check_errors"]:
        lines.append(f"CHECK ERRORS {len(found['check_errors'])} (see summary.json):")
        for e in found["check_errors"][:5]:
            lines.append(clip(f"  {e['rule_id']} on run {e['run_id']}: {e['error']}", 100))
    return lines
