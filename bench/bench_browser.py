"""report.html's run browser at scale: page size, render time, and load + filter time in
headless Chromium (the system's, by path).

Generates an OTLP dump of about `--runs` runs with bench/gen_otlp.py (11 spans a run on
average), analyzes it with the default pack, renders the page, then opens it in Chromium and
times: load (until the browser's index is decoded and the first page of runs drawn), a text
search, "failures only", a rule filter, a sort, and opening a run.

    python bench/bench_browser.py --runs 100000 [--out /tmp/bench-browser]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analyzer.engine import analyze_paths
from analyzer.metrics.summary import build_summary
from analyzer.pack import load_default_pack
from analyzer.render.html import render_html

SPANS_PER_RUN = 11.0  # gen_otlp.py: 1,000,010 spans made 90,843 runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench-browser"))
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    spans = int(args.runs * SPANS_PER_RUN)
    dump = args.out / f"otlp-{spans}-s{args.seed}.jsonl"
    if not dump.exists():
        from bench.gen_otlp import main as generate

        generate(["--spans", str(spans), "--seed", str(args.seed), "--out", str(dump)])
    analysis = analyze_paths([dump], packs=[load_default_pack()])
    summary = build_summary(analysis)
    t0 = time.perf_counter()
    page = render_html(analysis, summary)
    render_s = time.perf_counter() - t0
    path = args.out / "report.html"
    path.write_text(page, encoding="utf-8")
    runs = analysis.runs.runs.height
    finding_runs = int((analysis.runs.runs.get_column("findings") > 0).sum())
    print(f"runs {runs:,}, runs with a finding {finding_runs:,}")
    print(f"page {len(page.encode('utf-8')) / 1e6:.2f} MB, render_html {render_s:.2f} s")

    from playwright.sync_api import sync_playwright

    # a case id to search for (the generated runs have none: then a run id's first 12 digits)
    cases = analysis.runs.runs.drop_nulls("case_id").get_column("case_id").sort()
    ids = analysis.runs.runs.get_column("run_id").sort()
    case = cases[len(cases) // 2] if len(cases) else ids[len(ids) // 2][:12]
    rule = None
    if analysis.evaluation is not None and analysis.evaluation.findings.height:
        rule = analysis.evaluation.findings.get_column("rule_id").sort()[0]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
        for n in range(args.repeat):
            print(f"run {n + 1}: " + _session(browser, path, case, rule))
        browser.close()
    return 0


def _session(browser, path: Path, case: str, rule: str | None) -> str:
    """One tab: open the page and time each action; the figures as one line."""
    tab = browser.new_page(viewport={"width": 1280, "height": 1400})
    t0 = time.perf_counter()
    tab.goto(path.as_uri())
    tab.wait_for_selector("html[data-browser=ready]", timeout=60_000)
    load = time.perf_counter() - t0

    def applied() -> int:
        return int(tab.get_attribute("#ab-table", "data-applied") or 0)

    def timed(action) -> float:
        """Seconds from `action` until the list is filtered (and drawn) once more."""
        before = applied()
        start = time.perf_counter()
        action()
        tab.wait_for_function(
            "n => Number(document.getElementById('ab-table').dataset.applied) > n",
            arg=before,
            timeout=60_000,
        )
        return time.perf_counter() - start

    # the search waits 120 ms after the last key before it filters: included here
    search = timed(lambda: tab.fill("#ab-q", case))
    tab.fill("#ab-q", "")
    tab.wait_for_timeout(300)
    failures = timed(lambda: tab.check("#ab-fail"))
    by_rule = timed(lambda: tab.select_option("#ab-rule", label=rule)) if rule else 0.0
    tab.uncheck("#ab-fail")
    if rule is not None:
        tab.select_option("#ab-rule", label="any rule")
    sort = timed(lambda: tab.click("#ab-runs th[data-key=cost]"))
    tab.click("#ab-runs th[data-key=findings]")
    tab.click("#ab-runs th[data-key=findings]")  # most findings first
    start = time.perf_counter()
    tab.click("#ab-body button.ab-open")
    tab.wait_for_selector("#ab-run h3", timeout=60_000)
    opened = time.perf_counter() - start
    tab.close()
    return (
        f"load {load:.2f} s; search {search * 1000:.0f} ms; "
        f"failures only {failures * 1000:.0f} ms; rule filter {by_rule * 1000:.0f} ms; "
        f"sort by cost {sort * 1000:.0f} ms; open a run {opened * 1000:.0f} ms; "
        f"load + filter {load + failures:.2f} s"
    )


if __name__ == "__main__":
    sys.exit(main())
