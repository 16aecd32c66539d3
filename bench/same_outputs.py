"""Digests of every output of `agenttrace report --out` (and `runs`, `diff`) over a fixed set of
inputs, to check that a refactoring changes no byte.

    python bench/same_outputs.py record before.json            # on the old commit
    python bench/same_outputs.py record after.json             # on the new one
    python bench/same_outputs.py compare before.json after.json

The inputs: each sample folder with its pack (and the KYC labels), the real traces of
``../shared/real-traces`` (or ``--real DIR``), and the generated dumps given with ``--dump``
(e.g. ``bench/data/otlp-1000000-s1.jsonl``), each analyzed in memory and in partitions. Files
whose bytes name the machine or the moment (the manifest's timings, the log's paths) are
compared after removing those fields.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Fields of JSON outputs that differ between two runs on purpose (timings, the tool's own
#: version, the command line naming the temporary folder written to).
_VOLATILE = {"elapsed_s", "started_at", "finished_at", "version", "agenttrace_version", "command"}


#: The CLI of the checkout this script is in, whatever agenttrace is installed (an editable
#: install of another checkout maps its bundled files through an import hook: dropped).
_RUN = (
    "import sys; sys.meta_path = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]; "
    "from analyzer.cli import run; run()"
)


_OUT = ".same-outputs"


def _cases(real: Path, dumps: list[Path]) -> list[tuple[str, list[str]]]:
    samples = Path("sample_traces")  # relative to ROOT, the commands' folder: outputs name it
    cases = [
        (
            "kyc",
            [
                str(samples / "kyc"),
                "--rules",
                "kyc",
                "--labels",
                str(ROOT / "rules/kyc-labels.jsonl"),
            ],
        ),
        ("support", [str(samples / "support"), "--rules", "support"]),
        ("realestate", [str(samples / "realestate"), "--rules", "realestate"]),
        ("samples-default", [str(samples)]),
    ]
    if real.is_dir():
        cases.append(("real", [str(real)]))
        for path in sorted(real.glob("*.json")):
            cases.append((f"real-{path.stem}", [str(path)]))
    for dump in dumps:
        cases.append((f"dump-{dump.stem}", [str(dump), "--rules", "kyc"]))
    return cases


def _scrub(value):
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def _digest(path: Path) -> str:
    data = path.read_bytes().replace(str(ROOT).encode(), b"ROOT")  # a file given resolved
    if path.name in ("manifest.json", "ingest_log.json", "summary.json"):
        data = json.dumps(_scrub(json.loads(data)), sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()


def _agenttrace(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "from analyzer.cli import run; run()", *args],
        capture_output=True,
        cwd=ROOT,
        check=False,
    )


def record(out: Path, real: Path, dumps: list[Path]) -> None:
    digests: dict[str, str] = {}
    for name, args in _cases(real, dumps):
        for mode in ("0", "auto", "3"):
            # relative to ROOT, the same name on both sides: the outputs name it (the command)
            folder = ROOT / _OUT
            shutil.rmtree(folder, ignore_errors=True)
            done = _agenttrace("report", *args, "--partitions", mode, "--out", _OUT)
            key = f"{name}/partitions={mode}"
            digests[f"{key}/exit"] = str(done.returncode)
            for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
                if path.is_file():
                    digests[f"{key}/{path.relative_to(folder)}"] = _digest(path)
            shutil.rmtree(folder, ignore_errors=True)
            print(key, done.returncode, file=sys.stderr)
        done = _agenttrace("runs", args[0], "--format", "json")
        digests[f"{name}/runs"] = hashlib.sha256(done.stdout).hexdigest()
    base = ["sample_traces/kyc/traces-0001.jsonl"]
    cand = ["sample_traces/kyc/traces-0002.jsonl"]
    done = _agenttrace("diff", *base, *cand, "--rules", "kyc", "--format", "json")
    digests["diff/kyc"] = hashlib.sha256(done.stdout).hexdigest()
    out.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")


def compare(before: Path, after: Path) -> int:
    a, b = json.loads(before.read_text()), json.loads(after.read_text())
    cases_a, cases_b = ({k.split("/")[0] for k in side} for side in (a, b))
    for case in sorted(cases_a ^ cases_b):
        print(f"{case}: recorded on one side only, not compared")
    both = cases_a & cases_b
    keys = [k for k in a.keys() | b.keys() if k.split("/")[0] in both]
    differ = sorted(k for k in keys if a.get(k) != b.get(k))
    for key in differ:
        print(f"{key}: {a.get(key)} -> {b.get(key)}")
    print(f"{len(keys)} outputs compared, {len(differ)} differ")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("out", type=Path)
    rec.add_argument("--real", type=Path, default=ROOT.parent / "shared/real-traces")
    rec.add_argument("--dump", type=Path, action="append", default=[])
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("before", type=Path)
    cmp_.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "record":
        record(args.out, args.real, args.dump)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
