"""Mutation fuzzing of `agenttrace report` and `agenttrace ingest` (a tool, not a test: run it
by hand after a change to a reader, the run model or the engine).

Every case is a trace file of the repository (the samples, in JSON, protobuf and gzip, the real
traces of tests/data/real_corpus and the shared folder, the documents of tests/data/documents)
mutated at random: cut short, bytes overwritten, lines repeated or dropped, or its JSON values
replaced by values of another type, out of range, repeated or left out (a gzip file's content
mutated, or its compressed bytes). What must hold:

- ``report``: the command ends with exit code 0, 1 or 2 (never 3, an internal error), its JSON
  is whole and the accounting balances (spans read = kept + quarantined + duplicates);
- ``paths`` (with ``--mode paths``): a few mutated files ingested into a dataset in two
  ingests, the dataset's report, the files' report and their report in 3 or 8 partitions on
  two workers give the same summary (the dataset's accounting apart, which tells it from the
  files, but for its spans kept, orphans, spans in no run and runs; the partitioned report's
  is the files' one, warnings included).

A case that breaks a rule is kept (``--keep``) with the command line that shows it::

    python tests/fuzz_reports.py --mode report --seed 1 --cases 300
    python tests/fuzz_reports.py --mode paths --seed 1 --cases 30
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("AGENTTRACE_REAL_TRACES", "/work/shared/real-traces"))
PACKS = ["kyc", "default", "support", "realestate"]

#: Values of every JSON type, and of the OTLP value shapes, that readers must survive.
ODD_VALUES: list[Any] = [
    None, True, 0, -1, 2**63, -(2**63) - 1, 10**30, 1e308, -0.0, 1.5, "", "x" * 5000,
    "\ud800", "NaN", "1e999", [], {}, [[[[]]]], {"a": {"b": None}}, "0x" + "f" * 40,
    "2026-13-45T99:99:99Z", "\u0000", "\U0001f642" * 10, {"stringValue": 1},
    {"intValue": "abc"}, {"intValue": "99999999999999999999999"}, {"doubleValue": "x"},
    {"arrayValue": {"values": 5}}, {"kvlistValue": {"values": [{"key": None}]}},
    {"bytesValue": "!!"},
]  # fmt: skip
#: Keys a mutation adds where they mean most to the readers.
SPAN_KEYS = [
    "traceId", "spanId", "parentSpanId", "startTimeUnixNano", "attributes", "events", "links",
    "status", "kind", "name", "id", "model", "context", "spans", "observations",
]  # fmt: skip


def inputs() -> list[Path]:
    """The trace files mutations start from."""
    found = sorted((ROOT / "sample_traces").glob("*/*.jsonl"))[:6]
    found += sorted((ROOT / "sample_traces").glob("*/*.binpb"))
    found += sorted((ROOT / "sample_traces").glob("*/*.gz"))
    found += sorted((ROOT / "tests" / "data" / "real_corpus").glob("*.json"))
    found += sorted((ROOT / "tests" / "data" / "documents").glob("*.json"))
    return found + (sorted(SHARED.glob("*.json")) if SHARED.is_dir() else [])


def mutate_value(value: Any, rate: float, draw: random.Random) -> Any:
    """`value` with some of its parts replaced, left out, repeated or reordered."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            roll = draw.random()
            if roll < rate * 0.2:
                continue
            out[key] = (
                copy.deepcopy(draw.choice(ODD_VALUES))
                if roll < rate
                else mutate_value(item, rate, draw)
            )
        if draw.random() < rate * 0.1:
            out[draw.choice(SPAN_KEYS)] = copy.deepcopy(draw.choice(ODD_VALUES))
        return out
    if isinstance(value, list):
        items = [mutate_value(v, rate, draw) for v in value if draw.random() > rate * 0.1]
        if items and draw.random() < rate:
            items.append(copy.deepcopy(draw.choice(items)))
        if draw.random() < rate * 0.3:
            draw.shuffle(items)
        return items
    return value


def mutate(data: bytes, lines: bool, draw: random.Random, binary: bool = False) -> bytes:
    """One mutation of a file's bytes (`lines`: a JSON lines file; `binary`: not JSON)."""
    kinds = ["cut", "bytes"] if binary else ["cut", "bytes", "json", "json", "json", "lines"]
    kind = draw.choice(kinds)
    if kind == "cut":
        return data[: draw.randrange(len(data))]
    if kind == "bytes":
        out = bytearray(data)
        for _ in range(draw.randrange(1, 20)):
            out[draw.randrange(len(out))] = draw.randrange(256)
        return bytes(out)
    if kind == "lines" and lines:
        rows = data.split(b"\n")
        for _ in range(draw.randrange(1, 5)):
            if not rows:  # every line dropped
                break
            i = draw.randrange(len(rows))
            op = draw.choice(["repeat", "drop", "cut", "swap"])
            if op == "repeat":
                rows.insert(i, rows[i])
            elif op == "drop":
                rows.pop(i)
            elif op == "cut":
                rows[i] = rows[i][: draw.randrange(len(rows[i]) + 1)]
            else:
                j = draw.randrange(len(rows))
                rows[i], rows[j] = rows[j], rows[i]
        return b"\n".join(rows)
    rate = draw.choice([0.01, 0.03, 0.1])
    texts = data.split(b"\n") if lines else [data]
    out = []
    for text in texts:
        try:
            out.append(json.dumps(mutate_value(json.loads(text), rate, draw)).encode())
        except ValueError:
            out.append(text)
    return b"\n".join(out)


def mutated_file(folder: Path, name: str, draw: random.Random) -> Path:
    """A mutated copy of one of the `inputs`; a gzip file has its content mutated and is
    compressed again, or has its compressed bytes mutated."""
    source = draw.choice(inputs())
    path = folder / (name + "".join(source.suffixes[-2:]))
    data = source.read_bytes()
    if source.suffix == ".gz" and draw.random() < 0.8:
        inner = Path(source.stem).suffix
        data = gzip.compress(mutate(gzip.decompress(data), inner == ".jsonl", draw), mtime=0)
    else:
        binary = source.suffix in (".gz", ".binpb")
        data = mutate(data, source.suffix == ".jsonl", draw, binary)
    path.write_bytes(data)
    return path


def report_case(folder: Path, draw: random.Random, invoke) -> str | None:
    """One mutated file reported: the rule it breaks, or None."""
    args = ["report", str(mutated_file(folder, "case", draw)), "--format", "json"]
    pack = draw.choice(PACKS)
    args += ["--rules", str(ROOT / "rules" / f"{pack}.yaml")]
    if pack == "kyc" and draw.random() < 0.5:
        args += ["--labels", str(ROOT / "rules" / "kyc-labels.jsonl")]
    if draw.random() < 0.4:
        args += ["--out", str(folder / "out")]
    if draw.random() < 0.2:
        args += ["--redact-salt", "s"]
    result = invoke(args)
    if result.exit_code not in (0, 1, 2) or not isinstance(result.exception, SystemExit | None):
        return f"exit {result.exit_code}: {result.output[-500:]} ({' '.join(args)})"
    if result.exit_code == 2:
        return None
    ingest = json.loads(result.stdout)["ingest"]
    kept = ingest["spans_kept"] + ingest["spans_quarantined"] + ingest["duplicate_spans"]
    if ingest["spans_read"] != kept:
        return f"accounting does not balance: {ingest} ({' '.join(args)})"
    return None


def paths_case(folder: Path, draw: random.Random, invoke) -> str | None:
    """Mutated files through a dataset, in memory and partitioned: the rule broken, or None."""
    files = [str(mutated_file(folder, f"in{i}", draw)) for i in range(draw.randrange(2, 5))]
    rules = ["--rules", str(ROOT / "rules" / f"{draw.choice(PACKS[:3])}.yaml")]
    # many partitions for few runs: some hold one run, or one call
    partitioned = ["--partitions", str(draw.choice((3, 8))), "-j", "2", *rules]
    dataset = str(folder / "ds")
    half = draw.randrange(1, len(files))
    runs = {
        "ingest 1": ["ingest", *files[:half], "--out", dataset, *rules],
        "ingest 2": ["ingest", *files[half:], "--out", dataset, *rules],
        "dataset": ["report", dataset, "--format", "json", *rules],
        "files": ["report", *files, "--format", "json", *rules],
        "partitioned": ["report", *files, "--format", "json", *partitioned],
    }
    results = {name: invoke(args) for name, args in runs.items()}
    for name, result in results.items():
        if result.exit_code not in (0, 1, 2) or not isinstance(result.exception, SystemExit | None):
            return f"{name}: exit {result.exit_code}: {result.output[-500:]}"
    summaries = {}
    for name in ("dataset", "files", "partitioned"):
        if results[name].exit_code in (0, 1):
            summaries[name] = json.loads(results[name].stdout)
    if len(summaries) not in (0, 3):
        return f"some reports fail, others not: { {n: r.exit_code for n, r in results.items()} }"
    if summaries and summaries["partitioned"] != summaries["files"]:
        return "the partitioned report differs from the files' one (ingest included)"
    if summaries:
        same = ("spans_kept", "orphan_spans", "spans_outside_runs", "runs")
        ingests = [{k: summaries[n]["ingest"][k] for k in same} for n in ("dataset", "files")]
        if ingests[0] != ingests[1]:
            return f"the dataset's spans and runs differ from the files': {ingests}"
    for summary in summaries.values():
        summary.pop("ingest")  # the dataset's accounting tells it from the files
    differ = {n for n, s in summaries.items() if s != summaries.get("files")}
    return f"summaries differ from the files' one: {sorted(differ)}" if differ else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=["report", "paths"], default="report")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--keep", type=Path, default=Path("fuzz-cases"))
    args = ap.parse_args()
    from click.testing import CliRunner

    from analyzer.cli import main as cli

    runner = CliRunner()
    draw = random.Random(args.seed)
    case = report_case if args.mode == "report" else paths_case
    broken = 0
    for n in range(args.cases):
        folder = Path(tempfile.mkdtemp(prefix="agenttrace-fuzz-"))
        problem = case(folder, draw, lambda a: runner.invoke(cli, a))
        if problem is None:
            shutil.rmtree(folder)
            continue
        broken += 1
        kept = args.keep / f"{args.mode}-{args.seed}-{n}"
        shutil.copytree(folder, kept, dirs_exist_ok=True, ignore=shutil.ignore_patterns("ds"))
        shutil.rmtree(folder)
        print(f"case {n} ({kept}): {problem}", flush=True)
    print(f"{args.mode}, seed {args.seed}: {args.cases} cases, {broken} broken")


if __name__ == "__main__":
    main()
