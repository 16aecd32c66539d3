"""Ingest benchmark: agenttrace's OTLP JSON lines reader against a stdlib loop and the orjson floor.

    python bench/bench_ingest.py bench/data/otlp-1000000-s1.jsonl [--repeat 3] [--methods a,b]

Each measurement runs in its own process tree; wall time, CPU time and peak RSS (of the largest
process in the tree, from ``RUSAGE_CHILDREN``) are read around it. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor

__all__ = ["main"]

METHODS = {
    "agenttrace-1": "(a) agenttrace `read_lines`, 1 process, full span table",
    "agenttrace-2": "(a) agenttrace `read_lines(jobs=2)`, 2 threads, full span table",
    "agenttrace-ingest": "(a') agenttrace `read_traces(jobs=2)`: (a) + digest, de-duplication, "
    "orphans, sort",
    "agenttrace-ingest-tuned": "(a'') as (a'), the process started with `TUNED_ENV`",
    "stdlib-json": "(b) stdlib `json.loads` + dict loops, same columns, 1 process",
    "orjson-floor": "(c) floor: `orjson.loads` of every line, 2 processes, nothing kept",
}

#: Allocator settings for the measured process:
#: Arrow and polars both on jemalloc, neither giving freed pages back to the system, so fresh
#: pages (page faults are dear on this VM) are taken once, not again after every free.
TUNED_ENV = {
    "ARROW_DEFAULT_MEMORY_POOL": "jemalloc",
    "JE_ARROW_MALLOC_CONF": "dirty_decay_ms:-1,muzzy_decay_ms:-1",
    "_RJEM_MALLOC_CONF": "dirty_decay_ms:-1,muzzy_decay_ms:-1",
}


# --- the measured workloads (run in a child process) -------------------------------------------


def _agenttrace(path: str, jobs: int) -> int:
    import pyarrow as pa

    from analyzer.ingest.accounting import FileLog
    from analyzer.ingest.otlp_json import read_lines
    from analyzer.spans import SPAN_SCHEMA

    log = FileLog(path)
    with open(path, "rb") as f:
        table = pa.Table.from_batches(list(read_lines(f, log, jobs=jobs)), schema=SPAN_SCHEMA)
    assert log.spans_read == table.num_rows + log.spans_quarantined
    return table.num_rows


def _ingest(path: str) -> int:
    from analyzer.ingest import read_traces

    ingested = read_traces([path], jobs=2)
    assert ingested.log.balanced()
    return ingested.spans.num_rows


def _stdlib_attrs(items: list[dict]) -> list[dict]:
    out = []
    for item in items or ():
        value = item.get("value") or {}
        row = {
            "key": item["key"],
            "str": None,
            "int": None,
            "float": None,
            "bool": None,
            "json": None,
        }
        if "stringValue" in value:
            row["str"] = value["stringValue"]
        elif "boolValue" in value:
            row["bool"] = value["boolValue"]
        elif "intValue" in value:
            row["int"] = int(value["intValue"])
        elif "doubleValue" in value:
            row["float"] = float(value["doubleValue"])
        elif "arrayValue" in value:
            row["json"] = json.dumps(
                [next(iter(v.values()), None) for v in value["arrayValue"].get("values", [])],
                separators=(",", ":"),
            )
        else:
            row["json"] = json.dumps(value, separators=(",", ":"))
        out.append(row)
    return out


def _stdlib(path: str) -> int:
    """What a straightforward implementation does: json.loads, loops, lists, one Arrow table."""
    import pyarrow as pa

    from analyzer.spans import KINDS, SPAN_SCHEMA, STATUSES

    cols: dict[str, list] = {name: [] for name in SPAN_SCHEMA.names}
    gc.disable()  # the GC pitfall of PERF-NOTES would dominate otherwise
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            req = json.loads(line)
            for rs in req.get("resourceSpans", []):
                res = _stdlib_attrs(rs.get("resource", {}).get("attributes", []))
                for ss in rs.get("scopeSpans", []):
                    scope = ss.get("scope", {})
                    for sp in ss.get("spans", []):
                        status = sp.get("status", {})
                        cols["trace_id"].append(sp["traceId"].lower())
                        cols["span_id"].append(sp["spanId"].lower())
                        cols["parent_span_id"].append(sp.get("parentSpanId", "").lower() or None)
                        cols["name"].append(sp.get("name", ""))
                        cols["kind"].append(KINDS[int(sp.get("kind", 0))])
                        cols["start_ns"].append(int(sp["startTimeUnixNano"]))
                        cols["end_ns"].append(int(sp["endTimeUnixNano"]))
                        cols["status_code"].append(STATUSES[int(status.get("code", 0))])
                        cols["status_message"].append(status.get("message") or None)
                        cols["scope_name"].append(scope.get("name") or None)
                        cols["scope_version"].append(scope.get("version") or None)
                        cols["attributes"].append(_stdlib_attrs(sp.get("attributes", [])))
                        cols["resource_attributes"].append(res)
                        cols["events"].append(
                            [
                                {
                                    "time_ns": int(e["timeUnixNano"]),
                                    "name": e.get("name", ""),
                                    "attributes": _stdlib_attrs(e.get("attributes", [])),
                                }
                                for e in sp.get("events", [])
                            ]
                        )
                        cols["links"].append([])
                        cols["source_file"].append(path)
                        cols["source_pos"].append(line_no)
    table = pa.Table.from_pydict(cols, schema=SPAN_SCHEMA)
    return table.num_rows


def _floor_part(args: tuple[str, int, int]) -> int:
    import orjson

    path, start, stop = args
    n = 0
    with open(path, "rb") as f:
        f.seek(start)
        if start:
            f.readline()
        while f.tell() <= stop:
            line = f.readline()
            if not line:
                break
            if line.strip():
                orjson.loads(line)
                n += 1
    return n


def _floor(path: str) -> int:
    size = os.path.getsize(path)
    half = size // 2
    with ProcessPoolExecutor(2) as pool:
        lines = sum(pool.map(_floor_part, [(path, 0, half - 1), (path, half - 1, size)]))
    return lines


def _run(method: str, path: str) -> dict:
    start = time.perf_counter()
    if method == "agenttrace-1":
        spans = _agenttrace(path, 1)
    elif method == "agenttrace-2":
        spans = _agenttrace(path, 2)
    elif method in ("agenttrace-ingest", "agenttrace-ingest-tuned"):
        spans = _ingest(path)
    elif method == "stdlib-json":
        spans = _stdlib(path)
    else:
        spans = _floor(path)  # counts lines: the floor keeps no spans
    return {"spans": spans, "inner_wall": time.perf_counter() - start}


# --- the driver ---------------------------------------------------------------------------------


def _measure(method: str, path: str) -> dict:
    """Run `method` in a child; its wall, CPU and peak RSS (largest process of its tree)."""
    start = time.perf_counter()
    env = {**os.environ, **TUNED_ENV} if method.endswith("-tuned") else None
    proc = subprocess.run(
        [sys.executable, __file__, "--run", method, path],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out.update(wall=wall, cpu=usage.ru_utime + usage.ru_stime, rss_mb=usage.ru_maxrss / 1024)
    return out


def _busy(seconds: float = 1.0) -> float:
    """The share of all CPUs busy over `seconds` (other sessions share this machine)."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as fh:
            ticks = [int(x) for x in fh.readline().split()[1:]]
        return sum(ticks), ticks[3] + ticks[4]  # idle + iowait

    total0, idle0 = sample()
    time.sleep(seconds)
    total1, idle1 = sample()
    return 1 - (idle1 - idle0) / max(1, total1 - total0)


def _settle(limit: float) -> None:
    """Wait (up to `limit` seconds) until less than 8% of the CPUs are busy."""
    deadline = time.monotonic() + limit
    while _busy() > 0.08 and time.monotonic() < deadline:
        time.sleep(2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help="before each run, wait up to this many seconds for the other load to go",
    )
    ap.add_argument("--run", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--measure", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.run:
        print(json.dumps(_run(args.run, args.file)))
        return 0
    if args.measure:
        # a fresh process per measurement, so RUSAGE_CHILDREN covers that run alone
        print(json.dumps(_measure(args.measure, args.file)))
        return 0
    methods = args.methods.split(",")
    results: dict[str, list[dict]] = {m: [] for m in methods}
    for _ in range(args.repeat):
        for method in methods:  # interleaved, so load from elsewhere hits all methods alike
            if args.settle:
                _settle(args.settle)
            proc = subprocess.run(
                [sys.executable, __file__, "--measure", method, args.file],
                capture_output=True,
                text=True,
                check=True,
            )
            results[method].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(method, results[method][-1], file=sys.stderr)
    spans = max(
        (r["spans"] for m in methods if m.startswith("agenttrace") for r in results[m]), default=0
    )
    floor = (
        statistics.median(r["wall"] for r in results["orjson-floor"])
        if "orjson-floor" in results
        else None
    )
    print(
        f"File: `{os.path.basename(args.file)}`, {os.path.getsize(args.file) / 1e6:.0f} MB, "
        f"{spans:,} spans; median of {args.repeat} run(s), wall = whole process incl. "
        "interpreter start.\n"
    )
    print(
        "| method | wall (s) | spans/s | CPU (s) | peak RSS, largest process (MB) | wall / floor |"
    )
    print("|---|---|---|---|---|---|")
    for method in methods:
        rs = results[method]
        wall = statistics.median(r["wall"] for r in rs)
        cpu = statistics.median(r["cpu"] for r in rs)
        rss = max(r["rss_mb"] for r in rs)
        ratio = f"{wall / floor:.2f}x" if floor else ""
        rate = f"{spans / wall / 1000:.0f}k"
        print(f"| {METHODS[method]} | {wall:.1f} | {rate} | {cpu:.1f} | {rss:.0f} | {ratio} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
