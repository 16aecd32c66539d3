"""The terminal summary of a report: short, plain, safe for any terminal."""

from __future__ import annotations

from typing import Any

from analyzer.ingest.accounting import warning_lines
from analyzer.textsafe import clip, terminal_safe

__all__ = ["WIDTH", "finding_runs", "finding_runs_lines", "run_id_cells", "terminal_summary"]

#: No line is longer than this (in characters, colour codes left out).
WIDTH = 100
#: Run ids up to this width are printed whole (TRACE:SPAN ids have 49 characters); a longer
#: --run-key value is cut.
RUN_ID_WIDTH = 64
_RED, _YELLOW, _BOLD, _RESET = "\x1b[31m", "\x1b[33m", "\x1b[1m", "\x1b[0m"
#: Wrong label fields listed in the terminal (all in summary.json).
_WRONG_SHOWN = 20


def terminal_summary(summary: dict[str, Any], *, color: bool = False) -> list[str]:
    """Lines (at most 100 columns) summing up the ingest, the runs, the findings and metrics.

    ``color`` adds ANSI colours (pass it only when printing to a terminal): section names in
    bold, blocking findings in red, quarantines in yellow. Lines are measured without them.
    """
    lines = _plain_lines(summary)
    return [_paint(line) for line in lines] if color else lines


def _paint(line: str) -> str:
    head = line[:8]
    if line.startswith("QUARANTINED") or line.startswith("CHECK ERRORS"):
        return f"{_YELLOW}{line}{_RESET}"
    if line.startswith("findings ") and not line.startswith("findings 0 "):
        return f"{_RED}{line}{_RESET}"
    if head.strip() and not head.startswith(" ") and head == head.lower():
        return f"{_BOLD}{head}{_RESET}{line[8:]}"
    return line


def _plain_lines(summary: dict[str, Any]) -> list[str]:
    ing, runs = summary["ingest"], summary["runs"]
    lines = [
        f"agenttrace {summary['agenttrace_version']}",
        f"input    {ing['files']} files, {ing['records_read']:,} records, "
        f"{ing['spans_read']:,} spans read",
        f"kept     {ing['spans_kept']:,} spans; {ing['duplicate_spans']:,} duplicates dropped; "
        f"{ing['orphan_spans']:,} orphans",
    ]
    if ing.get("spans_outside_runs"):
        lines.append(
            f"no run   {ing['spans_outside_runs']:,} kept spans in no run (no agent, model or tool "
            "span holds them)"
        )
    if ing["spans_quarantined"] or ing["records_quarantined"]:
        lines.append(
            f"QUARANTINED {ing['spans_quarantined']:,} spans and {ing['records_quarantined']:,} "
            "records (see quarantine.jsonl):"
        )
        for q in ing["quarantine"][:5]:
            lines.append(clip(f"  {q['file']} {q['position']}: {q['reason']}", 100))
    lines += warning_lines(ing.get("warnings", []))
    if ing["files_skipped"]:
        lines.append(f"skipped  {len(ing['files_skipped'])} non-trace files by name")
    tokens = "-"
    if runs["input_tokens"] is not None:
        tokens = f"{runs['input_tokens']:,} in / {runs['output_tokens'] or 0:,} out"
    lines += [
        f"runs     {runs['count']:,} ({runs['with_answer']:,} answered, "
        f"{runs['without_answer']:,} without answer)",
        f"calls    {runs['model_calls']:,} model calls, {runs['tool_calls']:,} tool calls "
        f"({runs['unexecuted_tool_calls']:,} requested, no tool span)",
        f"tokens   {tokens}",
        clip(f"models   {', '.join(runs['models']) or '-'}", 100),
        clip("agents   " + ", ".join(f"{a} ({n})" for a, n in runs["agents"].items()), 100),
    ]
    return lines + _findings_lines(summary) + _metrics_lines(summary)


def rule_name(summary: dict[str, Any]):
    """A function (pack, rule_id) -> how to name the rule: its id, or ``pack/id`` where two
    packs of the summary have a rule of that id."""
    rules = (summary.get("checks") or {}).get("rules") or []
    count: dict[str, int] = {}
    for r in rules:
        count[r["rule_id"]] = count.get(r["rule_id"], 0) + 1
    return lambda pack, rule_id: f"{pack}/{rule_id}" if count.get(rule_id, 0) > 1 else rule_id


def _findings_lines(summary: dict[str, Any]) -> list[str]:
    name = rule_name(summary)
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
                f"  {clip(name(r['pack'], r['rule_id']), 28):<28} {clip(r['kind'], 22):<22} "
                f"{r['severity']:<9} {r['findings']:>8,} {runs:>10}"
            )
    checks = summary.get("checks") or {"rules": [], "unchecked": []}
    for r in checks["rules"]:
        if r["runs_unverifiable"]:
            reason = next((x["reason"] for x in r["reasons"] if x["status"] == "unverifiable"), "")
            lines.append(
                clip(
                    f"  {name(r['pack'], r['rule_id'])}: judged {r['runs_judged']:,} of "
                    f"{r['runs_applied']:,} runs; "
                    f"{r['runs_unverifiable']:,} unverifiable" + (f" ({reason})" if reason else ""),
                    100,
                )
            )
    if checks["unchecked"]:
        lines.append(
            f"UNCHECKED {len(checks['unchecked'])} (a clean result here proves nothing; "
            "--fail-on-unchecked exits 1):"
        )
        for u in checks["unchecked"]:
            lines.append(clip(f"  {name(u['pack'], u['rule_id'])}: {u['detail']}", 100))
    if found["check_errors"]:
        lines.append(f"CHECK ERRORS {len(found['check_errors'])} (see summary.json):")
        for e in found["check_errors"][:5]:
            lines.append(
                clip(f"  {name(e['pack'], e['rule_id'])} on run {e['run_id']}: {e['error']}", 100)
            )
    return lines


# --- headline metrics ----------------------------------------------------------------------------


def _usd(value: float | None) -> str:
    if value is None:
        return "unknown"
    if value == 0:
        return "$0"
    if value >= 1:
        return f"${value:,.2f}"
    if value >= 0.01:
        return f"${value:.4f}"
    return f"${value:.6f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _interval(lo: float | None, hi: float | None, fmt=_pct) -> str:
    if lo is None or hi is None:
        return "(n too small for an interval)"
    return f"[{fmt(lo)}, {fmt(hi)}]"


def _rate(r: dict[str, Any]) -> str:
    """``k/n rate [lo, hi]`` of a summary rate object."""
    if not r["n"]:
        return "-"
    return f"{r['k']}/{r['n']} {_pct(r['rate'])} {_interval(r['lo'], r['hi'])}"


def _metrics_lines(summary: dict[str, Any]) -> list[str]:
    metrics = summary.get("metrics")
    if not metrics:
        return []
    cost = metrics["cost"]
    tail = next((t for t in metrics["tails"] if t["metric"] == "cost_usd"), None)
    lines = [""]
    lines.append(
        f"cost     {_usd(cost['total_usd'])} over {cost['priced_runs']:,} priced runs "
        f"({cost['unpriced_runs']:,} unpriced); retries {_usd(cost['retry_cost_usd'])}"
    )
    for model in cost["unpriced_models"][:3]:
        if not model["model_calls"]:  # runs that recorded no model call
            lines.append(f"  unpriced: {model['reason']} in {model['runs']:,} of the runs")
            continue
        lines.append(
            clip(
                f"  unpriced {model['model'] or '(no model name)'}: {model['reason']}, "
                f"{model['model_calls']:,} calls, {model['input_tokens'] or 0:,} in / "
                f"{model['output_tokens'] or 0:,} out tokens",
                WIDTH,
            )
        )
    if tail is not None and tail["n"]:
        for q in ("p50", "p95"):
            lines.append(
                f"  per run {q} {_usd(tail[q])} "
                f"{_interval(tail[q + '_lo'], tail[q + '_hi'], _usd)} (n = {tail['n']})"
            )
    what = (
        "all label fields right"
        if cost["correct_by"] == "labels"
        else f"no finding at or above {cost['correct_threshold']}"
    )
    lines.append(
        f"  per correct run {_usd(cost['cost_per_correct_run_usd'])} "
        f"({cost['correct_runs']:,} of {cost['judged_runs']:,} runs: {what})"
    )
    routing = metrics.get("routing")
    if routing is not None:
        head = f"pick {routing['pick']}" if routing["pick"] is not None else "no pick"
        lines.append(
            clip(
                f"routing  {head} by model family (correct: {what}; "
                f"{routing['min_runs']}+ judged runs)",
                WIDTH,
            )
        )
        lines.append(clip(f"  {routing['reason']}", WIDTH))
        for family in routing["families"][:6]:
            rate = (
                f"{family['correct_runs']}/{family['judged_runs']} correct"
                if family["judged_runs"]
                else "none judged"
            )
            mean = _usd(family["mean_cost_usd"]) if family["mean_cost_usd"] is not None else "-"
            note = family["not_eligible_because"] or ""
            lines.append(
                clip(
                    f"  {clip(family['model_family'] or '(no model)', 28):<28} {rate:>16}  "
                    f"mean {mean}/run  {note}".rstrip(),
                    WIDTH,
                )
            )
    omissions = metrics["omission_rates"]
    if omissions:
        lines.append("")
        lines.append("omission per required tool: runs without it before the answer / runs judged")
        lines.append(f"  {'TOOL':<38} {'OMITTED':>11} {'RATE':>7}  95% INTERVAL")
        for row in omissions:
            ratio = f"{row['omitted_runs']}/{row['required_runs']}"
            lines.append(
                f"  {clip(row['tool'], 38):<38} {ratio:>11} {_pct(row['rate']):>7}  "
                f"{_interval(row['rate_lo'], row['rate_hi'])}"
            )
    trials = metrics["trials"]
    if trials["cases_with_trials"]:
        hats = ", ".join(
            f"pass^{h['k']} {h['value']:.3f} ({h['cases']} cases)"
            for h in trials["pass_hat_k"]
            if h["value"] is not None
        )
        lines.append("")
        lines.append(
            clip(
                f"trials   {trials['cases_with_trials']:,} cases with 2+ runs "
                f"({trials['runs']:,} runs); {hats}",
                WIDTH,
            )
        )
        dis = trials["disagreement"]
        lines.append(
            clip(
                f"  trials disagree: answers {_rate(dis['answers'])}; "
                f"tool sequences {_rate(dis['trajectories'])}",
                WIDTH,
            )
        )
    return lines + _labels_lines(summary.get("labels"))


def _labels_lines(labels: dict[str, Any] | None) -> list[str]:
    if not labels:
        return []
    lines = [
        "",
        clip(
            f"labels   {labels['cases']:,} cases, {labels['matched_runs']:,} runs matched "
            f"({len(labels['unmatched_cases']):,} cases without a run, "
            f"{labels['unlabelled_runs']:,} runs without a label)",
            WIDTH,
        ),
        f"  all fields correct    {_rate(labels['all_fields_correct'])}",
    ]
    if labels["critical_fields"]:
        lines.append(f"  all critical correct  {_rate(labels['all_critical_correct'])}")
    for row in labels["fields"]:
        name = clip(row["field"], 20) + (" *" if row["critical"] else "")
        ratio = f"{row['correct']}/{row['runs']}"
        lines.append(
            f"  {name:<22} {ratio:>9} {_pct(row['rate']):>7}  "
            f"{_interval(row['rate_lo'], row['rate_hi'])}  ({row['missing']} missing)"
        )
    wrong = labels.get("wrong_fields") or []
    if wrong:
        lines.append(f"  fields wrong or missing, by case ({len(wrong)}; expected -> answered):")
        for w in wrong[:_WRONG_SHOWN]:
            actual = "(missing)" if w["actual"] is None else repr(w["actual"])
            lines.append(
                clip(
                    f"    {w['case_id'] or w['run_id']}  {w['field']}: "
                    f"{w['expected']!r} -> {actual}",
                    WIDTH,
                )
            )
        if len(wrong) > _WRONG_SHOWN:
            lines.append(f"    ... {len(wrong) - _WRONG_SHOWN} more in summary.json")
    tools = labels["tools"]
    if tools["runs"]:
        wrong = tools["wrong_tool"]
        lines.append(f"  tool recall           {_rate(tools['recall'])}")
        lines.append(
            clip(
                f"  wrong tool            {wrong['k']}/{wrong['n']} runs ({wrong['calls']} calls"
                + (f": {', '.join(wrong['tools'])})" if wrong["tools"] else ")"),
                WIDTH,
            )
        )
    if tools["argument_precision"]["n"]:
        lines.append(f"  argument precision    {_rate(tools['argument_precision'])}")
    if labels["critical_fields"]:
        lines.append("  (* critical field)")
    return lines


# --- where: the runs behind the findings ---------------------------------------------------------


def finding_runs(runs):
    """The runs with a finding, worst first (lowest score, most findings, run id).

    `runs`: a frame with run_id, case_id, score, findings, failed_rules (the summary's facts).
    """
    import polars as pl

    if "findings" not in runs.columns:
        return runs.clear()
    return runs.filter(pl.col("findings") > 0).sort(
        ["score", "findings", "run_id"], descending=[False, True, False], nulls_last=True
    )


def run_id_cells(run_ids: list[str], least: int) -> tuple[list[str], int]:
    """Run ids as the cells of a column at least `least` wide: terminal-safe and whole (one
    is what `show` takes), up to `RUN_ID_WIDTH`, past which a --run-key value is cut; and the
    column's width."""
    safe = [terminal_safe(r) for r in run_ids]
    width = min(max([least, *map(len, safe)]), RUN_ID_WIDTH)
    return [f"{clip(r, width):<{width}}" for r in safe], width


def finding_runs_lines(bad, limit: int | None) -> list[str]:
    """`finding_runs` as lines: case, run, score, findings and the rules they broke; the
    first `limit` (None: all)."""
    if bad.is_empty():
        return []
    shown = bad if limit is None else bad.head(limit)
    more = "" if shown.height == bad.height else f"; the first {shown.height}, --verbose for all"
    run_ids, width = run_id_cells(shown.get_column("run_id").to_list(), 34)
    lines = [
        "",
        f"runs with findings {bad.height:,} (worst first{more}):",
        f"  {'CASE':<16} {'RUN':<{width}} {'SCORE':>6} {'FINDINGS':>8}  RULES",
    ]
    for run_id, r in zip(run_ids, shown.iter_rows(named=True), strict=True):
        score = "-" if r["score"] is None else f"{r['score']:.1f}"
        rules = ", ".join(r.get("failed_rules") or [])
        lines.append(
            clip(
                f"  {clip(r['case_id'] or '-', 16):<16} {run_id} {score:>6} "
                f"{r['findings']:>8,}  {rules}",
                WIDTH,
            )
        )
    return lines
