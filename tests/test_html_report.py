"""report.html: figures, links, determinism, self-containment, and escaping checked in Chromium."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest
from hostile_trace import write_hostile_trace

from analyzer.engine import analyze_paths
from analyzer.metrics.summary import build_summary
from analyzer.outputs import write_outputs
from analyzer.pack import load_default_pack, load_packs
from analyzer.render.browser import SCRIPT as SCRIPT_TEXT
from analyzer.render.browser import SCRIPT_HASH
from analyzer.render.html import _IMPORT, _sparkline, render_html

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian chromium not installed (.ci/run installs it)"
)

SCRIPT = "<script>document.title='pwned'</script>"
IMG = "<img src=x onerror=\"document.title='pwned'\">"
LINK = '<a href="javascript:alert(1)">javascript:alert(1)</a>'
SECTIONS = (
    "Headline figures",
    "Cost tails by model",
    "Cost vs correct rate by model",
    "Findings by rule",
    "Runs cited",
    "Worst runs",
)


# --- helpers ------------------------------------------------------------------------------------


_INLINE = {"a", "b", "i", "span", "code"}


class Page(HTMLParser):
    """Tags with their attributes, and the visible text (style contents left out); `title` is
    the document's, not an SVG's (a tooltip)."""

    def __init__(self, source: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.chunks: list[str] = []
        self._skip = 0
        self.title = ""
        self._in_title = False
        self._svg = 0
        self.feed(source)
        self.close()
        self.text = re.sub(r"\s+", " ", "".join(self.chunks))

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in _INLINE:
            self.chunks.append(" ")
        if tag in ("style", "script"):
            self._skip += 1
        self._svg += tag == "svg"
        self._in_title = tag == "title" and not self._svg

    def handle_endtag(self, tag):
        if tag not in _INLINE:
            self.chunks.append(" ")
        if tag in ("style", "script"):
            self._skip -= 1
        self._svg -= tag == "svg"
        if tag == "title":
            self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        elif not self._skip:
            self.chunks.append(data)

    def attr_values(self, name: str) -> list[str]:
        return [a[name] or "" for _, a in self.tags if name in a]

    def scripts(self) -> list[dict[str, str | None]]:
        """The attributes of each <script> element."""
        return [a for t, a in self.tags if t == "script"]


def only_our_scripts(page: str, parsed: Page) -> None:
    """The page's scripts: the run browser's data blocks (inert) and one script, exactly
    browser.js, which the Content-Security-Policy allows by its hash and allows alone."""
    scripts = parsed.scripts()
    data = [a for a in scripts if a.get("type") == "application/octet-stream"]
    code = [a for a in scripts if a.get("type") != "application/octet-stream"]
    assert len(code) == 1 and not code[0], code
    assert data and all(re.fullmatch(r"ab-(index|detail-\d+)", a.get("id") or "") for a in data)
    assert len(data) == len(scripts) - 1
    body = re.findall(r"<script>(.*?)</script>", page, re.DOTALL)
    assert body == [SCRIPT_TEXT]
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page)
    assert csp is not None
    assert csp.group(1) == (
        f"default-src 'none'; style-src 'unsafe-inline'; script-src '{SCRIPT_HASH}'"
    )
    digest = base64.b64encode(hashlib.sha256(SCRIPT_TEXT.encode("utf-8")).digest()).decode()
    assert f"sha256-{digest}" == SCRIPT_HASH
    for block in re.findall(
        r'<script type="application/octet-stream" id="[^"]+">(.*?)</script>', page, re.DOTALL
    ):
        assert re.fullmatch(r"[A-Za-z0-9+/=]+", block)


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """One headless Chromium run, offline, with a throwaway profile."""
    return subprocess.run(
        [
            CHROMIUM or "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def png_summary(data: bytes) -> tuple[int, int, int]:
    """(width, height, distinct byte values in the decompressed image rows) of a PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    return width, height, len(set(raw[:: max(1, len(raw) // 200_000)]))


# --- the sample traces --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample():
    analysis = analyze_paths([SAMPLES], packs=(load_default_pack(),))
    summary = build_summary(analysis)
    return analysis, summary, render_html(analysis, summary)


def card(page: str, label: str) -> tuple[str, str]:
    """(value, note) of the headline card named `label`, as text."""
    m = re.search(
        r'<div class="label">' + re.escape(label) + r'</div><div class="value">(.*?)</div>'
        r'(?:<div class="note">(.*?)</div>)?</div>',
        page,
    )
    assert m, label
    return Page(m.group(1)).text.strip(), Page(m.group(2) or "").text.strip()


def test_sample_headline_figures(sample):
    analysis, _, page = sample
    # README of sample_traces: 40 runs; one KYC run (KYC-2026-0013) ends without an answer.
    assert card(page, "Runs")[0] == "40"
    assert card(page, "Answered") == ("39", "97.5% of runs; 1 without answer")
    # Default pack on the samples: answered (high) x1, grounded-ids (high) x2,
    # tool-arguments (medium) x1, retries (low) x3.
    assert card(page, "Findings") == ("7", "0 critical, 3 high, 1 medium, 3 low")
    # Cost: the sum of the 40 runs' costs, 3 significant digits.
    total = analysis.runs.runs.get_column("cost_usd").sum()
    assert f"${total:.4f}" == "$0.0840"
    assert card(page, "Cost total") == ("$0.0840", "40 priced runs")
    # 37 correct runs: 40 minus the 3 runs with a high finding; 0.0840332 / 37 = 0.0022712...
    assert card(page, "Cost per correct run") == (
        "$0.00227",
        "37 correct runs (no finding at or above high)",
    )
    # p50 of 40 values: mean of the 20th and 21st; its interval is given; p95 needs n >= 72.
    costs = sorted(analysis.runs.runs.get_column("cost_usd").to_list())
    assert f"{(costs[19] + costs[20]) / 2:.3g}" == "0.000622"
    # Binomial(40, 1/2): P(B <= 13) = 0.0192 <= 0.025 < P(B <= 14) = 0.0403, so the interval
    # is [x_(14), x_(27)] (27 by symmetry).
    assert (f"{costs[13]:.3g}", f"{costs[26]:.3g}") == ("0.000542", "0.00425")
    assert card(page, "Cost per run p50") == (
        "$0.000622",
        "95% interval $0.000542 – $0.00425; n = 40",
    )
    assert card(page, "Cost per run p95") == ("$0.00499", "95% interval n too small; n = 40")
    # The default pack's 6 rules all judged runs: 40 + 39 + 39 + 40 + 40 + 28 = 226 of 6 x 40
    # pairs (tool-arguments and grounded-ids: one run each whose arguments were not recorded;
    # requested-calls: the 12 real-estate runs record no tool call id).
    assert card(page, "Rule coverage") == (
        "6 / 6",
        "rules that judged a run; they judged 226 of the 240 (rule, run) pairs they applied to "
        "(94.2%)",
    )
    # 39 of 40 runs recorded content; Wilson(39, 40) = [0.8712, 0.9956].
    assert card(page, "Content recorded") == (
        "97.5%",
        "39 of 40 runs recorded the content grounding checks need; 95% interval 87.1% – 99.6%",
    )
    # (70 + 75 + 75 + 85 + 3 * 95 + 33 * 100) / 40 = 97.25
    assert card(page, "Mean score") == ("97.25", "out of 100; lowest 70")
    text = Page(page).text
    assert "8 files, 324 spans read, 290 kept, 34 duplicates" in text
    for title in SECTIONS:
        assert title in text


def test_sample_findings_and_worst_runs(sample):
    analysis, _, page = sample
    text = Page(page).text
    for rule in (
        "answered (high): 1 finding in 1 run",
        "grounded-ids (high): 2 findings in 2",
        "retries (low): 3 findings in 3",
        "tool-arguments (medium): 1 finding in 1",
    ):
        assert rule in text
    # Worst first: score 70 (no answer, weight 30), then the two grounded-ids runs (75) by
    # run id, then tool-arguments (85), then the three retries runs (95) by run id.
    runs = analysis.runs.runs
    order = (
        runs.filter(pl.col("findings") > 0)
        .sort(["score", "findings", "run_id"], descending=[False, True, False])
        .get_column("run_id")
        .to_list()
    )
    assert runs.filter(pl.col("findings") > 0).get_column("score").sort().to_list() == [
        70.0,
        75.0,
        75.0,
        85.0,
        95.0,
        95.0,
        95.0,
    ]
    headings = re.findall(
        r'<h3 id="traj-[0-9a-f]{16}">(\d+)\. Run <span class="mono">([^<]+)<', page
    )
    assert [(int(n), rid) for n, rid in headings] == list(enumerate(order, 1))
    # By the sample README: 0013 no answer; 0008 and a support run (no case id) grounded-ids;
    # 0011 tool-arguments; retries in 0014, a support run and 0012 (run ids in that order).
    cases = dict(runs.select("run_id", "case_id").iter_rows())
    assert [cases[rid] for rid in order] == [
        "KYC-2026-0013",
        "KYC-2026-0008",
        None,
        "KYC-2026-0011",
        "KYC-2026-0014",
        None,
        "KYC-2026-0012",
    ]
    first = runs.filter(pl.col("run_id") == order[0]).row(0, named=True)
    assert first["case_id"] == "KYC-2026-0013" and not first["has_answer"]
    # Its trajectory shows tool calls with their tool names and arguments.
    worst = page[page.index('id="gt-trajectory-0"') : page.index('id="gt-trajectory-1"')]
    steps = analysis.runs.steps.filter(pl.col("run_id") == order[0]).sort("index")
    tool = steps.filter(pl.col("kind") == "tool_call").row(0, named=True)
    assert tool["name"] in worst
    assert Page(worst).text.count(tool["arguments"]) >= 1


def test_every_link_lands_on_the_page_and_nothing_external(sample):
    _, _, page = sample
    parsed = Page(page)
    ids = parsed.attr_values("id")
    assert len(ids) == len(set(ids)), "duplicate element ids"
    hrefs = parsed.attr_values("href")
    assert hrefs and all(h.startswith("#") and h[1:] in ids for h in hrefs)
    # Every finding's run links to its row in "Runs cited".
    assert sum(h.startswith("#run-") for h in hrefs) >= 7
    assert not parsed.attr_values("src")
    assert not re.search(r"https?://|@import|url\(", page, re.IGNORECASE)
    assert not [t for t, _ in parsed.tags if t in ("iframe", "img", "link", "object")]
    only_our_scripts(page, parsed)
    # great-tables tables carry our fixed ids, never random ones.
    table_ids = re.findall(r'<div id="(gt-[^"]+)"', page)
    fixed = ["gt-cost-tails", "gt-routing", "gt-tails", "gt-rule-rates", "gt-findings-0"]
    assert [t for t in table_ids if t in fixed] == fixed
    assert all(re.fullmatch(r"gt-[a-z-]+(-\d+)?", t) for t in table_ids)


def test_same_input_same_bytes_and_the_cost_tails_hold_sparklines(sample):
    analysis, _, page = sample
    again = render_html(
        analysis_again := analyze_paths([SAMPLES], packs=(load_default_pack(),)),
        build_summary(analysis_again),
    )
    assert again == page
    # One sparkline per row of the cost tails (each model, then all runs), drawn inline with
    # its lowest and highest cost on hover, and the same whatever the global generator holds.
    start = page.index('<div id="gt-cost-tails"')
    tails = page[start : page.index("</table>", start)]
    rows = table_rows(page, "gt-cost-tails")
    assert rows[-1][0] == "all runs"
    sparks = re.findall(r"<svg [^>]*>(.*?)</svg>", tails, re.DOTALL)
    assert len(sparks) == len(rows)
    costs = analysis.runs.runs.get_column("cost_usd")
    assert (f"{costs.min():.3g}", f"{costs.max():.3g}") == ("9.5e-05", "0.00647")
    assert "<title>Cost per run, sorted: $0.0000950 lowest, $0.00647 highest</title>" in sparks[-1]
    points = re.search(r'<polyline points="([^"]+)"', sparks[-1]).group(1).split()
    assert len(points) == 40  # every run of the 40: fewer than the 60 points sampled
    assert points[0].startswith("0.0,") and points[-1] == "120.0,2.0"  # the highest at the top
    random.seed(4)
    assert _sparkline(costs) == _sparkline(costs.sample(fraction=1.0, shuffle=True, seed=5))


def test_a_google_font_import_is_stripped():
    from great_tables import GT, google_font

    out = GT(pl.DataFrame({"a": [1]}), id="t").opt_table_font(font=google_font("Roboto"))
    html = out.as_raw_html()
    assert "fonts.googleapis.com" in html  # what great-tables writes when asked for one
    assert "googleapis" not in _IMPORT.sub("", html)


def test_write_outputs_writes_the_page_and_hashes_it(sample, tmp_path: Path):
    analysis, summary, page = sample
    write_outputs(analysis, summary, tmp_path, command=["agenttrace", "report"])
    written = (tmp_path / "report.html").read_bytes()
    assert written == page.encode("utf-8")
    manifest = json.loads((tmp_path / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["outputs"]["report.html"] == hashlib.sha256(written).hexdigest()


@needs_chromium
def test_chromium_screenshot_of_the_sample_page(sample, tmp_path: Path):
    _, _, page = sample
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    shot = tmp_path / "report.png"
    chromium(tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,4000", path.as_uri())
    data = shot.read_bytes()
    width, height, shades = png_summary(data)
    assert (width, height) == (1280, 4000)
    # A blank or failed page compresses to a few KB with a handful of byte values.
    assert len(data) > 100_000 and shades > 100


@needs_chromium
def test_chromium_dom_of_the_sample_page(sample, tmp_path: Path):
    _, _, page = sample
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    dom = Page(chromium(tmp_path / "profile", "--dump-dom", path.as_uri()).stdout)
    assert dom.title == "agenttrace report"
    for title in SECTIONS:
        assert title in dom.text
    for figure in ("$0.0840", "$0.00227", "97.5%", "0 critical, 3 high, 1 medium, 3 low"):
        assert figure in dom.text
    assert dom.text.count("KYC-2026-0013") >= 2  # in "Runs cited" and its trajectory


# --- hostile content -----------------------------------------------------------------------------

TRACE = "5b8efff798038103d269b633813fc60c"


ANSWER = f"Done. {SCRIPT} {IMG} see {LINK} & [x](javascript:alert(1))"
ARGUMENTS = json.dumps({"q": SCRIPT, "img": IMG, "link": LINK})


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[str, Path]:
    """A one-run trace whose run id, case, tool arguments and answer carry HTML payloads."""
    trace = write_hostile_trace(
        tmp_path / "trace.jsonl",
        TRACE,
        session=SCRIPT,
        case=IMG,
        agent=IMG,
        model="gpt-4.1",
        tool="search",
        arguments=json.loads(ARGUMENTS),
        result=f"found {IMG}",
        answer=ANSWER,
    )
    pack = tmp_path / "pack.yaml"
    pack.write_text(
        "pack: hostile\n"
        "rules:\n"
        "  - id: no-pwned\n"
        "    type: forbidden_text\n"
        "    patterns: [pwned]\n"
        "    severity: high\n"
        "  - id: must-call\n"
        "    type: required_tools\n"
        f"    tools: [{json.dumps(SCRIPT)}]\n"
        "    severity: medium\n",
        encoding="utf-8",
    )
    analysis = analyze_paths([trace], run_key="app.session", packs=load_packs([pack]))
    assert analysis.runs.runs.get_column("run_id").to_list() == [SCRIPT]
    assert analysis.runs.runs.get_column("answer").to_list() == [ANSWER]
    assert sorted(analysis.evaluation.findings.get_column("rule_id").to_list()) == [
        "must-call",
        "no-pwned",
    ]
    page = render_html(analysis, build_summary(analysis))
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    return page, path


def test_hostile_text_is_escaped_once_in_the_source(hostile):
    page, _ = hostile
    parsed = Page(page)
    # The only elements are ours: no script, image, frame or handler from the trace.
    assert not [t for t, _ in parsed.tags if t in ("img", "iframe", "object", "embed")]
    only_our_scripts(page, parsed)
    assert not [k for _, a in parsed.tags for k in a if k.lower().startswith("on")]
    assert all(h.startswith("#") for h in parsed.attr_values("href"))
    assert not parsed.attr_values("src")
    # Escaped exactly once: the reader sees the payloads as they were written.
    for where in (ANSWER, ARGUMENTS, SCRIPT, f"found {IMG}"):
        assert where in parsed.text, where
    assert "&amp;lt;" not in page
    # In the tool omission table, in the run id, in the case id: text every time.
    assert parsed.text.count(SCRIPT) >= 4


@needs_chromium
def test_hostile_text_stays_text_in_chromium(hostile, tmp_path: Path):
    _, path = hostile
    out = chromium(tmp_path / "profile", "--dump-dom", path.as_uri()).stdout
    dom = Page(out)
    assert dom.title == "agenttrace report"  # no payload ran
    assert "pwned" not in dom.title
    assert not [t for t, _ in dom.tags if t in ("img", "iframe", "object", "embed")]
    only_our_scripts(out, dom)
    assert not [k for _, a in dom.tags for k in a if k.lower().startswith("on")]
    assert not [h for h in dom.attr_values("href") if not h.startswith("#")]
    # The serialized DOM holds the payloads as escaped text nodes.
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in out
    assert "&lt;img src=x onerror=\"document.title='pwned'\"&gt;" in out
    assert '&lt;a href="javascript:alert(1)"&gt;javascript:alert(1)&lt;/a&gt;' in out
    assert ANSWER in dom.text


# --- the routing picture and degraded inputs ------------------------------------------------------


def model_row(group: str, cost: float, k: int, n: int, lo: float, hi: float) -> dict:
    return {
        "group": group,
        "runs": n,
        "passed_runs": k,
        "pass_rate": k / n,
        "pass_rate_lo": lo,
        "pass_rate_hi": hi,
        "total_cost_usd": cost * n,
        "cost_per_correct_run": cost * n / k,
        "cost_usd_p50": cost,
    }


def routing_column(section: str) -> dict[str, str]:
    """model family -> its 'Routing' cell in the routing table."""
    rows = re.findall(r"<tr>(.*?)</tr>", section, re.DOTALL)
    out = {}
    for row in rows:
        cells = [Page(c).text.strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)]
        if len(cells) == 9:
            out[cells[1]] = cells[8]
    return out


@pytest.mark.parametrize(
    ("b_hi", "pick"),
    [(0.97, "b"), (0.91, "c")],  # near miss: b's interval stops short of c's 0.92
)
def test_routing_curve_and_pick(b_hi: float, pick: str):
    from analyzer.metrics.stats import routing
    from analyzer.render.html import _routing

    rows = [
        model_row("a", 0.01, 50, 100, 0.40, 0.60),
        model_row("b", 0.02, 90, 100, 0.83, b_hi),
        model_row("c", 0.05, 92, 100, 0.85, 0.96),
        model_row("d", 0.03, 70, 100, 0.60, 0.78),  # dearer than b and worse: off the curve
        model_row("e", 0.001, 9, 9, 0.70, 1.0),  # cheapest and all correct, but 9 runs only
    ]
    picked = routing(rows, by_labels=False)
    assert picked["pick"] == pick
    section = _routing({"metrics": {"routing": picked, "methods": {"correct": "no finding"}}})
    assert routing_column(section) == {
        "a": "",
        "b": "routing pick" if pick == "b" else "",
        "c": "routing pick" if pick == "c" else "",
        "d": "",
        "e": "9 judged runs, fewer than 10",
    }
    assert f"Routing pick: {pick}, the cheapest of 4 model families" in Page(section).text
    # The curve joins e, b (or a, b, c) in cost order; every family is a point.
    assert section.count("<polyline") == 1 and section.count("<circle") == 5


def test_page_without_rule_packs(tmp_path: Path):
    analysis = analyze_paths([SAMPLES / "realestate"])
    page = render_html(analysis, build_summary(analysis))
    text = Page(page).text
    assert "No rule pack was applied." in text and "No run has a finding." in text
    assert card(page, "Findings")[0] == "0"
    hrefs, ids = Page(page).attr_values("href"), Page(page).attr_values("id")
    assert all(h[1:] in ids for h in hrefs)


def test_cli_writes_report_html_and_prints_it(tmp_path: Path):
    from click.testing import CliRunner

    from analyzer.cli import main

    out = tmp_path / "out"
    result = CliRunner().invoke(
        main, ["report", str(SAMPLES), "--out", str(out), "--format", "html"]
    )
    assert result.exit_code == 0, result.output
    written = (out / "report.html").read_text(encoding="utf-8")
    assert result.stdout == written  # stderr may carry a progress bar
    assert card(written, "Runs")[0] == "40"


def table_rows(page: str, table_id: str) -> list[list[str]]:
    """The body rows of the great-tables table `table_id`, as cell texts."""
    start = page.index(f'<div id="{table_id}"')
    body = page[start : page.index("</table>", start)]
    body = body[body.index("<tbody") :]
    return [
        [Page(c).text.strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)]
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.DOTALL)
    ]


def test_kyc_omissions_by_rule_and_by_label():
    from analyzer.metrics.labels import load_labels

    analysis = analyze_paths([SAMPLES / "kyc"], packs=load_packs([ROOT / "rules" / "kyc.yaml"]))
    labels = load_labels(ROOT / "rules" / "kyc-labels.jsonl")
    page = render_html(analysis, build_summary(analysis, labels))
    # kyc.yaml requires both tools in the 15 answered runs (sample README): the screening is
    # omitted in KYC-2026-0004, -0006 (only after the answer) and -0009, the owners lookup in
    # -0007 and -0009. Wilson(2, 15) = [0.0373, 0.3788], Wilson(3, 15) =
    # [0.0701, 0.4518].
    assert [r[:5] for r in table_rows(page, "gt-omissions")] == [
        ["lookup_beneficial_owners", "15", "2", "13.3%", "3.7% – 37.9%"],
        ["screen_sanctions", "15", "3", "20.0%", "7.0% – 45.2%"],
    ]
    # The labels expect four tools in each of the 16 runs (the unanswered run included).
    assert [r[:5] for r in table_rows(page, "gt-omissions-labels")] == [
        ["fetch_documents", "16", "0", "0.0%", "0.0% – 19.4%"],
        ["lookup_account", "16", "0", "0.0%", "0.0% – 19.4%"],
        ["lookup_beneficial_owners", "16", "2", "12.5%", "3.5% – 36.0%"],
        ["screen_sanctions", "16", "3", "18.8%", "6.6% – 43.0%"],
    ]
    # 13 of 16 runs have every field right: 2 wrong decisions and the run without an answer.
    assert card(page, "All fields correct") == (
        "81.2%",
        "13 of 16 labelled runs; 95% interval 57.0% – 93.4%",
    )
    assert table_rows(page, "gt-label-fields")[0] == [
        "decision",
        "critical",
        "exact",
        "16",
        "13",
        "2",
        "1",
        "81.2%",
        "57.0% – 93.4%",
    ]


# --- where: wrong label fields by case --------------------------------------------------------


@needs_chromium
def test_chromium_shows_the_wrong_cases_with_expected_and_answered(tmp_path: Path):
    # sample_traces/README.md: KYC-2026-0004 answered approve/low for escalate/high, -0008
    # escalate/medium for approve/low, -0013 never answered.
    from analyzer.metrics.labels import load_labels
    from analyzer.pack import load_packs

    root = SAMPLES.parent
    analysis = analyze_paths(
        [SAMPLES / "kyc"], packs=tuple(load_packs([root / "rules" / "kyc.yaml"]))
    )
    labels = load_labels(root / "rules" / "kyc-labels.jsonl")
    page = render_html(analysis, build_summary(analysis, labels))
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    dom = Page(chromium(tmp_path / "profile", "--dump-dom", path.as_uri()).stdout)
    assert "Fields wrong or missing, by case" in dom.text
    for row in (
        "KYC-2026-0004 b69f68276a803963e314c735a25e0a03 decision (critical) escalate approve",
        "KYC-2026-0008 2e5d703ccaf65bdb40b2d5faaa303940 risk_level low medium",
        "KYC-2026-0013 ae064840adad5d190ef6e3f71cf44b53 dossier_id KYC-2026-0013 (missing)",
    ):
        assert row in dom.text
    shot = tmp_path / "labels.png"
    chromium(
        tmp_path / "profile2", f"--screenshot={shot}", "--window-size=1280,3000", path.as_uri()
    )
    width, height, shades = png_summary(shot.read_bytes())
    assert (width, height) == (1280, 3000) and shades > 100


@needs_chromium
def test_hostile_text_stays_text_when_the_run_browser_opens_it(hostile, tmp_path: Path):
    # The same payloads with the page's script running: the run browser lists the run, opens
    # it with its steps expanded, and not one payload runs (no dialog, the title unchanged).
    sync_api = pytest.importorskip("playwright.sync_api")
    _, path = hostile
    dialogs: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(path.as_uri())
        page.wait_for_selector("html[data-browser=ready]")
        page.click("#ab-body button.ab-open")
        page.wait_for_selector("#ab-run table.ab-steps")
        for row in page.locator("#ab-run tr.ab-step").all():
            row.click()
        text = page.inner_text("#ab-run")
        title = page.title()
        browser.close()
    assert title == "agenttrace report" and not dialogs
    for where in (SCRIPT, ARGUMENTS, f"found {IMG}"):
        assert where in text, where


# --- every figure of the summary --------------------------------------------------------------


@pytest.fixture(scope="module")
def kyc_labelled():
    from analyzer.metrics.labels import load_labels

    analysis = analyze_paths([SAMPLES / "kyc"], packs=load_packs([ROOT / "rules" / "kyc.yaml"]))
    labels = load_labels(ROOT / "rules" / "kyc-labels.jsonl")
    summary = build_summary(analysis, labels)
    return summary, render_html(analysis, summary, labels=labels)


def test_breakdowns_by_temperature_and_every_other_group(kyc_labelled):
    summary, page = kyc_labelled
    groups = summary["metrics"]["breakdowns"]
    for key, rows in groups.items():
        table = "gt-breakdown-" + re.sub(r"[^a-z0-9]+", "-", key.lower())
        assert len(table_rows(page, table)) == len(rows), key
    # Temperature: 12 runs at 0.0 (7 correct by the findings, 10 with every label field
    # right), 4 at 0.7; the figures as summary.json has them.
    rows = {r["group"]: r for r in groups["temperature"]}
    assert rows[0.0]["runs"] == 12 and rows[0.0]["passed_runs"] == 7
    assert rows[0.0]["label_correct_runs"] == 10
    cells = table_rows(page, "gt-breakdown-temperature")
    assert cells[0][:4] == ["0.0", "12", "7 (58.3%)", "32.0% – 80.7%"]
    assert cells[0][6] == f"${rows[0.0]['total_cost_usd']:.4f}"
    assert cells[0][-2].startswith("10 of 12 (83.3%;")
    assert [c[0] for c in cells] == ["0.0", "0.7"]


def test_trials_tails_coverage_and_accounting(kyc_labelled):
    summary, page = kyc_labelled
    text = Page(page).text
    trials = summary["metrics"]["trials"]
    assert table_rows(page, "gt-pass-k") == [
        [str(r["k"]), str(r["cases"]), str(r["trials"]), f"{100 * r['value']:.1f}%"]
        for r in trials["pass_hat_k"]
    ]
    assert "Trials and pass^k" in text and "Answers disagree" in text
    tails = table_rows(page, "gt-tails")
    assert [r[0] for r in tails] == [
        "Cost per run",
        "Input tokens",
        "Output tokens",
        "Tokens",
        "Model calls",
        "Tool calls",
        "Duration (s)",
        "Retries",
        "Score",
    ]
    assert "e+" not in " ".join(" ".join(r) for r in tails)  # never in exponent notation
    coverage = table_rows(page, "gt-rule-coverage")
    assert len(coverage) == len(summary["metrics"]["rule_coverage"])
    kinds = table_rows(page, "gt-kind-rates")
    assert [r[0] for r in kinds] == [k["kind"] for k in summary["metrics"]["kind_rates"]]
    runs = summary["runs"]
    assert f"Orphan spans (parent missing) {summary['ingest']['orphan_spans']}" in text
    outside = summary["ingest"]["spans_outside_runs"]
    assert f"Spans in no run (no agent holds them) {outside}" in text
    assert f"Input tokens {runs['input_tokens']:,}" in text
