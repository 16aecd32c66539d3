"""Runs prebuilt at ingest (analyzer.prebuilt): a report from them equals the report from the
spans, also when runs straddle ingests, and no span is read to make it."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from split_dumps import assert_same_analysis, generate

from analyzer.cli import main
from analyzer.engine import analyze_paths, ingest_partitioned
from analyzer.errors import InputError
from analyzer.ingest.files import DATASET_MANIFEST
from analyzer.pack import load_default_pack, load_packs
from analyzer.prebuilt import prebuilt_dataset
from analyzer.resources import code_digest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def thirds(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A generated dump (a quarter KYC reviews) cut in three files: with 48 runs in flight, many
    runs have spans in two or all three files."""
    folder = tmp_path_factory.mktemp("thirds")
    whole = folder / "whole.jsonl"
    spans, traces, _ = generate(whole, 6000, seed=11, concurrency=48, kyc_share=0.25)
    lines = whole.read_text(encoding="utf-8").splitlines()
    whole.unlink()
    cut = [0, len(lines) // 3, 2 * len(lines) // 3, len(lines)]
    files = []
    for k in range(3):
        path = folder / f"{'abc'[k]}.jsonl"
        path.write_text("\n".join(lines[cut[k] : cut[k + 1]]) + "\n", encoding="utf-8")
        files.append(path)
    return {"files": files, "spans": spans, "traces": traces}


def _packs():
    return (load_default_pack(), *load_packs([ROOT / "rules" / "kyc.yaml"]))


def _manifest(dataset: Path) -> dict:
    return json.loads((dataset / DATASET_MANIFEST).read_text(encoding="utf-8"))


def _ingest_one_by_one(files: list[Path], dataset: Path, partitions: int) -> None:
    for path in files:
        ingest_partitioned([path], dataset, tool_version="t", jobs=1, partitions=partitions)


@pytest.mark.parametrize("order", ["forward", "backward"])
def test_runs_straddling_ingests_are_taken_whole_from_the_last_part(
    thirds: dict, tmp_path: Path, order: str
) -> None:
    files = thirds["files"] if order == "forward" else thirds["files"][::-1]
    dataset = tmp_path / "ds"
    _ingest_one_by_one(files, dataset, partitions=2)
    parts = _manifest(dataset)["parts"]
    assert len(parts) == 6
    # the first ingest supersedes nothing; each later one rebuilds the runs it continues
    assert [p["runs"]["supersedes"] for p in parts[:2]] == [0, 0]
    assert sum(p["runs"]["supersedes"] for p in parts[2:]) > 0
    assert prebuilt_dataset([dataset]) is not None
    packs = _packs()
    reference = analyze_paths(thirds["files"], packs=packs)
    assert reference.runs.runs.height == thirds["traces"]
    result = analyze_paths([dataset], jobs=1, packs=packs)
    assert_same_analysis(reference, result)
    log = result.ingested.log
    assert (log.spans_kept, log.duplicates, log.orphans) == (thirds["spans"], 0, 0)
    assert log.runs == thirds["traces"]


def test_traces_superseded_are_dropped_from_the_parts_holding_them(
    thirds: dict, tmp_path: Path
) -> None:
    dataset = tmp_path / "ds"
    _ingest_one_by_one(thirds["files"], dataset, partitions=2)
    parts = prebuilt_dataset([dataset])
    assert parts is not None
    # the last ingest's parts hold no superseded trace; each earlier part only its own
    assert [bool(p.superseded) for p in parts[4:]] == [False, False]
    packs = _packs()
    reference = analyze_paths(thirds["files"], packs=packs)
    # supersedes.parquet as written before the parts were recorded (trace ids only): the
    # traces are then dropped from every earlier part, with the same result
    for path in (dataset / "runs").glob("*/supersedes.parquet"):
        pl.read_parquet(path).select(pl.col("trace_id").unique().sort()).write_parquet(path)
    old = prebuilt_dataset([dataset])
    assert old is not None
    assert all(o.superseded >= p.superseded for o, p in zip(old, parts, strict=True))
    assert any(o.superseded > p.superseded for o, p in zip(old, parts, strict=True))
    assert_same_analysis(reference, analyze_paths([dataset], jobs=1, packs=packs))


def test_prebuilt_report_reads_no_span(thirds: dict, tmp_path: Path) -> None:
    dataset = tmp_path / "ds"
    _ingest_one_by_one(thirds["files"], dataset, partitions=1)
    outputs = {}
    for name, extra in (("spans", ["--partitions", "0"]), ("prebuilt", [])):
        out = tmp_path / name
        args = ["report", str(dataset), "--out", str(out), "-j", "2", *extra]
        args += ["--rules", str(ROOT / "rules" / "kyc.yaml"), "--since", "2026-01-01T00:01:00Z"]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        outputs[name] = out
        if name == "spans":  # from here on the spans are gone: only prebuilt runs remain
            for part in (dataset / "spans").glob("*.parquet"):
                part.unlink()
    for file in ("summary.json", "findings.jsonl", "runs.parquet", "steps.parquet"):
        spans = (outputs["spans"] / file).read_bytes()
        assert (outputs["prebuilt"] / file).read_bytes() == spans, file
    summary = json.loads((outputs["prebuilt"] / "summary.json").read_text(encoding="utf-8"))
    assert 0 < summary["runs"]["count"] < thirds["traces"]  # the window dropped the first runs


def test_older_or_missing_prebuilt_runs_fall_back_to_the_spans(
    thirds: dict, tmp_path: Path
) -> None:
    dataset = tmp_path / "ds"
    _ingest_one_by_one(thirds["files"][:2], dataset, partitions=1)
    manifest = _manifest(dataset)
    del manifest["parts"][0]["runs"]  # as written by a version before prebuilt runs
    # as written by another build of agenttrace: another release, or a commit of this one
    manifest["parts"][1]["runs"]["built_by"] = manifest["parts"][1]["runs"]["built_by"] + "0"
    (dataset / DATASET_MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    assert prebuilt_dataset([dataset]) is None
    reference = analyze_paths(thirds["files"][:2], packs=_packs())
    result = analyze_paths([dataset], jobs=1, partitions=2, packs=_packs())
    assert_same_analysis(reference, result)


def test_the_build_that_made_prebuilt_runs_is_told_by_its_code(tmp_path: Path) -> None:
    package = tmp_path / "analyzer"
    (package / "ingest").mkdir(parents=True)
    (package / "runs.py").write_text("X = 1\n")
    (package / "ingest" / "_reader.c").write_text("int x;\n")
    (package / "notes.md").write_text("not code\n")
    first = code_digest(package)
    assert first.startswith(code_digest().split("+")[0] + "+")
    (package / "notes.md").write_text("still not code\n")
    assert code_digest.__wrapped__(package) == first
    changed = set()
    for path, text in (("runs.py", "X = 2\n"), ("ingest/_reader.c", "int y;\n")):
        before = (package / path).read_text()
        (package / path).write_text(text)
        changed.add(code_digest.__wrapped__(package))
        (package / path).write_text(before)
    (package / "runs.py").rename(package / "run.py")  # the same bytes under another name
    changed.add(code_digest.__wrapped__(package))
    assert first not in changed and len(changed) == 3


def test_other_run_keys_and_mixed_inputs_use_the_spans(thirds: dict, tmp_path: Path) -> None:
    dataset = tmp_path / "ds"
    _ingest_one_by_one(thirds["files"][:1], dataset, partitions=1)
    assert prebuilt_dataset([dataset]) is not None
    assert prebuilt_dataset([dataset, thirds["files"][1]]) is None
    assert prebuilt_dataset([thirds["files"][0]]) is None
    packs = _packs()
    reference = analyze_paths([*thirds["files"][:2]], case_key="app.case_id", packs=packs)
    mixed = analyze_paths(
        [dataset, thirds["files"][1]], jobs=1, partitions=2, case_key="app.case_id", packs=packs
    )
    assert_same_analysis(reference, mixed)


def test_a_damaged_prebuilt_file_is_an_input_error_naming_it(thirds: dict, tmp_path: Path) -> None:
    dataset = tmp_path / "ds"
    _ingest_one_by_one(thirds["files"][:1], dataset, partitions=1)
    steps = dataset / "runs" / "part-00000" / "steps.parquet"
    steps.write_bytes(steps.read_bytes()[:100])
    with pytest.raises(InputError, match=r"part-00000/steps\.parquet: unreadable prebuilt runs"):
        analyze_paths([dataset], jobs=1)


def test_runs_and_show_on_a_dataset_read_its_prebuilt_runs(tmp_path: Path) -> None:
    samples = ROOT / "sample_traces"
    dataset = tmp_path / "ds"
    runner = CliRunner()
    assert runner.invoke(main, ["ingest", str(samples), "--out", str(dataset)]).exit_code == 0
    assert prebuilt_dataset([dataset]) is not None
    for part in (dataset / "spans").glob("*.parquet"):
        part.unlink()  # only the prebuilt runs remain
    listed = {}
    for source in (samples, dataset):
        result = runner.invoke(main, ["runs", str(source), "--format", "jsonl"])
        assert result.exit_code == 0, result.output
        listed[source] = result.stdout
    assert listed[dataset] == listed[samples]
    assert len(listed[samples].splitlines()) == 40
    run_id = json.loads(listed[samples].splitlines()[0])["run_id"]
    shown = [runner.invoke(main, ["show", run_id[:12], str(s)]).stdout for s in (samples, dataset)]
    assert shown[0] == shown[1]
    assert run_id in shown[0]
