"""`agenttrace ingest` is a transaction (issue 34): a file that changes while it is read is not
recorded as ingested, one ingest at a time holds a dataset, an interrupted ingest is recovered by
the next one, `report` refuses parts and unfinished datasets, and no write leaves the folder."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from analyzer import engine
from analyzer.cli import main
from analyzer.ingest import read_traces
from analyzer.ingest.dataset import read_dataset
from analyzer.ingest.files import DATASET_LOCK, DATASET_MANIFEST, sha256_of

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
KYC = sorted((SAMPLES / "kyc").glob("*.jsonl"))
SUPPORT = sorted((SAMPLES / "support").iterdir())


def _ingest(*args: str | Path, code: int = 0):
    result = CliRunner().invoke(main, ["ingest", *map(str, args), "--jobs", "1"])
    assert result.exit_code == code, result.output
    return result


def _manifest(dataset: Path) -> dict:
    return json.loads((dataset / DATASET_MANIFEST).read_text(encoding="utf-8"))


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def _keys(table) -> list[tuple[str, str]]:
    traces, spans = table.column("trace_id").to_pylist(), table.column("span_id").to_pylist()
    return sorted(zip(traces, spans, strict=True))


def _copies(tmp_path: Path, files: list[Path]) -> list[Path]:
    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    out = []
    for f in files:
        shutil.copy(f, folder / f"{f.parent.name}-{f.name}")
        out.append(folder / f"{f.parent.name}-{f.name}")
    return out


# --- 1. a file that changes while it is read --------------------------------------------------


def test_a_file_that_grows_during_ingest_is_not_recorded_and_is_read_whole_next_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    growing = tmp_path / "growing.jsonl"
    shutil.copy(KYC[0], growing)
    first_digest = sha256_of(growing)
    spill_all = engine._spill_all

    def then_grow(*args, **kwargs):  # the file is appended to once it has been read
        lines = spill_all(*args, **kwargs)
        with growing.open("ab") as fh:
            fh.write(KYC[1].read_bytes())
        return lines

    monkeypatch.setattr(engine, "_spill_all", then_grow)
    dataset = tmp_path / "ds"
    result = _ingest(growing, "--out", dataset)
    assert "changed while it was read" in result.output
    monkeypatch.undo()
    entries = _manifest(dataset)["files"]
    assert [e["path"] for e in entries] == [str(growing)]
    recorded = {e["sha256"] for e in entries}
    assert first_digest not in recorded and sha256_of(growing) not in recorded
    assert "changed while it was read" in entries[0]["warnings"][-1]["reason"]
    # the next night reads it whole: the rest is ingested, what was kept counts as duplicates
    output = _ingest(growing, "--out", dataset).output
    assert "nothing new" not in output
    spans, log = read_dataset(dataset)
    assert _keys(spans) == _keys(read_traces([growing]).spans)
    assert log.balanced()
    assert sha256_of(growing) in {e["sha256"] for e in _manifest(dataset)["files"]}
    assert "nothing new" in _ingest(growing, "--out", dataset).output


# --- 4. one ingest at a time --------------------------------------------------------------------


def test_a_second_ingest_fails_naming_the_holder_and_leaves_the_dataset_intact(
    tmp_path: Path,
) -> None:
    dataset = tmp_path / "ds"
    _ingest(KYC[0], "--out", dataset)
    before = _tree(dataset)
    holder = {"pid": 4242, "host": "night-runner", "started": "2026-12-05T03:00:00Z"}
    fd = os.open(dataset / DATASET_LOCK, os.O_RDWR | os.O_CREAT)
    try:
        os.write(fd, json.dumps(holder).encode())
        fcntl.flock(fd, fcntl.LOCK_EX)  # another ingest is running
        result = _ingest(KYC[1], "--out", dataset, code=2)
        assert "another agenttrace ingest is writing to this dataset" in result.output
        assert "pid 4242 on host night-runner, started 2026-12-05T03:00:00Z" in result.output
        assert _tree(dataset) == before | {DATASET_LOCK: json.dumps(holder).encode()}
    finally:
        os.close(fd)
    os.unlink(dataset / DATASET_LOCK)
    _ingest(KYC[1], "--out", dataset)  # free again: the same command goes through
    assert {e["path"] for e in _manifest(dataset)["files"]} == {str(KYC[0]), str(KYC[1])}
    assert not (dataset / DATASET_LOCK).exists()


def test_two_ingests_at_once_into_one_dataset_lose_nothing(tmp_path: Path) -> None:
    """Real processes: whichever runs second either fails (exit 2, the holder named, or said
    not yet recorded when the first had only just locked) or comes after the first; the
    manifest never loses the first's files."""
    dataset = tmp_path / "ds"
    cmd = [sys.executable, "-c", "from analyzer.cli import main; main()", "ingest"]
    a = subprocess.Popen(
        [*cmd, *map(str, KYC), "--out", str(dataset), "--jobs", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    b = subprocess.Popen(
        [*cmd, *map(str, SUPPORT), "--out", str(dataset), "--jobs", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    results = [(p.wait(timeout=60), *p.communicate()) for p in (a, b)]
    listed = {e["path"] for e in _manifest(dataset)["files"]}
    for (code, _, err), files in zip(results, (KYC, SUPPORT), strict=True):
        if code == 0:
            assert {str(f) for f in files} <= listed
        else:
            assert code == 2 and "another agenttrace ingest" in err
            assert "pid " in err or "holder not yet recorded" in err
    assert any(code == 0 for code, *_ in results)
    spans, _ = read_dataset(dataset)
    assert _keys(spans) == _keys(read_traces(sorted(listed)).spans)


# --- 3. an interrupted ingest is recovered ----------------------------------------------------


def _leave_unfinished(dataset: Path, next_part: int) -> None:
    """What an ingest killed before its manifest leaves behind."""
    dataset.mkdir(exist_ok=True)
    (dataset / DATASET_LOCK).write_text(
        json.dumps({"pid": 99999, "host": "h", "started": "2026-12-05T03:00:00Z"})
    )
    staging = dataset / ".agenttrace-ingest-99999-abcd"
    (staging / "runs" / f"part-{next_part:05d}").mkdir(parents=True)
    (staging / "spans").mkdir()
    (staging / "spans" / f"part-{next_part:05d}.parquet").write_bytes(b"PAR1 half")
    (dataset / "spans").mkdir(exist_ok=True)
    (dataset / "spans" / f"part-{next_part:05d}.parquet").write_bytes(b"PAR1 half a part")
    (dataset / "runs" / f"part-{next_part:05d}").mkdir(parents=True)
    (dataset / "runs" / f"part-{next_part:05d}" / "runs.parquet").write_bytes(b"PAR1")
    (dataset / f".agenttrace-0f0f-{DATASET_MANIFEST}").write_text("{")
    (dataset / "quarantine.jsonl").write_text('{"half": ')


def test_an_interrupted_first_ingest_is_recovered_by_the_next(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    _ingest(*KYC, "--out", fresh)
    dataset = tmp_path / "ds"
    _leave_unfinished(dataset, 0)
    # report refuses it instead of reading its parts as trace files
    refused = CliRunner().invoke(main, ["report", str(dataset)])
    assert refused.exit_code == 2, refused.output
    assert "unfinished agenttrace dataset" in refused.output
    result = _ingest(*KYC, "--out", dataset)
    assert "recovered the dataset" in result.output and "pid 99999" in result.output
    assert _tree(dataset) == _tree(fresh)


def test_an_interrupted_append_is_recovered_and_the_last_manifest_stays_intact(
    tmp_path: Path,
) -> None:
    fresh = tmp_path / "fresh"
    _ingest(*KYC, "--out", fresh)
    _ingest(*SUPPORT, "--out", fresh)
    dataset = tmp_path / "ds"
    _ingest(*KYC, "--out", dataset)
    committed = _tree(dataset)
    before = read_dataset(dataset)[0]
    _leave_unfinished(dataset, 1)
    assert read_dataset(dataset)[0].equals(before)  # the dataset as of its manifest
    assert "unfinished" not in CliRunner().invoke(main, ["report", str(dataset)]).output
    # nothing new to read: still recovered
    _ingest(*KYC, "--out", dataset)
    assert _tree(dataset) == committed
    _leave_unfinished(dataset, 1)
    _ingest(*SUPPORT, "--out", dataset)
    assert _tree(dataset) == _tree(fresh)


def test_an_ingest_failing_midway_leaves_the_dataset_of_its_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk while the parts are moved in: the error is reported, nothing of the
    ingest stays (no temporary name, no part the manifest does not list, no lock)."""
    from analyzer.ingest import dataset as module

    dataset = tmp_path / "ds"
    _ingest(*KYC, "--out", dataset)
    committed = _tree(dataset)
    commit_parts = module.commit_parts

    def full(staging: Path, out: Path) -> None:
        commit_parts(staging, out)  # the parts are in place, the manifest is not written
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(module, "commit_parts", full)
    result = CliRunner().invoke(main, ["ingest", *map(str, SUPPORT), "--out", str(dataset), "-j1"])
    assert result.exit_code != 0
    assert _tree(dataset) == committed
    assert not list(dataset.glob(".agenttrace-*"))


def test_a_folder_holding_other_files_is_still_refused(tmp_path: Path) -> None:
    other = tmp_path / "other"
    _leave_unfinished(other, 0)
    (other / "notes.txt").write_text("mine")
    result = _ingest(*KYC, "--out", other, code=2)
    assert "neither an agenttrace dataset nor an empty folder" in result.output
    assert (other / "notes.txt").read_text() == "mine"
    assert (other / "spans" / "part-00000.parquet").exists()  # nothing of it removed


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from analyzer.cli import main; main()", *args]


def _kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the ingest and any worker it started (it may have ended already)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def test_an_ingest_killed_while_writing_is_recovered_by_the_next(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    _ingest(*KYC, "--out", fresh)
    dataset = tmp_path / "ds"
    process = subprocess.Popen(
        _cli("ingest", *map(str, KYC), "--out", str(dataset), "--jobs", "1"),
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not any(dataset.glob(".agenttrace-ingest-*")) and time.monotonic() < deadline:
        time.sleep(0.005)  # killed once it has started writing
    _kill_group(process)
    assert not (dataset / DATASET_MANIFEST).exists()
    result = _ingest(*KYC, "--out", dataset)
    assert "recovered the dataset" in result.output
    assert _tree(dataset) == _tree(fresh)


# --- report refuses what is no trace file -------------------------------------------------------


def test_report_refuses_a_part_file_and_a_dataset_subfolder(tmp_path: Path) -> None:
    dataset = tmp_path / "ds"
    _ingest(*KYC, "--out", dataset)
    for path in (dataset / "spans" / "part-00000.parquet", dataset / "spans", dataset / "runs"):
        result = CliRunner().invoke(main, ["report", str(path)])
        assert result.exit_code == 2, result.output
        assert "is part of the agenttrace dataset" in result.output
        assert f"give the dataset folder {dataset}" in result.output
    (dataset / DATASET_MANIFEST).unlink()  # a folder with parts and runs, no manifest
    result = CliRunner().invoke(main, ["report", str(dataset)])
    assert result.exit_code == 2, result.output
    assert "unfinished agenttrace dataset" in result.output


# --- 5. nothing written outside the dataset folder --------------------------------------------


def test_symlinks_planted_in_a_dataset_are_not_written_through(tmp_path: Path) -> None:
    dataset = tmp_path / "ds"
    _ingest(KYC[0], "--out", dataset)
    outside = tmp_path / "outside"
    outside.mkdir()
    victims = {name: outside / name for name in ("part", "quarantine", "manifest")}
    for victim in victims.values():
        victim.write_text("precious")
    (outside / "runs-part").mkdir()
    (dataset / "spans" / "part-00001.parquet").symlink_to(victims["part"])
    (dataset / "runs" / "part-00001").symlink_to(outside / "runs-part")
    (dataset / "quarantine.jsonl").unlink()
    (dataset / "quarantine.jsonl").symlink_to(victims["quarantine"])
    _ingest(KYC[1], "--out", dataset)
    for victim in victims.values():
        assert victim.read_text() == "precious"
    assert list((outside / "runs-part").iterdir()) == []
    for name in ("spans/part-00001.parquet", "runs/part-00001", "quarantine.jsonl"):
        assert not (dataset / name).is_symlink()
    assert pq.read_metadata(dataset / "spans" / "part-00001.parquet").num_rows > 0
    spans, _ = read_dataset(dataset)
    assert _keys(spans) == _keys(read_traces([KYC[0], KYC[1]]).spans)


@pytest.mark.parametrize("name", ["spans", "runs"])
def test_a_dataset_subfolder_that_is_a_symlink_is_refused(tmp_path: Path, name: str) -> None:
    dataset = tmp_path / "ds"
    _ingest(KYC[0], "--out", dataset)
    outside = tmp_path / "outside"
    shutil.move(dataset / name, outside)
    (dataset / name).symlink_to(outside)
    before = _tree(outside)
    result = _ingest(KYC[1], "--out", dataset, code=2)
    assert f"{dataset / name}: is a symbolic link" in result.output
    assert _tree(outside) == before
    assert not (dataset / DATASET_LOCK).exists()


def test_a_lock_file_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    dataset = tmp_path / "ds"
    _ingest(KYC[0], "--out", dataset)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (dataset / DATASET_LOCK).symlink_to(victim)
    result = _ingest(KYC[1], "--out", dataset, code=2)
    assert "cannot take the dataset lock: a symbolic link" in result.output
    assert victim.read_text() == "precious"


# --- the property: killed at any moment, the dataset is its manifest's; a re-run completes it --


def _start_ingest(files: list[Path], dataset: Path) -> subprocess.Popen:
    return subprocess.Popen(
        _cli("ingest", *map(str, files), "--out", str(dataset), "--jobs", "1"),
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _until_writing(process: subprocess.Popen, marker: Path, limit: float) -> float:
    """Wait until `marker` appears (the ingest has started on the dataset, its imports done)
    or the ingest ends; the time waited."""
    started = time.monotonic()
    while not marker.exists() and process.poll() is None and time.monotonic() - started < limit:
        time.sleep(0.002)
    return time.monotonic() - started


def test_ingest_killed_at_random_moments_leaves_a_consistent_dataset(tmp_path: Path) -> None:
    """SIGKILL at seeded moments while an ingest works on the dataset (a first ingest, or an
    append): the dataset holds the spans of the files its manifest lists, and a re-run gives
    the dataset of one uninterrupted ingest."""
    files = _copies(tmp_path, [*KYC, *SUPPORT])
    first = files[:2]
    whole = tmp_path / "whole"
    _ingest(*first, "--out", whole)
    _ingest(*files, "--out", whole)
    expected = _keys(read_dataset(whole)[0])
    assert expected == _keys(read_traces(files).spans)
    timed = tmp_path / "timed"
    process = _start_ingest(files, timed)
    _until_writing(process, timed, 60)
    active = _until_writing(process, timed / DATASET_MANIFEST, 60)  # folder made -> committed
    assert process.wait(timeout=60) == 0
    rng = random.Random(34)
    rounds = {"first": 5, "append": 2}  # moments spread over (fractions of) its work
    spread = {"first": 1.0, "append": 1.1}
    for round_, (kind, stratum) in enumerate(
        sorted(((k, i) for k, n in rounds.items() for i in range(n)), key=lambda r: r[1])
    ):
        dataset = tmp_path / f"ds-{round_}"
        marker = dataset
        if kind == "append":
            _ingest(*first, "--out", dataset)
            marker = dataset / DATASET_LOCK
        process = _start_ingest(files, dataset)
        _until_writing(process, marker, 60)
        # stratified: each kind of ingest killed early, midway and late in its work
        time.sleep((stratum + rng.random()) / rounds[kind] * spread[kind] * active)
        _kill_group(process)
        if (dataset / DATASET_MANIFEST).exists():
            listed = sorted({e["path"] for e in _manifest(dataset)["files"]})
            spans, log = read_dataset(dataset)
            assert _keys(spans) == _keys(read_traces(listed).spans), round_
            assert log.balanced()
        _ingest(*files, "--out", dataset)
        spans, log = read_dataset(dataset)
        assert _keys(spans) == expected, round_
        assert log.balanced()
        assert not (dataset / DATASET_LOCK).exists()
        assert not list(dataset.glob(".agenttrace-*"))


def test_a_dataset_inside_the_folder_ingested_is_not_read_as_input(tmp_path: Path) -> None:
    folder = tmp_path / "dumps"
    folder.mkdir()
    for f in KYC:
        shutil.copy(f, folder / f.name)
    dataset = folder / "dataset"
    _ingest(folder, "--out", dataset)
    assert "nothing new: 5 files" in _ingest(folder, "--out", dataset).output
    spans, log = read_dataset(dataset)
    assert _keys(spans) == _keys(read_traces(sorted(folder.glob("*.jsonl"))).spans)
    assert len(log.files) == len(KYC)


def test_new_parts_are_numbered_after_the_highest_listed() -> None:
    """A partition that kept no span leaves its number unused: counting the parts would name
    a listed one, which the next ingest would then replace."""
    from analyzer.ingest.dataset import next_part_index

    parts = [{"path": "spans/part-00000.parquet"}, {"path": "spans/part-00002.parquet"}]
    assert next_part_index(parts) == 3
    assert next_part_index([]) == 0
