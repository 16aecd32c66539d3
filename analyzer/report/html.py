"""report.html: one self-contained page of a report's figures, findings and worst runs."""

from __future__ import annotations

import contextlib
import hashlib
import html
import math
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import polars as pl

from analyzer.report.browser import CSS as _BROWSER_CSS
from analyzer.report.browser import SCRIPT, SCRIPT_HASH, browser_section
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
#: Points of each model's cost curve in the tails nanoplots (sorted costs, sampled).
_CURVE_POINTS = 60

_DASH = "—"

# No network, and no script but the run browser's (allowed by its hash): a payload that
# escaped the escaping could still neither run nor call home.
_CSP = f"default-src 'none'; style-src 'unsafe-inline'; script-src '{SCRIPT_HASH}'"

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


def _get(mapping: Mapping[str, Any] | None, *path: str) -> Any:
    """mapping[path[0]][path[1]]..., or None when a key is absent."""
    node: Any = mapping
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


# --- great-tables ------------------------------------------------------------------------------


@contextlib.contextmanager
def _fixed_random() -> Iterator[None]:
    """great-tables jitters a nanoplot whose values are all equal with `random`: seed it, so
    the same input gives the same bytes, and give the caller's generator back untouched."""
    state = random.getstate()
    random.seed(0)
    try:
        yield
    finally:
        random.setstate(state)


def _raw(value: Any) -> str:
    # Cells reach great-tables already escaped by this module (or built from escaped parts):
    # an explicit formatter makes great-tables pass them through as they are.
    return "" if value is None else str(value)


_IMPORT = re.compile(r"@import[^;]*;")


def _table(
    frame: pl.DataFrame,
    table_id: str,
    labels: Mapping[str, str],
    *,
    title: str | None = None,
    nanoplot: str | None = None,
    note: str | None = None,
) -> str:
    """A great-tables table of ``frame`` whose text columns hold escaped HTML.

    ``labels`` maps column -> fixed label text; ``nanoplot`` names a list column drawn as a
    nanoplot (its missing cells shown as a dash).
    """
    from great_tables import GT, nanoplot_options
    from great_tables import html as gt_html

    text_cols = [c for c in frame.columns if c != nanoplot]
    gt = GT(frame, id=table_id).cols_label(**{c: gt_html(_e(labels[c])) for c in frame.columns})
    if title:
        gt = gt.tab_header(title=gt_html(_e(title)))
    if text_cols:
        gt = gt.fmt(_raw, columns=text_cols)
    if nanoplot is not None:
        gt = gt.fmt_nanoplot(
            nanoplot,
            plot_type="line",
            options=nanoplot_options(
                show_data_area=False, data_point_radius=4, data_line_stroke_width=4
            ),
        ).sub_missing(columns=nanoplot, missing_text=_DASH)
    if note:
        gt = gt.tab_source_note(gt_html(_e(note)))
    gt = gt.tab_options(table_font_size="13px", container_width="100%")
    with _fixed_random():
        out = gt.as_raw_html()
    # Recent great-tables versions add no web font by default; strip any that appears so the
    # page never fetches anything when opened.
    return _IMPORT.sub("", out)


# --- the page ----------------------------------------------------------------------------------


def render_html(analysis, summary: Mapping[str, Any], *, labels=None) -> str:
    """The report page: headline figures, a browser of every run, tool omissions, cost tails,
    cost vs correct rate per model, breakdowns, trials, findings by rule with evidence, and
    the worst runs with their trajectories.

    `labels`: the golden labels the summary scored (`analyzer.labels.LabelSet`, or its
    `LabelScores`), or None; given, each run's view shows its label fields, expected against
    answered.

    Self-contained (no external resource; one inline script, allowed by its hash, that puts
    trace text on the page as text only) and deterministic: the same analysis and summary give
    the same bytes. Every text from the traces is escaped. Every section but the run browser
    reads without script.
    """
    # Every run, but only the columns the page ranks and plots them by; the other columns and
    # the steps only of the runs it shows (a partitioned result's are read so from its spill).
    runs = analysis.runs.select("runs", _RANKED)
    findings = analysis.evaluation.findings if analysis.evaluation is not None else None
    ctx = _Context(analysis.runs, runs, findings)
    worst = ctx.worst_runs()
    # The run browser's data is built in a thread of its own (polars, JSON and zlib, which let
    # the GIL go) while the static sections are rendered (great-tables: Python, mostly).
    with ThreadPoolExecutor(1, thread_name_prefix="agenttrace-browser") as pool:
        browser = pool.submit(
            browser_section, analysis.runs, findings, ctx.ranks, _label_fields(analysis, labels)
        )
        parts = _static_parts(summary, runs, ctx, worst)
        parts.insert(2, browser.result())
    titles = (
        ("unchecked", "Unchecked"),
        ("headline", "Headline"),
        ("browser", "Run browser"),
        ("omissions", "Tool omissions"),
        ("cost-tails", "Cost tails"),
        ("routing", "Cost vs correct rate"),
        ("breakdowns", "Breakdowns"),
        ("trials", "Trials"),
        ("temperature", "Temperature"),
        ("steps", "Cost per step"),
        ("tails", "Distributions"),
        ("labels", "Golden labels"),
        ("findings", "Findings by rule"),
        ("coverage", "Rule coverage"),
        ("accounting", "Input and checks"),
        ("runs", "Runs cited"),
        ("worst", "Worst runs"),
        ("methods", "Methods"),
    )
    # Only the sections this summary has (one without metrics has fewer): no dead link.
    nav = " · ".join(
        f'<a href="#{sid}">{_e(name)}</a>'
        for sid, name in titles
        if any(p.startswith(f'<section id="{sid}"') for p in parts)
    )
    version = _e(summary.get("agenttrace_version", ""))
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        "<title>agenttrace report</title>\n"
        f"<style>{_CSS}{_BROWSER_CSS}</style>\n</head>\n<body>\n"
        f"<h1>agenttrace report</h1>\n"
        f'<p class="muted">agenttrace {version}, summary version '
        f"{_e(summary.get('summary_version', ''))}</p>\n"
        f"<nav>{nav}</nav>\n"
        + "\n".join(p for p in parts if p)
        + f"\n<script>{SCRIPT}</script>\n</body>\n</html>\n"
    )


def _static_parts(
    summary: Mapping[str, Any], runs: pl.DataFrame, ctx: _Context, worst: list[str]
) -> list[str]:
    """Every section of the page but the run browser, in page order."""
    return [
        _unchecked(summary),
        _headline(summary),
        _omissions(summary),
        _cost_tails(runs, summary),
        _routing(summary),
        _breakdowns(summary),
        _trials(summary),
        _temperature(summary),
        _steps(summary),
        _tails(summary),
        _labels(summary),
        _findings(summary, ctx, worst),
        _rule_coverage(summary),
        _accounting(summary),
        _cited_runs(ctx, worst),
        _worst(ctx, worst),
        _methods(summary),
    ]


def _label_fields(analysis, labels) -> pl.DataFrame | None:
    """Each labelled run's fields, expected against answered (`LabelScores.fields`)."""
    if labels is None:
        return None
    from analyzer.labels import scored

    return scored(labels, analysis.runs).fields


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
    tail = _tail_row(metrics, "cost_usd")
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


def _tail_row(metrics: Mapping[str, Any], metric: str) -> Mapping[str, Any] | None:
    for row in metrics.get("tails") or []:
        if row.get("metric") == metric:
            return row
    return None


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


def _omission_table(rows: Sequence[Mapping[str, Any]], table_id: str, base: str, title: str):
    """Per tool: omitted runs / ``base`` runs, the rate, its Wilson interval and a bar."""
    frame = pl.DataFrame(
        {
            "tool": [_t(r.get("tool"), 60) for r in rows],
            "required": [_num(r.get(base)) for r in rows],
            "omitted": [_num(r.get("omitted_runs")) for r in rows],
            "rate": [_pct(r.get("rate")) for r in rows],
            "interval": [
                _interval(r.get("rate_lo"), r.get("rate_hi"), n=r.get(base)) for r in rows
            ],
            "bar": [_interval_bar(r.get("rate"), r.get("rate_lo"), r.get("rate_hi")) for r in rows],
        },
        schema=dict.fromkeys(("tool", "required", "omitted", "rate", "interval", "bar"), pl.String),
    )
    return _table(
        frame,
        table_id,
        {
            "tool": "Tool",
            "required": "Required in runs" if base == "required_runs" else "Expected in runs",
            "omitted": "Omitted in runs",
            "rate": "Omission rate",
            "interval": "95% interval",
            "bar": "",
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
        frame = pl.DataFrame(
            {
                "field": [_t(r.get("field"), 40) for r in rows],
                "critical": ["critical" if r.get("critical") else "" for r in rows],
                "match": [_t(", ".join(r.get("matches") or []), 40) for r in rows],
                "runs": [_num(r.get("runs")) for r in rows],
                "correct": [_num(r.get("correct")) for r in rows],
                "wrong": [_num(r.get("wrong")) for r in rows],
                "missing": [_num(r.get("missing")) for r in rows],
                "rate": [_pct(r.get("rate")) for r in rows],
                "interval": [
                    _interval(r.get("rate_lo"), r.get("rate_hi"), n=r.get("runs")) for r in rows
                ],
            },
            schema=dict.fromkeys(
                (
                    "field",
                    "critical",
                    "match",
                    "runs",
                    "correct",
                    "wrong",
                    "missing",
                    "rate",
                    "interval",
                ),
                pl.String,
            ),
        )
        table = _table(
            frame,
            "gt-label-fields",
            {
                "field": "Field",
                "critical": "Critical",
                "match": "Match",
                "runs": "Runs",
                "correct": "Correct",
                "wrong": "Wrong",
                "missing": "Missing",
                "rate": "Accuracy",
                "interval": "95% interval",
            },
            title="Answer fields",
        )
    wrong_rows = labels.get("wrong_fields") or []
    if wrong_rows:
        frame = pl.DataFrame(
            {
                "case": [_t(r.get("case_id"), 60) for r in wrong_rows],
                "run": [f'<span class="mono">{_t(r.get("run_id"), 40)}</span>' for r in wrong_rows],
                "field": [
                    _t(r.get("field"), 40) + (" (critical)" if r.get("critical") else "")
                    for r in wrong_rows
                ],
                "expected": [_t(r.get("expected"), 200) for r in wrong_rows],
                "actual": [
                    _t(r.get("actual"), 200) if r.get("actual") is not None else "(missing)"
                    for r in wrong_rows
                ],
            },
            schema=dict.fromkeys(("case", "run", "field", "expected", "actual"), pl.String),
        )
        table += _table(
            frame,
            "gt-label-wrong",
            {
                "case": "Case",
                "run": "Run",
                "field": "Field",
                "expected": "Expected",
                "actual": "Answered",
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


def _curve(values: pl.Series) -> list[float] | None:
    """Sorted values, sampled at evenly spaced ranks when there are many (max included)."""
    xs = values.drop_nulls().sort()
    n = len(xs)
    if n == 0:
        return None
    if n > _CURVE_POINTS:
        idx = [round(i * (n - 1) / (_CURVE_POINTS - 1)) for i in range(_CURVE_POINTS)]
        xs = xs.gather(idx)
    return [float(round(x, 9)) for x in xs.to_list()]


def _unpriced(summary: Mapping[str, Any]) -> str:
    """The models whose calls have no cost, with their token counts (never a cost of 0)."""
    rows = [
        r if isinstance(r, Mapping) else {"model": r}
        for r in _get(summary, "metrics", "cost", "unpriced_models") or []
    ]
    if not rows:
        return ""
    frame = pl.DataFrame(
        {
            "model": [_t(r.get("model"), 60) if r.get("model") else "(not recorded)" for r in rows],
            "reason": [_t(r.get("reason"), 40) for r in rows],
            "calls": [_num(r.get("model_calls")) for r in rows],
            "runs": [_num(r.get("runs")) for r in rows],
            "input": [_num(r.get("input_tokens")) for r in rows],
            "output": [_num(r.get("output_tokens")) for r in rows],
            "cached": [_num(r.get("cached_input_tokens")) for r in rows],
        },
        schema=dict.fromkeys(
            ("model", "reason", "calls", "runs", "input", "output", "cached"), pl.String
        ),
    )
    return _table(
        frame,
        "gt-unpriced",
        {
            "model": "Model",
            "reason": "Why no cost",
            "calls": "Model calls",
            "runs": "Runs",
            "input": "Input tokens",
            "output": "Output tokens",
            "cached": "Cached input tokens",
        },
        title="Unpriced models",
        note="Their runs' cost is unknown (—), not zero: add them to the price table (--prices).",
    )


def _cost_tails(runs: pl.DataFrame, summary: Mapping[str, Any]) -> str:
    from analyzer.metrics import run_groups, tails

    if "cost_usd" not in runs.columns or runs.height == 0:
        return ""
    overall = tails(runs, metrics=("cost_usd",)).with_columns(
        pl.lit(None, pl.String).alias("model")
    )
    per_model = tails(runs, by="model", metrics=("cost_usd",))
    groups, _ = run_groups(runs, "model")
    costs = groups.join(runs.select("run_id", "cost_usd"), on="run_id", how="left")
    rows: list[dict[str, Any]] = []
    curves: list[list[float] | None] = []
    for row in per_model.iter_rows(named=True):
        model = row["model"]
        mine = costs.filter(
            pl.col("model").is_null() if model is None else pl.col("model") == model
        )
        rows.append({**row, "_label": _t(model, 60) if model is not None else "(no model)"})
        curves.append(_curve(mine.get_column("cost_usd")))
    for row in overall.iter_rows(named=True):
        rows.append({**row, "_label": "<b>all runs</b>"})
        curves.append(_curve(runs.get_column("cost_usd")))

    def q(r: Mapping[str, Any], name: str) -> str:
        return (
            f'{_usd(r[name])}<br><span class="muted">'
            f"{_interval(r[f'{name}_lo'], r[f'{name}_hi'], _usd)}</span>"
        )

    frame = pl.DataFrame(
        {
            "model": [r["_label"] for r in rows],
            "runs": [_num(r["runs"]) for r in rows],
            "priced": [_num(r["n"]) for r in rows],
            "p50": [q(r, "p50") for r in rows],
            "p95": [q(r, "p95") for r in rows],
            "p99": [q(r, "p99") for r in rows],
            "max": [_usd(r["max"]) for r in rows],
            "curve": curves,
        },
        schema={
            **dict.fromkeys(("model", "runs", "priced", "p50", "p95", "p99", "max"), pl.String),
            "curve": pl.List(pl.Float64),
        },
    )
    table = _table(
        frame,
        "gt-cost-tails",
        {
            "model": "Model",
            "runs": "Runs",
            "priced": "Priced runs",
            "p50": "p50",
            "p95": "p95",
            "p99": "p99",
            "max": "Max",
            "curve": "Cost per run, sorted",
        },
        nanoplot="curve",
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
    frame = pl.DataFrame(
        {
            "n": [str(i + 1) for i in range(len(rows))],
            "model": [_t(r.get("model_family") or "(no model)", 60) for r in rows],
            "runs": [_num(r.get("runs")) for r in rows],
            "judged": [_num(r.get("judged_runs")) for r in rows],
            "correct": [_num(r.get("correct_runs")) for r in rows],
            "rate": [_pct(r.get("correct_rate")) for r in rows],
            "interval": [
                _interval(r.get("correct_rate_lo"), r.get("correct_rate_hi")) for r in rows
            ],
            "mean": [_usd(r.get("mean_cost_usd")) for r in rows],
            "pick": [
                "routing pick"
                if r.get("model_family") == pick and pick is not None
                else (_t(r.get("not_eligible_because"), 60) if not r.get("eligible") else "")
                for r in rows
            ],
        },
        schema=dict.fromkeys(
            ("n", "model", "runs", "judged", "correct", "rate", "interval", "mean", "pick"),
            pl.String,
        ),
    )
    table = _table(
        frame,
        "gt-routing",
        {
            "n": "#",
            "model": "Model family",
            "runs": "Runs",
            "judged": "Judged runs",
            "correct": "Correct runs",
            "rate": "Correct rate",
            "interval": "95% interval",
            "mean": "Mean cost / run",
            "pick": "Routing",
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
        ("Runs", _num(ing.get("runs", runs.get("count")))),
        ("Runs with content recorded", _num(runs.get("with_content"))),
        ("Model calls", _num(runs.get("model_calls"))),
        ("Tool calls", _num(runs.get("tool_calls"))),
        ("Tool calls requested, never run", _num(runs.get("unexecuted_tool_calls"))),
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
    dl = "".join(f"<dt>{_e(k)}</dt><dd>{v}</dd>" for k, v in info)
    parts = [f'<dl class="run">{dl}</dl>']
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
        frame = pl.DataFrame(
            {
                "rule": [_t(x["rule"], 60) for x in reasons],
                "status": [_t(x["status"], 30) for x in reasons],
                "reason": [_t(x["reason"], 200) for x in reasons],
                "runs": [_num(x["runs"]) for x in reasons],
            },
            schema=dict.fromkeys(("rule", "status", "reason", "runs"), pl.String),
        )
        parts.append(
            _table(
                frame,
                "gt-check-reasons",
                {"rule": "Rule", "status": "Status", "reason": "Why", "runs": "Runs"},
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
    for key, rows in sorted(groups.items(), key=lambda kv: _breakdown_order(kv[0])):
        if not rows:
            continue
        shown = rows[:BREAKDOWN_ROWS]
        labelled = any(r.get("label_runs") for r in shown)
        columns: dict[str, list[str]] = {
            "group": [_group_label(r.get("group")) for r in shown],
            "runs": [_num(r.get("runs")) for r in shown],
            "passed": [f"{_num(r.get('passed_runs'))} ({_pct(r.get('pass_rate'))})" for r in shown],
            "interval": [
                _interval(r.get("pass_rate_lo"), r.get("pass_rate_hi"), n=r.get("runs"))
                for r in shown
            ],
            "findings": [_num(r.get("runs_with_findings")) for r in shown],
            "score": [_num(r.get("mean_score"), 4) for r in shown],
            "cost": [
                _usd(r.get("total_cost_usd"))
                + (f" ({_num(r.get('unpriced_runs'))} unpriced)" if r.get("unpriced_runs") else "")
                for r in shown
            ],
            "per_correct": [_usd(r.get("cost_per_correct_run")) for r in shown],
            "cost_q": [_q(r, "cost_usd", _usd) for r in shown],
            "tokens_q": [_q(r, "tokens") for r in shown],
            "calls_q": [f"{_q(r, 'model_calls')} · {_q(r, 'tool_calls')}" for r in shown],
            "duration_q": [_q(r, "duration_s") for r in shown],
        }
        labels = {
            "group": key.replace("_", " ").capitalize(),
            "runs": "Runs",
            "passed": "Correct runs",
            "interval": "95% interval",
            "findings": "Runs with a finding",
            "score": "Mean score",
            "cost": "Total cost",
            "per_correct": "Cost / correct run",
            "cost_q": "Cost p50 / p95",
            "tokens_q": "Tokens p50 / p95",
            "calls_q": "Model · tool calls p50 / p95",
            "duration_q": "Duration (s) p50 / p95",
        }
        if labelled:
            columns["label"] = [_label_rate(r) for r in shown]
            columns["label_cost"] = [_usd(r.get("label_cost_per_correct_run")) for r in shown]
            labels["label"] = "All label fields right"
            labels["label_cost"] = "Cost / run with fields right"
        frame = pl.DataFrame(columns, schema=dict.fromkeys(columns, pl.String))
        note = None
        if len(rows) > len(shown):
            note = f"First {len(shown)} of {len(rows)} groups; all in summary.json."
        parts.append(
            _table(
                frame,
                "gt-breakdown-" + re.sub(r"[^a-z0-9]+", "-", key.lower()),
                labels,
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


def _breakdown_order(key: str) -> tuple[int, str]:
    keys = list(_BREAKDOWN_TITLES)
    return (keys.index(key) if key in keys else len(keys), key)


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
        frame = pl.DataFrame(
            {
                "k": [_num(r.get("k")) for r in pass_k],
                "n_cases": [_num(r.get("cases")) for r in pass_k],
                "trials": [_num(r.get("trials")) for r in pass_k],
                "value": [_pct(r.get("value")) for r in pass_k],
            },
            schema=dict.fromkeys(("k", "n_cases", "trials", "value"), pl.String),
        )
        tables += _table(
            frame,
            "gt-pass-k",
            {"k": "k", "n_cases": "Cases with n ≥ k", "trials": "Trials", "value": "pass^k"},
            title="pass^k: the chance that k trials of a case all pass",
        )
    if per_case:
        frame = pl.DataFrame(
            {
                "k": [_num(r.get("k")) for r in per_case],
                "n_cases": [_num(r.get("cases")) for r in per_case],
            },
            schema=dict.fromkeys(("k", "n_cases"), pl.String),
        )
        tables += _table(
            frame,
            "gt-trials-per-case",
            {"k": "Trials of the case", "n_cases": "Cases"},
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


def _rate_cell(r: Mapping[str, Any] | None) -> str:
    """``k of n (rate; interval)`` of a `metrics.rate` dict."""
    if not r or not r.get("n"):
        return _DASH
    return (
        f"{_num(r.get('k'))} of {_num(r.get('n'))} ({_pct(r.get('rate'))}; "
        f"{_interval(r.get('lo'), r.get('hi'), n=r.get('n'))})"
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
        columns: dict[str, list[str]] = {
            "temperature": [_temperature_label(t) for t in temperatures],
            "runs": [_num(rows.get(t, {}).get("runs")) for t in temperatures],
            "correct": [
                _rate_cell(
                    {
                        "k": rows[t].get("passed_runs"),
                        "n": rows[t].get("runs"),
                        "rate": rows[t].get("pass_rate"),
                        "lo": rows[t].get("pass_rate_lo"),
                        "hi": rows[t].get("pass_rate_hi"),
                    }
                )
                if t in rows
                else _DASH
                for t in temperatures
            ],
            "per_correct": [
                _usd(rows.get(t, {}).get("cost_per_correct_run")) for t in temperatures
            ],
            "cost_q": [_q(rows[t], "cost_usd", _usd) if t in rows else _DASH for t in temperatures],
            "answers": [_rate_cell(disagreement.get(t, {}).get("answers")) for t in temperatures],
            "paths": [
                _rate_cell(disagreement.get(t, {}).get("trajectories")) for t in temperatures
            ],
        }
        labels = {
            "temperature": "Temperature",
            "runs": "Runs",
            "correct": "Correct runs (95% interval)",
            "per_correct": "Cost / correct run",
            "cost_q": "Cost p50 / p95",
            "answers": "Cases whose answers disagree",
            "paths": "Cases whose trajectories disagree",
        }
        if any(r.get("label_runs") for r in by_temperature):
            columns["label"] = [_label_rate(rows[t]) if t in rows else _DASH for t in temperatures]
            labels["label"] = "All label fields right"
        frame = pl.DataFrame(columns, schema=dict.fromkeys(columns, pl.String))
        parts.append(
            _table(
                frame,
                "gt-temperature",
                labels,
                title="Quality, cost and trial disagreement per temperature",
                note="Disagreement: over the cases with 2+ trials at that temperature.",
            )
        )
    omissions = axis.get("omission_rates") or []
    if omissions:
        frame = pl.DataFrame(
            {
                "temperature": [_temperature_label(r.get("temperature")) for r in omissions],
                "tool": [_t(r.get("tool"), 60) for r in omissions],
                "required": [_num(r.get("required_runs")) for r in omissions],
                "omitted": [_num(r.get("omitted_runs")) for r in omissions],
                "rate": [_pct(r.get("rate")) for r in omissions],
                "interval": [
                    _interval(r.get("rate_lo"), r.get("rate_hi"), n=r.get("required_runs"))
                    for r in omissions
                ],
                "bar": [
                    _interval_bar(r.get("rate"), r.get("rate_lo"), r.get("rate_hi"))
                    for r in omissions
                ],
            },
            schema=dict.fromkeys(
                ("temperature", "tool", "required", "omitted", "rate", "interval", "bar"),
                pl.String,
            ),
        )
        parts.append(
            _table(
                frame,
                "gt-temperature-omissions",
                {
                    "temperature": "Temperature",
                    "tool": "Tool",
                    "required": "Required in runs",
                    "omitted": "Omitted in runs",
                    "rate": "Omission rate",
                    "interval": "95% interval",
                    "bar": "",
                },
                title="Tool omissions per temperature",
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
    columns = {
        "agent": [_group_label(r.get("agent")) for r in shown],
        "step": [_num(r.get("step")) for r in shown],
        "model": [_group_label(r.get("model")) for r in shown],
        "calls": [
            _num(r.get("calls"))
            + (
                f" ({_num(r['calls'] - r['priced_calls'])} unpriced)"
                if r.get("priced_calls") is not None and r.get("calls") != r.get("priced_calls")
                else ""
            )
            for r in shown
        ],
        "cost": [f"{_usd(r.get('mean_cost_usd'))} / {_usd(r.get('p95_cost_usd'))}" for r in shown],
        "runs": [_num(r.get("runs")) for r in shown],
        "correct": [
            f"{_num(r.get('correct_runs'))} of {_num(r.get('judged_runs'))} "
            f"({_pct(r.get('correct_rate'))})"
            for r in shown
        ],
        "interval": [
            _interval(r.get("correct_rate_lo"), r.get("correct_rate_hi"), n=r.get("judged_runs"))
            for r in shown
        ],
        "bar": [
            _interval_bar(r.get("correct_rate"), r.get("correct_rate_lo"), r.get("correct_rate_hi"))
            for r in shown
        ],
    }
    frame = pl.DataFrame(columns, schema=dict.fromkeys(columns, pl.String))
    note = None
    if len(rows) > len(shown):
        note = f"First {len(shown)} of {len(rows)} rows; all in summary.json."
    table = _table(
        frame,
        "gt-steps",
        {
            "agent": "Agent",
            "step": "Step",
            "model": "Model",
            "calls": "Calls",
            "cost": "Cost of a call: mean / p95",
            "runs": "Runs",
            "correct": "Correct runs",
            "interval": "95% interval",
            "bar": "",
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

    def q(r: Mapping[str, Any], name: str) -> str:
        f = fmt(r)
        return (
            f'{f(r.get(name))}<br><span class="muted">'
            f"{_interval(r.get(f'{name}_lo'), r.get(f'{name}_hi'), f)}</span>"
        )

    frame = pl.DataFrame(
        {
            "metric": [_e(_TAIL_NAMES.get(r.get("metric"), (r.get("metric"),))[0]) for r in rows],
            "runs": [_num(r.get("runs")) for r in rows],
            "n": [_num(r.get("n")) for r in rows],
            "missing": [_num(r.get("missing")) for r in rows],
            "p50": [q(r, "p50") for r in rows],
            "p95": [q(r, "p95") for r in rows],
            "p99": [q(r, "p99") for r in rows],
            "max": [fmt(r)(r.get("max")) for r in rows],
        },
        schema=dict.fromkeys(
            ("metric", "runs", "n", "missing", "p50", "p95", "p99", "max"), pl.String
        ),
    )
    table = _table(
        frame,
        "gt-tails",
        {
            "metric": "Per run",
            "runs": "Runs",
            "n": "With a value",
            "missing": "Missing",
            "p50": "p50",
            "p95": "p95",
            "p99": "p99",
            "max": "Max",
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
        cols = (
            "applied",
            "checked",
            "partial",
            "not_applicable",
            "unverifiable",
            "error",
            "judged",
        )
        frame = pl.DataFrame(
            {
                "rule": [_t(r.get("rule_id"), 40) for r in rows],
                "pack": [_t(r.get("pack"), 30) for r in rows],
                **{c: [_num(r.get(c)) for r in rows] for c in cols},
                "rate": [_pct(r.get("judged_rate")) for r in rows],
                "interval": [
                    _interval(r.get("judged_rate_lo"), r.get("judged_rate_hi"), n=r.get("applied"))
                    for r in rows
                ],
            },
            schema=dict.fromkeys(("rule", "pack", *cols, "rate", "interval"), pl.String),
        )
        parts.append(
            _table(
                frame,
                "gt-rule-coverage",
                {
                    "rule": "Rule",
                    "pack": "Pack",
                    "applied": "Applied",
                    "checked": "Checked",
                    "partial": "Partly checked",
                    "not_applicable": "Not applicable",
                    "unverifiable": "Unverifiable",
                    "error": "Error",
                    "judged": "Judged",
                    "rate": "Judged rate",
                    "interval": "95% interval",
                },
                title="What each rule could check, per run",
            )
        )
    if kinds:
        frame = pl.DataFrame(
            {
                "kind": [_t(r.get("kind"), 40) for r in kinds],
                "judged": [_num(r.get("judged")) for r in kinds],
                "failed": [_num(r.get("failed")) for r in kinds],
                "rate": [_pct(r.get("rate")) for r in kinds],
                "interval": [
                    _interval(r.get("rate_lo"), r.get("rate_hi"), n=r.get("judged")) for r in kinds
                ],
            },
            schema=dict.fromkeys(("kind", "judged", "failed", "rate", "interval"), pl.String),
        )
        parts.append(
            _table(
                frame,
                "gt-kind-rates",
                {
                    "kind": "Finding kind",
                    "judged": "Judged runs",
                    "failed": "Runs with one",
                    "rate": "Rate",
                    "interval": "95% interval",
                },
                title="Rates by finding kind",
            )
        )
    return _section("coverage", "Rule coverage and finding kinds", "\n".join(parts))


# --- findings ----------------------------------------------------------------------------------


#: The columns of every run the page reads (`render_html`): to rank them and plot their costs.
_RANKED = ("run_id", "score", "findings", "cost_usd", "models")


class _Context:
    """The runs, steps and findings the finding and trajectory sections share: `runs` holds
    every run's `_RANKED` columns; `runset` the rest, read for the runs shown."""

    def __init__(self, runset: RunTables, runs: pl.DataFrame, findings: pl.DataFrame | None):
        self.runset = runset
        self.findings = findings
        self._shown: list[tuple[tuple[str, str], list[dict[str, Any]], int]] | None = None
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

    def worst_runs(self) -> list[str]:
        """Lowest score, then most findings, then run id; only runs with a finding."""
        bad = self.ranks.filter(pl.col("findings") > 0)
        return bad.get_column("run_id").head(WORST_RUNS).to_list()

    def shown_findings(self) -> list[tuple[tuple[str, str], list[dict[str, Any]], int]]:
        """Per (pack, rule_id): its first FINDINGS_PER_RULE findings (worst runs first), and
        how many it has in all."""
        if self._shown is None:
            self._shown = self._shown_findings()
        return self._shown

    def _shown_findings(self) -> list[tuple[tuple[str, str], list[dict[str, Any]], int]]:
        if self.findings is None or self.findings.is_empty():
            return []
        rows = (
            self.findings.join(self.ranks.select("run_id", "_rank"), on="run_id", how="left")
            .with_columns(_spans=pl.col("span_ids").list.join(" "))
            .sort(
                [
                    "pack",
                    "rule_id",
                    "_rank",
                    "run_id",
                    "kind",
                    "tool",
                    "argument",
                    "_spans",
                    "detail",
                ],
                nulls_last=True,
            )
        )
        out = []
        for (pack, rule_id), part in rows.group_by(["pack", "rule_id"], maintain_order=True):
            out.append(((pack, rule_id), part.head(FINDINGS_PER_RULE).to_dicts(), part.height))
        return out


def _run_link(run_id: str) -> str:
    return f'<a href="#{_anchor("run", run_id)}" class="mono">{_t(run_id, 80)}</a>'


def _findings(summary: Mapping[str, Any], ctx: _Context, worst: list[str]) -> str:
    metrics = summary.get("metrics") or {}
    rates = metrics.get("rule_rates")
    parts = []
    if rates:
        frame = pl.DataFrame(
            {
                "rule": [_t(r.get("rule_id"), 40) for r in rates],
                "pack": [_t(r.get("pack"), 30) for r in rates],
                "applied": [_num(r.get("applied")) for r in rates],
                "judged": [_num(r.get("judged")) for r in rates],
                "failed": [_num(r.get("failed")) for r in rates],
                "rate": [_pct(r.get("rate")) for r in rates],
                "interval": [
                    _interval(r.get("rate_lo"), r.get("rate_hi"), n=r.get("judged")) for r in rates
                ],
            },
            schema=dict.fromkeys(
                ("rule", "pack", "applied", "judged", "failed", "rate", "interval"), pl.String
            ),
        )
        parts.append(
            _table(
                frame,
                "gt-rule-rates",
                {
                    "rule": "Rule",
                    "pack": "Pack",
                    "applied": "Applied to runs",
                    "judged": "Judged runs",
                    "failed": "Runs with a finding",
                    "rate": "Rate",
                    "interval": "95% interval",
                },
                title="Rule rates",
            )
        )
    if ctx.findings is None:
        parts.append("<p>No rule pack was applied.</p>")
        return _section("findings", "Findings by rule", "\n".join(parts))
    shown = ctx.shown_findings()
    if not shown:
        parts.append("<p>No finding.</p>")
    traj = set(worst)
    for n, ((pack, rule_id), rows, total) in enumerate(shown):
        severity = rows[0].get("severity")
        runs = len({r["run_id"] for r in rows})
        title = f"{pack} / {rule_id} ({severity}): {_num(total)} finding{'s' if total != 1 else ''}"
        if total > len(rows):
            title += f", the first {len(rows)}"
        note = None
        if total > len(rows):
            note = (
                f"First {len(rows)} of {total} shown (worst runs first); all in findings.jsonl, "
                "and every run with one in the run browser above (filter by this rule)."
            )
        frame = pl.DataFrame(
            {
                "run": [_run_link(r["run_id"]) for r in rows],
                "case": [_t(r.get("case_id"), 30) for r in rows],
                "kind": [_t(r.get("kind"), 30) for r in rows],
                "tool": [_t(r.get("tool"), 40) for r in rows],
                "argument": [_t(r.get("argument"), 40) for r in rows],
                "detail": [_t(r.get("detail"), 300) for r in rows],
                "spans": [_span_links(r["run_id"], r.get("span_ids"), traj) for r in rows],
            },
            schema=dict.fromkeys(
                ("run", "case", "kind", "tool", "argument", "detail", "spans"), pl.String
            ),
        )
        parts.append(
            f'<h3 id="{_anchor("rule", pack, rule_id)}" class="sev-{_e(severity)}">'
            f"{_e(title)} in {runs} run{'s' if runs != 1 else ''}</h3>"
        )
        parts.append(
            _table(
                frame,
                f"gt-findings-{n}",
                {
                    "run": "Run",
                    "case": "Case",
                    "kind": "Kind",
                    "tool": "Tool",
                    "argument": "Argument",
                    "detail": "Detail",
                    "spans": "Evidence spans",
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


def _cited_runs(ctx: _Context, worst: list[str]) -> str:
    cited = set(worst)
    for _, rows, _ in ctx.shown_findings():
        cited.update(r["run_id"] for r in rows)
    if not cited:
        return ""
    runs = (
        ctx.rows("runs", cited)
        .join(ctx.ranks.select("run_id", "_rank"), on="run_id", how="left")
        .sort("_rank")
    )
    traj = set(worst)
    rows = runs.to_dicts()

    def run_cell(r: Mapping[str, Any]) -> str:
        rid = r["run_id"]
        cell = f'<span id="{_anchor("run", rid)}" class="mono">{_t(rid, 80)}</span>'
        if rid in traj:
            cell += f' <a href="#{_anchor("traj", rid)}">trajectory</a>'
        return cell

    frame = pl.DataFrame(
        {
            "run": [run_cell(r) for r in rows],
            "case": [_t(r.get("case_id"), 30) for r in rows],
            "agent": [_t(r.get("agent"), 30) for r in rows],
            "models": [_t(", ".join(r.get("models") or []), 60) for r in rows],
            "score": [_num(r.get("score")) for r in rows],
            "findings": [_num(r.get("findings")) for r in rows],
            "cost": [_usd(r.get("cost_usd")) for r in rows],
            "answer": [_t(r.get("answer"), 160) for r in rows],
        },
        schema=dict.fromkeys(
            ("run", "case", "agent", "models", "score", "findings", "cost", "answer"), pl.String
        ),
    )
    table = _table(
        frame,
        "gt-runs",
        {
            "run": "Run",
            "case": "Case",
            "agent": "Agent",
            "models": "Models",
            "score": "Score",
            "findings": "Findings",
            "cost": "Cost",
            "answer": "Answer (clipped)",
        },
    )
    return _section("runs", "Runs cited", table, "The runs the findings above name, worst first.")


# --- worst runs --------------------------------------------------------------------------------


def _requested(calls: Sequence[Mapping[str, Any]] | None) -> str:
    if not calls:
        return ""
    return "; ".join(f"{c.get('name')}({c.get('arguments') or ''})" for c in calls)


_STEP_COLUMNS = ("index", "kind", "name", "status", "tokens", "cost", "arguments", "result", "span")


def _step_row(step: Mapping[str, Any]) -> dict[str, str]:
    """The cells of one trajectory step, escaped; its index carries the step's anchor."""
    tool = step.get("kind") == "tool_call"
    model = step.get("kind") == "model_call"
    status = _t(step.get("status"), 20)
    if step.get("error_type"):
        status += f" ({_t(step.get('error_type'), 40)})"
    if tool and step.get("executed") is False:
        status += " not run"
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


def _worst(ctx: _Context, worst: list[str]) -> str:
    intro = (
        f"The runs with a finding, at most {WORST_RUNS}, lowest score first (then the most "
        "findings), each with its steps in order: model calls and tool calls, their arguments "
        "and results clipped."
    )
    if not worst:
        return _section("worst", "Worst runs", "<p>No run has a finding.</p>", intro)
    runs = {r["run_id"]: r for r in ctx.rows("runs", worst).to_dicts()}
    steps = ctx.rows("steps", worst).sort("run_id", "index")
    failed: dict[str, list[str]] = {}
    if ctx.findings is not None:
        for rid, rule in (
            ctx.findings.filter(pl.col("run_id").is_in(worst))
            .select("run_id", "rule_id")
            .unique()
            .sort("run_id", "rule_id")
            .iter_rows()
        ):
            failed.setdefault(rid, []).append(rule)
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
        dl = "".join(f"<dt>{_e(k)}</dt><dd>{v}</dd>" for k, v in info)
        parts.append(
            f'<h3 id="{_anchor("traj", rid)}">{n + 1}. Run <span class="mono">{_t(rid, 80)}'
            f'</span> <a href="#{_anchor("run", rid)}" class="muted">(row)</a></h3>'
            f'<dl class="run">{dl}</dl>'
        )
        if not mine:
            parts.append("<p>No step recorded.</p>")
            continue

        frame = pl.DataFrame(
            [_step_row(step) for step in mine], schema=dict.fromkeys(_STEP_COLUMNS, pl.String)
        )
        note = f"First {STEPS_PER_RUN} of {total} steps." if total > STEPS_PER_RUN else None
        parts.append(
            _table(
                frame,
                f"gt-trajectory-{n}",
                {
                    "index": "#",
                    "kind": "Step",
                    "name": "Model or tool",
                    "status": "Status",
                    "tokens": "Tokens in / out",
                    "cost": "Cost",
                    "arguments": "Arguments (clipped)",
                    "result": "Result or output (clipped)",
                    "span": "Span",
                },
                note=note,
            )
        )
    return _section("worst", "Worst runs", "\n".join(parts), intro)


# --- methods -----------------------------------------------------------------------------------


def _methods(summary: Mapping[str, Any]) -> str:
    methods = _get(summary, "metrics", "methods")
    if not methods:
        return ""
    items = "".join(
        f"<dt>{_e(k.replace('_', ' '))}</dt><dd>{_e(v)}</dd>" for k, v in sorted(methods.items())
    )
    return _section("methods", "Methods", f'<dl class="run">{items}</dl>')
