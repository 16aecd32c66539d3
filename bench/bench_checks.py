"""What the checks of the example packs cost next to the ingest, on a run set of 1M+ spans.

The run set is the 40 sample runs (three conventions: OTel GenAI, OpenInference, OpenLLMetry)
copied until it holds ``--spans`` spans, each copy under new trace ids, written once as OTLP JSON
lines (one line per trace) to ``bench/data/``. So every rule of ``rules/kyc.yaml``,
``support.yaml`` and ``realestate.yaml`` meets the runs it was written for, and the findings of the
big set must be exactly ``copies`` times those of the 40 runs (checked: a fast wrong answer is
no result).

Phases timed in one process, in order: ingest (``read_traces``, ``--jobs`` processes), runs
(``analyze`` without packs: normalize, runs and steps, prices, retries), checks (``evaluate`` of
the three packs plus the per-run finding counts and scores, as ``analyze`` does with packs).

    python bench/bench_checks.py [--spans 1000000] [--jobs 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analyzer.ingest import read_traces  # noqa: E402
from analyzer.pack import load_packs  # noqa: E402
from analyzer.pipeline import _with_findings, analyze_runs  # noqa: E402
from analyzer.runs import build_runs  # noqa: E402

PACKS = [ROOT / "rules" / f"{name}.yaml" for name in ("kyc", "support", "realestate")]
DATA = Path(__file__).resolve().parent / "data"


def analyze(ingested):
    """The runs of a span table, priced, without rule packs (the checks are timed apart)."""
    from analyzer.conventions import normalize

    spans = ingested.spans
    runset = build_runs(spans, normalize(spans), parents=ingested.parents, log=ingested.log)
    return analyze_runs(ingested, runset)


# --- the run set ---------------------------------------------------------------------------------


def _any_value(value) -> dict:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_any_value(v) for v in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": [_kv(k, v) for k, v in value.items()]}}
    return {"stringValue": str(value)}


def _kv(key: str, value) -> dict:
    return {"key": key, "value": _any_value(value)}


def _attrs(rows) -> list[dict]:
    out = []
    for row in rows or []:
        for field in ("str", "int", "float", "bool"):
            if row[field] is not None:
                out.append(_kv(row["key"], row[field]))
                break
        else:
            if row["json"] is not None:
                out.append(_kv(row["key"], json.loads(row["json"])))
    return out


def trace_lines(spans) -> list[str]:
    """One OTLP JSON line per trace of the span table ``spans`` (sorted by trace id)."""
    rows = spans.to_pylist()
    by_trace: dict[str, list[dict]] = {}
    for row in rows:
        by_trace.setdefault(row["trace_id"], []).append(row)
    lines = []
    for trace_id in sorted(by_trace):
        groups: dict[tuple, list[dict]] = {}
        for row in by_trace[trace_id]:
            key = (
                json.dumps(_attrs(row["resource_attributes"]), sort_keys=True),
                row["scope_name"] or "",
                row["scope_version"] or "",
            )
            span = {
                "traceId": row["trace_id"],
                "spanId": row["span_id"],
                "name": row["name"],
                "kind": [
                    "unspecified",
                    "internal",
                    "server",
                    "client",
                    "producer",
                    "consumer",
                ].index(row["kind"] or "unspecified"),
                "startTimeUnixNano": str(row["start_ns"]),
                "endTimeUnixNano": str(row["end_ns"]),
                "attributes": _attrs(row["attributes"]),
                "events": [
                    {
                        "timeUnixNano": str(e["time_ns"]),
                        "name": e["name"],
                        "attributes": _attrs(e["attributes"]),
                    }
                    for e in row["events"] or []
                ],
                "links": [
                    {"traceId": lk["trace_id"], "spanId": lk["span_id"]}
                    for lk in row["links"] or []
                ],
                "status": {
                    "code": ["unset", "ok", "error"].index(row["status_code"] or "unset"),
                    **({"message": row["status_message"]} if row["status_message"] else {}),
                },
            }
            if row["parent_span_id"]:
                span["parentSpanId"] = row["parent_span_id"]
            groups.setdefault(key, []).append(span)
        resource_spans = [
            {
                "resource": {"attributes": json.loads(res)},
                "scopeSpans": [{"scope": {"name": name, "version": version}, "spans": spans_}],
            }
            for (res, name, version), spans_ in sorted(groups.items(), key=lambda kv: kv[0])
        ]
        lines.append(json.dumps({"resourceSpans": resource_spans}, ensure_ascii=False))
    return lines


def build_run_set(spans_wanted: int) -> tuple[Path, int, int]:
    """The copied sample run set as OTLP JSON lines: (path, copies, spans)."""
    samples = read_traces([ROOT / "sample_traces"]).spans
    copies = math.ceil(spans_wanted / samples.num_rows)
    path = DATA / f"samples-x{copies}.jsonl"
    if not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        templates = [
            (line, json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"])
            for line in trace_lines(samples)
        ]
        tmp = path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            for copy in range(copies):
                prefix = f"{copy:08x}"
                for line, trace_id in templates:
                    fh.write(line.replace(trace_id, prefix + trace_id[8:]))
                    fh.write("\n")
        tmp.rename(path)
    return path, copies, samples.num_rows * copies


# --- timing --------------------------------------------------------------------------------------


def _findings_key(findings) -> list[tuple]:
    return sorted(
        (r["rule_id"], r["kind"], r["tool"] or "", r["argument"] or "", r["detail"], r["pack"])
        for r in findings.iter_rows(named=True)
    )


def one_round(path: Path, packs, jobs: int) -> dict[str, float]:
    """Wall seconds of each phase, and the findings."""
    from analyzer.checks import evaluate

    t0 = time.perf_counter()
    ingested = read_traces([path], jobs=jobs)
    t1 = time.perf_counter()
    analysis = analyze(ingested)
    t2 = time.perf_counter()
    evaluation = evaluate(packs, analysis.runs)
    _with_findings(analysis.runs, evaluation, packs)
    t3 = time.perf_counter()
    return {
        "spans": ingested.spans.num_rows,
        "runs": analysis.runs.runs.height,
        "ingest": t1 - t0,
        "runs_phase": t2 - t1,
        "checks": t3 - t2,
        "findings": evaluation.findings,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    # one by one: the kyc and support packs both name a rule `no-retries`
    packs = [pack for path in PACKS for pack in load_packs([path])]
    base = analyze(read_traces([ROOT / "sample_traces"]))
    from analyzer.checks import evaluate

    base_findings = _findings_key(evaluate(packs, base.runs).findings)
    path, copies, spans = build_run_set(args.spans)
    print(
        f"run set: {path.name}, {copies} copies of the 40 sample runs, {spans:,} spans, "
        f"{path.stat().st_size / 1e6:,.0f} MB; packs: kyc, support, realestate "
        f"({sum(len(p.rules) for p in packs)} rules); jobs {args.jobs}"
    )
    rounds = []
    for i in range(args.repeat):
        r = one_round(path, packs, args.jobs)
        expected = sorted(base_findings * copies)
        assert r["spans"] == spans, (r["spans"], spans)
        assert _findings_key(r["findings"]) == expected, "findings differ from copies x base"
        rounds.append(r)
        print(
            f"round {i + 1}: ingest {r['ingest']:.2f} s, runs {r['runs_phase']:.2f} s, "
            f"checks {r['checks']:.2f} s, {r['findings'].height:,} findings "
            f"({len(base_findings)} x {copies}), {r['runs']:,} runs"
        )
    med = {k: statistics.median(r[k] for r in rounds) for k in ("ingest", "runs_phase", "checks")}
    print()
    print("| phase | median wall (s) | range (s) | spans/s |")
    print("|---|---|---|---|")
    for key, label in (
        ("ingest", f"ingest (`read_traces`, jobs={args.jobs})"),
        ("runs_phase", "runs (normalize, steps, prices, retries)"),
        ("checks", "checks of the 3 example packs"),
    ):
        values = [r[key] for r in rounds]
        print(
            f"| {label} | {med[key]:.2f} | {min(values):.2f}-{max(values):.2f} | "
            f"{spans / med[key]:,.0f} |"
        )
    ratio = med["checks"] / med["ingest"]
    print(
        f"\nchecks / ingest = {ratio:.2f} (target < 1); peak RSS "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB"
    )
    return 0 if ratio < 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
