"""What the metrics and renderers add to the analysis: `report` phases timed on one input.

Analysis = read, normalize, runs, prices and the default pack's checks (`analyze_paths`);
then, each timed apart: `build_summary` (every metric of summary.json), the terminal summary,
`render_html` (report.html), and writing the output folder. The target of issue 4: summary,
terminal and page together at most 25% of the analysis.

    python bench/bench_render.py bench/data/otlp-1000000-s1.jsonl [--out /tmp/render-out]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analyzer.engine import analyze_paths
from analyzer.metrics.summary import build_summary
from analyzer.outputs import write_outputs
from analyzer.pack import load_default_pack
from analyzer.render.html import render_html
from analyzer.render.terminal import terminal_summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    analysis = analyze_paths([args.path], packs=[load_default_pack()], jobs=args.jobs)
    t1 = time.perf_counter()
    summary = build_summary(analysis)
    t2 = time.perf_counter()
    lines = terminal_summary(summary)
    t3 = time.perf_counter()
    page = render_html(analysis, summary)
    t4 = time.perf_counter()
    out = args.out or Path(tempfile.mkdtemp(prefix="agenttrace-render-"))
    write_outputs(analysis, summary, out, command=["bench_render"])
    t5 = time.perf_counter()

    runs = analysis.runs.runs.height
    analysis_s = t1 - t0
    rendering = (t2 - t1) + (t3 - t2) + (t4 - t3)
    print(
        f"{args.path.name}: {analysis.ingested.log.spans_read:,} spans, {runs:,} runs, "
        f"{len(lines)} terminal lines, report.html {len(page) / 1e6:.2f} MB"
    )
    print("| phase | wall (s) | share of analysis |")
    print("|---|---|---|")
    for label, secs in (
        ("analysis (read, runs, prices, default pack)", analysis_s),
        ("summary.json metrics (`build_summary`)", t2 - t1),
        ("terminal summary", t3 - t2),
        ("report.html (`render_html`)", t4 - t3),
        ("metrics + renderers", rendering),
        ("writing the output folder (Parquet, JSONL, page, manifest)", t5 - t4),
    ):
        print(f"| {label} | {secs:.2f} | {secs / analysis_s:.1%} |")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:,.0f} MB; target: metrics + renderers <= 25% of the analysis")
    return 0 if rendering <= 0.25 * analysis_s else 1


if __name__ == "__main__":
    raise SystemExit(main())
