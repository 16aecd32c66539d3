"""The Spark path (analyzer.spark) gives exactly the in-process result, on a real local session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("pyspark")

from factories import REAL_NO_RUN, no_run_files
from split_dumps import assert_same_analysis, generate, split_dump

from analyzer.cli import main
from analyzer.engine import analyze_paths
from analyzer.metrics.summary import build_summary
from analyzer.pack import load_default_pack, load_packs
from analyzer.spark import analyze_spark

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
RULES = ROOT / "rules"

#: Spark binds to the loopback interface only: these tests need no network.
LOOPBACK = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
}


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("agenttrace-tests")
    for key, value in LOOPBACK.items():
        builder = builder.config(key, value)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYSPARK_PYTHON", sys.executable)  # the workers' Python, read by PySpark
        patch.setenv("SPARK_LOCAL_IP", "127.0.0.1")  # the JVM, when it starts, binds there
        patch.delenv("SPARK_REMOTE", raising=False)  # else PySpark would connect to it
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        yield session
        session.stop()


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """About 20k generated spans cut into two files (runs straddle them) plus resent lines."""
    return split_dump(
        tmp_path_factory.mktemp("gen"),
        20_000,
        seed=11,
        concurrency=32,
        resent=lambda lines, half: lines[5:7],
    )


def test_samples_equal_in_process(spark) -> None:
    # two of the example packs together (support.yaml shares rule ids with kyc.yaml, and the
    # default pack with kyc.yaml, so they cannot join): the default pack runs in the tests below
    packs = load_packs([RULES / "kyc.yaml", RULES / "realestate.yaml"])
    reference = analyze_paths([SAMPLES], packs=packs)
    result = analyze_spark([SAMPLES], spark=spark, packs=packs)
    assert_same_analysis(reference, result)
    log = result.ingested.log
    # sample_traces/README.md, "Files and accounting"
    assert (log.spans_read, log.spans_kept, log.duplicates) == (324, 290, 34)
    assert (log.spans_quarantined, log.orphans, log.runs) == (0, 1, 40)
    by_name = {Path(f.path).name: (f.records, f.spans_kept, f.duplicates) for f in log.files}
    assert by_name["traces-0002.jsonl"] == (2, 16, 16)
    assert by_name["console_spans_part.json.gz"] == (18, 0, 18)
    runs = result.runs.runs
    no_answer = runs.filter(~runs["has_answer"])["trace_id"].to_list()
    assert no_answer == ["ae064840adad5d190ef6e3f71cf44b53"]  # KYC-2026-0013
    assert set(result.evaluation.findings["rule_id"]) >= {"kyc-required-checks"}


def test_spans_in_no_run_are_counted_as_in_process(spark, tmp_path: Path) -> None:
    inputs = [*no_run_files(tmp_path), *REAL_NO_RUN]
    packs = [load_default_pack()]
    reference = analyze_paths(inputs, packs=packs)
    result = analyze_spark(inputs, spark=spark, packs=packs, buckets=2)
    assert_same_analysis(reference, result)
    assert result.ingested.log.outside_runs == 5  # tests/test_engine.py counts them by hand


def test_generated_set_equals_in_process(spark, generated: dict) -> None:
    packs = [load_default_pack()]
    reference = analyze_paths([generated["folder"]], packs=packs)
    result = analyze_spark([generated["folder"]], spark=spark, packs=packs, buckets=3)
    assert_same_analysis(reference, result)
    log = result.ingested.log
    assert result.runs.runs.height == generated["traces"]
    assert log.spans_read == generated["spans"] + generated["duplicates"]
    assert log.duplicates == generated["duplicates"]
    assert log.spans_kept == generated["spans"]
    assert log.records == generated["lines"] + 2
    assert log.balanced()
    kept = {Path(f.path).name: (f.spans_kept, f.duplicates) for f in log.files}
    assert kept["c-resent.jsonl"] == (0, generated["duplicates"])  # sorts last: all duplicates


def test_ingested_dataset_through_a_uri_with_a_time_window_equals_in_process(
    spark, generated: dict, tmp_path: Path
) -> None:
    dataset = tmp_path / "dataset"
    ingest = CliRunner().invoke(main, ["ingest", str(generated["folder"]), "--out", str(dataset)])
    assert ingest.exit_code == 0, ingest.output
    packs = [load_default_pack()]
    starts = sorted(analyze_paths([dataset]).runs.runs["started_ns"].to_list())
    since, until = starts[len(starts) // 4], starts[3 * len(starts) // 4]
    window = {"since_ns": since, "until_ns": until}
    reference = analyze_paths([dataset], packs=packs, **window)
    # a file: URI: the manifest and the Parquet parts are read by Spark, as from hdfs:// or s3a://
    result = analyze_spark(f"file://{dataset}", spark=spark, packs=packs, **window)
    assert_same_analysis(reference, result)
    inside = sum(since <= s < until for s in starts)
    assert 0 < inside < generated["traces"]
    assert result.runs.runs.height == inside
    assert result.ingested.log.spans_kept == generated["spans"]  # the accounting covers all
    assert result.ingested.log.duplicates == generated["duplicates"]
    assert all(f.format.startswith("dataset:") for f in result.ingested.log.files)


def test_one_group_per_run_key_value_joins_traces_of_different_files(spark, tmp_path: Path) -> None:
    whole = tmp_path / "whole.jsonl"
    generate(whole, 200, seed=3, concurrency=4)
    text = whole.read_text(encoding="utf-8")
    whole.unlink()
    marker = '"gen_ai.conversation.id","value":{"stringValue":"'
    convs: list[str] = []
    start = 0
    while (found := text.find(marker, start)) >= 0:
        value = text[found + len(marker) : found + len(marker) + 32]
        if value not in convs:
            convs.append(value)
        start = found + 1
    for other in convs[1:4]:  # three conversations merged into the first: 4 traces, one run
        text = text.replace(other, convs[0])
    lines = text.splitlines()
    (tmp_path / "x.jsonl").write_text("\n".join(lines[::2]) + "\n", encoding="utf-8")
    (tmp_path / "y.jsonl").write_text("\n".join(lines[1::2]) + "\n", encoding="utf-8")
    key = "gen_ai.conversation.id"
    reference = analyze_paths([tmp_path], run_key=key, packs=[load_default_pack()])
    # buckets=0: one applyInArrow call per run key value, literally groupBy(run key)
    packs = [load_default_pack()]
    result = analyze_spark([tmp_path], spark=spark, run_key=key, packs=packs, buckets=0)
    assert_same_analysis(reference, result)
    runs = result.runs.runs
    assert runs.height == len(convs) - 3
    assert runs.filter(runs["run_id"] == convs[0])["traces"].to_list() == [4]


def test_report_engine_spark_on_a_uri_writes_the_same_outputs(spark, tmp_path: Path) -> None:
    runner = CliRunner()
    outs = {}
    # the Spark side names the folder by URI: its files are listed and read as bytes by Spark
    # (binaryFile), as from hdfs:// or s3a://, then parsed by the project's readers
    inputs = {"inprocess": str(SAMPLES / "kyc"), "spark": f"file://{SAMPLES / 'kyc'}"}
    for engine, given in inputs.items():
        out = tmp_path / engine
        args = ["report", given, "--out", str(out), "--engine", engine]
        result = runner.invoke(main, args)
        assert result.exit_code == 0, result.output
        outs[engine] = out
    for name in ("summary.json", "findings.jsonl", "runs.parquet", "steps.parquet"):
        assert (outs["spark"] / name).read_bytes() == (outs["inprocess"] / name).read_bytes()
    summary = json.loads((outs["spark"] / "summary.json").read_text(encoding="utf-8"))
    assert summary["ingest"]["runs"] == 16
    assert summary["ingest"]["duplicate_spans"] == 16
    manifest = json.loads((outs["spark"] / "manifest.json").read_text(encoding="utf-8"))
    assert "file:" + str(SAMPLES / "kyc" / "traces.jsonl") in json.dumps(manifest)


def test_report_engine_spark_refuses_a_missing_path_before_starting_spark(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["report", str(tmp_path / "nope"), "--engine", "spark"])
    assert result.exit_code == 2
    assert "no such file or folder" in result.output


def test_spark_submit_runs_the_entry_point(tmp_path: Path) -> None:
    """`spark-submit analyzer/spark_submit.py PATH...` is `agenttrace report --engine spark ...`."""
    submit = Path(sys.executable).with_name("spark-submit")
    if not submit.exists():
        pytest.skip("spark-submit is not installed beside this Python")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("SPARK_REMOTE", None)
    out = tmp_path / "out"
    command = [
        str(submit),
        "--master",
        "local[1]",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.driver.host=127.0.0.1",
        str(ROOT / "analyzer" / "spark_submit.py"),
        str(SAMPLES / "realestate"),
        "--out",
        str(out),
        "--format",
        "json",
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    reference = build_summary(analyze_paths([SAMPLES / "realestate"], packs=[load_default_pack()]))
    assert json.loads(done.stdout) == json.loads(json.dumps(reference))
    assert json.loads((out / "summary.json").read_text(encoding="utf-8"))["ingest"]["runs"] == 12


_SESSION_PYTHON = """
import sys
from analyzer.spark import spark_session
session = spark_session("local[1]")
print(session.sparkContext.pythonExec == sys.executable)
session.stop()
"""


def test_a_local_session_runs_its_python_workers_on_this_interpreter() -> None:
    """Not on the first ``python3`` of the PATH: that of a virtual environment not activated is
    another Python, without agenttrace's dependencies (its workers failed on ``import
    pyarrow``)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "SPARK_REMOTE")}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if Path(p) != Path(sys.executable).parent
    )
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(
        [sys.executable, "-c", _SESSION_PYTHON],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "True"


def test_report_engine_spark_without_pyspark_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pyspark", None)  # `import pyspark` now fails
    result = CliRunner().invoke(main, ["report", str(SAMPLES / "kyc"), "--engine", "spark"])
    assert result.exit_code == 2
    assert "pip install 'agenttrace[spark]'" in result.output


def schema_pack(folder: Path) -> Path:
    """A pack whose output_schema rule reads a schema file (compiled validators do not pickle:
    each worker compiles its own)."""
    schema = ROOT / "tests" / "checks" / "schemas" / "verdict.schema.json"
    pack = folder / "contract.yaml"
    pack.write_text(
        "pack: contract\nrules:\n"
        f"  - {{id: verdict, type: output_schema, schema: '{schema}', severity: high}}\n",
        encoding="utf-8",
    )
    return pack


def test_output_schema_runs_on_every_path(spark, tmp_path: Path) -> None:
    packs = load_packs([schema_pack(tmp_path)])
    reference = analyze_paths([SAMPLES / "kyc"], packs=packs)
    # the test schema is not the KYC verdict's: the 15 answered runs fail it, 0013 has no answer
    assert reference.evaluation.findings.height == 15
    assert_same_analysis(reference, analyze_spark([SAMPLES / "kyc"], spark=spark, packs=packs))
    outs = {}
    for name, extra in (("memory", ()), ("partitions", ("--partitions", "4", "--jobs", "2"))):
        outs[name] = tmp_path / name
        result = CliRunner().invoke(
            main,
            ["report", str(SAMPLES / "kyc"), "--rules", str(tmp_path / "contract.yaml"),
             "--out", str(outs[name]), *extra],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
    read = lambda name: (outs[name] / "findings.jsonl").read_text(encoding="utf-8")  # noqa: E731
    assert read("partitions") == read("memory") and read("memory").count("\n") == 15
