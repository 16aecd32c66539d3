"""A diff as a terminal table, JSON, Markdown (for a pull request) and a self-contained HTML page.

Every text that comes from the traces (paths, agent and model names, tool names, rule ids) is
made safe for its medium (`analyzer.textsafe`): `clip` on a terminal, `json_safe` in JSON (no
raw control or bidi character), `markdown_safe` in Markdown (escaped, no live mention or
link; the whole clipped to GitHub's 64 KB), escaped in HTML.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

from analyzer.metrics.compare import Diff
from analyzer.metrics.fmt import delta_text, interval_text, value_text
from analyzer.metrics.fmt import label as _label
from analyzer.metrics.gate import Gate, GateCheck
from analyzer.metrics.intervals import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from analyzer.textsafe import clip, clip_markdown, json_safe, markdown_safe, terminal_safe

__all__ = [
    "DIFF_VERSION",
    "render_html",
    "render_json",
    "render_markdown",
    "render_table",
]

#: Version of the JSON document `render_json` writes.
DIFF_VERSION = 1
_WIDTH = 100
_DASH = "-"

_CHANGE_SHORT = {
    "better": "better",
    "worse": "WORSE",
    "no significant change": "-",
    "not measured": "n/a",
}
_METHODS = (
    "Delta = candidate - baseline; 95 % intervals. Rates: Newcombe's hybrid score interval "
    "(method 10 of Newcombe 1998) for two samples, its paired version (method 10 of Newcombe "
    "1998, paired data) for runs paired one to one by case id; scores, costs, tokens, model "
    f"calls and pass^k: percentile bootstrap ({BOOTSTRAP_RESAMPLES} resamples, numpy "
    f"default_rng({BOOTSTRAP_SEED})), paired over cases when the runs are paired. A change is "
    "significant when its interval excludes 0."
)
_CORRECT = {
    "findings": "A run is correct with no finding at or above high.",
    "labels": "A run is correct when all its label fields are right.",
}


def _methods(diff: Diff) -> str:
    return f"{_METHODS} {_CORRECT[diff.correct_by]}"


_GROUPS = {
    "omission_rate": "omission_rate (per tool)",
    "kind_rate": "kind_rate (per finding kind)",
    "rule_rate": "rule_rate (per rule)",
    "pass_hat_k": "pass_hat_k (pass^k over cases)",
}


def _gate_summary(checks: Sequence[GateCheck]) -> tuple[bool, int]:
    broken = sum(1 for c in checks if not c.passed)
    return broken == 0, broken


def _config_lines(diff: Diff) -> list[tuple[str, bool, str, str]]:
    """(part, changed, baseline, candidate) for the configuration, as plain text."""
    b, c = diff.baseline, diff.candidate

    def hashes(side: dict[str, Any]) -> str:
        return ", ".join(f"{h['config_hash']} ({h['runs']})" for h in side["config_hashes"])

    def packs(side: dict[str, Any]) -> str:
        return ", ".join(
            f"{p['name']} {(p.get('sha256') or '')[:12]}".strip() for p in side["packs"]
        )

    def prices(side: dict[str, Any]) -> str:
        p = side.get("prices") or {}
        return f"{p.get('source', _DASH)} (as of {p.get('as_of', _DASH)})" if p else _DASH

    def listing(side: dict[str, Any], key: str) -> str:
        return ", ".join(str(v) for v in side[key]) or _DASH

    def definitions(side: dict[str, Any], key: str) -> str:
        return side.get(key) or _DASH

    parts = (
        ("config hashes", "config_hashes", lambda side, _: hashes(side)),
        ("agents", "agents", listing),
        ("models", "models", listing),
        ("temperatures", "temperatures", listing),
        ("tools", "tools", listing),
        ("tool definitions", "tool_definitions_sha256", definitions),
        ("rule packs", "packs", lambda side, _: packs(side)),
        ("prices", "prices", lambda side, _: prices(side)),
    )
    return [
        (part, key in diff.config_changes, show(b, key), show(c, key)) for part, key, show in parts
    ]


def _hash_counts(side: dict[str, Any]) -> str:
    n = len(side["config_hashes"])
    top = side["config_hashes"][0]["config_hash"] if n else _DASH
    return f"{n} distinct (most runs: {top})" if n > 1 else top


def _pairing_text(diff: Diff) -> str:
    p = diff.pairing
    left = p["runs_left_out"]
    if p["mode"] == "paired":
        each = "one run per case" if p["one_run_per_case"] else "several runs in some cases"
        text = f"paired by case id: {p['cases']} cases ({each})"
    else:
        text = "two samples (runs without a case id, or no case on both sides)"
    if left["baseline"] or left["candidate"]:
        text += f"; left out: {left['baseline']} + {left['candidate']} runs (case on one side)"
    return text


# --- terminal ------------------------------------------------------------------------------------


def render_table(diff: Diff, checks: Sequence[GateCheck] | None = None) -> list[str]:
    """Lines of at most 100 columns: sides, configuration, gate verdict, metric table."""
    b, c = diff.baseline, diff.candidate
    lines = [
        clip(f"baseline   {b['source']} ({b['kind']}, {b['runs_compared']} runs compared)", _WIDTH),
        clip(f"candidate  {c['source']} ({c['kind']}, {c['runs_compared']} runs compared)", _WIDTH),
        clip(f"pairing    {_pairing_text(diff)}", _WIDTH),
        clip(
            f"changed    {', '.join(diff.config_changes) or 'nothing in the configuration'}", _WIDTH
        ),
    ]
    for part, changed, vb, vc in _config_lines(diff):
        if changed:
            if part == "config hashes":
                vb, vc = _hash_counts(b), _hash_counts(c)
            lines.append(clip(f"  {part:<13} {vb} -> {vc}", _WIDTH))
    if checks is not None:
        ok, broken = _gate_summary(checks)
        lines.append("")
        lines.append(
            f"GATE {'PASSED' if ok else 'FAILED'}: {broken} of {len(checks)} limits broken"
        )
        for check in checks:
            mark = "ok    " if check.passed else "BROKEN"
            lines.append(clip(f"  {mark} {check.message}", _WIDTH))
    lines.append("")
    lines.append(
        f"{'METRIC':<34} {'BASELINE':>10} {'CANDIDATE':>10} {'DELTA':>10} "
        f"{'95% CI OF DELTA':>22} CHANGE"
    )
    group = None
    for row in diff.metrics:
        if row.key is not None and row.metric != group:
            lines.append(_GROUPS.get(row.metric, row.metric))
        group = row.metric if row.key is not None else None
        label = _label(row) if row.key is None else f"  {row.key}"
        if row.metric == "pass_hat_k":
            label = f"  k={row.key}"
        lines.append(
            f"{clip(label, 34):<34} {value_text(row.metric, row.baseline):>10} "
            f"{value_text(row.metric, row.candidate):>10} {delta_text(row.metric, row.delta):>10} "
            f"{interval_text(row):>22} {_CHANGE_SHORT[row.change]}"
        )
    lines.append("")
    lines.append("CHANGE: better/WORSE when the 95% interval of the delta excludes 0; - when not.")
    for name, cases in _changed_cases(diff):
        shown = cases[:_CASES_SHOWN]
        more = f"; the first {len(shown)}, --format json for all" if len(shown) < len(cases) else ""
        lines += ["", f"{name.upper()} CASES {len(cases):,} (passed runs / judged runs{more}):"]
        for case in shown:
            lines.append(clip(f"  {_case_text(case)}", _WIDTH))
    return [line[:_WIDTH] for line in lines]


#: Regressed and fixed cases listed by the table (JSON and Markdown list them all).
_CASES_SHOWN = 20


def _changed_cases(diff: Diff) -> list[tuple[str, list[dict[str, Any]]]]:
    """("regressed", cases), ("fixed", cases), those with any case; none for two samples."""
    cases = diff.cases or {}
    return [(name, cases[name]) for name in ("regressed", "fixed") if cases.get(name)]


def _runs_passed(side: dict[str, Any]) -> str:
    return f"{side['passed']}/{side['runs']}"


def _case_text(case: dict[str, Any]) -> str:
    """One case on one line: its id, passed runs before -> after, the candidate's findings."""
    b, c = case["baseline"], case["candidate"]
    found = ", ".join(c["findings"]) or "no finding"
    return f"{case['case_id']}  {_runs_passed(b)} -> {_runs_passed(c)}  now: {found}"


# --- JSON ----------------------------------------------------------------------------------------


def render_json(
    diff: Diff, checks: Sequence[GateCheck] | None = None, gate: Gate | None = None
) -> str:
    """The diff as one JSON document (sorted keys; characters a terminal could act on escaped)."""
    from analyzer import __version__

    doc: dict[str, Any] = {
        "diff_version": DIFF_VERSION,
        "agenttrace_version": __version__,
        **diff.as_dict(),
        "methods": _methods(diff),
        "gate": None,
    }
    if checks is not None:
        ok, broken = _gate_summary(checks)
        doc["gate"] = {
            "file": gate.source if gate is not None else None,
            "sha256": gate.sha256 if gate is not None else None,
            "passed": ok,
            "broken": broken,
            "checks": [c.as_dict() for c in checks],
        }
    return json_safe(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False))


# --- Markdown ------------------------------------------------------------------------------------


# Where a clipped Markdown diff's whole text is.
_WHOLE = "the whole diff: `--format json` or `--format html`"
#: Trace text safe inside a Markdown table cell: no markup, no HTML, one line, no live link.
_md = markdown_safe


def render_markdown(diff: Diff, checks: Sequence[GateCheck] | None = None) -> str:
    """The diff as Markdown to paste into a pull request: verdict, deltas, configuration;
    at most 64 KB (`clip_markdown`: a last line says what was left out)."""
    b, c = diff.baseline, diff.candidate
    out = ["## agenttrace diff", ""]
    if checks is not None:
        ok, broken = _gate_summary(checks)
        verdict = "passed" if ok else "FAILED"
        out += [f"**Gate {verdict}**: {broken} of {len(checks)} limits broken.", ""]
        out += ["| | limit | check |", "|---|---|---|"]
        for check in checks:
            mark = "ok" if check.passed else "**broken**"
            out.append(f"| {mark} | {_md(check.limit)} | {_md(check.message)} |")
        out.append("")
    changed = ", ".join(diff.config_changes) or "nothing"
    out += [
        f"Baseline {_md(b['source'])} ({b['kind']}, {b['runs_compared']} runs) against candidate "
        f"{_md(c['source'])} ({c['kind']}, {c['runs_compared']} runs); "
        f"{_md(_pairing_text(diff))}. Configuration changed: {_md(changed)}.",
        "",
        "| metric | baseline | candidate | delta | 95% CI | change |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for row in diff.metrics:
        change = row.change if row.change != "worse" else "**worse**"
        out.append(
            f"| {_md(_label(row))} | {value_text(row.metric, row.baseline)} | "
            f"{value_text(row.metric, row.candidate)} | {delta_text(row.metric, row.delta)} | "
            f"{interval_text(row)} | {change} |"
        )
    for name, cases in _changed_cases(diff):
        out += [
            "",
            f"**{name.capitalize()} cases: {len(cases):,}** (runs passed / judged)",
            "",
            "| case | baseline | candidate | candidate findings | baseline findings |",
            "|---|---:|---:|---|---|",
        ]
        for case in cases:
            b_side, c_side = case["baseline"], case["candidate"]
            out.append(
                f"| {_md(case['case_id'])} | {_runs_passed(b_side)} | {_runs_passed(c_side)} | "
                f"{_md(', '.join(c_side['findings']) or '–')} | "
                f"{_md(', '.join(b_side['findings']) or '–')} |"
            )
    out += ["", "| configuration | baseline | candidate |", "|---|---|---|"]
    for part, changed, vb, vc in _config_lines(diff):
        mark = " (changed)" if changed else ""
        out.append(f"| {part}{mark} | {_md(vb)} | {_md(vc)} |")
    out += ["", f"<sub>{_md(_methods(diff))}</sub>", ""]
    return clip_markdown("\n".join(out), whole=_WHOLE)


# --- HTML ----------------------------------------------------------------------------------------

# the diff's tables, after report.html's styles (cards, headings, sections)
_CSS = """
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border-bottom: 1px solid #e4e4e4; padding: 4px 10px; text-align: left; }
th { border-bottom: 2px solid #aaa; background: #f6f6f6; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.worse, .broken { color: #c0392b; font-weight: 600; }
.better, .passed { color: #1e7b34; font-weight: 600; }
.card.broken .value { color: #c0392b; } .card.passed .value { color: #1e7b34; }
"""


def _e(text: object) -> str:
    return html.escape(terminal_safe(text), quote=True)


def _html_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Cells are texts, escaped here, or (text, class)."""

    def cell(c: object) -> str:
        text, k = c if isinstance(c, tuple) else (c, "")
        return f'<td class="{k}">{_e(text)}</td>' if k else f"<td>{_e(text)}</td>"

    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "\n".join("<tr>" + "".join(cell(c) for c in row) + "</tr>" for row in rows)
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


_CASE_HEADER = (
    "case",
    "baseline passed",
    "candidate passed",
    "candidate findings",
    "baseline findings",
)


def render_html(diff: Diff, checks: Sequence[GateCheck] | None = None) -> str:
    """A self-contained page in report.html's style (no script, no external resource):
    headline cards, the gate, the metrics, the changed cases and what was compared; every
    text escaped."""
    from analyzer import __version__
    from analyzer.render.html import _card, _page, _section

    b, c = diff.baseline, diff.candidate
    worse = sum(1 for row in diff.metrics if row.change == "worse")
    better = sum(1 for row in diff.metrics if row.change == "better")
    cards = []
    ok, broken = _gate_summary(checks or [])
    if checks is not None:
        cards.append(
            _card(
                "Gate",
                "passed" if ok else "FAILED",
                f"{broken} of {len(checks)} limits broken",
                "passed" if ok else "broken",
            )
        )
    cards += [
        _card(
            "Runs compared",
            f"{_e(b['runs_compared'])} → {_e(c['runs_compared'])}",
            "baseline → candidate",
        ),
        _card(
            "Metrics worse",
            str(worse),
            f"of {len(diff.metrics)}; {better} better, the others no significant change",
            "broken" if worse else "",
        ),
        _card(
            "Configuration changed",
            _e(", ".join(diff.config_changes) or "nothing"),
            _e(_pairing_text(diff)),
        ),
    ]
    for name, cases in _changed_cases(diff):
        how = "less" if name == "regressed" else "more"
        cards.append(
            _card(
                f"{name.capitalize()} cases",
                f"{len(cases):,}",
                f"cases whose runs passed {how} often on the candidate",
            )
        )
    sections: list[tuple[str, str, str]] = []  # id, name in the navigation, the section

    def section(sid: str, name: str, body: str, intro: str | None = None, title: str = "") -> None:
        sections.append((sid, name, _section(sid, title or name, body, intro)))

    section("headline", "Headline", f'<div class="cards">{"".join(cards)}</div>')
    if checks is not None:
        rows = [
            [
                ("ok" if ch.passed else "broken", "passed" if ch.passed else "broken"),
                ch.limit,
                ch.message,
            ]
            for ch in checks
        ]
        section(
            "gate",
            "Gate",
            f'<p class="{"passed" if ok else "broken"}">Gate {"passed" if ok else "FAILED"}: '
            f"{broken} of {len(checks)} limits broken.</p>\n"
            + _html_table(["", "limit", "check"], rows),
        )
    rows = [
        [
            _label(row),
            (value_text(row.metric, row.baseline), "num"),
            (value_text(row.metric, row.candidate), "num"),
            (delta_text(row.metric, row.delta), "num"),
            (interval_text(row), "num"),
            (row.change, row.change if row.change in ("better", "worse") else ""),
        ]
        for row in diff.metrics
    ]
    section(
        "metrics",
        "Metrics",
        _html_table(["metric", "baseline", "candidate", "delta", "95% CI", "change"], rows),
        "Candidate against baseline; a change is better or worse when its 95% interval excludes 0.",
    )
    for name, cases in _changed_cases(diff):
        rows = [
            [
                (case["case_id"], "mono"),
                (_runs_passed(case["baseline"]), "num"),
                (_runs_passed(case["candidate"]), "num"),
                ", ".join(case["candidate"]["findings"]) or "–",
                ", ".join(case["baseline"]["findings"]) or "–",
            ]
            for case in cases
        ]
        section(
            f"cases-{name}",
            f"{name.capitalize()} cases",
            _html_table(_CASE_HEADER, rows),
            "Runs passed / judged, per case, on each side.",
            title=f"{name.capitalize()} cases: {len(cases):,}",
        )
    rows = [
        ["source", f"{b['source']} ({b['kind']})", f"{c['source']} ({c['kind']})"],
        ["runs compared", (b["runs_compared"], "num"), (c["runs_compared"], "num")],
    ]
    for part, changed, vb, vc in _config_lines(diff):
        rows.append(
            [(part + (" (changed)" if changed else ""), "worse" if changed else ""), vb, vc]
        )
    section(
        "compared",
        "What was compared",
        _html_table(["", "baseline", "candidate"], rows),
        _e(_pairing_text(diff)),
    )
    section("methods", "Methods", f'<p class="muted">{_e(_methods(diff))}</p>')
    byline = (
        f"agenttrace {_e(__version__)}: baseline {_e(b['source'])} against candidate "
        f"{_e(c['source'])}"
    )
    return _page("diff", byline, sections, css=_CSS)
