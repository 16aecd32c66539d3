"""Report benchmark: `agenttrace report` end to end, from JSON and from the ingested dataset.

    python bench/bench_report.py bench/data/otlp-1000000-s1.jsonl [--repeat 3] [--methods a,b]

Compares, on the same file: the `orjson.loads` floor (every line, 2 processes, nothing kept),
the stdlib-json loop of `bench_ingest.py` (1 process, the span table only), `agenttrace
report` from the JSON file (partitioned, the default for a big input, and in memory),
`agenttrace ingest` into a dataset, and `agenttrace report` from that dataset. Every
measurement is a fresh process tree; wall time, CPU time and peak RSS (of the largest process
of the tree, from ``RUSAGE_CHILDREN``) are read around it. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["main"]

HERE = Path(__file__).resolve().parent
METHODS = {
    "orjson-floor": "floor: `orjson.loads` of every line, 2 processes, nothing kept",
    "stdlib-json": "stdlib `json.loads` + dict loops to a span table, 1 process",
    "report-json": "`agenttrace report FILE` (partitioned: auto), `-j 2`",
    "report-json-out": "`agenttrace report FILE --out DIR` (every output), `-j 2`",
    "report-json-memory": "`agenttrace report FILE --partitions 0` (all in memory), `-j 2`",
    "ingest": "`agenttrace ingest FILE --out DS`, `-j 2`",
    "report-dataset": "`agenttrace report DS` (partitioned: auto), `-j 2`",
    "report-dataset-memory": "`agenttrace report DS --partitions 0`, `-j 2`",
    "core-json": "`analyze_paths(FILE, jobs=2)` alone: no summary, steps left in the spill",
}

#: `core-json`, timed by phase: the imports, the reading of every unit into the spill (the
#: workers' start included, until the last unit is in: `progress` is called unit by unit, in
#: order), and the analysis of the partitions with the merge of their results. The phases run
#: one after the other: no partition can be analyzed before every unit is read, as a run's
#: spans may sit in any unit.
_CORE = """
import time; START = time.perf_counter()
import json, sys
from analyzer.pack import load_default_pack
from analyzer.engine import analyze_paths
from analyzer.progress import Progress
class Phases(Progress):
    def advance(self, spans=0):
        if self._name == "read":
            read.append(time.perf_counter())
        super().advance(spans)
if __name__ == "__main__":
    read = []
    begin = time.perf_counter()
    a = analyze_paths([sys.argv[1]], jobs=2, packs=[load_default_pack()],
                      progress=Phases(open("/dev/null", "w"), bar=False))
    end = time.perf_counter()
    phases = {"imports": begin - START, "read and spill": read[-1] - begin,
              "partitions and merge": end - read[-1]}
    print(json.dumps({"spans": a.ingested.log.spans_kept, "runs": a.runs.runs.height,
                      "findings": a.evaluation.findings.height, "phases": phases}))
"""


def _agenttrace() -> str:
    found = Path(sys.executable).parent / "agenttrace"
    return str(found) if found.exists() else (shutil.which("agenttrace") or "agenttrace")


def _command(method: str, path: str, dataset: str) -> list[str] | None:
    """The command line of a CLI method (None for the in-Python baselines)."""
    cli = [_agenttrace()]
    common = ["--format", "json", "-j", "2"]
    return {
        "report-json": [*cli, "report", path, *common],
        "report-json-out": [*cli, "report", path, *common, "--out", dataset + "-report"],
        "report-json-memory": [*cli, "report", path, *common, "--partitions", "0"],
        "ingest": [*cli, "ingest", path, "--out", dataset + "-fresh", "-j", "2"],
        "report-dataset": [*cli, "report", dataset, *common],
        "report-dataset-memory": [*cli, "report", dataset, *common, "--partitions", "0"],
        "core-json": [sys.executable, "-c", _CORE, path],
    }.get(method)


def _measure(method: str, path: str, dataset: str) -> dict:
    """Run `method` in a child; its wall, CPU and peak RSS (largest process of its tree)."""
    command = _command(method, path, dataset)
    if command is None:  # the baselines of bench_ingest.py, run the same way
        command = [sys.executable, str(HERE / "bench_ingest.py"), "--run", method, path]
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{method} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024}
    if method == "core-json":
        out.update(json.loads(proc.stdout))
    if method.startswith("report"):
        summary = json.loads(proc.stdout)
        out["spans"] = summary["ingest"]["spans_kept"]
        out["runs"] = summary["runs"]["count"]
        out["findings"] = summary["findings"]["total"]
    if method == "ingest":
        shutil.rmtree(dataset + "-fresh", ignore_errors=True)
    if method == "report-json-out":
        shutil.rmtree(dataset + "-report", ignore_errors=True)
    return out


def _compile_package() -> None:
    """Write the bytecode of the installed package first, as `pip install` does: an editable
    install under ``PYTHONDONTWRITEBYTECODE`` (set on this workplace's machines) would otherwise
    compile its modules from source in every process, 0.13 s each time."""
    import compileall

    import analyzer

    compileall.compile_dir(Path(analyzer.__file__).parent, quiet=1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--dataset", default=None, help="an ingested dataset of FILE (default: made)")
    ap.add_argument("--settle", type=float, default=0.0, help="wait up to this long for quiet")
    ap.add_argument("--measure", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.measure:
        # a fresh process per measurement, so RUSAGE_CHILDREN covers that run alone
        print(json.dumps(_measure(args.measure, args.file, args.dataset)))
        return 0
    methods = args.methods.split(",")
    _compile_package()
    tmp = None
    dataset = args.dataset
    if dataset is None and any("dataset" in m for m in methods):
        tmp = tempfile.mkdtemp(prefix="agenttrace-bench-", dir=HERE / "data")
        dataset = str(Path(tmp) / "ds")
        subprocess.run([_agenttrace(), "ingest", args.file, "--out", dataset], check=True)
    dataset = dataset or str(Path(tempfile.gettempdir()) / "agenttrace-bench-ds")
    sys.path.insert(0, str(HERE))
    from bench_ingest import _settle

    results: dict[str, list[dict]] = {m: [] for m in methods}
    try:
        for _ in range(args.repeat):
            for method in methods:  # interleaved, so load from elsewhere hits all alike
                if args.settle:
                    _settle(args.settle)
                proc = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--measure",
                        method,
                        args.file,
                        "--dataset",
                        dataset,
                    ],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                results[method].append(json.loads(proc.stdout.strip().splitlines()[-1]))
                print(method, results[method][-1], file=sys.stderr)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    floor = (
        statistics.median(r["wall"] for r in results["orjson-floor"])
        if results.get("orjson-floor")
        else None
    )
    spans = next((r["spans"] for m in methods for r in results[m] if "spans" in r), None)
    print(
        f"File: `{os.path.basename(args.file)}`, {os.path.getsize(args.file) / 1e6:.0f} MB, "
        f"{spans or 0:,} spans; median of {args.repeat} run(s); wall = whole process tree "
        "incl. interpreter start; RSS = largest single process.\n"
    )
    print("| method | wall (s) | CPU (s) | peak RSS (MB) | wall / floor | runs | findings |")
    print("|---|---|---|---|---|---|---|")
    for method in methods:
        rs = results[method]
        wall = statistics.median(r["wall"] for r in rs)
        cpu = statistics.median(r["cpu"] for r in rs)
        rss = max(r["rss_mb"] for r in rs)
        ratio = f"{wall / floor:.2f}x" if floor else ""
        runs = f"{rs[0]['runs']:,}" if "runs" in rs[0] else ""
        found = f"{rs[0]['findings']:,}" if "findings" in rs[0] else ""
        print(
            f"| {METHODS[method]} | {wall:.2f} | {cpu:.2f} | {rss:.0f} | {ratio} | {runs} "
            f"| {found} |"
        )
    if results.get("core-json"):
        print("\n| `core-json` phase | wall (s), median | / floor |\n|---|---|---|")
        for phase in results["core-json"][0]["phases"]:
            took = statistics.median(r["phases"][phase] for r in results["core-json"])
            print(f"| {phase} | {took:.2f} | {f'{took / floor:.2f}x' if floor else ''} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
