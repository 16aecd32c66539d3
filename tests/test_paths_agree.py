"""Every rule type's case file (tests/checks/*.yaml) through every execution path.

`test_check_cases` judges the case files on normalized rows built in memory, which no path that
reads files ever does. Here each case file's runs become a real OTLP/JSON trace file (one line
per run, the OpenTelemetry GenAI attributes `analyzer.conventions` reads: invoke_agent / chat /
execute_tool spans, messages, tool_call parts, finish reasons, usage, tool definitions, resend
counts, error status, root span attributes), and

- `test_trace_file_gives_the_case_findings`: a case file's trace analyzed in process gives, run
  by run, what `test_check_cases` gives on its rows: findings in order (rule, kind, tool,
  argument, detail, spans, severity, pack, case id), coverage with its reasons, check errors.
  Every run of every case file is faithful; only the runs with a ``cost_usd`` (budget.yaml) are
  written differently: a trace has no cost column, so their model calls get a model of their own
  that a test price table prices to that cost (`_priced`).
- `test_every_path_gives_the_same_findings`: the packs of all case files at once (renamed: they
  share pack names) over all the traces give the same findings (every column), coverage and
  check errors in 2 partitions on 2 worker processes, from a dataset of ``agenttrace ingest``
  (read from the rule results kept at ingest with its packs; checked again with another pack
  list; in process), and on a local Spark session (the trace files; the dataset), as in process.
  The plugin rule types of tests/plugin_example.py are imported by the worker processes (which
  inherit sys.path) and by Spark's Python workers (``spark.executorEnv.PYTHONPATH``).
- `test_every_path_gives_the_same_runs_and_steps` / `..._summary`: the same runs and steps
  tables, and the same summaries.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from click.testing import CliRunner
from test_check_cases import _case_files, _evaluate, _run_rows

from analyzer.checks import COVERAGE_SCHEMA, FINDING_SCHEMA
from analyzer.cli import main
from analyzer.engine import analyze_paths
from analyzer.pack import Pack, load_packs
from analyzer.pipeline import Analysis
from analyzer.pricing import PriceTable, load_prices

TESTS = Path(__file__).resolve().parent

#: Case times are ns from 0; in the traces they are ns after 2023-11-14T22:13:20Z.
BASE_NS = 1_700_000_000_000_000_000
SCOPE = "agenttrace.tests.case_files"
#: Case files per trace file read by the paths.
BUNDLE = 4


# --- case files as OTLP/JSON traces -------------------------------------------------------------


def _value(value: Any) -> dict[str, Any]:
    """An OTLP JSON AnyValue."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": str(value)}


def _messages(messages: list[dict[str, Any]]) -> str:
    """gen_ai.input.messages: one text part per message; a tool message answering a call, its
    tool_call_response part."""

    def part(m: dict[str, Any]) -> dict[str, Any]:
        if m.get("tool_call_id") is not None:
            return {"type": "tool_call_response", "id": m["tool_call_id"], "response": m["content"]}
        return {"type": "text", "content": m["content"]}

    return json.dumps([{"role": m["role"], "parts": [part(m)]} for m in messages])


def _output(row: dict[str, Any]) -> str | None:
    """gen_ai.output.messages of a model call: its text and the tool calls it requested."""
    parts: list[dict[str, Any]] = []
    if row.get("output_text") is not None:
        parts.append({"type": "text", "content": row["output_text"]})
    for call in row.get("requested_calls") or []:
        part = {"type": "tool_call", "name": call["name"]}
        if call["id"] is not None:
            part["id"] = call["id"]
        if call["arguments"] is not None:
            part["arguments"] = call["arguments"]  # as the model wrote it, malformed or not
        parts.append(part)
    if not parts:
        return None
    reasons = row.get("finish_reasons") or []
    finish = "tool_call" if reasons == ["tool_calls"] else (reasons[0] if reasons else "stop")
    return json.dumps([{"role": "assistant", "parts": parts, "finish_reason": finish}])


def _attributes(row: dict[str, Any]) -> tuple[str, int, dict[str, Any]]:
    """Span name, kind and GenAI attributes of a normalized row of `test_check_cases`."""
    role = row["role"]
    attrs: dict[str, Any] = {}
    if role == "agent":
        attrs["gen_ai.operation.name"] = "invoke_agent"
        attrs["gen_ai.agent.name"] = row["agent_name"]
        attrs.update(row.get("attrs") or {})  # the root span's attributes (run selection)
        if row.get("output_text") is not None:
            attrs["gen_ai.output.messages"] = _output({"output_text": row["output_text"]})
        return f"invoke_agent {row['agent_name']}", 1, attrs
    if role == "model_call":
        attrs["gen_ai.operation.name"] = "chat"
        attrs["gen_ai.request.model"] = row["model"]
        for key in ("input_tokens", "output_tokens"):
            if row.get(key) is not None:
                attrs[f"gen_ai.usage.{key}"] = row[key]
        if row.get("input_messages"):
            attrs["gen_ai.input.messages"] = _messages(row["input_messages"])
        output = _output(row) if row.get("has_content", True) else None
        if output is not None:
            attrs["gen_ai.output.messages"] = output
        if row.get("finish_reasons"):
            attrs["gen_ai.response.finish_reasons"] = list(row["finish_reasons"])
        name, kind = f"chat {row['model']}", 3
    else:
        attrs["gen_ai.operation.name"] = "execute_tool"
        if row.get("tool_name") is not None:
            attrs["gen_ai.tool.name"] = row["tool_name"]
        for key, field in (
            ("gen_ai.tool.call.id", "tool_call_id"),
            ("gen_ai.tool.call.arguments", "arguments"),
            ("gen_ai.tool.call.result", "result"),
        ):
            if row.get(field) is not None:
                attrs[key] = row[field]
        name = "execute_tool" + (f" {row['tool_name']}" if row.get("tool_name") else "")
        kind = 1
    if row.get("http_resend_count") is not None:
        attrs["http.request.resend_count"] = row["http_resend_count"]
    if row.get("tool_definitions") is not None:
        defs = json.loads(row["tool_definitions"])
        attrs["gen_ai.tool.definitions"] = json.dumps([{"type": "function", **d} for d in defs])
    return name, kind, attrs


def _span(row: dict[str, Any], prefix: str) -> dict[str, Any]:
    name, kind, attrs = _attributes(row)
    span = {
        "traceId": _trace_id(row["trace_id"], prefix),
        "spanId": _span_id(row["span_id"], prefix),
        "name": name,
        "kind": kind,
        "startTimeUnixNano": str(BASE_NS + row["start_ns"]),
        "endTimeUnixNano": str(BASE_NS + row["end_ns"]),
        "attributes": [{"key": k, "value": _value(v)} for k, v in attrs.items()],
        "status": {"code": 2} if row.get("status") == "error" else {},
    }
    if row.get("parent_span_id"):
        span["parentSpanId"] = _span_id(row["parent_span_id"], prefix)
    return span


def _trace_id(trace: str, prefix: str) -> str:
    """The case's trace id made unique across case files: its file number in front."""
    return prefix + trace[len(prefix) :]


def _span_id(span: str, prefix: str) -> str:
    return prefix[-2:] + span[2:]


def _case_span_id(span: str) -> str:
    """The span id `test_check_cases` gave (`_span_id` undone)."""
    return "00" + span[2:]


def _priced(rows: list[dict[str, Any]], model: str, cost: float) -> dict[str, Any]:
    """Give the model calls of a run with a ``cost_usd`` a model of its own, and the price table
    entry that makes the run cost that: ``test_check_cases`` sets the runs' cost column, a trace
    records tokens that a price table prices. A model call without usage would leave the run
    unpriced: it records 0 tokens (a run without any usage records output tokens instead)."""
    calls = [r for r in rows if r["role"] == "model_call"]
    for r in calls:
        r["model"] = model
        if r.get("input_tokens") is None and r.get("output_tokens") is None:
            r["input_tokens"], r["output_tokens"] = 0, 0
    tokens_in = sum(r.get("input_tokens") or 0 for r in calls)
    tokens_out = sum(r.get("output_tokens") or 0 for r in calls)
    if not tokens_in and not tokens_out:
        calls[-1]["output_tokens"] = tokens_out = 1000
    if tokens_out:
        return {"model": model, "input": 0.0, "output": cost * 1e6 / tokens_out}
    return {"model": model, "input": cost * 1e6 / tokens_in, "output": 0.0}


@dataclass
class CaseTrace:
    path: Path  # the case file
    trace: Path  # its runs as OTLP/JSON lines
    prefix: str  # trace ids start with it
    prices: list[dict[str, Any]]  # price table entries of its runs with a cost


def write_trace(case: Path, number: int, out: Path) -> CaseTrace:
    """The runs of case file `case` as OTLP/JSON lines (one line per run) in `out`."""
    data = yaml.safe_load(case.read_text(encoding="utf-8"))
    prefix = f"{number:04x}"
    prices = []
    lines = []
    for i, run in enumerate(data["runs"]):
        rows, _ = _run_rows(i, run)
        rows = copy.deepcopy(rows)
        if "cost_usd" in run:
            prices.append(_priced(rows, f"priced-{prefix}-{i}", run["cost_usd"]))
        resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]}
        spans = [_span(r, prefix) for r in rows]
        scope = {"scope": {"name": SCOPE}, "spans": spans}
        lines.append(json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [scope]}]}))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return CaseTrace(case, out, prefix, prices)


def write_prices(traces: list[CaseTrace], out: Path) -> Path:
    entries = [entry for t in traces for entry in t.prices]
    table = {"currency": "USD", "as_of": "2026-12-02", "models": entries}
    out.write_text(yaml.safe_dump(table, sort_keys=False), encoding="utf-8")
    return out


def write_pack(case: Path, out: Path) -> Path:
    """The pack of case file `case` under a name of its own (the case files share pack names,
    and packs used together need names of their own), schema paths made absolute."""
    data = yaml.safe_load(case.read_text(encoding="utf-8"))
    pack = copy.deepcopy(data["pack"])
    pack["pack"] = case.stem.replace("_", "-")
    for rule in pack["rules"]:
        if isinstance(rule.get("schema"), str) and not Path(rule["schema"]).is_absolute():
            rule["schema"] = str(case.parent / rule["schema"])
    out.write_text(yaml.safe_dump(pack, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return out


@dataclass
class Corpus:
    traces: list[CaseTrace]
    files: list[Path]  # the traces of all case files, in a few files
    prices_file: Path
    prices: PriceTable
    pack_files: list[Path]  # every case file's pack
    packs: list[Pack]
    plain_files: list[Path]  # the packs without a plugin rule (results kept at ingest)
    plain: list[Pack]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    folder = tmp_path_factory.mktemp("case_traces")
    (folder / "traces").mkdir()
    (folder / "packs").mkdir()
    traces = [
        write_trace(case, n + 1, folder / "traces" / f"{case.stem}.jsonl")
        for n, case in enumerate(_case_files())
    ]
    # the paths read them four case files to a file (Spark reads a file per task: 16 tasks of
    # small files took longer than the analysis)
    (folder / "bundled").mkdir()
    bundles = []
    for start in range(0, len(traces), BUNDLE):
        bundle = folder / "bundled" / f"cases-{start // BUNDLE}.jsonl"
        chunk = traces[start : start + BUNDLE]
        text = "".join(t.trace.read_text(encoding="utf-8") for t in chunk)
        bundle.write_text(text, encoding="utf-8")
        bundles.append(bundle)
    prices_file = write_prices(traces, folder / "prices.yaml")
    pack_files = [write_pack(t.path, folder / "packs" / f"{t.path.stem}.yaml") for t in traces]
    packs = load_packs(pack_files, allow_plugins=True)
    plugin = {t.path.stem for t in traces if _allow_plugins(t.path)}
    plain_files = [p for p in pack_files if p.stem not in plugin]
    return Corpus(
        traces,
        bundles,
        prices_file,
        load_prices(prices_file),
        pack_files,
        packs,
        plain_files,
        load_packs(plain_files),
    )


def _allow_plugins(case: Path) -> bool:
    return bool(yaml.safe_load(case.read_text(encoding="utf-8")).get("allow_plugins"))


# --- the trace files say what the cases say ------------------------------------------------------


def _per_run(analysis_findings: pl.DataFrame, run_id: str, to_case) -> list[dict[str, Any]]:
    rows = analysis_findings.filter(pl.col("run_id") == run_id)
    return [
        {
            "rule": f["rule_id"],
            "kind": f["kind"],
            "tool": f["tool"],
            "argument": f["argument"],
            "detail": f["detail"],
            "spans": [to_case(s) for s in f["span_ids"]],
            "severity": f["severity"],
            "pack": f["pack"],
            "case_id": f["case_id"],
        }
        for f in rows.iter_rows(named=True)
    ]


@pytest.mark.parametrize("case", _case_files(), ids=lambda p: p.stem)
def test_trace_file_gives_the_case_findings(case: Path, corpus: Corpus) -> None:
    data, pack, run_ids, _, expected = _evaluate(case)
    trace = next(t for t in corpus.traces if t.path == case)
    result = analyze_paths([trace.trace], packs=[pack], prices=corpus.prices, jobs=1)
    assert result.ingested.log.spans_quarantined == 0
    assert result.runs.runs.height == len(data["runs"])
    found = result.evaluation
    problems = []
    for run in data["runs"]:
        ours = _trace_id(run_ids[run["name"]], trace.prefix)
        theirs = run_ids[run["name"]]
        facts = {}
        for side, evaluation, run_id, to_case in (
            ("trace", found, ours, _case_span_id),
            ("rows", expected, theirs, lambda s: s),
        ):
            facts[side] = {
                "findings": _per_run(evaluation.findings, run_id, to_case),
                "coverage": sorted(
                    (c["rule_id"], c["status"], c["reason"])
                    for c in evaluation.coverage.filter(pl.col("run_id") == run_id).iter_rows(
                        named=True
                    )
                ),
                "errors": [(e.rule_id, e.error) for e in evaluation.errors if e.run_id == run_id],
            }
        if facts["trace"] != facts["rows"]:
            problems.append((run["name"], facts))
    assert not problems, json.dumps(problems, indent=1, ensure_ascii=False)


# --- every path gives the same findings ----------------------------------------------------------

#: The paths compared with the in-process analysis of the trace files.
PATHS = (
    "partitioned",  # 2 partitions on 2 worker processes
    "dataset, kept results",  # ingested with the packs without plugin rules: results kept
    "dataset, checked",  # every pack (a plugin rule: no results kept): the runs are checked
    "dataset, in process",
    "spark",
    "spark, dataset",
)

#: Findings sort by every column (span ids joined): the order a path gives is not compared.
_FINDING_KEY = ["run_id", "pack", "rule_id", "kind", "tool", "argument", "detail", "_spans"]


def _facts(analysis: Analysis) -> dict[str, Any]:
    """The findings (every column), coverage and check errors of `analysis`, each sorted by a
    key of all its columns."""
    evaluation = analysis.evaluation
    assert evaluation is not None
    findings = (
        evaluation.findings.select(list(FINDING_SCHEMA))
        .with_columns(_spans=pl.col("span_ids").list.join(" "))
        .sort(_FINDING_KEY, nulls_last=True, maintain_order=True)
        .drop("_spans")
    )
    coverage = evaluation.coverage.select(list(COVERAGE_SCHEMA)).sort(
        ["run_id", "pack", "rule_id", "status", "reason"], nulls_last=True, maintain_order=True
    )
    errors = sorted(
        evaluation.errors, key=lambda e: (e.run_id, e.pack, e.rule_id, e.error, e.location or "")
    )
    return {"findings": findings, "coverage": coverage, "errors": errors}


@dataclass
class Compared:
    result: Analysis
    reference: Analysis  # the in-process analysis of the trace files with the same packs


@pytest.fixture(scope="module")
def references(corpus: Corpus) -> dict[str, Analysis]:
    """In process: with every pack, and with the packs whose results ingest keeps."""
    files = corpus.files
    every = analyze_paths(files, jobs=1, packs=corpus.packs, prices=corpus.prices)
    plain = analyze_paths(files, jobs=1, packs=corpus.plain, prices=corpus.prices)
    return {"every": every, "plain": plain}


def _ingest(files: list[Path], dataset: Path, corpus: Corpus) -> None:
    rules = [arg for p in corpus.plain_files for arg in ("--rules", str(p))]
    args = ["ingest", *map(str, files), "--out", str(dataset), "--jobs", "1", *rules]
    result = CliRunner().invoke(main, [*args, "--prices", str(corpus.prices_file)])
    assert result.exit_code == 0, result.output
    assert "rule results kept for the packs" in result.output, result.output


@pytest.fixture(scope="module")
def dataset(corpus: Corpus, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`agenttrace ingest` of the traces in two halves: two parts, each with the rule results
    of the packs without plugin rules kept."""
    out = tmp_path_factory.mktemp("dataset") / "ds"
    files = corpus.files
    _ingest(files[: len(files) // 2], out, corpus)
    _ingest(files[len(files) // 2 :], out, corpus)
    return out


def _checked_again(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the rule results kept at ingest were not read: runs checked again")


@pytest.fixture(scope="module")
def local_paths(
    corpus: Corpus, references: dict[str, Analysis], dataset: Path
) -> dict[str, Compared]:
    import analyzer.engine as partitioned

    files = corpus.files
    every = {"packs": corpus.packs, "prices": corpus.prices}
    plain = {"packs": corpus.plain, "prices": corpus.prices}
    # the plugin rule types are imported by the worker processes too
    out = {"partitioned": analyze_paths(files, partitions=2, jobs=2, **every)}
    with pytest.MonkeyPatch.context() as patch:  # with the packs of the kept results, no part
        patch.setattr(partitioned, "prebuilt_partial", _checked_again)  # is checked again (nor
        patch.setattr(partitioned, "_pool", _checked_again)  # are processes started to check)
        out["dataset, kept results"] = analyze_paths([dataset], jobs=2, **plain)
    out["dataset, checked"] = analyze_paths([dataset], jobs=2, **every)
    out["dataset, in process"] = analyze_paths([dataset], jobs=1, **every)
    return {
        path: Compared(result, references["plain" if "kept" in path else "every"])
        for path, result in out.items()
    }


@pytest.fixture(scope="module")
def spark():
    """A local Spark session (tests/test_spark.py's settings) whose Python workers can import
    the plugin rule types of tests/plugin_example.py."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java")
    from pyspark.sql import SparkSession
    from test_spark import LOOPBACK

    builder = SparkSession.builder.master("local[2]").appName("agenttrace-paths-agree")
    for key, value in LOOPBACK.items():
        builder = builder.config(key, value)
    builder = builder.config("spark.executorEnv.PYTHONPATH", str(TESTS))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYSPARK_PYTHON", sys.executable)
        patch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        patch.delenv("SPARK_REMOTE", raising=False)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        yield session
        session.stop()


@pytest.fixture(scope="module")
def spark_paths(
    corpus: Corpus, references: dict[str, Analysis], dataset: Path, spark
) -> dict[str, Compared]:
    from analyzer.spark import analyze_spark

    files = corpus.files
    every = {"packs": corpus.packs, "prices": corpus.prices}
    return {
        "spark": Compared(analyze_spark(files, spark=spark, **every), references["every"]),
        "spark, dataset": Compared(
            analyze_spark(dataset, spark=spark, **every), references["every"]
        ),
    }


def _compared(request: pytest.FixtureRequest, path: str) -> Compared:
    fixture = "spark_paths" if path.startswith("spark") else "local_paths"
    return request.getfixturevalue(fixture)[path]


def test_the_comparison_is_not_vacuous(corpus: Corpus, references: dict[str, Analysis]) -> None:
    """Every case file's pack finds something, plugin rules crash on some runs, and every
    coverage status shows."""
    facts = _facts(references["every"])
    assert set(facts["findings"]["pack"]) == {p.name for p in corpus.packs}
    assert {(e.rule_id, e.error) for e in facts["errors"]} == {
        ("crashy", "RuntimeError: boom in the answer"),
        ("vector", "ValueError: cannot handle an explosion"),
    }
    statuses = set(facts["coverage"]["status"])
    assert statuses >= {"checked", "partial", "unverifiable", "not_applicable", "error"}
    assert references["every"].runs.runs.height == sum(
        len(yaml.safe_load(t.path.read_text(encoding="utf-8"))["runs"]) for t in corpus.traces
    )


def _rows(frame: pl.DataFrame) -> str:
    return json.dumps(frame.to_dicts(), indent=1, ensure_ascii=False)


@pytest.mark.parametrize("path", PATHS)
def test_every_path_gives_the_same_findings(request: pytest.FixtureRequest, path: str) -> None:
    compared = _compared(request, path)
    facts, reference = _facts(compared.result), _facts(compared.reference)
    for name in ("findings", "coverage"):
        ours, theirs = facts[name], reference[name]
        assert ours.schema == theirs.schema, name
        if not ours.equals(theirs):
            on = list(theirs.columns)
            missing = theirs.join(ours, on=on, how="anti", nulls_equal=True)
            extra = ours.join(theirs, on=on, how="anti", nulls_equal=True)
            pytest.fail(
                f"{name} of {path} ({ours.height} rows) differ from those in process "
                f"({theirs.height} rows)\nonly in process: {_rows(missing)}\n"
                f"only on {path}: {_rows(extra)}"
            )
    assert facts["errors"] == reference["errors"]


@pytest.mark.parametrize("path", PATHS)
def test_every_path_gives_the_same_runs_and_steps(
    request: pytest.FixtureRequest, path: str
) -> None:
    compared = _compared(request, path)
    for table in ("runs", "steps"):
        ours = getattr(compared.result.runs, table)
        theirs = getattr(compared.reference.runs, table)
        assert ours.columns == theirs.columns, table
        assert ours.equals(theirs), table


def _differences(ours: Any, theirs: Any, where: str = "") -> list[str]:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return [
            d
            for key in sorted(set(ours) | set(theirs))
            for d in _differences(ours.get(key), theirs.get(key), f"{where}.{key}")
        ]
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return [
            d
            for i, pair in enumerate(zip(ours, theirs, strict=True))
            for d in _differences(*pair, f"{where}[{i}]")
        ]
    return [] if ours == theirs else [f"{where}: {ours!r} (in process: {theirs!r})"]


@pytest.mark.parametrize("path", PATHS)
def test_every_path_gives_the_same_summary(request: pytest.FixtureRequest, path: str) -> None:
    from analyzer.metrics.summary import build_summary

    compared = _compared(request, path)
    ours = json.loads(json.dumps(build_summary(compared.result), ensure_ascii=False))
    theirs = json.loads(json.dumps(build_summary(compared.reference), ensure_ascii=False))
    # kind_rates of a kind only a plugin finds, unpriced models on Spark: both once differed
    assert not (differences := _differences(ours, theirs)), "\n".join(differences)
