"""report.html's run browser, driven in headless Chromium with Playwright: search, filters,
sorting, a run's view (span tree, timeline, arguments, messages, findings, label verdicts),
following a finding to its highlighted step, and hostile trace text that never runs.

Chromium is the system's (Debian package, `.ci/run` installs it), launched by path: no
browser is downloaded. Each state is saved as a screenshot under the test's tmp dir, and
copied to $AGENTTRACE_ARTIFACTS when that is set.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import polars as pl
import pytest
from hostile_trace import write_hostile_trace

from analyzer.engine import analyze_paths
from analyzer.metrics.labels import load_labels
from analyzer.metrics.summary import build_summary
from analyzer.pack import load_default_pack, load_packs
from analyzer.render import browser
from analyzer.render.html import render_html

sync_api = pytest.importorskip("playwright.sync_api")

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
CHROMIUM = next(
    (
        p
        for p in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser"))
        if p and Path(p).exists()
    ),
    None,
)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian chromium not installed (.ci/run installs it)"
)


# --- the browser ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chromium():
    with sync_api.sync_playwright() as p:
        browser_ = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser_
        browser_.close()


class Page:
    """One page open in Chromium: offline (every request but the file itself fails and is
    counted), with its script errors and dialogs recorded."""

    def __init__(self, chromium, path: Path, shots: Path):
        self.page = chromium.new_page(viewport={"width": 1280, "height": 1400})
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        self.shots = shots
        url = path.as_uri()

        def route(r):
            if r.request.url != url:
                self.requests.append(r.request.url)
                r.abort()
            else:
                r.continue_()

        self.page.route("**/*", route)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))

        def dialog(d):
            self.dialogs.append(d.message)
            d.dismiss()

        self.page.on("dialog", dialog)
        self.page.goto(url)
        self.page.wait_for_selector("html[data-browser=ready]", timeout=20_000)

    def shot(self, name: str) -> Path:
        path = self.shots / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=False)
        target = os.environ.get("AGENTTRACE_ARTIFACTS")
        if target:
            Path(target).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(target) / path.name)
        return path

    def count(self) -> str:
        return self.page.inner_text("#ab-count")

    def ids(self) -> list[str]:
        return [t.strip() for t in self.page.locator("#ab-body button.ab-open").all_inner_texts()]

    def column(self, n: int) -> list[str]:
        return self.page.locator(f"#ab-body tr td:nth-child({n})").all_inner_texts()

    def search(self, text: str) -> None:
        self.page.fill("#ab-q", text)
        self.page.wait_for_function("q => document.getElementById('ab-q').value === q", arg=text)
        self.page.wait_for_timeout(250)  # the search waits 120 ms after the last key

    def select(self, sid: str, label: str) -> None:
        self.page.select_option(f"#{sid}", label=label)

    def open(self, run_id: str) -> None:
        self.search(run_id)
        assert self.ids() == [run_id[:39] + "…" if len(run_id) > 40 else run_id]
        self.page.click("#ab-body button.ab-open")
        self.page.wait_for_selector("#ab-run h3")

    def close(self) -> None:
        assert not self.errors, self.errors
        assert not self.requests, self.requests
        self.page.close()


def write(page: str, tmp_path: Path, name: str = "report.html") -> Path:
    path = tmp_path / name
    path.write_text(page, encoding="utf-8")
    return path


# --- the KYC samples, with labels --------------------------------------------------------------


@pytest.fixture(scope="module")
def kyc():
    analysis = analyze_paths([SAMPLES / "kyc"], packs=load_packs([ROOT / "rules" / "kyc.yaml"]))
    labels = load_labels(ROOT / "rules" / "kyc-labels.jsonl")
    summary = build_summary(analysis, labels)
    return analysis, summary, render_html(analysis, summary, labels=labels)


@pytest.fixture
def kyc_page(kyc, chromium, tmp_path: Path):
    _, _, page = kyc
    opened = Page(chromium, write(page, tmp_path), tmp_path)
    yield opened
    opened.close()


def test_every_run_is_listed_worst_first(kyc, kyc_page):
    analysis, _, _ = kyc
    runs = analysis.runs.runs
    assert (
        kyc_page.count() == f"runs 1–{runs.height} of {runs.height} matching ({runs.height} in all)"
    )
    worst = (
        runs.sort(["score", "findings", "run_id"], descending=[False, True, False], nulls_last=True)
        .get_column("run_id")
        .to_list()
    )
    assert kyc_page.ids() == worst
    assert "16 runs. Steps are embedded for 16 of them" in kyc_page.page.inner_text("#ab-status")
    kyc_page.shot("browser-list")


def test_search_a_case_id(kyc, kyc_page):
    analysis, _, _ = kyc
    kyc_page.search("kyc-2026-0008")  # case-insensitive
    run = analysis.runs.runs.filter(pl.col("case_id") == "KYC-2026-0008").row(0, named=True)
    assert kyc_page.ids() == [run["run_id"]]
    assert kyc_page.column(2) == ["KYC-2026-0008"]
    assert kyc_page.count() == "runs 1–1 of 1 matching (16 in all)"
    kyc_page.shot("browser-search-case")
    # a run id prefix, and text of an answer
    kyc_page.search(run["run_id"][:10])
    assert kyc_page.ids() == [run["run_id"]]
    kyc_page.search("no such thing anywhere")
    assert kyc_page.count() == "no run matches"
    # text: the start of each run's answer is searched too
    runs = analysis.runs.runs
    escalated = runs.filter(
        pl.col("answer")
        .str.slice(0, browser.ANSWER_INDEX)
        .str.to_lowercase()
        .str.contains("escalate")
    )
    assert 0 < escalated.height < runs.height
    kyc_page.search("ESCALATE")
    assert sorted(kyc_page.ids()) == escalated.get_column("run_id").sort().to_list()


def test_filter_failures_only(kyc, kyc_page):
    analysis, summary, _ = kyc
    runs = analysis.runs.runs
    wrong = {r["run_id"] for r in summary["labels"]["wrong_fields"]}
    failing = runs.filter(
        (pl.col("findings") > 0) | ~pl.col("has_answer") | pl.col("run_id").is_in(list(wrong))
    )
    assert 0 < failing.height < runs.height
    kyc_page.page.check("#ab-fail")
    kyc_page.page.wait_for_timeout(100)
    assert sorted(kyc_page.ids()) == sorted(failing.get_column("run_id").to_list())
    assert all(s in ("findings", "labels wrong", "no answer") for s in kyc_page.column(6))
    kyc_page.shot("browser-failures-only")


def test_filters_by_rule_severity_kind_agent_model_temperature(kyc, kyc_page):
    analysis, _, _ = kyc
    runs = analysis.runs.runs
    findings = analysis.evaluation.findings

    def runs_with(expr) -> list[str]:
        return sorted(set(findings.filter(expr).get_column("run_id").to_list()))

    rule = findings.get_column("rule_id").sort()[0]
    kyc_page.select("ab-rule", rule)
    assert sorted(kyc_page.ids()) == runs_with(pl.col("rule_id") == rule)
    kyc_page.select("ab-rule", "any rule")
    kyc_page.select("ab-sev", "critical")
    assert sorted(kyc_page.ids()) == runs_with(pl.col("severity") == "critical")
    kyc_page.select("ab-sev", "any severity")
    kyc_page.select("ab-kind", "omission")
    assert sorted(kyc_page.ids()) == runs_with(pl.col("kind") == "omission")
    kyc_page.select("ab-kind", "any kind")
    kyc_page.select("ab-temp", "0.7")
    hot = runs.filter(pl.col("temperature") == 0.7).get_column("run_id").sort().to_list()
    assert hot and sorted(kyc_page.ids()) == hot
    kyc_page.shot("browser-filter-temperature")
    kyc_page.select("ab-temp", "any temperature")
    agent = runs.get_column("agent")[0]
    kyc_page.select("ab-agent", agent)
    assert len(kyc_page.ids()) == runs.filter(pl.col("agent") == agent).height
    model = runs.get_column("models")[0][0]
    kyc_page.select("ab-model", model)
    expected = runs.filter(pl.col("models").list.contains(model) & (pl.col("agent") == agent))
    assert sorted(kyc_page.ids()) == expected.get_column("run_id").sort().to_list()


def test_sort_by_any_column(kyc, kyc_page):
    analysis, _, _ = kyc
    runs = analysis.runs.runs
    page = kyc_page.page
    page.click("#ab-runs th[data-key=cost]")
    by_cost = runs.sort(["cost_usd", "run_id"]).get_column("run_id").to_list()
    assert kyc_page.ids() == by_cost
    page.click("#ab-runs th[data-key=cost]")  # again: reversed (ties by run id)
    assert kyc_page.ids()[0] == runs.sort("cost_usd", descending=True).get_column("run_id")[0]
    page.click("#ab-runs th[data-key=case]")
    assert kyc_page.column(2) == sorted(runs.get_column("case_id").to_list())
    page.click("#ab-runs th[data-key=duration]")
    durations = [float(d.split()[0]) for d in kyc_page.column(10)]
    assert durations == sorted(durations)
    kyc_page.shot("browser-sorted-duration")


def test_open_a_run_and_follow_a_finding_to_its_step(kyc, kyc_page):
    analysis, _, _ = kyc
    findings = analysis.evaluation.findings
    # a finding whose evidence is one step of the run (hallucinated argument: the tool call)
    finding = (
        findings.filter(pl.col("span_ids").list.len() > 0)
        .sort("severity", "run_id", "rule_id")
        .filter(pl.col("kind") == "hallucinated_argument")
        .row(0, named=True)
    )
    rid, span = finding["run_id"], finding["span_ids"][0]
    steps = analysis.runs.steps.filter(pl.col("run_id") == rid).sort("index")
    step = steps.filter(pl.col("span_id") == span).row(0, named=True)
    kyc_page.open(rid)
    view = kyc_page.page.inner_text("#ab-run")
    assert rid in view and finding["detail"] in view
    # the trajectory: every step in the tree, with its timeline bar
    rows = kyc_page.page.locator("#ab-run tr.ab-step")
    assert rows.count() == steps.height
    bars = kyc_page.page.locator("#ab-run .ab-bar")
    widths = [b.bounding_box()["width"] for b in bars.all()]
    assert all(w > 0 for w in widths)
    # the offending step is marked before anything is clicked
    cited = kyc_page.page.locator("#ab-run tr.ab-step.cited")
    assert cited.count() >= 1
    kyc_page.shot("run-view")
    kyc_page.page.click(f"#ab-run button.ab-span:text-is('{span}')")
    highlighted = kyc_page.page.locator("#ab-run tr.ab-step.hl")
    assert highlighted.count() == 1
    text = highlighted.inner_text()
    assert text.split()[0] == str(step["index"]) and step["name"] in text
    # its details open with the full arguments
    more = kyc_page.page.locator("#ab-run tr.ab-more.hl")
    assert more.is_visible()
    assert step["arguments"] in more.inner_text()
    assert highlighted.is_visible()
    kyc_page.shot("run-finding-highlighted")


def test_a_run_shows_its_label_verdicts(kyc, kyc_page):
    # sample_traces/README.md: KYC-2026-0004 answered approve for escalate.
    analysis, _, _ = kyc
    rid = analysis.runs.runs.filter(pl.col("case_id") == "KYC-2026-0004").get_column("run_id")[0]
    kyc_page.open(rid)
    rows = kyc_page.page.locator("#ab-run table.ab-labels tbody tr").all_inner_texts()
    cells = [r.split("\t") for r in rows]
    assert ["decision", "critical", "wrong", "escalate", "approve"] in cells
    kyc_page.shot("run-labels")


def test_a_step_shows_its_full_arguments_result_and_output(kyc, kyc_page):
    analysis, _, _ = kyc
    steps = analysis.runs.steps
    rid = steps.filter(pl.col("kind") == "tool_call").get_column("run_id").sort()[0]
    kyc_page.open(rid)
    mine = steps.filter(pl.col("run_id") == rid).sort("index")
    rows = kyc_page.page.locator("#ab-run tr.ab-step")
    more = kyc_page.page.locator("#ab-run tr.ab-more")
    tool = mine.filter(pl.col("kind") == "tool_call").row(0, named=True)
    rows.nth(tool["index"]).click()
    assert more.nth(tool["index"]).is_visible()
    text = more.nth(tool["index"]).inner_text()
    assert tool["result"] in text and tool["arguments"] in text
    # a model call: the calls it requested, and its text output when it gave one
    model = mine.filter(pl.col("kind") == "model_call").row(0, named=True)
    rows.nth(model["index"]).click()
    text = more.nth(model["index"]).inner_text()
    for call in model["requested_calls"] or []:
        assert f"Requests {call['name']}" in text and call["arguments"] in text
    answer = mine.filter(pl.col("output_text").is_not_null()).row(-1, named=True)
    rows.nth(answer["index"]).click()
    assert answer["output_text"] in more.nth(answer["index"]).inner_text()
    kyc_page.shot("run-step-expanded")


def test_a_model_call_shows_its_prompt_messages(kyc, kyc_page):
    analysis, _, _ = kyc
    messages = analysis.runs.messages
    # a model call given a tool's result: system, user, the assistant's request, the tool's
    # answer (with its tool call id)
    call = (
        messages.filter(pl.col("role") == "tool")
        .sort("run_id", "index")
        .select("run_id", "index")
        .row(0, named=True)
    )
    rid, index = call["run_id"], call["index"]
    prompt = messages.filter((pl.col("run_id") == rid) & (pl.col("index") == index)).sort(
        "position"
    )
    assert {"system", "user", "assistant", "tool"} <= set(prompt.get_column("role").to_list())
    kyc_page.open(rid)
    rows = kyc_page.page.locator("#ab-run tr.ab-step")
    more = kyc_page.page.locator("#ab-run tr.ab-more")
    rows.nth(index).click()
    box = more.nth(index).locator("details.ab-prompt")
    assert box.is_visible()
    assert box.locator("summary").inner_text() == f"Prompt: {prompt.height} messages"
    assert box.locator(".ab-msg .ab-role").all_inner_texts() == prompt.get_column("role").to_list()
    shown = box.locator("pre").all_inner_texts()
    assert shown == prompt.get_column("content").to_list()
    for tool_call_id in prompt.get_column("tool_call_id").drop_nulls().to_list():
        assert f"tool call {tool_call_id}" in box.inner_text()
    kyc_page.shot("run-prompt-messages")
    # a tool call has no prompt
    tool = (
        analysis.runs.steps.filter((pl.col("run_id") == rid) & (pl.col("kind") == "tool_call"))
        .get_column("index")
        .min()
    )
    rows.nth(tool).click()
    assert more.nth(tool).locator("details.ab-prompt").count() == 0


def _embedded(page: str) -> str:
    """The run browser's data of `page` (every block inflated), as text."""
    import base64
    import zlib

    blocks = re.findall(r'type="application/octet-stream" id="[^"]+">([^<]*)</script>', page)
    return "\n".join(zlib.decompress(base64.b64decode(b)).decode("utf-8") for b in blocks)


@pytest.mark.parametrize("partitions", ["0", "3"])
def test_redacted_prompt_messages_are_tokens(chromium, tmp_path: Path, partitions: str):
    from click.testing import CliRunner

    from analyzer.cli import main
    from analyzer.redact import TOKEN_RE, Redactor

    args = ["report", str(SAMPLES / "kyc"), "--format", "html", "--redact-salt", "s", "-j", "1"]
    result = CliRunner().invoke(main, [*args, "--partitions", partitions])
    assert result.exit_code == 0, result.output
    page = result.output
    data = _embedded(page)
    assert '"messages":{"role":' in data
    messages = analyze_paths([SAMPLES / "kyc"]).runs.messages
    assert messages.height > 100
    # no message's text, whole or its start (an assistant's is the calls it requested: their
    # ids, tool and argument names are kept, as in the steps' requested calls), but those
    # redaction keeps whole (JSON of keys and booleans alone: {"found": false})
    for role, text in messages.select("role", "content").unique().iter_rows():
        if Redactor("s").json_text(text) == text:
            continue
        pieces = [text, json.dumps(text)[1:-1]] + ([text[:40]] if role != "assistant" else [])
        for piece in pieces:
            if piece and len(piece) >= 12:
                assert piece not in page and piece not in data, piece
    opened = Page(chromium, write(page, tmp_path), tmp_path)
    rid = messages.get_column("run_id").sort()[0]
    opened.open(rid)
    opened.page.locator("#ab-run tr.ab-step").nth(0).click()
    box = opened.page.locator("#ab-run tr.ab-more").nth(0).locator("details.ab-prompt")
    shown = box.locator("pre").all_inner_texts()
    assert shown and all(TOKEN_RE.fullmatch(t) for t in shown), shown
    assert box.locator(".ab-role").all_inner_texts()[:2] == ["system", "user"]
    opened.close()


# --- caps and chunks ------------------------------------------------------------------------------


def test_capped_detail_says_so_and_chunks_decode_on_demand(chromium, tmp_path: Path, monkeypatch):
    monkeypatch.setattr(browser, "DETAIL_OTHERS", 2)
    monkeypatch.setattr(browser, "CHUNK_RUNS", 3)
    analysis = analyze_paths([SAMPLES], packs=(load_default_pack(),))
    page = render_html(analysis, build_summary(analysis))
    blocks = re.findall(r'id="ab-detail-(\d+)"', page)
    runs = analysis.runs.runs
    with_findings = runs.filter(pl.col("findings") > 0).height
    without_answer = runs.filter(~pl.col("has_answer") & (pl.col("findings") == 0)).height
    embedded = with_findings + without_answer + 2
    assert len(blocks) == -(-embedded // 3)
    opened = Page(chromium, write(page, tmp_path), tmp_path)
    status = opened.page.inner_text("#ab-status")
    assert f"Steps are embedded for {embedded} of them" in status
    assert f"The other {runs.height - embedded} runs are listed" in status
    # a clean run past the cap: listed, its figures shown, no steps
    clean = runs.filter(pl.col("findings") == 0).sort("run_id").get_column("run_id")[-1]
    opened.open(clean)
    assert "steps are not embedded" in opened.page.inner_text("#ab-run")
    # a failing run in the last chunk opens with its steps
    last = runs.filter(pl.col("findings") > 0).sort("run_id").get_column("run_id")[-1]
    opened.open(last)
    assert opened.page.locator("#ab-run tr.ab-step").count() > 0
    opened.shot("capped")
    opened.close()


def test_failing_runs_over_the_cap_worst_first(chromium, tmp_path: Path, monkeypatch):
    monkeypatch.setattr(browser, "DETAIL_FAILING", 3)
    monkeypatch.setattr(browser, "DETAIL_OTHERS", 0)
    analysis = analyze_paths([SAMPLES], packs=(load_default_pack(),))
    runs = analysis.runs.runs
    failing = runs.filter((pl.col("findings") > 0) | ~pl.col("has_answer"))
    order = failing.sort(
        ["score", "findings", "run_id"], descending=[False, True, False]
    ).get_column("run_id")
    opened = Page(
        chromium, write(render_html(analysis, build_summary(analysis)), tmp_path), tmp_path
    )
    status = opened.page.inner_text("#ab-status")
    assert f"the 3 worst of the {failing.height} runs with a finding" in status
    opened.open(order[0])
    assert opened.page.locator("#ab-run tr.ab-step").count() > 0
    opened.open(order[-1])  # over the cap: its findings, but no steps
    view = opened.page.inner_text("#ab-run")
    assert "Steps of this run are not embedded" in view
    assert opened.page.locator("#ab-run table.ab-findings tbody tr").count() >= 1
    opened.close()


def test_same_input_same_bytes():
    analysis = analyze_paths([SAMPLES / "kyc"], packs=load_packs([ROOT / "rules" / "kyc.yaml"]))
    labels = load_labels(ROOT / "rules" / "kyc-labels.jsonl")
    one = render_html(analysis, build_summary(analysis, labels), labels=labels)
    again = analyze_paths([SAMPLES / "kyc"], packs=load_packs([ROOT / "rules" / "kyc.yaml"]))
    two = render_html(again, build_summary(again, labels), labels=labels)
    assert one == two


# --- hostile text ---------------------------------------------------------------------------

PWN = "window.__pwned=1;alert(1)"
PAYLOADS = (
    f"<script>{PWN}</script>",
    f'<img src=x onerror="{PWN}">',
    f'<svg onload="{PWN}"></svg>',
    f'"><iframe srcdoc="<script>{PWN}</script>">',
    f'<a href="javascript:{PWN}">x</a>',
    "\u202egnp.exe",
)
HOSTILE = " ".join(PAYLOADS)
TRACE = "7b8efff798038103d269b633813fc60c"


@pytest.fixture
def hostile_page(tmp_path: Path) -> Path:
    """One run whose every text (run id, case, agent, model, tool name, arguments, result,
    prompt messages, answer, finding details, label values) carries script payloads."""
    trace = write_hostile_trace(
        tmp_path / "trace.jsonl",
        TRACE,
        session=PAYLOADS[2],
        case=PAYLOADS[0],
        agent=PAYLOADS[1],
        model=PAYLOADS[3],
        tool=PAYLOADS[4],
        arguments={"q": HOSTILE},
        result=f"found {HOSTILE}",
        answer=json.dumps({"decision": HOSTILE}),
        prompt=HOSTILE,
    )
    pack = tmp_path / "pack.yaml"
    pack.write_text(
        "pack: hostile\n"
        "rules:\n"
        "  - {id: no-pwned, type: forbidden_text, patterns: [__pwned], severity: high}\n"
        f"  - {{id: must-call, type: required_tools, tools: [{json.dumps(PAYLOADS[1])}]}}\n",
        encoding="utf-8",
    )
    labels_file = tmp_path / "labels.jsonl"
    labels_file.write_text(
        json.dumps({"case_id": PAYLOADS[0], "fields": {"decision": {"expected": HOSTILE + "!"}}})
        + "\n",
        encoding="utf-8",
    )
    labels = load_labels(labels_file)
    analysis = analyze_paths([trace], run_key="app.session", packs=load_packs([pack]))
    assert analysis.runs.runs.get_column("run_id").to_list() == [PAYLOADS[2]]
    assert analysis.evaluation.findings.height >= 2
    page = render_html(analysis, build_summary(analysis, labels), labels=labels)
    return write(page, tmp_path)


def test_hostile_text_never_runs_in_the_browser(chromium, hostile_page: Path, tmp_path: Path):
    opened = Page(chromium, hostile_page, tmp_path)
    page = opened.page
    page.fill("#ab-q", "")
    page.check("#ab-fail")
    page.wait_for_timeout(100)
    assert len(opened.ids()) == 1
    page.click("#ab-body button.ab-open")
    page.wait_for_selector("#ab-run table.ab-steps")
    for row in page.locator("#ab-run tr.ab-step").all():
        row.click()
    for button in page.locator("#ab-run button.ab-span").all():
        button.click()
    page.wait_for_timeout(300)
    opened.shot("hostile-run")
    text = page.inner_text("#ab-run")
    # every payload is on the page as text, and none became an element or ran
    for payload in PAYLOADS[:5]:
        assert payload in text or payload in page.inner_text("body"), payload
    assert f"found {PAYLOADS[0]}" in text
    # the prompt message, as text
    prompt = page.locator("#ab-run details.ab-prompt")
    assert prompt.count() == 1
    assert prompt.locator(".ab-role").all_inner_texts() == ["user"]
    assert prompt.locator("pre").inner_text() == HOSTILE.replace("\u202e", "\ufffd")
    assert page.evaluate("window.__pwned") is None
    assert opened.dialogs == []
    assert page.title() == "agenttrace report"
    assert page.locator("img, iframe, svg[onload], a[href^=javascript]").count() == 0
    handlers = page.evaluate(
        "Array.from(document.querySelectorAll('*')).flatMap(e => "
        "Array.from(e.attributes).map(a => a.name)).filter(n => n.startsWith('on'))"
    )
    assert handlers == []
    # the bidi override is neutralized in what the browser shows
    assert "\u202e" not in text
    opened.close()
