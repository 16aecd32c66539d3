"""report.html: one self-contained page of a report's figures, findings and worst runs."""

from __future__ import annotations

import functools
import hashlib
import html
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from analyzer.render.browser import CSS as _BROWSER_CSS
from analyzer.render.browser import SCRIPT, SCRIPT_HASH, browser_section, ordered_findings
from analyzer.textsafe import clip

if TYPE_CHECKING:
    from analyzer.runs import RunTables

__all__ = [
    "FINDINGS_PER_RULE",
    "STEPS_PER_RUN",
    "WORST_RUNS",
    "render_html",
]

#: Runs shown with their trajectory in "Worst runs".
WORST_RUNS = 10
#: Findings listed per rule (the rest are in findings.jsonl).
FINDINGS_PER_RULE = 50
#: Steps shown per trajectory.
STEPS_PER_RUN = 80
#: Points of each model's cost curve in the cost tails (sorted costs, sampled).
_CURVE_POINTS = 60

_DASH = "—"

# No network, and no script but the run browser's (allowed by its hash): a payload that
# escaped the escaping could still neither run nor call home.
_CSP = "default-src 'none'; style-src 'unsafe-inline'"

_CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, Arial, sans-serif;
  margin: 0 auto; max-width: 1200px; padding: 16px 24px 48px; color: #222; }
h1 { font-size: 1.6em; margin-bottom: 4px; }
h2 { border-bottom: 2px solid #ddd; padding-bottom: 4px; margin-top: 40px; }
h3 { margin: 28px 0 6px; font-size: 1.1em; }
nav a { margin: 0 6px; }
.muted { color: #666; font-size: 0.9em; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 12px 0; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 10px 14px; min-width: 150px; }
.card .label { color: #555; font-size: 0.85em; }
.card .value { font-size: 1.5em; font-weight: 600; margin: 2px 0; }
.card .note { color: #666; font-size: 0.8em; }
.sev-critical { color: #8b0000; } .sev-high { color: #c0392b; }
.sev-medium { color: #b9770e; } .sev-low { color: #2e6da4; }
code, .mono { font-family: ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace;
  font-size: 0.85em; word-break: break-all; }
dl.run { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 0 0 8px; }
dl.run dt { color: #555; } dl.run dd { margin: 0; }
.gt_table { font-size: 13px !important; }
.gt_table td { overflow-wrap: break-word; }
svg.scatter text { font-family: system-ui, Arial, sans-serif; font-size: 11px; }
.unchecked { border: 2px solid #c0392b; background: #fdecea; border-radius: 6px;
  padding: 8px 16px; margin: 12px 0; }
.unchecked h2 { border: 0; margin: 4px 0; color: #8b0000; }
"""


# --- text helpers ------------------------------------------------------------------------------


def _e(text: object) -> str:
    """Escaped text for an HTML text node or a quoted attribute value."""
    return html.escape("" if text is None else str(text), quote=True)


def _t(text: object, width: int) -> str:
    """Untrusted trace text: controls and bidi overrides neutralized, clipped, escaped."""
    if text is None:
        return _DASH
    return _e(clip(text, width))


def _anchor(prefix: str, *parts: object) -> str:
    """An element id derived from untrusted values: a hash, so always a safe id."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).hexdigest()
    return f"{prefix}-{digest[:16]}"


def _usd(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return _DASH
    if abs(value) >= 1:
        return f"${value:,.2f}"
    if value == 0:
        return "$0"
    # three significant digits, never in exponent notation
    decimals = min(12, max(2, 2 - math.floor(math.log10(abs(value)))))
    return f"${value:.{decimals}f}"


def _num(value: float | int | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return _DASH
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:.{digits}g}"


def _fig(value: float | int | None) -> str:
    """A measured quantity (a quantile of tokens, calls, seconds): never in exponent notation."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return _DASH
    if abs(value) >= 100 or float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _pct(rate: float | None) -> str:
    return _DASH if rate is None else f"{100 * rate:.1f}%"


def _interval(lo: float | None, hi: float | None, fmt=_pct, *, n: int | None = None) -> str:
    if n == 0:
        return _DASH  # a rate over no run
    if lo is None or hi is None:
        return "n too small"
    return f"{fmt(lo)} – {fmt(hi)}"


def _rates(
    rows: Sequence[Mapping[str, Any]], n: str | None, label: str = "Rate", key: str = "rate"
) -> dict[str, tuple[str, list[str]]]:
    """The columns "rate" and "interval" (its 95% interval, a dash where ``n`` is 0) of
    ``rows`` that hold ``key``, ``key_lo`` and ``key_hi``."""
    return {
        "rate": (label, [_pct(r.get(key)) for r in rows]),
        "interval": (
            "95% interval",
            [
                _interval(r.get(f"{key}_lo"), r.get(f"{key}_hi"), n=r.get(n) if n else None)
                for r in rows
            ],
        ),
    }


def _bars(rows: Sequence[Mapping[str, Any]], key: str = "rate") -> dict[str, tuple[str, list]]:
    """The column "bar": each row's ``key`` and its interval drawn (`_interval_bar`)."""
    return {
        "bar": (
            "",
            [_interval_bar(r.get(key), r.get(f"{key}_lo"), r.get(f"{key}_hi")) for r in rows],
        )
    }


def _counts(rows: Sequence[Mapping[str, Any]], **labels: str) -> dict[str, tuple[str, list]]:
    """Columns of counts: each keyword names a key of ``rows`` and gives its label."""
    return {k: (label, [_num(r.get(k)) for r in rows]) for k, label in labels.items()}


def _rule_columns(rows: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, list[str]]]:
    """The columns "rule" and "pack" of rows with rule_id and pack."""
    return {
        "rule": ("Rule", [_t(r.get("rule_id"), 40) for r in rows]),
        "pack": ("Pack", [_t(r.get("pack"), 30) for r in rows]),
    }


def _quantile(row: Mapping[str, Any], name: str, fmt) -> str:
    """A quantile of a tails row, and under it its 95% interval."""
    interval = _interval(row.get(f"{name}_lo"), row.get(f"{name}_hi"), fmt)
    return f'{fmt(row.get(name))}<br><span class="muted">{interval}</span>'


def _dl(items) -> str:
    """(label, escaped HTML) pairs as a definition list."""
    return '<dl class="run">' + "".join(f"<dt>{_e(k)}</dt><dd>{v}</dd>" for k, v in items) + "</dl>"


def _get(mapping: Mapping[str, Any] | None, *path: str) -> Any:
    """mapping[path[0]][path[1]]..., or None when a key is absent."""
    node: Any = mapping
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


# --- great-tables ------------------------------------------------------------------------------


def _raw(value: Any) -> str:
    # Cells reach great-tables already escaped by this module (or built from escaped parts):
    # an explicit formatter makes great-tables pass them through as they are.
    return "" if value is None else str(value)


_IMPORT = re.compile(r"@import[^;]*;")


def _table(
    table_id: str,
    columns: Mapping[str, tuple[str, Sequence[str]]],
    *,
    title: str | None = None,
    note: str | None = None,
) -> str:
    """A great-tables table: ``columns`` maps column -> (fixed label text, cells of escaped
    HTML)."""
    from great_tables import GT
    from great_tables import html as gt_html

    frame = pl.DataFrame(
        {c: cells for c, (_, cells) in columns.items()}, schema=dict.fromkeys(columns, pl.String)
    )
    gt = GT(frame, id=table_id).cols_label(**{c: gt_html(_e(lb)) for c, (lb, _) in columns.items()})
    if title:
        gt = gt.tab_header(title=gt_html(_e(title)))
    gt = gt.fmt(_raw, columns=list(columns))
    if note:
        gt = gt.tab_source_note(gt_html(_e(note)))
    gt = gt.tab_options(table_font_size="13px", container_width="100%")
    # Recent great-tables versions add no web font by default; strip any that appears so the
    # page never fetches anything when opened.
    return _IMPORT.sub("", gt.as_raw_html())


# --- the page ----------------------------------------------------------------------------------


def run_browser(analysis, *, labels=None) -> str:
    """The run browser section of the page (`browser_section`): what `render_html` builds
    unless its caller built it apart, e.g. while the other sections are rendered."""
    return _Context(analysis).browser(labels)


def render_html(
    analysis, summary: Mapping[str, Any], *, labels=None, browser: Callable[[], str] | None = None
) -> str:
    """The report page: headline figures, a browser of every run, tool omissions, cost tails,
    cost vs correct rate per model, breakdowns, trials, findings by rule with evidence, and
    the worst runs with their trajectories.

    `labels`: the golden labels the summary scored (`analyzer.metrics.labels.LabelSet`, or its
    `LabelScores`), or None; given, each run's view shows its label fields, expected against
    answered. `browser`: the run browser section (`run_browser`) when the caller builds it,
    asked for once the other sections are rendered.

    Self-contained (no external resource; one inline script, allowed by its hash, that puts
    trace text on the page as text only) and deterministic: the same analysis and summary give
    the same bytes. Every text from the traces is escaped. Every section but the run browser
    reads without script.
    """
    ctx = _Context(analysis)
    static = (  # id, name in the navigation, the section ("" when the summary has none)
        ("unchecked", "Unchecked", _unchecked(summary)),
        ("headline", "Headline", _headline(summary)),
        ("browser", "Run browser", None),  # built once the others are
        ("omissions", "Tool omissions", _omissions(summary)),
        ("cost-tails", "Cost tails", _cost_tails(ctx.runs, summary)),
        ("routing", "Cost vs correct rate", _routing(summary)),
        ("breakdowns", "Breakdowns", _breakdowns(summary)),
        ("trials", "Trials", _trials(summary)),
        ("temperature", "Temperature", _temperature(summary)),
        ("steps", "Cost per step", _steps(summary)),
        ("tails", "Distributions", _tails(summary)),
        ("labels", "Golden labels", _labels(summary)),
        ("findings", "Findings by rule", _findings(summary, ctx)),
        ("coverage", "Rule coverage", _rule_coverage(summary)),
        ("accounting", "Input and checks", _accounting(summary)),
        ("runs", "Runs cited", _cited_runs(ctx)),
        ("worst", "Worst runs", _worst(ctx)),
        ("methods", "Methods", _methods(summary)),
    )
    page = ctx.browser(labels) if browser is None else browser()
    sections = [(sid, name, page if part is None else part) for sid, name, part in static]
    byline = (
        f"agenttrace {_e(summary.get('agenttrace_version', ''))}, summary version "
        f"{_e(summary.get('summary_version', ''))}"
    )
    return _page("report", byline, sections, css=_BROWSER_CSS, script=True)


def _page(what: str, byline: str, sections, *, css: str, script: bool = False) -> str:
    """A whole page, "agenttrace {what}", in this module's style and `css`: `byline` (escaped
    HTML) under its heading, then a navigation to the `sections` (id, name in the
    navigation, escaped HTML; "" for one to leave out) and the sections, and, with `script`,
    the run browser's script, which the page's Content-Security-Policy allows by its hash."""
    csp = f"{_CSP}; script-src '{SCRIPT_HASH}'" if script else _CSP
    # Only the sections there are (a summary without metrics has fewer): no dead link.
    nav = " · ".join(f'<a href="#{sid}">{_e(name)}</a>' for sid, name, part in sections if part)
    end = f"\n<script>{SCRIPT}</script>" if script else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>agenttrace {what}</title>\n"
        f"<style>{_CSS}{css}</style>\n</head>\n<body>\n"
        f"<h1>agenttrace {what}</h1>\n"
        f'<p class="muted">{byline}</p>\n'
        f"<nav>{nav}</nav>\n"
        + "\n".join(part for _, _, part in sections if part)
        + f"{end}\n</body>\n</html>\n"
    )


def _unchecked(summary: Mapping[str, Any]) -> str:
    """First on the page: what makes a clean result unreadable as clean (summary
    ``checks.unchecked``); nothing when there is none."""
    problems = _get(summary, "checks", "unchecked") or []
    if not problems:
        return ""
    items = "".join(
        f"<li><b>{_e(u.get('pack'))}/{_e(u.get('rule_id'))}</b>: {_e(u.get('detail'))}</li>"
        for u in problems
    )
    return (
        '<section id="unchecked" class="unchecked">\n'
        f"<h2>{len(problems)} rule problem(s): these rules checked nothing, or less than "
        "they name</h2>\n"
        "<p>A clean result below proves nothing for them: fix the pack or the traces "
        "(<code>report --fail-on-unchecked</code> exits 1 on this).</p>\n"
        f"<ul>{items}</ul>\n</section>"
    )


def _section(sid: str, title: str, body: str, intro: str | None = None) -> str:
    lead = f'<p class="muted">{intro}</p>\n' if intro else ""
    return f'<section id="{sid}">\n<h2>{_e(title)}</h2>\n{lead}{body}\n</section>'


# --- headline ----------------------------------------------------------------------------------


def _card(label: str, value: str, note: str = "", cls: str = "") -> str:
    klass = f"card {cls}".strip()
    note_html = f'<div class="note">{note}</div>' if note else ""
    return (
        f'<div class="{klass}"><div class="label">{_e(label)}</div>'
        f'<div class="value">{value}</div>{note_html}</div>'
    )


def _headline(summary: Mapping[str, Any]) -> str:
    runs = summary.get("runs", {})
    found = summary.get("findings", {})
    metrics = summary.get("metrics") or {}
    count = runs.get("count", 0)
    answered = runs.get("with_answer", 0)
    cards = [
        _card(
            "Runs",
            _num(count),
            f"{_num(runs.get('model_calls'))} model calls, "
            f"{_num(runs.get('tool_calls'))} tool calls",
        ),
        _card(
            "Answered",
            _num(answered),
            f"{_pct(answered / count) if count else _DASH} of runs; "
            f"{_num(runs.get('without_answer'))} without answer",
        ),
    ]
    by_sev = found.get("by_severity", {})
    sev_note = ", ".join(
        f'<span class="sev-{_e(s)}">{_num(n)} {_e(s)}</span>' for s, n in by_sev.items()
    )
    cards.append(_card("Findings", _num(found.get("total", 0)), sev_note))
    cost = metrics.get("cost")
    if cost is not None:
        unpriced = cost.get("unpriced_runs") or 0
        note = f"{_num(cost.get('priced_runs'))} priced runs"
        if unpriced:
            note += f'; {_num(unpriced)} unpriced (see <a href="#cost-tails">cost tails</a>)'
        cards.append(_card("Cost total", _usd(cost.get("total_usd")), note))
    tail = next((r for r in metrics.get("tails") or [] if r.get("metric") == "cost_usd"), None)
    if tail is not None:
        for q in ("p50", "p95"):
            cards.append(
                _card(
                    f"Cost per run {q}",
                    _usd(tail.get(q)),
                    f"95% interval {_interval(tail.get(f'{q}_lo'), tail.get(f'{q}_hi'), _usd)}"
                    f"; n = {_num(tail.get('n'))}",
                )
            )
    if cost is not None:
        by = cost.get("correct_by") or "findings"
        rule = (
            f"no finding at or above {_e(cost.get('correct_threshold') or 'high')}"
            if by == "findings"
            else "all label fields right"
        )
        cards.append(
            _card(
                "Cost per correct run",
                _usd(cost.get("cost_per_correct_run_usd")),
                f"{_num(cost.get('correct_runs'))} correct runs ({rule})",
            )
        )
    rules = _get(summary, "checks", "rules") or []
    if rules:
        applied = sum(r.get("runs_applied") or 0 for r in rules)
        judged = sum(r.get("runs_judged") or 0 for r in rules)
        working = sum(1 for r in rules if r.get("runs_judged"))
        note = (
            f"rules that judged a run; they judged {_num(judged)} of the {_num(applied)} "
            f"(rule, run) pairs they applied to ({_pct(judged / applied) if applied else _DASH})"
        )
        if working < len(rules):
            note += (
                f'; <span class="sev-critical">{_num(len(rules) - working)} judged no run</span>'
            )
        cards.append(_card("Rule coverage", f"{working} / {len(rules)}", note))
    cov = metrics.get("content_coverage")
    if cov:
        cards.append(
            _card(
                "Content recorded",
                _pct(cov.get("rate")),
                f"{_num(cov.get('with_content'))} of {_num(cov.get('runs'))} runs recorded the "
                f"content grounding checks need; 95% interval "
                f"{_interval(cov.get('rate_lo'), cov.get('rate_hi'))}",
            )
        )
    scores = metrics.get("scores")
    if scores:
        cards.append(
            _card(
                "Mean score",
                _num(scores.get("mean"), 4),
                f"out of 100; lowest {_num(scores.get('min'))}",
            )
        )
    ing = summary.get("ingest", {})
    accounting = (
        f"{_num(ing.get('files'))} files, {_num(ing.get('spans_read'))} spans read, "
        f"{_num(ing.get('spans_kept'))} kept, {_num(ing.get('duplicate_spans'))} duplicates, "
        f"{_num(ing.get('spans_quarantined'))} spans and "
        f"{_num(ing.get('records_quarantined'))} records quarantined"
    )
    packs = ", ".join(_e(p.get("name")) for p in summary.get("packs", [])) or "none"
    body = (
        f'<div class="cards">{"".join(cards)}</div>\n'
        f'<p class="muted">Input: {accounting}. Rule packs: {packs}.</p>'
    )
    return _section("headline", "Headline figures", body)


# --- tool omissions ----------------------------------------------------------------------------


def _interval_bar(rate: float | None, lo: float | None, hi: float | None) -> str:
    """A small inline SVG: the 0-100 % axis, the interval as a bar, the rate as a tick."""
    if rate is None:
        return _DASH
    w, h = 120, 14
    parts = [
        f'<svg width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
        f'aria-label="{_pct(rate)}">',
        f'<line x1="0" y1="7" x2="{w}" y2="7" stroke="#ccc" stroke-width="1"/>',
    ]
    if lo is not None and hi is not None:
        parts.append(
            f'<rect x="{lo * w:.1f}" y="3" width="{max(1.0, (hi - lo) * w):.1f}" height="8" '
            'fill="#9cc3e6"/>'
        )
    parts.append(f'<rect x="{rate * w - 1:.1f}" y="0" width="2" height="{h}" fill="#1f4e79"/>')
    parts.append("</svg>")
    return "".join(parts)


def _omission_table(
    rows: Sequence[Mapping[str, Any]], table_id: str, base: str, title: str, first=None
) -> str:
    """Per tool: omitted runs / ``base`` runs, the rate, its Wilson interval and a bar, after
    the columns ``first`` (as `_table` takes them)."""
    required = "Required in runs" if base == "required_runs" else "Expected in runs"
    return _table(
        table_id,
        {
            **(first or {}),
            "tool": ("Tool", [_t(r.get("tool"), 60) for r in rows]),
            "required": (required, [_num(r.get(base)) for r in rows]),
            "omitted": ("Omitted in runs", [_num(r.get("omitted_runs")) for r in rows]),
            **_rates(rows, base, "Omission rate"),
            **_bars(rows),
        },
        title=title,
    )


def _omissions(summary: Mapping[str, Any]) -> str:
    rules = _get(summary, "metrics", "omission_rates")
    labelled = _get(summary, "labels", "tools", "omission_by_tool")
    if rules is None and labelled is None:
        return ""
    intro = (
        "Per tool: the runs that did not call it, over the runs where a required_tools rule "
        "required it (runs without an answer left out) or where the golden labels expect it. "
        "Wilson 95% intervals."
    )
    parts = []
    if rules:
        parts.append(_omission_table(rules, "gt-omissions", "required_runs", "By the rules"))
    else:
        idle = [
            r
            for r in _get(summary, "checks", "rules") or []
            if r.get("type") == "required_tools" and not r.get("runs_judged")
        ]
        if idle:
            names = ", ".join(f"{_e(r.get('pack'))}/{_e(r.get('rule_id'))}" for r in idle)
            parts.append(
                f'<p class="sev-critical">No omission was measured: the required_tools '
                f"rule(s) {names} judged no run (see the problems at the top).</p>"
            )
        else:
            parts.append(
                "<p>No tool was required by a rule in the packs applied "
                "(give a pack with required_tools rules to measure omissions).</p>"
            )
    if labelled:
        parts.append(
            _omission_table(
                labelled, "gt-omissions-labels", "expected_runs", "Against the golden labels"
            )
        )
    return _section("omissions", "Tool omissions", "\n".join(parts), intro)


# --- golden labels -----------------------------------------------------------------------------


def _rate_card(label: str, r: Mapping[str, Any] | None, what: str) -> str:
    if not r:
        return ""
    return _card(
        label,
        _pct(r.get("rate")),
        f"{_num(r.get('k'))} of {_num(r.get('n'))} {what}; 95% interval "
        f"{_interval(r.get('lo'), r.get('hi'), n=r.get('n'))}",
    )


def _labels(summary: Mapping[str, Any]) -> str:
    labels = summary.get("labels")
    if not labels:
        return ""
    tools = labels.get("tools") or {}
    wrong = tools.get("wrong_tool") or {}
    cards = [
        _rate_card("All fields correct", labels.get("all_fields_correct"), "labelled runs"),
        _rate_card("Critical fields correct", labels.get("all_critical_correct"), "runs"),
        _rate_card("Tool recall", tools.get("recall"), "expected tool calls made"),
        _rate_card("Runs with a wrong tool", wrong, "runs"),
        _rate_card("Argument precision", tools.get("argument_precision"), "expected arguments"),
    ]
    rows = labels.get("fields") or []
    table = ""
    if rows:
        table = _table(
            "gt-label-fields",
            {
                "field": ("Field", [_t(r.get("field"), 40) for r in rows]),
                "critical": ("Critical", ["critical" if r.get("critical") else "" for r in rows]),
                "match": ("Match", [_t(", ".join(r.get("matches") or []), 40) for r in rows]),
                **_counts(rows, runs="Runs", correct="Correct", wrong="Wrong", missing="Missing"),
                **_rates(rows, "runs", "Accuracy"),
            },
            title="Answer fields",
        )
    wrong_rows = labels.get("wrong_fields") or []
    if wrong_rows:
        table += _table(
            "gt-label-wrong",
            {
                "case": ("Case", [_t(r.get("case_id"), 60) for r in wrong_rows]),
                "run": (
                    "Run",
                    [f'<span class="mono">{_t(r.get("run_id"), 40)}</span>' for r in wrong_rows],
                ),
                "field": (
                    "Field",
                    [
                        _t(r.get("field"), 40) + (" (critical)" if r.get("critical") else "")
                        for r in wrong_rows
                    ],
                ),
                "expected": ("Expected", [_t(r.get("expected"), 200) for r in wrong_rows]),
                "actual": (
                    "Answered",
                    [
                        _t(r.get("actual"), 200) if r.get("actual") is not None else "(missing)"
                        for r in wrong_rows
                    ],
                ),
            },
            title="Fields wrong or missing, by case",
        )
    unmatched = labels.get("unmatched_cases") or []
    body = (
        f'<div class="cards">{"".join(cards)}</div>\n'
        f'<p class="muted">Labels: {_t(labels.get("file"), 120)} '
        f'(sha256 <span class="mono">{_t(labels.get("sha256"), 64)}</span>): '
        f"{_num(labels.get('cases'))} cases, {_num(labels.get('matched_runs'))} runs matched, "
        f"{_num(len(unmatched))} cases with no run, "
        f"{_num(labels.get('unlabelled_runs'))} runs without a label.</p>\n{table}"
    )
    return _section("labels", "Golden labels", body)


# --- cost tails --------------------------------------------------------------------------------


def _sparkline(costs: pl.Series) -> str:
    """A small inline SVG of ``costs`` sorted, as a line over evenly spaced ranks (at most
    _CURVE_POINTS, the highest included), from 0 at the bottom to the highest at the top; its
    title, shown on hover, names the lowest and the highest. A dash when there is none."""
    xs = costs.drop_nulls().sort()
    n = len(xs)
    if n == 0:
        return _DASH
    if n > _CURVE_POINTS:
        xs = xs.gather([round(i * (n - 1) / (_CURVE_POINTS - 1)) for i in range(_CURVE_POINTS)])
    values = xs.to_list() if n > 1 else xs.to_list() * 2  # one run: a flat line
    w, h, pad = 120, 30, 2
    low, high = min(0.0, values[0]), values[-1]
    heights = [(v - low) / (high - low) if high > low else 0.0 for v in values]
    step = w / (len(values) - 1)
    points = " ".join(
        f"{i * step:.1f},{h - pad - (h - 2 * pad) * y:.1f}" for i, y in enumerate(heights)
    )
    tip = f"Cost per run, sorted: {_usd(values[0])} lowest, {_usd(values[-1])} highest"
    return (
        f'<svg width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img"><title>{_e(tip)}</title>'
        f'<polyline points="{points}" fill="none" stroke="#1f4e79" stroke-width="1.5"/></svg>'
    )


def _unpriced(summary: Mapping[str, Any]) -> str:
    """The models whose calls have no cost, with their token counts (never a cost of 0)."""
    rows = _get(summary, "metrics", "cost", "unpriced_models") or []
    if not rows:
        return ""
    return _table(
        "gt-unpriced",
        {
            "model": (
                "Model",
                [_t(r.get("model"), 60) if r.get("model") else "(not recorded)" for r in rows],
            ),
            "reason": ("Why no cost", [_t(r.get("reason"), 40) for r in rows]),
            "calls": ("Model calls", [_num(r.get("model_calls")) for r in rows]),
            "runs": ("Runs", [_num(r.get("runs")) for r in rows]),
            "input": ("Input tokens", [_num(r.get("input_tokens")) for r in rows]),
            "output": ("Output tokens", [_num(r.get("output_tokens")) for r in rows]),
            "cached": ("Cached input tokens", [_num(r.get("cached_input_tokens")) for r in rows]),
        },
        title="Unpriced models",
        note="Their runs' cost is unknown (—), not zero: add them to the price table (--prices).",
    )


def _cost_tails(runs: pl.DataFrame, summary: Mapping[str, Any]) -> str:
    from analyzer.metrics.stats import run_groups, tails

    if "cost_usd" not in runs.columns or runs.height == 0:
        return ""
    overall = tails(runs, metrics=("cost_usd",)).with_columns(
        pl.lit(None, pl.String).alias("model")
    )
    per_model = tails(runs, by="model", metrics=("cost_usd",))
    groups, _ = run_groups(runs, "model")
    costs = groups.join(runs.select("run_id", "cost_usd"), on="run_id", how="left")
    rows: list[dict[str, Any]] = []
    curves: list[str] = []
    for row in per_model.iter_rows(named=True):
        model = row["model"]
        mine = costs.filter(
            pl.col("model").is_null() if model is None else pl.col("model") == model
        )
        rows.append({**row, "_label": _t(model, 60) if model is not None else "(no model)"})
        curves.append(_sparkline(mine.get_column("cost_usd")))
    for row in overall.iter_rows(named=True):
        rows.append({**row, "_label": "<b>all runs</b>"})
        curves.append(_sparkline(runs.get_column("cost_usd")))

    table = _table(
        "gt-cost-tails",
        {
            "model": ("Model", [r["_label"] for r in rows]),
            "runs": ("Runs", [_num(r["runs"]) for r in rows]),
            "priced": ("Priced runs", [_num(r["n"]) for r in rows]),
            **{p: (p, [_quantile(r, p, _usd) for r in rows]) for p in ("p50", "p95", "p99")},
            "max": ("Max", [_usd(r["max"]) for r in rows]),
            "curve": ("Cost per run, sorted", curves),
        },
        note=(
            "Quantiles: type 7 (linear); under each, its distribution-free 95% interval "
            "('n too small' when the runs are too few for one). A run that used two models "
            "counts under both. Unpriced runs are left out of the quantiles."
        ),
    )
    return _section(
        "cost-tails",
        "Cost tails by model",
        table + _unpriced(summary),
        "Cost per run in USD. The curve is each model's runs sorted by cost: a steep right end "
        "is a tail of expensive runs.",
    )


# --- cost vs correct rate ----------------------------------------------------------------------


def _frontier(points: Sequence[tuple[float, float, int]]) -> list[int]:
    """Indices of the points no cheaper-or-equal point matches in correct rate, by cost."""
    best = -1.0
    keep = []
    for _x, y, i in sorted(points, key=lambda p: (p[0], -p[1], p[2])):
        if y > best:
            keep.append(i)
            best = y
    return keep


def _scatter(rows: Sequence[Mapping[str, Any]], frontier: Sequence[int]) -> str:
    """Inline SVG: mean cost per run (x) against correct rate (y) with Wilson bars, one point
    per `metrics.routing` family."""
    pts = [(i, r.get("mean_cost_usd"), r.get("correct_rate")) for i, r in enumerate(rows)]
    pts = [(i, x, y) for i, x, y in pts if x is not None and y is not None]
    if not pts:
        return "<p>No model family has a known cost for all its runs: nothing to plot.</p>"
    W, H, L, R, T, B = 860, 340, 70, 190, 16, 44
    xs = [x for _, x, _ in pts]
    lo_x, hi_x = min(xs), max(xs)
    log = lo_x > 0 and hi_x / lo_x > 20
    if log:
        a, b = math.log10(lo_x) - 0.1, math.log10(hi_x) + 0.1

        def fx(v: float) -> float:
            return L + (math.log10(v) - a) / (b - a) * (W - L - R)
    else:
        top = hi_x * 1.1 if hi_x > 0 else 1.0

        def fx(v: float) -> float:
            return L + v / top * (W - L - R)

    def fy(v: float) -> float:
        return T + (1 - v) * (H - T - B)

    out = [
        f'<svg class="scatter" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img" '
        'aria-label="Mean cost per run against correct rate, one point per model family">',
        f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - T - B}" fill="#fafafa" '
        'stroke="#ccc"/>',
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        y = fy(tick)
        out.append(
            f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#e5e5e5"/>'
            f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">{int(tick * 100)}%</text>'
        )
    if log:
        ticks = [
            m * 10**e
            for e in range(math.floor(a), math.ceil(b) + 1)
            for m in (1, 2, 5)
            if a <= math.log10(m * 10**e) <= b
        ]
    else:
        ticks = [top * k / 4 for k in range(5)]
    for tick in ticks:
        x = fx(tick)
        out.append(
            f'<line x1="{x:.1f}" y1="{T}" x2="{x:.1f}" y2="{H - B}" stroke="#e5e5e5"/>'
            f'<text x="{x:.1f}" y="{H - B + 16}" text-anchor="middle">{_e(_usd(tick))}</text>'
        )
    out.append(
        f'<text x="{(L + W - R) / 2:.1f}" y="{H - 8}" text-anchor="middle">'
        "mean cost per run (USD)</text>"
        f'<text x="14" y="{(T + H - B) / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {(T + H - B) / 2:.1f})">correct rate</text>'
    )
    on = [(fx(rows[i]["mean_cost_usd"]), fy(rows[i]["correct_rate"])) for i in frontier]
    if len(on) > 1:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in on)
        out.append(
            f'<polyline points="{path}" fill="none" stroke="#2e8b57" stroke-width="2" '
            'stroke-dasharray="5 3"/>'
        )
    for i, x, y in pts:
        r = rows[i]
        px, py = fx(x), fy(y)
        lo, hi = r.get("correct_rate_lo"), r.get("correct_rate_hi")
        if lo is not None and hi is not None:
            out.append(
                f'<line x1="{px:.1f}" y1="{fy(lo):.1f}" x2="{px:.1f}" y2="{fy(hi):.1f}" '
                'stroke="#1f4e79" stroke-width="1.5"/>'
            )
        color = "#2e8b57" if i in frontier else "#1f4e79"
        # Points carry their row number; the names go in the legend, where they cannot overlap.
        out.append(
            f'<circle cx="{px:.1f}" cy="{py:.1f}" r="5" fill="{color}"/>'
            f'<text x="{px + 7:.1f}" y="{py - 5:.1f}" fill="{color}">{i + 1}</text>'
        )
    for k, (i, _, _) in enumerate(pts[:20]):
        color = "#2e8b57" if i in frontier else "#1f4e79"
        out.append(
            f'<text x="{W - R + 12}" y="{T + 12 + 15 * k}" fill="{color}">'
            f"{i + 1}. {_t(rows[i].get('model_family') or '(no model)', 26)}</text>"
        )
    out.append("</svg>")
    return "".join(out)


def _routing(summary: Mapping[str, Any]) -> str:
    routing = _get(summary, "metrics", "routing")
    if routing is None:
        return ""
    correct = _get(summary, "metrics", "methods", "correct") or "no finding at or above high"
    intro = (
        "One point per model family: a run counts for its primary model (the one of most "
        "tokens), dated snapshots grouped under their family. Mean cost per run against the "
        f"share of judged runs that are correct ({_e(correct)}), with Wilson 95% bars. The "
        "dashed line joins the families with enough runs that no cheaper one matches: where it "
        "turns flat, paying more buys no more correct runs."
    )
    title = "Cost vs correct rate by model family"
    rows = routing.get("families") or []
    if not rows:
        return _section("routing", title, "<p>No run.</p>", intro)
    # the curve joins the families the pick chooses from; the others are points only
    frontier = _frontier(
        [(r["mean_cost_usd"], r["correct_rate"], i) for i, r in enumerate(rows) if r["eligible"]]
    )
    pick = routing.get("pick")
    svg = _scatter(rows, frontier)
    table = _table(
        "gt-routing",
        {
            "n": ("#", [str(i + 1) for i in range(len(rows))]),
            "model": (
                "Model family",
                [_t(r.get("model_family") or "(no model)", 60) for r in rows],
            ),
            "runs": ("Runs", [_num(r.get("runs")) for r in rows]),
            "judged": ("Judged runs", [_num(r.get("judged_runs")) for r in rows]),
            "correct": ("Correct runs", [_num(r.get("correct_runs")) for r in rows]),
            **_rates(rows, None, "Correct rate", "correct_rate"),
            "mean": ("Mean cost / run", [_usd(r.get("mean_cost_usd")) for r in rows]),
            "pick": (
                "Routing",
                [
                    "routing pick"
                    if r.get("model_family") == pick and pick is not None
                    else (_t(r.get("not_eligible_because"), 60) if not r.get("eligible") else "")
                    for r in rows
                ],
            ),
        },
        note=(
            f"Correct: {_e(correct)}. Routing pick: the cheapest family whose 95% interval "
            "reaches the best correct rate, among the families with at least "
            f"{_num(routing.get('min_runs'))} judged runs and a known cost "
            "(report --routing-min-runs). Mean cost is unknown (—) when a run is unpriced."
        ),
    )
    head = f"Routing pick: <b>{_t(pick, 60)}</b>, " if pick is not None else "No routing pick: "
    lead = f"<p>{head}{_t(routing.get('reason'), 200)}.</p>"
    return _section("routing", title, lead + svg + table, intro)


# --- input and checks -------------------------------------------------------------------------

#: Quarantined records, warnings and check errors listed (the rest are in summary.json).
LISTED = 50


def _listing(items: Sequence[Any], what: str) -> str:
    """Up to LISTED entries (each a mapping or a text), escaped, as a list."""
    if not items:
        return ""
    rows = []
    for item in items[:LISTED]:
        if isinstance(item, Mapping):
            rows.append("; ".join(f"{_e(k)}: {_t(v, 300)}" for k, v in sorted(item.items())))
        else:
            rows.append(_t(item, 300))
    more = (
        f'<p class="muted">First {LISTED} of {len(items)}; all in summary.json.</p>'
        if len(items) > LISTED
        else ""
    )
    return (
        f"<h3>{_e(what)} ({len(items)})</h3><ul>{''.join(f'<li>{r}</li>' for r in rows)}</ul>{more}"
    )


def _accounting(summary: Mapping[str, Any]) -> str:
    ing = summary.get("ingest") or {}
    runs = summary.get("runs") or {}
    if not ing and not runs:
        return ""
    info = [
        ("Files read", _num(ing.get("files"))),
        ("Files skipped (not traces)", _t(", ".join(ing.get("files_skipped") or []) or _DASH, 400)),
        ("Records read", _num(ing.get("records_read"))),
        ("Spans read", _num(ing.get("spans_read"))),
        ("Spans kept", _num(ing.get("spans_kept"))),
        ("Duplicate spans dropped", _num(ing.get("duplicate_spans"))),
        ("Spans quarantined", _num(ing.get("spans_quarantined"))),
        ("Records quarantined", _num(ing.get("records_quarantined"))),
        ("Orphan spans (parent missing)", _num(ing.get("orphan_spans"))),
        ("Spans in no run (no agent holds them)", _num(ing.get("spans_outside_runs"))),
        ("Runs", _num(ing.get("runs", runs.get("count")))),
        ("Runs with content recorded", _num(runs.get("with_content"))),
        ("Model calls", _num(runs.get("model_calls"))),
        ("Tool calls", _num(runs.get("tool_calls"))),
        ("Tool calls requested, no tool span", _num(runs.get("unexecuted_tool_calls"))),
        ("Input tokens", _num(runs.get("input_tokens"))),
        ("Output tokens", _num(runs.get("output_tokens"))),
        ("Cached input tokens", _num(runs.get("cached_input_tokens"))),
        (
            "Runs per agent",
            ", ".join(f"{_t(k, 60)}: {_num(v)}" for k, v in (runs.get("agents") or {}).items())
            or _DASH,
        ),
        ("Models", _t(", ".join(runs.get("models") or []) or _DASH, 600)),
    ]
    cost = _get(summary, "metrics", "cost") or {}
    if cost:
        info += [
            ("Recorded cost (spans' own figure)", _usd(cost.get("recorded_total_usd"))),
            ("Retry cost", _usd(cost.get("retry_cost_usd"))),
            ("Runs whose retry cost is unknown", _num(cost.get("retry_cost_unknown_runs"))),
        ]
    parts = [_dl(info)]
    reasons = [
        {
            "rule": f"{r.get('pack')}/{r.get('rule_id')}",
            "status": x.get("status"),
            "reason": x.get("reason"),
            "runs": x.get("runs"),
        }
        for r in _get(summary, "checks", "rules") or []
        for x in r.get("reasons") or []
    ]
    if reasons:
        parts.append(
            _table(
                "gt-check-reasons",
                {
                    "rule": ("Rule", [_t(x["rule"], 60) for x in reasons]),
                    "status": ("Status", [_t(x["status"], 30) for x in reasons]),
                    "reason": ("Why", [_t(x["reason"], 200) for x in reasons]),
                    "runs": ("Runs", [_num(x["runs"]) for x in reasons]),
                },
                title="Why a rule could not judge a run",
            )
        )
    parts.append(_listing(_get(summary, "findings", "check_errors") or [], "Check errors"))
    parts.append(_listing(ing.get("quarantine") or [], "Quarantined"))
    parts.append(_listing(ing.get("warnings") or [], "Warnings"))
    return _section(
        "accounting",
        "Input and checks: nothing lost",
        "\n".join(p for p in parts if p),
        "Every span read is kept, dropped as a duplicate, or quarantined with its reason.",
    )


# --- breakdowns, trials, distributions, rule coverage -----------------------------------------

#: Groups shown per breakdown table (the rest are in summary.json).
BREAKDOWN_ROWS = 50

_BREAKDOWN_TITLES = {
    "model": "By model (a run that used two models counts under both)",
    "model_family": "By model family (the run's primary model, dated snapshots grouped)",
    "temperature": "By temperature",
    "agent": "By agent",
    "case_class": "By case class",
    "config_hash": "By configuration (agent, prompt, tools, model, temperature)",
    "service.version": "By service version",
}


def _q(row: Mapping[str, Any], name: str, fmt=_fig) -> str:
    """p50 / p95 of a breakdown row's `name`."""
    return f"{fmt(row.get(f'{name}_p50'))} / {fmt(row.get(f'{name}_p95'))}"


def _group_label(value: Any) -> str:
    return "(none)" if value is None else _t(value, 60)


def _breakdowns(summary: Mapping[str, Any]) -> str:
    groups = _get(summary, "metrics", "breakdowns")
    if not groups:
        return ""
    correct = _get(summary, "metrics", "methods", "correct") or "no finding at or above high"
    parts = []
    known = list(_BREAKDOWN_TITLES)
    for key in sorted(groups, key=lambda k: (known.index(k) if k in known else len(known), k)):
        rows = groups[key]
        if not rows:
            continue
        shown = rows[:BREAKDOWN_ROWS]
        labelled = any(r.get("label_runs") for r in shown)
        columns = {
            "group": (
                key.replace("_", " ").capitalize(),
                [_group_label(r.get("group")) for r in shown],
            ),
            "runs": ("Runs", [_num(r.get("runs")) for r in shown]),
            "passed": (
                "Correct runs",
                [f"{_num(r.get('passed_runs'))} ({_pct(r.get('pass_rate'))})" for r in shown],
            ),
            "interval": _rates(shown, "runs", key="pass_rate")["interval"],
            "findings": ("Runs with a finding", [_num(r.get("runs_with_findings")) for r in shown]),
            "score": ("Mean score", [_num(r.get("mean_score"), 4) for r in shown]),
            "cost": (
                "Total cost",
                [
                    _usd(r.get("total_cost_usd"))
                    + (
                        f" ({_num(r.get('unpriced_runs'))} unpriced)"
                        if r.get("unpriced_runs")
                        else ""
                    )
                    for r in shown
                ],
            ),
            "per_correct": (
                "Cost / correct run",
                [_usd(r.get("cost_per_correct_run")) for r in shown],
            ),
            "cost_q": ("Cost p50 / p95", [_q(r, "cost_usd", _usd) for r in shown]),
            "tokens_q": ("Tokens p50 / p95", [_q(r, "tokens") for r in shown]),
            "calls_q": (
                "Model · tool calls p50 / p95",
                [f"{_q(r, 'model_calls')} · {_q(r, 'tool_calls')}" for r in shown],
            ),
            "duration_q": ("Duration (s) p50 / p95", [_q(r, "duration_s") for r in shown]),
        }
        if labelled:
            columns["label"] = ("All label fields right", [_label_rate(r) for r in shown])
            columns["label_cost"] = (
                "Cost / run with fields right",
                [_usd(r.get("label_cost_per_correct_run")) for r in shown],
            )
        note = None
        if len(rows) > len(shown):
            note = f"First {len(shown)} of {len(rows)} groups; all in summary.json."
        parts.append(
            _table(
                "gt-breakdown-" + re.sub(r"[^a-z0-9]+", "-", key.lower()),
                columns,
                title=_BREAKDOWN_TITLES.get(key, f"By {key}"),
                note=note,
            )
        )
    if not parts:
        return ""
    intro = (
        f"Each group's runs: correct ({_e(correct)}) with its Wilson 95% interval, cost against "
        "quality, and the spread of cost, tokens, calls and duration."
    )
    return _section("breakdowns", "Breakdowns: cost against quality", "\n".join(parts), intro)


def _label_rate(r: Mapping[str, Any]) -> str:
    lo, hi = r.get("label_correct_rate_lo"), r.get("label_correct_rate_hi")
    return (
        f"{_num(r.get('label_correct_runs'))} of {_num(r.get('label_runs'))} "
        f"({_pct(r.get('label_correct_rate'))}; {_interval(lo, hi, n=r.get('label_runs'))})"
    )


def _trials(summary: Mapping[str, Any]) -> str:
    trials = _get(summary, "metrics", "trials")
    if not trials:
        return ""
    dis = trials.get("disagreement") or {}
    cards = [
        _card(
            "Cases",
            _num(trials.get("cases")),
            f"{_num(trials.get('cases_with_trials'))} with 2+ trials "
            f"({_num(trials.get('runs'))} runs)",
        ),
        _rate_card("Answers disagree", dis.get("answers"), "cases with 2+ trials"),
        _rate_card("Trajectories disagree", dis.get("trajectories"), "cases with 2+ trials"),
    ]
    per_case = trials.get("trials_per_case") or []
    pass_k = trials.get("pass_hat_k") or []
    tables = ""
    if pass_k:
        tables += _table(
            "gt-pass-k",
            {
                "k": ("k", [_num(r.get("k")) for r in pass_k]),
                "n_cases": ("Cases with n ≥ k", [_num(r.get("cases")) for r in pass_k]),
                "trials": ("Trials", [_num(r.get("trials")) for r in pass_k]),
                "value": ("pass^k", [_pct(r.get("value")) for r in pass_k]),
            },
            title="pass^k: the chance that k trials of a case all pass",
        )
    if per_case:
        tables += _table(
            "gt-trials-per-case",
            {
                "k": ("Trials of the case", [_num(r.get("k")) for r in per_case]),
                "n_cases": ("Cases", [_num(r.get("cases")) for r in per_case]),
            },
            title="Trials per case",
        )
    method = _get(summary, "metrics", "methods", "trials")
    return _section(
        "trials",
        "Trials and pass^k",
        f'<div class="cards">{"".join(c for c in cards if c)}</div>\n{tables}',
        _e(method) if method else None,
    )


def _temperature_label(value: Any) -> str:
    return "(none or several)" if value is None else _e(_num(value))


#: The keys of a breakdown row's correct rate, as `_rate_cell` takes them.
_PASS_RATE = ("passed_runs", "runs", "pass_rate", "pass_rate_lo", "pass_rate_hi")


def _rate_cell(r: Mapping[str, Any] | None, k="k", n="n", rate="rate", lo="lo", hi="hi") -> str:
    """``k of n (rate; interval)`` of a `metrics.rate` dict (or of a row whose keys are named)."""
    if not r or not r.get(n):
        return _DASH
    return (
        f"{_num(r.get(k))} of {_num(r.get(n))} ({_pct(r.get(rate))}; "
        f"{_interval(r.get(lo), r.get(hi), n=r.get(n))})"
    )


def _temperature(summary: Mapping[str, Any]) -> str:
    """The temperature axis: per temperature, the runs' correct rate and cost (the temperature
    breakdown), their trials' disagreement, and the omission rate per required tool."""
    axis = _get(summary, "metrics", "temperature")
    by_temperature = _get(summary, "metrics", "breakdowns", "temperature") or []
    if not axis and not by_temperature:
        return ""
    axis = axis or {}
    disagreement = {r.get("temperature"): r for r in axis.get("disagreement") or []}
    temperatures = [r.get("group") for r in by_temperature]
    temperatures += [t for t in disagreement if t not in temperatures]
    rows = {r.get("group"): r for r in by_temperature}
    parts = []
    if temperatures:
        columns = {
            "temperature": ("Temperature", [_temperature_label(t) for t in temperatures]),
            "runs": ("Runs", [_num(rows.get(t, {}).get("runs")) for t in temperatures]),
            "correct": (
                "Correct runs (95% interval)",
                [_rate_cell(rows.get(t), *_PASS_RATE) for t in temperatures],
            ),
            "per_correct": (
                "Cost / correct run",
                [_usd(rows.get(t, {}).get("cost_per_correct_run")) for t in temperatures],
            ),
            "cost_q": (
                "Cost p50 / p95",
                [_q(rows[t], "cost_usd", _usd) if t in rows else _DASH for t in temperatures],
            ),
            "answers": (
                "Cases whose answers disagree",
                [_rate_cell(disagreement.get(t, {}).get("answers")) for t in temperatures],
            ),
            "paths": (
                "Cases whose trajectories disagree",
                [_rate_cell(disagreement.get(t, {}).get("trajectories")) for t in temperatures],
            ),
        }
        if any(r.get("label_runs") for r in by_temperature):
            columns["label"] = (
                "All label fields right",
                [_label_rate(rows[t]) if t in rows else _DASH for t in temperatures],
            )
        parts.append(
            _table(
                "gt-temperature",
                columns,
                title="Quality, cost and trial disagreement per temperature",
                note="Disagreement: over the cases with 2+ trials at that temperature.",
            )
        )
    omissions = axis.get("omission_rates") or []
    if omissions:
        temperature = [_temperature_label(r.get("temperature")) for r in omissions]
        parts.append(
            _omission_table(
                omissions,
                "gt-temperature-omissions",
                "required_runs",
                "Tool omissions per temperature",
                {"temperature": ("Temperature", temperature)},
            )
        )
    if not parts:
        return ""
    method = _get(summary, "metrics", "methods", "temperature")
    return _section(
        "temperature",
        "Temperature sensitivity",
        "\n".join(parts),
        _e(method) if method else None,
    )


#: Rows shown in the cost-per-step table (the rest are in summary.json).
STEP_ROWS = 100


def _steps(summary: Mapping[str, Any]) -> str:
    """Cost versus quality per step: per (agent, step, model), the cost of a call and the
    correct rate of the runs the calls belong to."""
    rows = _get(summary, "metrics", "steps")
    if not rows:
        return ""
    shown = rows[:STEP_ROWS]
    note = None
    if len(rows) > len(shown):
        note = f"First {len(shown)} of {len(rows)} rows; all in summary.json."
    table = _table(
        "gt-steps",
        {
            "agent": ("Agent", [_group_label(r.get("agent")) for r in shown]),
            "step": ("Step", [_num(r.get("step")) for r in shown]),
            "model": ("Model", [_group_label(r.get("model")) for r in shown]),
            "calls": (
                "Calls",
                [
                    _num(r.get("calls"))
                    + (
                        f" ({_num(r['calls'] - r['priced_calls'])} unpriced)"
                        if r.get("priced_calls") is not None
                        and r.get("calls") != r.get("priced_calls")
                        else ""
                    )
                    for r in shown
                ],
            ),
            "cost": (
                "Cost of a call: mean / p95",
                [f"{_usd(r.get('mean_cost_usd'))} / {_usd(r.get('p95_cost_usd'))}" for r in shown],
            ),
            "runs": ("Runs", [_num(r.get("runs")) for r in shown]),
            "correct": (
                "Correct runs",
                [
                    f"{_num(r.get('correct_runs'))} of {_num(r.get('judged_runs'))} "
                    f"({_pct(r.get('correct_rate'))})"
                    for r in shown
                ],
            ),
            "interval": _rates(shown, "judged_runs", key="correct_rate")["interval"],
            **_bars(shown, "correct_rate"),
        },
        title="Cost and quality per step and model",
        note=note,
    )
    correct = _get(summary, "metrics", "methods", "correct") or "no finding at or above high"
    method = _get(summary, "metrics", "methods", "steps")
    intro = (
        "Where to route: each step of an agent's runs, per model, with what a call costs and "
        f"how many of the runs it belongs to were correct ({_e(correct)}). "
        + (_e(method) if method else "")
    )
    return _section("steps", "Cost and quality per step", table, intro)


_TAIL_NAMES = {
    "cost_usd": ("Cost per run", _usd),
    "input_tokens": ("Input tokens", _fig),
    "output_tokens": ("Output tokens", _fig),
    "tokens": ("Tokens", _fig),
    "model_calls": ("Model calls", _fig),
    "tool_calls": ("Tool calls", _fig),
    "duration_s": ("Duration (s)", _fig),
    "retries": ("Retries", _fig),
    "score": ("Score", _fig),
}


def _tails(summary: Mapping[str, Any]) -> str:
    rows = _get(summary, "metrics", "tails") or []
    if not rows:
        return ""

    def fmt(r: Mapping[str, Any]):
        return _TAIL_NAMES.get(r.get("metric"), (r.get("metric"), _fig))[1]

    table = _table(
        "gt-tails",
        {
            "metric": (
                "Per run",
                [_e(_TAIL_NAMES.get(r.get("metric"), (r.get("metric"),))[0]) for r in rows],
            ),
            **_counts(rows, runs="Runs", n="With a value", missing="Missing"),
            **{p: (p, [_quantile(r, p, fmt(r)) for r in rows]) for p in ("p50", "p95", "p99")},
            "max": ("Max", [fmt(r)(r.get("max")) for r in rows]),
        },
        note="Under each quantile, its distribution-free 95% interval.",
    )
    scores = _get(summary, "metrics", "scores")
    lead = ""
    if scores:
        lead = (
            f"<p>Score out of 100: mean {_num(scores.get('mean'), 4)}, median "
            f"{_num(scores.get('p50'))}, lowest {_num(scores.get('min'))} over "
            f"{_num(scores.get('runs'))} runs.</p>"
        )
    return _section("tails", "Distributions per run", lead + table)


def _rule_coverage(summary: Mapping[str, Any]) -> str:
    rows = _get(summary, "metrics", "rule_coverage") or []
    kinds = _get(summary, "metrics", "kind_rates") or []
    if not rows and not kinds:
        return ""
    parts = []
    if rows:
        parts.append(
            _table(
                "gt-rule-coverage",
                {
                    **_rule_columns(rows),
                    **_counts(
                        rows,
                        applied="Applied",
                        checked="Checked",
                        partial="Partly checked",
                        not_applicable="Not applicable",
                        unverifiable="Unverifiable",
                        error="Error",
                        judged="Judged",
                    ),
                    **_rates(rows, "applied", "Judged rate", "judged_rate"),
                },
                title="What each rule could check, per run",
            )
        )
    if kinds:
        parts.append(
            _table(
                "gt-kind-rates",
                {
                    "kind": ("Finding kind", [_t(r.get("kind"), 40) for r in kinds]),
                    **_counts(kinds, judged="Judged runs", failed="Runs with one"),
                    **_rates(kinds, "judged"),
                },
                title="Rates by finding kind",
            )
        )
    return _section("coverage", "Rule coverage and finding kinds", "\n".join(parts))


# --- findings ----------------------------------------------------------------------------------


#: The columns of every run the page reads (`render_html`): to rank them and plot their costs.
_RANKED = ("run_id", "score", "findings", "cost_usd", "models")


class _Context:
    """The runs, steps and findings of an analysis the page's sections share: `runs` holds
    every run's `_RANKED` columns; `runset` the rest, read only for the runs shown (a
    partitioned result's so from its spill)."""

    def __init__(self, analysis):
        self.runset: RunTables = analysis.runs
        self.runs = runs = self.runset.select("runs", _RANKED)
        self.findings = analysis.evaluation.findings if analysis.evaluation is not None else None
        order = runs.select(
            "run_id",
            pl.col("score") if "score" in runs.columns else pl.lit(None, pl.Float64).alias("score"),
            pl.col("findings") if "findings" in runs.columns else pl.lit(0).alias("findings"),
        )
        #: run_id, findings, _rank: the runs, worst first (lowest score, most findings, id)
        self.ranks = order.sort(
            ["score", "findings", "run_id"], descending=[False, True, False], nulls_last=True
        ).select("run_id", "findings", _rank=pl.int_range(pl.len(), dtype=pl.Int64))

    def rows(self, name: str, run_ids: Sequence[str]) -> pl.DataFrame:
        """The rows of table `name` ("runs", "steps") of `run_ids`."""
        return self.runset.select(name, run_ids=sorted(run_ids))

    def browser(self, labels=None) -> str:
        """The run browser section (`browser_section`), with each labelled run's fields,
        expected against answered, when `labels` (as `render_html` takes them) are given."""
        fields = None
        if labels is not None:
            from analyzer.metrics.labels import scored

            fields = scored(labels, self.runset).fields
        return browser_section(self.runset, self.findings, self.ranks, fields)

    @functools.cached_property
    def worst(self) -> list[str]:
        """The runs shown with their trajectory: lowest score, then most findings, then run
        id; only runs with a finding, at most WORST_RUNS."""
        bad = self.ranks.filter(pl.col("findings") > 0)
        return bad.get_column("run_id").head(WORST_RUNS).to_list()

    @functools.cached_property
    def shown_findings(self) -> list[tuple[tuple[str, str], list[dict[str, Any]], int]]:
        """Per (pack, rule_id): its first FINDINGS_PER_RULE findings (worst runs first), and
        how many it has in all."""
        if self.findings is None or self.findings.is_empty():
            return []
        ranked = self.findings.join(self.ranks.select("run_id", "_rank"), on="run_id", how="left")
        rows = ordered_findings(ranked, "pack", "rule_id", "_rank", "run_id")
        return [
            (key, part.head(FINDINGS_PER_RULE).to_dicts(), part.height)
            for key, part in rows.group_by(["pack", "rule_id"], maintain_order=True)
        ]


def _run_link(run_id: str) -> str:
    return f'<a href="#{_anchor("run", run_id)}" class="mono">{_t(run_id, 80)}</a>'


def _findings(summary: Mapping[str, Any], ctx: _Context) -> str:
    metrics = summary.get("metrics") or {}
    rates = metrics.get("rule_rates")
    parts = []
    if rates:
        parts.append(
            _table(
                "gt-rule-rates",
                {
                    **_rule_columns(rates),
                    **_counts(
                        rates,
                        applied="Applied to runs",
                        judged="Judged runs",
                        failed="Runs with a finding",
                    ),
                    **_rates(rates, "judged"),
                },
                title="Rule rates",
            )
        )
    if ctx.findings is None:
        parts.append("<p>No rule pack was applied.</p>")
        return _section("findings", "Findings by rule", "\n".join(parts))
    shown = ctx.shown_findings
    if not shown:
        parts.append("<p>No finding.</p>")
    traj = set(ctx.worst)
    for n, ((pack, rule_id), rows, total) in enumerate(shown):
        severity = rows[0].get("severity")
        runs = len({r["run_id"] for r in rows})
        title = f"{pack} / {rule_id} ({severity}): {_num(total)} finding{'s' if total != 1 else ''}"
        note = None
        if total > len(rows):
            title += f", the first {len(rows)}"
            note = (
                f"First {len(rows)} of {total} shown (worst runs first); all in findings.jsonl, "
                "and every run with one in the run browser above (filter by this rule)."
            )
        parts.append(
            f'<h3 id="{_anchor("rule", pack, rule_id)}" class="sev-{_e(severity)}">'
            f"{_e(title)} in {runs} run{'s' if runs != 1 else ''}</h3>"
        )
        parts.append(
            _table(
                f"gt-findings-{n}",
                {
                    "run": ("Run", [_run_link(r["run_id"]) for r in rows]),
                    "case": ("Case", [_t(r.get("case_id"), 30) for r in rows]),
                    "kind": ("Kind", [_t(r.get("kind"), 30) for r in rows]),
                    "tool": ("Tool", [_t(r.get("tool"), 40) for r in rows]),
                    "argument": ("Argument", [_t(r.get("argument"), 40) for r in rows]),
                    "detail": ("Detail", [_t(r.get("detail"), 300) for r in rows]),
                    "spans": (
                        "Evidence spans",
                        [_span_links(r["run_id"], r.get("span_ids"), traj) for r in rows],
                    ),
                },
                note=note,
            )
        )
    return _section(
        "findings",
        "Findings by rule",
        "\n".join(parts),
        "Each finding with its run (linked to the run's row below) and the spans that show it "
        "(linked to the step when the run's trajectory is on this page).",
    )


def _span_links(run_id: str, span_ids: Sequence[str] | None, traj: set[str]) -> str:
    if not span_ids:
        return _DASH
    out = []
    for sid in span_ids:
        text = f'<span class="mono">{_t(sid, 40)}</span>'
        if run_id in traj:
            text = f'<a href="#{_anchor("step", run_id, sid)}">{text}</a>'
        out.append(text)
    return " ".join(out)


# --- runs cited --------------------------------------------------------------------------------


def _cited_runs(ctx: _Context) -> str:
    cited = set(ctx.worst)
    for _, rows, _ in ctx.shown_findings:
        cited.update(r["run_id"] for r in rows)
    if not cited:
        return ""
    runs = (
        ctx.rows("runs", cited)
        .join(ctx.ranks.select("run_id", "_rank"), on="run_id", how="left")
        .sort("_rank")
    )
    traj = set(ctx.worst)
    rows = runs.to_dicts()

    def run_cell(r: Mapping[str, Any]) -> str:
        rid = r["run_id"]
        cell = f'<span id="{_anchor("run", rid)}" class="mono">{_t(rid, 80)}</span>'
        if rid in traj:
            cell += f' <a href="#{_anchor("traj", rid)}">trajectory</a>'
        return cell

    table = _table(
        "gt-runs",
        {
            "run": ("Run", [run_cell(r) for r in rows]),
            "case": ("Case", [_t(r.get("case_id"), 30) for r in rows]),
            "agent": ("Agent", [_t(r.get("agent"), 30) for r in rows]),
            "models": ("Models", [_t(", ".join(r.get("models") or []), 60) for r in rows]),
            **_counts(rows, score="Score", findings="Findings"),
            "cost": ("Cost", [_usd(r.get("cost_usd")) for r in rows]),
            "answer": ("Answer (clipped)", [_t(r.get("answer"), 160) for r in rows]),
        },
    )
    return _section("runs", "Runs cited", table, "The runs the findings above name, worst first.")


# --- worst runs --------------------------------------------------------------------------------


def _requested(calls: Sequence[Mapping[str, Any]] | None) -> str:
    if not calls:
        return ""
    return "; ".join(f"{c.get('name')}({c.get('arguments') or ''})" for c in calls)


_STEP_COLUMNS = {
    "index": "#",
    "kind": "Step",
    "name": "Model or tool",
    "status": "Status",
    "tokens": "Tokens in / out",
    "cost": "Cost",
    "arguments": "Arguments (clipped)",
    "result": "Result or output (clipped)",
    "span": "Span",
}


def _step_row(step: Mapping[str, Any]) -> dict[str, str]:
    """The cells of one trajectory step, escaped; its index carries the step's anchor."""
    tool = step.get("kind") == "tool_call"
    model = step.get("kind") == "model_call"
    status = _t(step.get("status"), 20)
    if step.get("error_type"):
        status += f" ({_t(step.get('error_type'), 40)})"
    if tool and step.get("executed") is False:
        status += " no span"
    if tool:
        arguments = _t(step.get("arguments"), 300)
    else:
        requested = _requested(step.get("requested_calls"))
        arguments = f"requests {_t(requested, 300)}" if requested else ""
    result = step.get("result") if tool else step.get("output_text")
    anchor = _anchor("step", step.get("run_id"), step.get("span_id"))
    return {
        "index": f'<span id="{anchor}">{_num(step.get("index"))}</span>',
        "kind": _t((step.get("kind") or "").replace("_", " "), 20),
        "name": _t(step.get("name") or step.get("tool_name") or step.get("model"), 50),
        "status": status,
        "tokens": (
            f"{_num(step.get('input_tokens'))} / {_num(step.get('output_tokens'))}" if model else ""
        ),
        "cost": _usd(step.get("cost_usd")) if model else "",
        "arguments": arguments,
        "result": _t(result, 200) if result is not None else "",
        "span": f'<span class="mono">{_t(step.get("span_id"), 40)}</span>',
    }


def _worst(ctx: _Context) -> str:
    worst = ctx.worst
    intro = (
        f"The runs with a finding, at most {WORST_RUNS}, lowest score first (then the most "
        "findings), each with its steps in order: model calls and tool calls, their arguments "
        "and results clipped."
    )
    if not worst:
        return _section("worst", "Worst runs", "<p>No run has a finding.</p>", intro)
    runs = {r["run_id"]: r for r in ctx.rows("runs", worst).to_dicts()}
    steps = ctx.rows("steps", worst).sort("run_id", "index")
    failed = {}  # run_id -> the rules it broke
    if ctx.findings is not None:
        found = ctx.findings.filter(pl.col("run_id").is_in(worst))
        failed = dict(found.group_by("run_id").agg(pl.col("rule_id").unique().sort()).iter_rows())
    parts = []
    for n, rid in enumerate(worst):
        r = runs[rid]
        mine = steps.filter(pl.col("run_id") == rid)
        total = mine.height
        mine = mine.head(STEPS_PER_RUN).to_dicts()
        info = [
            ("Case", _t(r.get("case_id"), 60)),
            ("Agent", _t(r.get("agent"), 60)),
            ("Models", _t(", ".join(r.get("models") or []), 100)),
            ("Score", _num(r.get("score"))),
            (
                "Findings",
                _num(r.get("findings"))
                + (
                    f" ({', '.join(_t(x, 40) for x in failed.get(rid, []))})"
                    if rid in failed
                    else ""
                ),
            ),
            ("Cost", _usd(r.get("cost_usd"))),
            ("Duration", f"{_num(r.get('duration_s'))} s"),
            ("Answer", _t(r.get("answer"), 600) if r.get("has_answer") else "no answer"),
        ]
        parts.append(
            f'<h3 id="{_anchor("traj", rid)}">{n + 1}. Run <span class="mono">{_t(rid, 80)}'
            f'</span> <a href="#{_anchor("run", rid)}" class="muted">(row)</a></h3>' + _dl(info)
        )
        if not mine:
            parts.append("<p>No step recorded.</p>")
            continue

        cells = [_step_row(step) for step in mine]
        columns = {c: (label, [r[c] for r in cells]) for c, label in _STEP_COLUMNS.items()}
        note = f"First {STEPS_PER_RUN} of {total} steps." if total > STEPS_PER_RUN else None
        parts.append(_table(f"gt-trajectory-{n}", columns, note=note))
    return _section("worst", "Worst runs", "\n".join(parts), intro)


# --- methods -----------------------------------------------------------------------------------


def _methods(summary: Mapping[str, Any]) -> str:
    methods = _get(summary, "metrics", "methods")
    if not methods:
        return ""
    items = [(k.replace("_", " "), _e(v)) for k, v in sorted(methods.items())]
    return _section("methods", "Methods", _dl(items))
