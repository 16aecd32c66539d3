"""Incremental, idempotent ingest into a dataset; report --since/--until time windows."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from analyzer.cli import main
from analyzer.engine import analyze_paths
from analyzer.ingest.files import DATASET_MANIFEST

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
KYC = sorted((SAMPLES / "kyc").glob("*.jsonl"))
OUTPUTS = ("summary.json", "findings.jsonl", "runs.parquet", "steps.parquet")


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, [*args])
    assert result.exit_code == 0, result.output
    return result.output


def _report(source: Path, out: Path, *extra: str) -> dict[str, bytes]:
    _run("report", str(source), "--out", str(out), "--partitions", "0", *extra)
    return {name: (out / name).read_bytes() for name in OUTPUTS}


def _manifest(dataset: Path) -> dict:
    return json.loads((dataset / DATASET_MANIFEST).read_text(encoding="utf-8"))


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_reingest_adds_nothing_and_changes_no_byte(tmp_path: Path) -> None:
    dataset = tmp_path / "ds"
    _run("ingest", *map(str, KYC), "--out", str(dataset))
    before = _tree(dataset)
    first = _report(dataset, tmp_path / "r1")
    output = _run("ingest", *map(str, KYC), "--out", str(dataset))
    assert f"nothing new: {len(KYC)} files already in the dataset" in output
    assert _tree(dataset) == before
    assert _report(dataset, tmp_path / "r2") == first


def test_append_skips_known_files_and_counts_known_spans_as_duplicates(tmp_path: Path) -> None:
    dataset = tmp_path / "ds"
    _run("ingest", str(KYC[0]), str(KYC[1]), "--out", str(dataset))
    # a copy of a file under another name: same bytes, so skipped by digest
    copy = tmp_path / "copy.jsonl"
    shutil.copy(KYC[0], copy)
    # a file resending the first line of KYC[1]: new bytes, known spans
    resent = tmp_path / "resent.jsonl"
    line = KYC[1].read_text(encoding="utf-8").splitlines()[0]
    resent.write_text(line + "\n", encoding="utf-8")
    n_line = sum(
        len(ss["spans"]) for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"]
    )
    output = _run("ingest", str(copy), str(resent), str(KYC[2]), "--out", str(dataset))
    assert "1 files already in the dataset skipped" in output
    manifest = _manifest(dataset)
    assert [Path(p["path"]).name for p in manifest["parts"]] == [
        "part-00000.parquet",
        "part-00001.parquet",
    ]
    files = {Path(f["path"]).name: f for f in manifest["files"]}
    assert sorted(files) == ["resent.jsonl", KYC[0].name, KYC[1].name, KYC[2].name]
    assert (files["resent.jsonl"]["spans_kept"], files["resent.jsonl"]["duplicates"]) == (0, n_line)
    # the dataset reports what the same files read directly report
    direct = analyze_paths([KYC[0], KYC[1], KYC[2], resent])
    via = analyze_paths([dataset])
    assert via.runs.runs.equals(direct.runs.runs)
    # traces-0002 resends 16 spans of traces-0001 (sample_traces/README.md), resent 16 more
    assert n_line == 16
    assert via.ingested.log.duplicates == direct.ingested.log.duplicates == 16 + n_line
    assert via.ingested.log.balanced()


def test_ingest_order_does_not_change_the_report(tmp_path: Path) -> None:
    forward, backward = tmp_path / "fwd", tmp_path / "bwd"
    for path in KYC:
        _run("ingest", str(path), "--out", str(forward))
    for path in reversed(KYC):
        _run("ingest", str(path), "--out", str(backward))
    assert _manifest(forward)["files"] == _manifest(backward)["files"]
    one = _report(forward, tmp_path / "r-fwd")
    other = _report(backward, tmp_path / "r-bwd")
    assert one == other
    partitioned = tmp_path / "r-part"
    _run("report", str(backward), "--out", str(partitioned), "--partitions", "3", "-j", "1")
    assert {n: (partitioned / n).read_bytes() for n in OUTPUTS} == one


def test_ingest_refuses_a_folder_that_is_not_a_dataset(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x", encoding="utf-8")
    result = CliRunner().invoke(main, ["ingest", str(KYC[0]), "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "neither an agenttrace dataset nor an empty folder" in result.output


# --- time windows ---------------------------------------------------------------------------

#: The first sample runs start at 2026-11-02T08:00:00Z and 08:07:00Z (sample_traces/generate.py).
FIRST = int(datetime(2026, 11, 2, 8, tzinfo=UTC).timestamp()) * 10**9
SECOND = FIRST + 420 * 10**9


def test_window_start_is_inclusive_and_end_exclusive_at_the_nanosecond() -> None:
    starts = sorted(analyze_paths([SAMPLES]).runs.runs["started_ns"].to_list())
    assert starts[:2] == [FIRST, SECOND]
    assert analyze_paths([SAMPLES], since_ns=SECOND).runs.runs.height == 39
    assert analyze_paths([SAMPLES], since_ns=SECOND + 1).runs.runs.height == 38
    assert analyze_paths([SAMPLES], until_ns=SECOND).runs.runs.height == 1
    assert analyze_paths([SAMPLES], until_ns=SECOND + 1).runs.runs.height == 2
    window = analyze_paths([SAMPLES], since_ns=SECOND, until_ns=SECOND + 1)
    assert window.runs.runs["started_ns"].to_list() == [SECOND]
    assert set(window.runs.steps["run_id"].to_list()) == set(window.runs.runs["run_id"].to_list())


@pytest.mark.parametrize(
    ("args", "runs"),
    [
        (["--since", "2026-11-02T08:07:00Z"], 39),
        (["--since", "2026-11-02T08:07:00.000001+00:00"], 38),
        (["--until", "2026-11-02T08:07:00Z"], 1),
        (["--until", "2026-11-02T09:07:00+01:00"], 1),
        (["--since", "2026-11-02T08:00:00", "--until", "2026-11-02T08:07:00.000001"], 2),
    ],
)
def test_report_since_until(args: list[str], runs: int, tmp_path: Path) -> None:
    dataset = tmp_path / "ds"
    _run("ingest", str(SAMPLES), "--out", str(dataset))
    summary = json.loads(
        _run("report", str(dataset), "--format", "json", "--partitions", "2", "-j", "1", *args)
    )
    assert summary["runs"]["count"] == runs
    assert summary["ingest"]["runs"] == runs


def test_report_rejects_a_time_that_is_not_iso() -> None:
    result = CliRunner().invoke(main, ["report", str(SAMPLES), "--since", "yesterday"])
    assert result.exit_code == 2
    assert "not an ISO 8601 time" in result.output
