"""The partitioned path (analyzer.engine) gives exactly the in-process result."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from click.testing import CliRunner
from factories import REAL_NO_RUN, no_run_files
from split_dumps import assert_same_analysis, generate, span_count, split_dump

from analyzer import engine, partition
from analyzer.cli import main
from analyzer.engine import (
    _merge_ordered,
    _pool,
    _read_batches,
    _StepCursor,
    analyze_paths,
    default_jobs,
    ingest_partitioned,
    partition_ids,
)
from analyzer.metrics.summary import build_summary
from analyzer.pack import load_default_pack
from analyzer.partition import (
    PartitionOptions,
    analyze_partition,
    write_batches,
    write_ipc_batches,
)
from analyzer.prebuilt import prebuilt_dataset

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A generated dump cut into two files (runs straddle them) plus a file of resent lines."""
    return split_dump(
        tmp_path_factory.mktemp("gen"),
        3000,
        seed=7,
        concurrency=16,
        resent=lambda lines, half: lines[2:4] + lines[half + 1 : half + 2],
    )


@pytest.mark.parametrize(("partitions", "jobs"), [(1, 1), (3, 1), (7, 1), (3, 2)])
def test_partitioned_equals_in_process_on_samples(partitions: int, jobs: int) -> None:
    packs = [load_default_pack()]
    reference = analyze_paths([SAMPLES], packs=packs)
    result = analyze_paths([SAMPLES], partitions=partitions, jobs=jobs, packs=packs)
    assert_same_analysis(reference, result)
    assert result.runs.runs.height == 40
    assert result.ingested.log.balanced()
    # the prompt messages report.html shows: read narrowly from the spill, and whole
    assert reference.runs.messages.height > 500
    some = reference.runs.runs.get_column("run_id").sort().head(7).to_list()
    narrow = result.runs.select("messages", run_ids=some)
    assert narrow.equals(reference.runs.select("messages", run_ids=some))
    assert result.runs.messages.equals(reference.runs.messages)


@pytest.mark.parametrize(("partitions", "jobs"), [(1, 1), (3, 1), (7, 1), (1, 2), (3, 2), (7, 2)])
def test_partitioned_equals_in_process_on_generated_set(
    generated: dict, partitions: int, jobs: int
) -> None:
    packs = [load_default_pack()]
    reference = analyze_paths([generated["folder"]], packs=packs)
    result = analyze_paths([generated["folder"]], partitions=partitions, jobs=jobs, packs=packs)
    assert_same_analysis(reference, result)
    log = result.ingested.log
    # every trace is one run, although the lines of a run sit in two files
    assert result.runs.runs.height == generated["traces"]
    assert log.spans_read == generated["spans"] + generated["duplicates"]
    assert log.duplicates == generated["duplicates"]
    assert log.spans_kept == generated["spans"]
    assert log.records == generated["lines"] + 3
    assert log.orphans == 0
    assert log.balanced()
    kept = {Path(f.path).name: (f.spans_kept, f.duplicates) for f in log.files}
    # the resent file sorts last: all its spans are the duplicates
    assert kept["c-resent.jsonl"] == (0, generated["duplicates"])


def test_tables_merged_in_ranges_of_runs_are_the_in_process_ones(
    generated: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runs, steps and coverage of the partitions merged in two ranges of runs at once
    (`_MERGE_THREADS`), each in pieces of a few steps: as one merge would give them."""
    monkeypatch.setattr(engine, "_MERGE_RANGE_MIN", 10)
    monkeypatch.setattr(engine, "_MERGE_STEPS", 7)
    packs = [load_default_pack()]
    reference = analyze_paths([generated["folder"]], packs=packs)
    result = analyze_paths([generated["folder"]], partitions=5, jobs=1, packs=packs)
    assert_same_analysis(reference, result)
    spill = result.facts.keep.folder
    for name in ("runs", "steps", "coverage"):
        assert (spill / f"{name}.arrow.0").stat().st_size > 0
        assert (spill / f"{name}.arrow.1").stat().st_size > 0


@pytest.mark.parametrize("range_rows", [1 << 16, 3])
def test_the_ordered_merge_interleaves_partitions_by_run_and_types_all_null_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, range_rows: int
) -> None:
    """Rows of three partitions, each in run order, merged by run id (a run's rows kept in
    their order), in one range or several, in pieces of 2 rows; a column that one partition
    holds only nulls of (typed Null there) takes the others' type."""
    monkeypatch.setattr(engine, "_MERGE_RANGE_MIN", range_rows)
    monkeypatch.setattr(engine, "_MERGE_STEPS", 2)
    parts = [
        pl.DataFrame({"run_id": ["a", "a", "d"], "i": [0, 1, 0], "x": ["a0", None, "d0"]}),
        pl.DataFrame({"run_id": ["b", "e", "e", "e"], "i": [0, 0, 1, 2], "x": [None] * 4}),
        pl.DataFrame({"run_id": ["c", "f"], "i": [0, 0], "x": ["c0", "f0"]}),
    ]
    assert parts[1].schema["x"] == pl.Null
    files = []
    for k, part in enumerate(parts):
        files.append(str(tmp_path / f"p{k}.arrow"))
        write_batches(part, files[-1])
    rows = [pl.read_ipc(f"{f}.runs") for f in files]
    merged = _merge_ordered(files, rows, str(tmp_path / "merged.arrow"))
    assert len(merged) == (2 if range_rows == 3 else 1)
    frame = pl.from_arrow(_read_batches(merged).read_all())
    assert frame.schema == {"run_id": pl.String, "i": pl.Int64, "x": pl.String}
    assert frame.rows() == [
        ("a", 0, "a0"),
        ("a", 1, None),
        ("b", 0, None),
        ("c", 0, "c0"),
        ("d", 0, "d0"),
        ("e", 0, None),
        ("e", 1, None),
        ("e", 2, None),
        ("f", 0, "f0"),
    ]


def test_a_partitioned_result_reads_its_tables_in_batches_and_narrowly_unloaded(
    generated: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its runs, steps and coverage, read a batch at a time (merged in two ranges) or only
    some columns, or only some runs' rows, from the spill: as the in-process path's frames
    give them, and none of them loaded whole."""
    monkeypatch.setattr(engine, "_MERGE_RANGE_MIN", 10)
    packs = [load_default_pack()]
    reference = analyze_paths([generated["folder"]], packs=packs)
    result = analyze_paths([generated["folder"]], partitions=5, jobs=1, packs=packs)
    ids = reference.runs.runs.get_column("run_id")
    some = [ids[-1], *ids.gather_every(7).to_list(), "no-such-run"]
    for ref, got, name in (
        (reference.runs, result.runs, "runs"),
        (reference.runs, result.runs, "steps"),
        (reference.evaluation, result.evaluation, "coverage"),
    ):
        frame = getattr(ref, name)
        columns = [frame.columns[-1], "run_id", frame.columns[1], "no_such_column"]
        assert got.select(name, columns).equals(frame.select(columns[:3]))
        assert got.select(name, run_ids=some).equals(frame.filter(pl.col("run_id").is_in(some)))
        assert got.select(name, columns, []).equals(frame.select(columns[:3]).clear())
        assert pl.from_arrow(got.batches(name).read_all()).equals(frame)
        assert name not in got._frames  # still only in the spill
    assert len(list(result.facts.keep.folder.glob("steps.arrow.*"))) == 2


def _threads(_: int) -> tuple[int, int]:
    import polars as pl
    import pyarrow as pa

    return pl.thread_pool_size(), pa.cpu_count()


def test_workers_compute_with_their_share_of_the_cpus() -> None:
    """Two workers on this machine's CPUs: each computes with half of them (at least one), so
    the processes do not all run a thread per CPU (polars' and Arrow's default)."""
    share = max(1, default_jobs() // 2)
    with _pool(2) as pool:
        assert set(pool.map(_threads, range(4))) == {(share, share)}


def test_a_pool_left_takes_no_more_work_and_its_workers_exit() -> None:
    """Left normally, the pool refuses new work and its workers exit on their own (the caller
    goes on meanwhile); left by an error, the caller waits until they have exited."""
    with _pool(2) as pool:
        assert sorted(pool.map(abs, [-1, -2])) == [1, 2]
        workers = list(pool._processes.values())  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError):
        pool.submit(abs, -3)
    # The pool's own thread reaps the workers: polled here, not joined (a join racing it can
    # return before the exit code is known)
    deadline = time.monotonic() + 60
    while any(worker.is_alive() for worker in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [worker.exitcode for worker in workers] == [0, 0]
    with pytest.raises(ZeroDivisionError), _pool(2) as pool:
        list(pool.map(abs, [-1, -2]))
        workers = list(pool._processes.values())  # type: ignore[attr-defined]
        raise ZeroDivisionError
    assert workers and not any(worker.is_alive() for worker in workers)


def test_duplicates_keep_the_copy_of_the_first_file_in_path_order(tmp_path: Path) -> None:
    lines = (SAMPLES / "kyc" / "traces-0001.jsonl").read_text(encoding="utf-8").splitlines()
    (tmp_path / "z.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "a.jsonl").write_text(lines[0] + "\n", encoding="utf-8")
    first = span_count(lines[:1])
    result = analyze_paths([tmp_path], partitions=5, jobs=1)
    reference = analyze_paths([tmp_path])
    counts = {Path(f.path).name: (f.spans_kept, f.duplicates) for f in result.ingested.log.files}
    assert counts["a.jsonl"] == (first, 0)
    assert counts["z.jsonl"] == (span_count(lines) - first, first)
    assert result.runs.runs.equals(reference.runs.runs)


def test_run_key_groups_traces_of_different_files_into_one_run(tmp_path: Path) -> None:
    whole = tmp_path / "whole.jsonl"
    generate(whole, 400, seed=3, concurrency=4)
    text = whole.read_text(encoding="utf-8")
    whole.unlink()
    convs = []
    for line in text.splitlines():
        marker = '"gen_ai.conversation.id","value":{"stringValue":"'
        start = 0
        while (found := line.find(marker, start)) >= 0:
            value = line[found + len(marker) : found + len(marker) + 32]
            if value not in convs:
                convs.append(value)
            start = found + 1
    # three conversations merged into the first one: 4 traces, one run
    for other in convs[1:4]:
        text = text.replace(other, convs[0])
    lines = text.splitlines()
    (tmp_path / "x.jsonl").write_text("\n".join(lines[::2]) + "\n", encoding="utf-8")
    (tmp_path / "y.jsonl").write_text("\n".join(lines[1::2]) + "\n", encoding="utf-8")
    key = "gen_ai.conversation.id"
    reference = analyze_paths([tmp_path], run_key=key)
    for partitions, jobs in [(4, 1), (7, 2)]:
        result = analyze_paths([tmp_path], partitions=partitions, jobs=jobs, run_key=key)
        assert result.runs.runs.equals(reference.runs.runs)
        assert result.runs.steps.equals(reference.runs.steps)
    runs = reference.runs.runs
    assert runs.height == len(convs) - 3
    merged = runs.filter(runs["run_id"] == convs[0])
    assert merged["traces"].to_list() == [4]


def test_analyze_partition_on_one_group_is_the_in_process_run() -> None:
    from analyzer.ingest import read_traces

    table = read_traces([SAMPLES / "kyc"]).spans
    trace = table.column("trace_id")[0].as_py()
    group = table.filter(pa.compute.equal(table.column("trace_id"), trace))
    partial = analyze_partition(group, PartitionOptions(packs=(load_default_pack(),)))
    reference = analyze_paths([SAMPLES / "kyc"], packs=[load_default_pack()])
    runs = reference.runs.runs.filter(reference.runs.runs["trace_id"] == trace)
    assert partial.runs.equals(runs)
    assert sum(k for k, _ in partial.counts.values()) == group.num_rows
    assert sum(d for _, d in partial.counts.values()) == 0
    assert partial.orphans == 0


def test_partition_ids_are_stable_and_in_range() -> None:
    keys = pa.array([f"{i:032x}" for i in range(1000)])
    first = partition_ids(keys, 7).to_pylist()
    assert first == partition_ids(keys, 7).to_pylist()
    assert set(first) == set(range(7))
    assert partition_ids(keys, 1).to_pylist() == [0] * 1000


@pytest.mark.parametrize("range_rows", [None, 7])
def test_report_cli_partitioned_writes_the_same_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, range_rows: int | None
) -> None:
    """Byte for byte; also when the partitions' tables are merged in ranges of runs."""
    if range_rows is not None:
        monkeypatch.setattr(engine, "_MERGE_RANGE_MIN", range_rows)
    runner = CliRunner()
    outs = {}
    for name, extra in {"mem": ["--partitions", "0"], "part": ["--partitions", "3"]}.items():
        out = tmp_path / name
        result = runner.invoke(main, ["report", str(SAMPLES), "--out", str(out), "-j", "1", *extra])
        assert result.exit_code == 0, result.output
        outs[name] = out
    files = ("summary.json", "findings.jsonl", "runs.parquet", "steps.parquet", "coverage.parquet")
    for file in files:
        assert (outs["mem"] / file).read_bytes() == (outs["part"] / file).read_bytes(), file


def test_parquet_outputs_do_not_depend_on_how_the_rows_are_cut_in_batches(
    tmp_path: Path,
) -> None:
    """The steps merged in one range of runs or in two (a batch cut short where they meet), or
    held in memory in one chunk, are written as the same bytes: in row groups of
    ROW_GROUP_ROWS rows, the last one fewer."""
    import pyarrow.parquet as pq

    from analyzer.outputs import ROW_GROUP_ROWS, _parquet
    from analyzer.runs import frame_batches

    n = 2 * ROW_GROUP_ROWS + 12_345
    frame = pl.DataFrame(
        {
            "run_id": [f"run-{i // 10:06d}" for i in range(n)],
            "index": range(n),
            # unique texts past the dictionary's size, in several pages a row group
            "text": [f"{i:08d}" * 8 if i % 13 else None for i in range(n)],
        }
    )
    half = ROW_GROUP_ROWS + 1001
    cuts = {
        "even": [*range(0, n, 4096), n],
        "cut": sorted({*range(0, half, 4096), half, *range(half, n, 4096), n}),
        "odd": [*range(0, n, 999), n],
        "whole": [0, n],
    }
    for name, bounds in cuts.items():
        chunks = [frame.slice(a, b - a) for a, b in itertools.pairwise(bounds)]
        _parquet(frame_batches(pl.concat(chunks, rechunk=False)), tmp_path / f"{name}.parquet")
    first = (tmp_path / "even.parquet").read_bytes()
    for name in cuts:
        assert (tmp_path / f"{name}.parquet").read_bytes() == first, name
    meta = pq.ParquetFile(tmp_path / "cut.parquet").metadata
    groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert groups == [ROW_GROUP_ROWS, ROW_GROUP_ROWS, 12_345]
    assert pl.read_parquet(tmp_path / "cut.parquet").equals(frame)


def test_only_the_tables_asked_for_are_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller that reads no runs, steps or coverage (a summary alone) gets the same summary
    and findings; the partitions wrote the findings only, and reading another table raises."""
    packs = [load_default_pack()]
    written = _record_written_tables(monkeypatch)
    whole = analyze_paths([SAMPLES], partitions=3, jobs=1, packs=packs)
    assert written == {"steps": 3, "runs": 3, "findings": 3, "coverage": 3, "messages": 3}
    written.clear()
    lean = analyze_paths([SAMPLES], partitions=3, jobs=1, packs=packs, tables=())
    assert written == {"findings": 3}
    assert lean.runs.messages.is_empty()  # the page's prompts alone: none, not an error
    assert build_summary(lean) == build_summary(whole)
    assert lean.evaluation.findings.equals(whole.evaluation.findings)
    for read in (lambda: lean.runs.runs, lambda: lean.runs.steps, lambda: lean.evaluation.coverage):
        with pytest.raises(RuntimeError, match="were not kept"):
            read()
    written.clear()
    runs_only = analyze_paths([SAMPLES], partitions=3, jobs=1, packs=packs, tables=["runs"])
    assert written == {"runs": 3, "findings": 3}
    assert runs_only.runs.runs.equals(whole.runs.runs)
    with pytest.raises(RuntimeError, match="the steps of this result were not kept"):
        runs_only.runs.steps  # noqa: B018


@pytest.mark.parametrize(
    ("args", "tables"),
    [
        (["--format", "json"], {"findings"}),
        (["--format", "table"], {"findings"}),
        (["--format", "html"], {"steps", "runs", "findings", "coverage", "messages"}),
        (
            ["--format", "json", "--out", "OUT"],
            {"steps", "runs", "findings", "coverage", "messages"},
        ),
        (
            ["--format", "json", "--redact-salt", "s"],
            {"steps", "runs", "findings", "coverage", "messages"},
        ),
    ],
)
def test_report_writes_the_tables_its_outputs_read(
    args: list[str], tables: set[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The printed summary (JSON or table) reads none of the runs, steps and coverage: the
    partitions do not write them, and it is the summary of the analysis in memory."""
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    written = _record_written_tables(monkeypatch)
    runner = CliRunner()
    base = ["report", str(SAMPLES), "-j", "1", *args]
    parts = runner.invoke(main, [*base, "--partitions", "3"])
    assert parts.exit_code == 0, parts.output
    assert set(written) == tables
    whole = runner.invoke(main, [*base, "--partitions", "0"])
    assert parts.output == whole.output
    if "html" in args:  # the page's run browser holds the model calls' prompt messages
        shown = _page_messages(parts.output)
        assert {"system", "user", "assistant", "tool"} <= set(shown["role"])
        analysis = analyze_paths([SAMPLES])
        texts = set(analysis.runs.messages.get_column("content").drop_nulls().to_list())
        assert shown["content"] and set(shown["content"]) <= texts


def _page_messages(page: str) -> dict[str, list]:
    """The prompt messages embedded in report.html's run browser (every detail block)."""
    import base64
    import re
    import zlib

    out: dict[str, list] = {"role": [], "content": []}
    for block in re.findall(r'id="ab-detail-\d+">([^<]*)</script>', page):
        for row in json.loads(zlib.decompress(base64.b64decode(block))):
            for key in out:
                out[key].extend((row.get("messages") or {}).get(key) or [])
    return out


@pytest.mark.parametrize(
    ("rules", "tables"),
    [([], set()), (["--rules", str(ROOT / "rules" / "kyc.yaml")], {"findings"})],
)
def test_a_report_of_a_dataset_writes_the_tables_its_outputs_read(
    rules: list[str], tables: set[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From a dataset's prebuilt runs: with the packs of the ingest, the kept results are taken
    (nothing written); with others, the checks run and the findings alone are written."""
    runner = CliRunner()
    dataset = tmp_path / "ds"
    ingested = runner.invoke(main, ["ingest", str(SAMPLES), "--out", str(dataset), "-j", "1"])
    assert ingested.exit_code == 0, ingested.output
    written = _record_written_tables(monkeypatch)
    base = ["report", str(dataset), "--format", "json", "-j", "1", *rules]
    prebuilt = runner.invoke(main, base)
    assert prebuilt.exit_code == 0, prebuilt.output
    assert set(written) == tables
    assert prebuilt.output == runner.invoke(main, [*base, "--partitions", "0"]).output


def _record_written_tables(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts of the per-run tables the partitions write (with jobs=1 they run in this
    process), by name."""
    import collections

    written: collections.Counter[str] = collections.Counter()
    write = partition.write_batches

    def recording(frame, path: str, compression: str | None = None) -> None:
        written[path.rsplit(".", 2)[-2]] += 1
        write(frame, path, compression)

    monkeypatch.setattr(partition, "write_batches", recording)
    return written


def test_report_rejects_a_bad_partition_count() -> None:
    result = CliRunner().invoke(main, ["report", str(SAMPLES), "--partitions", "many"])
    assert result.exit_code == 2
    assert "--partitions" in result.output


def test_partitioned_ingest_reads_back_as_the_in_memory_ingest(
    generated: dict, tmp_path: Path
) -> None:
    from analyzer.ingest import read_traces

    trees = []
    for jobs in (1, 2):
        out = tmp_path / f"ds-{jobs}"
        ingest_partitioned([generated["folder"]], out, tool_version="t", jobs=jobs, partitions=3)
        trees.append(
            {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
        )
    assert trees[0] == trees[1]  # --jobs changes no byte
    prebuilt = [
        f"runs/part-{p:05d}/{t}.parquet"
        for p in range(3)
        for t in (
            "messages",
            "retries",
            "retry_unknown",
            "retry_unrecorded",
            "runs",
            "sources",
            "span_runs",
            "steps",
        )
    ]
    assert sorted(trees[0]) == sorted(
        [
            "agenttrace-dataset.json",
            "quarantine.jsonl",
            *prebuilt,
            "spans/part-00000.parquet",
            "spans/part-00001.parquet",
            "spans/part-00002.parquet",
        ]
    )
    direct = read_traces([generated["folder"]])
    back = read_traces([tmp_path / "ds-1"])
    assert back.spans.equals(direct.spans)
    assert back.log.duplicates == direct.log.duplicates == generated["duplicates"]
    assert back.log.orphans == direct.log.orphans == 0
    manifest = json.loads((tmp_path / "ds-1" / "agenttrace-dataset.json").read_text())
    assert sum(p["spans"] for p in manifest["parts"]) == generated["spans"]
    assert manifest["orphan_spans"] == 0


def test_a_file_ingested_in_pieces_writes_the_dataset_read_whole(
    tmp_path: Path, monkeypatch
) -> None:
    """Pieces read by the native reader spill each resource once; the dataset's parts hold
    each span's own list, byte for byte the dataset of the file read whole."""
    from analyzer import engine
    from analyzer.ingest import read_traces

    dump = tmp_path / "dump.jsonl"
    generate(dump, 500, seed=9, concurrency=4)
    trees = []
    for pieces in (False, True):
        if pieces:
            monkeypatch.setattr(engine, "UNIT_BYTES", dump.stat().st_size // 8)
            assert engine._line_ranges(dump, 2) is not None
        out = tmp_path / f"ds-{pieces}"
        ingest_partitioned([dump], out, tool_version="t", jobs=2, partitions=3)
        trees.append(
            {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
        )
    assert trees[0] == trees[1]
    assert read_traces([tmp_path / "ds-True"]).spans.equals(read_traces([dump]).spans)


def test_merged_unpriced_models_equal_those_of_all_steps(generated: dict, tmp_path: Path) -> None:
    from analyzer.pricing import load_prices, unpriced_models

    prices_file = tmp_path / "prices.yaml"
    prices_file.write_text(
        'currency: USD\nas_of: "2026-11-01"\nmodels:\n'
        "  - {model: gpt-4o-mini, input: 0.15, output: 0.60}\n",
        encoding="utf-8",
    )
    prices = load_prices(prices_file)
    reference = analyze_paths([generated["folder"]], prices=prices)
    result = analyze_paths([generated["folder"]], partitions=5, jobs=1, prices=prices)
    expected = unpriced_models(reference.runs.steps, reference.runs.runs)
    # three of the generator's four models have no price here
    assert expected.height == 3
    assert result.unpriced.equals(expected)
    assert unpriced_models(result.runs.steps, result.runs.runs).equals(expected)


def test_kyc_runs_of_the_generator_meet_the_kyc_pack_alike_on_both_paths(tmp_path: Path) -> None:
    from analyzer.pack import load_packs

    path = tmp_path / "kyc.jsonl"
    generate(path, 3000, seed=11, concurrency=8, kyc_share=0.5)
    packs = load_packs([ROOT / "rules" / "kyc.yaml"])
    reference = analyze_paths([path], packs=packs)
    result = analyze_paths([path], partitions=4, jobs=1, packs=packs)
    assert_same_analysis(reference, result)
    found = reference.evaluation.findings
    kinds = set(found.filter(found["rule_id"] == "kyc-required-checks")["kind"].to_list())
    # a skipped screening (or owners lookup) is an omission and a premature answer
    assert kinds == {"omission", "premature_answer"}
    runs = reference.runs.runs
    assert runs.filter(runs["agent"] == "kyc-reviewer").height > 0


def test_summary_of_a_partitioned_analysis_loads_no_whole_run_table(generated: dict) -> None:
    """The summary reads the facts merged from the partitions: the runs, steps and coverage
    stay in the spill until something else reads them."""
    packs = [load_default_pack()]
    reference = build_summary(analyze_paths([generated["folder"]], packs=packs))
    result = analyze_paths([generated["folder"]], partitions=3, jobs=1, packs=packs)
    summary = build_summary(result)
    assert summary == reference
    assert result.runs._frames == {}
    assert result.evaluation._frames == {}
    # the facts keep the columns summary figures read, and no attribute text, one part per
    # partition (read one at a time by the summary)
    runs = result.facts.runs()
    assert "attributes" not in runs.columns
    assert "app.case_type" in runs.columns
    assert len(result.facts.parts) == 3
    assert result.facts.height == runs.height == summary["runs"]["count"]
    # written to the spill by the partitions' processes: the parent holds none of them
    assert all(p.frame is None and p.path for p in result.facts.parts)


def test_the_facts_files_live_as_long_as_the_facts(generated: dict) -> None:
    """Once every spilled table is loaded, nothing else holds the spill but the facts: their
    files stay until the facts go (a summary read from them after that still works)."""
    import gc

    packs = [load_default_pack()]
    reference = build_summary(analyze_paths([generated["folder"]], packs=packs))
    result = analyze_paths([generated["folder"]], partitions=3, jobs=1, packs=packs)
    assert result.runs.runs.height and result.runs.steps.height
    assert result.evaluation.coverage.height
    gc.collect()
    assert build_summary(result) == reference
    folder = Path(result.facts.parts[0].path).parent
    del result
    gc.collect()
    assert not folder.exists()


def test_summary_with_another_case_class_reads_the_runs_themselves(generated: dict) -> None:
    packs = [load_default_pack()]
    reference = analyze_paths([generated["folder"]], packs=packs)
    result = analyze_paths([generated["folder"]], partitions=3, jobs=1, packs=packs)
    other = "gen_ai.agent.name"
    assert result.facts.case_class != other
    assert build_summary(result, case_class=other) == build_summary(reference, case_class=other)
    assert "runs" in result.runs._frames  # loaded from the spill for it


def test_partitioned_summary_is_that_of_the_facts_case_class(generated: dict) -> None:
    packs = [load_default_pack()]
    reference = analyze_paths([generated["folder"]], packs=packs)
    result = analyze_paths(
        [generated["folder"]], partitions=3, jobs=1, packs=packs, case_class="service.name"
    )
    assert result.facts.case_class == "service.name"
    left = build_summary(reference, case_class="service.name")
    assert build_summary(result, case_class="service.name") == left
    assert left["metrics"]["breakdowns"]["case_class"]  # groups by the service name
    assert result.runs._frames == {}


def test_partitioned_summary_without_packs_is_the_in_process_one(generated: dict) -> None:
    reference = build_summary(analyze_paths([generated["folder"]]))
    result = analyze_paths([generated["folder"]], partitions=3, jobs=1)
    assert result.facts is not None and result.facts.rates is None
    summary = build_summary(result)
    assert summary == reference
    assert summary["findings"]["total"] == 0 and summary["metrics"]["rule_rates"] == []


def test_a_file_read_in_pieces_is_read_as_if_whole(tmp_path: Path, monkeypatch) -> None:
    """A JSON lines file over two `UNIT_BYTES` is read in newline-aligned pieces, side by side,
    each numbering its lines from 1: the line numbers run on across the pieces (positions of
    quarantined lines and warnings, the spans' own), and the counts, SHA-256 and analysis are
    those of the file read whole."""
    import dataclasses

    from analyzer import engine
    from analyzer.ingest import limits

    dump = tmp_path / "dump.jsonl"
    generate(dump, 800, seed=5, concurrency=4)
    lines = dump.read_text(encoding="utf-8").splitlines()
    step = len(lines) // 4
    # a value cut on reading, in the last quarter: a warning that names its line
    request = json.loads(lines[-step])
    span = request["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["attributes"].append(
        {"key": "note", "value": {"stringValue": "x" * (limits.MAX_ATTRIBUTE_BYTES + 1)}}
    )
    lines[-step] = json.dumps(request)
    bad = '{"resourceSpans": [{"truncated'
    for at in (3 * step, 2 * step, step, 1):  # from the end, so the indices still hold
        lines[at:at] = [bad, "", ""]
    dump.write_text("\n".join(lines) + "\n", encoding="utf-8")
    whole = analyze_paths([dump], partitions=3, jobs=1, packs=[load_default_pack()])
    monkeypatch.setattr(engine, "UNIT_BYTES", dump.stat().st_size // 10)
    pieces = engine._line_ranges(dump, 2)
    assert pieces is not None and len(pieces) >= 5
    split = analyze_paths([dump], partitions=3, jobs=2, packs=[load_default_pack()])
    (log,) = split.ingested.log.files
    assert [q.position for q in log.quarantine] == [
        f"line {at + 1}" for at, line in enumerate(lines) if line == bad
    ]
    cut = next(at for at, line in enumerate(lines) if span["spanId"] in line and "x" * 99 in line)
    assert [w.position for w in log.warnings] == [f"line {cut + 1}, span {span['spanId']}"]
    assert dataclasses.asdict(log) == dataclasses.asdict(whole.ingested.log.files[0])
    assert_same_analysis(whole, split)


@pytest.mark.parametrize("run_key", [None, "service.name"])
def test_read_in_pieces_each_resource_is_spilled_once_a_partition(
    tmp_path: Path, monkeypatch, run_key: str | None
) -> None:
    """Pieces read by the native reader keep each resource's attributes once through the spill:
    every spill file holds the resources of its spans and no others. The analysis (run
    attributes, a run key read from the resource) is the in-process one."""
    import pyarrow.compute as pc

    from analyzer import engine

    dump = tmp_path / "dump.jsonl"
    generate(dump, 600, seed=8, concurrency=4)
    reference = analyze_paths([dump], run_key=run_key, packs=[load_default_pack()])
    written: list[pa.Table] = []
    write = engine._write_ipc

    def recording(table: pa.Table, path: Path) -> None:
        written.append(table)
        write(table, path)

    monkeypatch.setattr(engine, "_write_ipc", recording)
    monkeypatch.setattr(engine, "UNIT_BYTES", dump.stat().st_size // 6)
    result = analyze_paths(
        [dump], partitions=3, jobs=1, run_key=run_key, packs=[load_default_pack()]
    )
    assert_same_analysis(reference, result)
    assert len(written) >= 3 * 3
    resources = 0
    for table in written:
        (column,) = table.column("resource_attributes").chunks
        used = pc.unique(column.indices)
        assert sorted(used.to_pylist()) == list(range(len(column.dictionary)))
        resources += len(column.dictionary)
    assert resources * 5 < sum(t.num_rows for t in written)  # each resource of many spans once


@pytest.mark.parametrize("pieces", [False, True])
def test_files_are_hashed_only_when_asked(tmp_path: Path, monkeypatch, pieces: bool) -> None:
    """With ``digests=False`` no file is hashed, read whole or in pieces, partitioned or in
    process: the logs keep "" and the analysis is the same. By default each log holds its
    file's SHA-256."""
    from analyzer import engine
    from analyzer.ingest.files import sha256_of

    dump = tmp_path / "dump.jsonl"
    generate(dump, 400, seed=3, concurrency=4)
    if pieces:
        monkeypatch.setattr(engine, "UNIT_BYTES", dump.stat().st_size // 10)
        assert engine._line_ranges(dump, 1) is not None
    digest = sha256_of(dump)
    packs = [load_default_pack()]
    hashed = analyze_paths([dump], partitions=3, jobs=1, packs=packs)
    bare = analyze_paths([dump], partitions=3, jobs=1, packs=packs, digests=False)
    assert [f.sha256 for f in hashed.ingested.log.files] == [digest]
    assert [f.sha256 for f in bare.ingested.log.files] == [""]
    assert_same_analysis(hashed, bare)
    assert [f.sha256 for f in analyze_paths([dump]).ingested.log.files] == [digest]
    assert [f.sha256 for f in analyze_paths([dump], digests=False).ingested.log.files] == [""]


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_a_file_is_cut_in_pieces_of_about_equal_size_a_multiple_of_jobs(
    tmp_path: Path, monkeypatch, jobs: int
) -> None:
    """Pieces of at most about `UNIT_BYTES`, newline-aligned, covering the file, their count a
    multiple of `jobs`, none smaller than the others by more than two lines: the processes finish
    their last pieces together (a last piece of a few bytes left one process idle)."""
    from analyzer import engine

    dump = tmp_path / "dump.jsonl"
    line = '{"resourceSpans": []}'
    dump.write_text("".join(f'{line[:-1]}, "n": {i}}}\n' for i in range(1000)), "utf-8")
    size = dump.stat().st_size
    monkeypatch.setattr(engine, "UNIT_BYTES", size // 9 - 1)  # 9 full pieces and a crumb
    pieces = engine._line_ranges(dump, jobs)
    assert pieces is not None
    assert len(pieces) % jobs == 0 and len(pieces) == -(-10 // jobs) * jobs
    assert pieces[0][0] == 0 and pieces[-1][1] == size
    assert all(a[1] == b[0] for a, b in itertools.pairwise(pieces))
    data = dump.read_bytes()
    assert all(data[start - 1 : start] == b"\n" for start, _ in pieces[1:])
    longest = max(len(x) for x in data.splitlines(keepends=True))
    sizes = [stop - start for start, stop in pieces]
    assert max(sizes) - min(sizes) <= 2 * longest  # each end within a line of its mark


def test_spilled_tables_are_written_in_batches_of_a_bounded_size(tmp_path: Path) -> None:
    """The ordered merge holds a batch of every partition's file at once: wide rows are
    written in batches of about _BATCH_BYTES (4x as many compressed), narrow ones in batches
    of STEP_BATCH rows."""
    wide = pa.table({"run_id": [f"r{i:05d}" for i in range(9000)], "text": ["x" * 1000] * 9000})
    narrow = pa.table({"run_id": [f"r{i:05d}" for i in range(9000)]})
    write_ipc_batches(wide, str(tmp_path / "wide"))
    write_ipc_batches(wide, str(tmp_path / "zstd"), "zstd")
    write_ipc_batches(narrow, str(tmp_path / "narrow"))
    for name, size in (("wide", partition.BATCH_BYTES), ("zstd", 4 * partition.BATCH_BYTES)):
        batches = list(_read_batches([str(tmp_path / name)]))
        assert max(b.nbytes for b in batches) <= size
        assert len(batches) == -(-wide.nbytes // size)
    rows = [b.num_rows for b in _read_batches([str(tmp_path / "narrow")])]
    assert rows == [partition.STEP_BATCH, partition.STEP_BATCH, 808]


def test_the_ordered_merge_reads_each_batch_of_a_file_once(tmp_path: Path) -> None:
    """The merge takes a partition's rows a few hundred at a time, fewer than a batch holds:
    each batch is read from the file once, not once a take (three times as many bytes read
    when the runs of 1M spans were merged)."""
    table = pa.table({"run_id": [f"r{i:05d}" for i in range(9000)], "n": list(range(9000))})
    path = str(tmp_path / "steps.arrow")
    write_ipc_batches(table, path)  # batches of 4096, 4096 and 808 rows
    cursor = _StepCursor(path)
    reader, read = cursor._reader, []

    class Counting:
        schema = reader.schema

        def get_batch(self, i: int) -> pa.RecordBatch:
            read.append(i)
            return reader.get_batch(i)

    cursor._reader = Counting()
    taken = [batch for _ in range(9) for batch in cursor.take(1000)]
    cursor.close()
    assert read == [0, 1, 2]
    assert pa.Table.from_batches(taken).equals(table)


def test_a_report_of_a_dataset_shows_the_prompt_messages_of_the_traces(tmp_path: Path):
    """report.html of a dataset holds the same prompt messages as that of its trace files,
    from the rule results kept at ingest (the default pack) and with the checks run again."""
    runner = CliRunner()
    dataset = tmp_path / "ds"
    ingested = runner.invoke(main, ["ingest", str(SAMPLES), "--out", str(dataset), "-j", "1"])
    assert ingested.exit_code == 0, ingested.output
    traces = runner.invoke(main, ["report", str(SAMPLES), "--format", "html"])
    expected = _page_messages(traces.output)
    assert len(expected["content"]) > 100
    kyc = str(ROOT / "rules" / "kyc.yaml")
    for extra in ([], ["--rules", kyc]):  # kept results; checked again
        page = runner.invoke(main, ["report", str(dataset), "-j", "1", "--format", "html", *extra])
        assert page.exit_code == 0, page.output
        shown = _page_messages(page.output)
        assert sorted(shown["content"]) == sorted(expected["content"]), extra
        assert sorted(shown["role"]) == sorted(expected["role"])


# --- spans in no run ----------------------------------------------------------------------------


def test_spans_in_no_run_are_counted_alike_on_every_path(tmp_path: Path) -> None:
    first, second = no_run_files(tmp_path)
    inputs = [first, second, *REAL_NO_RUN]
    packs = [load_default_pack()]
    reference = analyze_paths(inputs, partitions=0, packs=packs)
    log = reference.ingested.log
    # 2 web spans + 2 embeddings + 1 root above the agents; LATE's root is in its run
    assert (log.outside_runs, log.runs) == (5, 1 + 8 + 3)
    assert build_summary(reference)["ingest"]["spans_outside_runs"] == 5
    assert_same_analysis(reference, analyze_paths(inputs, partitions=3, jobs=2, packs=packs))
    dataset = tmp_path / "ds"
    ingest_partitioned(inputs, dataset, tool_version="t", jobs=1, partitions=2)
    assert_same_analysis(reference, analyze_paths([dataset], jobs=1, packs=packs))  # prebuilt
    assert_same_analysis(reference, analyze_paths([dataset], partitions=0, packs=packs))
    # a time window selects runs, not the spans read: the count stays
    late = {"since_ns": 2_000_000_000_000_000_000}
    for result in (analyze_paths(inputs, **late), analyze_paths([dataset], jobs=1, **late)):
        assert (result.ingested.log.outside_runs, result.ingested.log.runs) == (5, 0)


def test_spans_in_no_run_of_a_dataset_follow_the_traces_later_ingests_complete(
    tmp_path: Path,
) -> None:
    first, second = no_run_files(tmp_path)
    dataset = tmp_path / "ds"
    manifest = dataset / "agenttrace-dataset.json"
    ingest_partitioned([first, *REAL_NO_RUN], dataset, tool_version="t", jobs=1, partitions=2)
    assert json.loads(manifest.read_text())["spans_outside_runs"] == 2 + 1 + 2 + 1
    assert analyze_paths([dataset], jobs=1).ingested.log.outside_runs == 6
    ingest_partitioned([second], dataset, tool_version="t", jobs=1, partitions=2)
    document = json.loads(manifest.read_text())
    assert sum(p["runs"]["supersedes"] for p in document["parts"]) == 1  # LATE, rebuilt whole
    assert document["spans_outside_runs"] == 5  # LATE's root is in its run now
    packs = [load_default_pack()]
    reference = analyze_paths([first, second, *REAL_NO_RUN], packs=packs)
    result = analyze_paths([dataset], jobs=1, packs=packs)
    assert result.ingested.log.outside_runs == 5
    assert_same_analysis(reference, result)
    # a manifest written before the count was kept: the spans are read again, alike
    del document["spans_outside_runs"]
    manifest.write_text(json.dumps(document))
    assert prebuilt_dataset([dataset]) is None
    assert_same_analysis(reference, analyze_paths([dataset], jobs=1, packs=packs))


def test_spans_in_no_run_are_said_in_the_table_and_markdown_only_when_there_are_some(
    tmp_path: Path,
) -> None:
    said = "no run   5 kept spans in no run (no agent, model or tool span holds them)"
    inputs = [str(p) for p in (*no_run_files(tmp_path), *REAL_NO_RUN)]
    table = CliRunner().invoke(main, ["report", *inputs])
    assert table.exit_code == 0, table.output
    assert said in table.output.splitlines()
    # a billion of them still fits the table's 100 columns
    assert len(said.replace(" 5 ", " 1,000,000,000 ")) <= 100
    markdown = CliRunner().invoke(main, ["report", *inputs, "--format", "markdown"])
    assert "- in no run: 5 kept spans (no agent, model or tool span holds them)" in markdown.output
    samples = CliRunner().invoke(main, ["report", str(SAMPLES)])
    assert samples.exit_code == 0 and "no run " not in samples.output
