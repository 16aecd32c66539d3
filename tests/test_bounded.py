"""Issue 34 (points 2, 6, 7): every regex and parse of untrusted input is bounded, and detection
never loses data.

Each hostile input runs in a subprocess with a time limit (`run_cli`, `run_python`), so a hang
fails in seconds instead of holding the suite: a regular expression from a trace's tool
definition or from a labels file (RE2, linear time), YAML alias bombs in a pack, a gate file
and a price table, a folder with symbolic links to itself, a FIFO named as input, plugins that
never return or try to end the process, a file starting with more than 64 KiB of blank lines,
a file whose first lines are garbage before valid OTLP, and a gzip bomb (peak memory).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from analyzer.ingest import read_traces

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
KYC = str(ROOT / "sample_traces" / "kyc")
TRACE = "5b8efff798038103d269b633813fc60c"
#: Seconds any one hostile command may take: each ends in one to three seconds once bounded.
LIMIT = 30


def run_python(code: str, *args: str, env: dict[str, str] | None = None, timeout: float = LIMIT):
    """``python -c code args`` in a subprocess; a hang fails the test after `timeout` s."""
    try:
        return subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONPATH": str(TESTS), **(env or {})},
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"still running after {timeout} s: {err.cmd[3:]}")


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = LIMIT):
    """``agenttrace args`` in a subprocess (see `run_python`)."""
    return run_python("from analyzer.cli import run; run()", *args, env=env, timeout=timeout)


def otlp_line(*spans: dict) -> str:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]})


def span(span_id: str, name: str = "s", parent: str | None = None, **attributes: str) -> dict:
    out = {
        "traceId": TRACE,
        "spanId": span_id,
        "name": name,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000000001000",
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()],
    }
    if parent:
        out["parentSpanId"] = parent
    return out


# --- regular expressions from untrusted text ------------------------------------------------------

EVIL_PATTERN = "^(a+)+$"
EVIL_TEXT = "a" * 40 + "!"


def _tool_call_trace(path: Path, pattern: str, argument: str) -> Path:
    """One OpenInference run: the model is offered a tool whose schema has `pattern`, and the
    tool is called with `argument`."""
    schema = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": pattern}},
        "required": ["code"],
    }
    offered = {"type": "function", "function": {"name": "lookup", "parameters": schema}}
    root = "00000000000000a0"
    kinds = "openinference.span.kind"
    spans = [
        span(root, "agent", **{kinds: "AGENT"}),
        span(
            "00000000000000a1",
            "response",
            root,
            **{kinds: "LLM", "llm.tools.0.tool.json_schema": json.dumps(offered)},
        ),
        span(
            "00000000000000a2",
            "lookup",
            root,
            **{
                kinds: "TOOL",
                "tool.name": "lookup",
                "input.value": json.dumps({"code": argument}),
            },
        ),
        span("00000000000000a3", "response", root, **{kinds: "LLM", "output.value": "done"}),
    ]
    path.write_text(otlp_line(*spans) + "\n")
    return path


def test_catastrophic_pattern_in_a_recorded_tool_definition_is_judged_at_once(tmp_path: Path):
    trace = _tool_call_trace(tmp_path / "evil.jsonl", EVIL_PATTERN, EVIL_TEXT)
    out = tmp_path / "out"
    done = run_cli("report", str(trace), "--out", str(out))
    assert done.returncode == 0, done.stderr
    [finding] = [json.loads(x) for x in (out / "findings.jsonl").read_text().splitlines()]
    assert (finding["kind"], finding["rule_id"], finding["argument"]) == (
        "malformed_arguments",
        "tool-arguments",
        "code",
    )
    assert finding["detail"] == (
        f"lookup arguments fail schema at $.code: {EVIL_TEXT!r} does not match '^(a+)+$'"
    )


def test_pattern_the_linear_engine_cannot_run_leaves_the_schema_unapplied():
    from analyzer.checks.argument_schema import _Judge

    judge = _Judge()
    key = json.dumps([{"type": "object", "properties": {"q": {"pattern": r"^(a)\1$"}}}])
    assert judge.verdict(key, json.dumps({"q": "ab"})) == (None, None)  # unjudged, not passed
    assert "could not be applied" in (judge.unusable[key] or "")
    assert "backreferences" in (judge.unusable[key] or "")
    # the same schema, judged: a pattern RE2 runs gives jsonschema's own wording
    fine = json.dumps([{"type": "object", "properties": {"q": {"pattern": EVIL_PATTERN}}}])
    detail, argument = judge.verdict(fine, json.dumps({"q": EVIL_TEXT}))
    assert argument == "q"
    assert detail == f"arguments fail schema at $.q: {EVIL_TEXT!r} does not match '^(a+)+$'"


def test_catastrophic_labels_regex_is_scored_at_once(tmp_path: Path):
    answer = json.dumps({"dossier_id": EVIL_TEXT})
    root = "00000000000000b0"
    trace = tmp_path / "run.jsonl"
    trace.write_text(
        otlp_line(
            span(root, "agent", **{"openinference.span.kind": "AGENT", "case.id": "C-1"}),
            span(
                "00000000000000b1",
                "response",
                root,
                **{"openinference.span.kind": "LLM", "output.value": answer},
            ),
        )
        + "\n"
    )
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        json.dumps(
            {
                "case_id": "C-1",
                "fields": {"dossier_id": {"expected": EVIL_PATTERN, "match": "regex"}},
            }
        )
        + "\n"
    )
    done = run_cli(
        "report", str(trace), "--labels", str(labels), "--case-key", "case.id", "--format", "json"
    )
    assert done.returncode == 0, done.stderr
    [field] = json.loads(done.stdout)["labels"]["fields"]
    assert (field["field"], field["runs"], field["wrong"]) == ("dossier_id", 1, 1)


def test_labels_regex_the_linear_engine_cannot_run_is_a_labels_problem(tmp_path: Path):
    from analyzer.errors import InputError
    from analyzer.metrics.labels import load_labels

    path = tmp_path / "labels.jsonl"
    path.write_text(
        json.dumps({"case_id": "C-1", "fields": {"x": {"expected": r"(a)\1", "match": "regex"}}})
        + "\n"
    )
    with pytest.raises(InputError, match=r"fields\.x\.expected: invalid regular expression"):
        load_labels(path)


# --- YAML alias bombs -----------------------------------------------------------------------------


def billion_laughs(prefix: str = "") -> str:
    """Nine levels of nine aliases each: 10^9 nodes from under a kilobyte."""
    lines = [prefix, 'l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("option", "prefix", "label"),
    [
        ("--rules", "pack: bomb\nrules: []", "rule pack"),
        ("--prices", 'currency: USD\nas_of: "2026-12-01"\nmodels: []', "price table"),
    ],
    ids=["pack", "prices"],
)
def test_yaml_alias_bomb_is_refused_with_the_file_named(
    tmp_path: Path, option: str, prefix: str, label: str
):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(billion_laughs(prefix))
    done = run_cli("report", KYC, option, str(bomb), "--format", "json")
    assert done.returncode == 2, done.stderr
    assert str(bomb) in done.stderr
    assert "refused as an alias bomb" in done.stderr


def test_yaml_alias_bomb_in_a_gate_file_is_refused(tmp_path: Path):
    bomb = tmp_path / "gate.yaml"
    bomb.write_text(billion_laughs("gates: []"))
    code = textwrap.dedent(
        """
        import sys
        from analyzer.metrics.gate import GateError, load_gate
        try:
            load_gate(sys.argv[1])
        except GateError as err:
            print(err)
        """
    )
    done = run_python(code, str(bomb))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{bomb}: not valid YAML: aliases expand the document past")


def test_alias_counting_keeps_ordinary_aliases_and_refuses_self_reference():
    from analyzer.yamlplace import MAX_YAML_NODES, YamlAliasBomb, load_yaml

    data, root = load_yaml("base: &b {input: 1, output: 2}\nx: *b\ny: {<<: *b, output: 3}\n")
    assert data == {
        "base": {"input": 1, "output": 2},
        "x": {"input": 1, "output": 2},
        "y": {"input": 1, "output": 3},
    }
    assert root is not None and root.start_mark.line == 0
    with pytest.raises(YamlAliasBomb, match="holds itself"):
        load_yaml("a: &a [1, *a]\n")

    def wide(aliases: int) -> str:  # 1,001 nodes, then that many aliases of them
        return "a: &a [" + ", ".join(["1"] * 1000) + "]\nb: [" + ", ".join(["*a"] * aliases) + "]"

    assert len(load_yaml(wide(990))[0]["b"]) == 990  # just under a million nodes: read
    with pytest.raises(yaml.YAMLError, match=f"past {MAX_YAML_NODES:,} nodes"):
        load_yaml(wide(1000))


def test_libyaml_reads_every_bundled_file_as_the_pure_python_loader_does():
    from analyzer.yamlplace import SAFE_LOADER, load_yaml

    assert SAFE_LOADER is yaml.CSafeLoader  # the wheel of PyYAML the project installs has it

    def lines(node) -> list:
        children = node.value if isinstance(node.value, list) else []
        flat = [c for pair in children for c in (pair if isinstance(pair, tuple) else (pair,))]
        here = (node.start_mark.line, node.start_mark.column)
        return [here, *(x for c in flat for x in lines(c))]

    bundled = sorted((ROOT / "rules").glob("*.yaml"))
    assert len(bundled) >= 4
    for path in bundled:
        text = path.read_text(encoding="utf-8")
        fast, slow = load_yaml(text), load_yaml(text, yaml.SafeLoader)
        assert fast[0] == slow[0], path
        assert lines(fast[1]) == lines(slow[1]), path
    # a syntax error is told in the pure-Python parser's words, at its line
    with pytest.raises(yaml.MarkedYAMLError) as err:
        load_yaml("a: 1\nb: [1,\n")
    assert err.value.problem == "expected the node content, but found '<stream end>'"
    assert err.value.problem_mark is not None and err.value.problem_mark.line == 2


# --- folders and special files --------------------------------------------------------------------


def test_folder_with_symlinks_to_itself_is_walked_once(tmp_path: Path):
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "t.jsonl").write_text(otlp_line(span("00000000000000c1")) + "\n")
    (folder / "again").symlink_to(".")
    (folder / "more").symlink_to(folder)
    done = run_cli("report", str(folder), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ingest"]["spans_read"] == 1
    assert f"warning: {folder / 'again'}: a folder already walked" in done.stderr
    assert f"warning: {folder / 'more'}: a folder already walked" in done.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_named_or_in_a_folder_is_skipped_unopened(tmp_path: Path):
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "t.jsonl").write_text(otlp_line(span("00000000000000c1")) + "\n")
    os.mkfifo(folder / "inner.pipe")
    named = tmp_path / "named.pipe"
    os.mkfifo(named)
    done = run_cli("report", str(named), str(folder), "--format", "json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)["ingest"]
    assert summary["spans_read"] == 1
    assert sorted(summary["files_skipped"]) == sorted([str(folder / "inner.pipe"), str(named)])
    assert f"warning: {named}: a FIFO (named pipe); skipped, not opened" in done.stderr
    alone = run_cli("report", str(named))
    assert alone.returncode == 2
    assert "no input" in alone.stderr


# --- plugins --------------------------------------------------------------------------------------


def _plugin_report(tmp_path: Path, rule: str):
    pack = tmp_path / "plugin.yaml"
    pack.write_text(f"pack: p\nrules:\n  - {{id: r, type: 'plugin_hostile:{rule}'}}\n")
    done = run_cli(
        "report",
        KYC,
        "--rules",
        str(pack),
        "--allow-plugins",
        "--format",
        "json",
        env={"AGENTTRACE_PLUGIN_SECONDS": "0.5"},
    )
    assert done.returncode == 0, done.stderr
    [rule_row] = json.loads(done.stdout)["checks"]["rules"]
    return rule_row


@pytest.mark.parametrize("rule", ["Forever", "Blocks", "ForeverCheck"])
def test_plugin_that_never_returns_is_stopped_as_check_errors(tmp_path: Path, rule: str):
    row = _plugin_report(tmp_path, rule)
    assert row["runs_error"] == row["runs_applied"] > 0
    reasons = " ".join(r["reason"] for r in row["reasons"])
    assert "ran past its time budget of 0.5 s and was stopped" in reasons


@pytest.mark.parametrize(
    ("rule", "said"),
    [
        ("'EndsProcess', how: exit", "tried to end the process (SystemExit: 3)"),
        ("'EndsProcess', how: raise", "tried to end the process (SystemExit: 5)"),
        ("'EndsProcess', how: os_exit", "called os._exit(4)"),
        ("Interrupts", "raised KeyboardInterrupt"),
    ],
    ids=["sys.exit", "SystemExit", "os._exit", "KeyboardInterrupt"],
)
def test_plugin_that_ends_the_process_is_a_check_error(tmp_path: Path, rule: str, said: str):
    name, _, options = rule.partition(", ")
    pack = tmp_path / "plugin.yaml"
    name = name.strip("'")
    extra = f", {options}" if options else ""
    pack.write_text(f"pack: p\nrules:\n  - {{id: r, type: 'plugin_hostile:{name}'{extra}}}\n")
    done = run_cli("report", KYC, "--rules", str(pack), "--allow-plugins", "--format", "json")
    assert done.returncode == 0, done.stderr
    [row] = json.loads(done.stdout)["checks"]["rules"]
    assert row["runs_error"] == row["runs_applied"] > 0
    [reason] = row["reasons"]
    assert said in reason["reason"]


def test_plugin_that_swallows_its_stop_ends_agenttrace_loudly(tmp_path: Path):
    pack = tmp_path / "plugin.yaml"
    pack.write_text("pack: p\nrules:\n  - {id: r, type: 'plugin_hostile:Swallows'}\n")
    done = run_cli(
        "report",
        KYC,
        "--rules",
        str(pack),
        "--allow-plugins",
        env={"AGENTTRACE_PLUGIN_SECONDS": "0.5"},
    )
    assert done.returncode == 2
    assert "the plugin plugin_hostile:Swallows went on past its time budget" in done.stderr


# --- detection ------------------------------------------------------------------------------------

LINE_1 = otlp_line(span("00000000000000d1"))
LINE_2 = otlp_line(span("00000000000000d2"))


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gzip"])
def test_blank_lines_past_64_kib_before_the_spans_are_read_through(tmp_path: Path, packed: bool):
    text = ("\n" * 70_000 + "  \t\n" + LINE_1 + "\n" + LINE_2 + "\n").encode()
    path = tmp_path / ("blank.jsonl.gz" if packed else "blank.jsonl")
    path.write_bytes(gzip.compress(text, mtime=0) if packed else text)
    ingested = read_traces([path])
    [log] = ingested.log.files
    assert log.format == ("jsonl+gzip" if packed else "jsonl")
    assert (log.records, log.spans_read, log.spans_kept, log.quarantine) == (2, 2, 2, [])
    rows = ingested.spans.select(["span_id", "source_pos"]).to_pylist()
    assert rows == [
        {"span_id": "00000000000000d1", "source_pos": 70_002},
        {"span_id": "00000000000000d2", "source_pos": 70_003},
    ]


def test_blank_lines_before_an_otlp_document_are_read_through(tmp_path: Path):
    path = tmp_path / "doc.json"
    path.write_text("\n" * 70_000 + json.dumps(json.loads(LINE_1), indent=2))
    ingested = read_traces([path])
    assert ingested.log.files[0].format == "otlp-json"
    assert ingested.spans.column("span_id").to_pylist() == ["00000000000000d1"]


def test_only_blank_lines_is_still_empty(tmp_path: Path):
    path = tmp_path / "blank.jsonl"
    path.write_text("\n" * 100_000)
    ingested = read_traces([path])
    assert ingested.log.files[0].format == "empty"
    assert ingested.log.quarantine == []


@pytest.mark.parametrize(
    "garbage",
    ["not json at all", '{"some": "other json"}', "[1, 2, 3]"],
    ids=["text", "json-object", "json-list"],
)
@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gzip"])
def test_first_lines_garbage_then_otlp_quarantines_each_bad_line(
    tmp_path: Path, garbage: str, packed: bool
):
    text = (f"{garbage}\n" * 12 + LINE_1 + "\n" + LINE_2 + "\n").encode()
    path = tmp_path / ("mixed.jsonl.gz" if packed else "mixed.jsonl")
    path.write_bytes(gzip.compress(text, mtime=0) if packed else text)
    ingested = read_traces([path])
    [log] = ingested.log.files
    assert log.format == ("jsonl+gzip" if packed else "jsonl")
    assert ingested.spans.column("span_id").to_pylist() == ["00000000000000d1", "00000000000000d2"]
    assert (log.records, log.records_quarantined, log.spans_kept) == (14, 12, 2)
    assert [q.position for q in log.quarantine] == [f"line {i}" for i in range(1, 13)]


# --- decompression --------------------------------------------------------------------------------


def test_gzip_bomb_is_refused_before_memory_grows(tmp_path: Path):
    # 3 MB of gzip members, each 16 MiB of spaces: 3 GB once expanded, past 1000x
    member = gzip.compress(b" " * (16 << 20), 9, mtime=0)
    path = tmp_path / "bomb.jsonl.gz"
    with path.open("wb") as fh:
        fh.write(gzip.compress(b'{"resourceSpans": [', mtime=0))
        for _ in range((3 << 20) // len(member)):
            fh.write(member)
    assert path.stat().st_size < 3.2e6
    code = textwrap.dedent(
        """
        import json, resource, sys
        from analyzer.ingest import read_traces
        ingested = read_traces([sys.argv[1]])
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
        print(json.dumps({"peak_mib": peak / 1024,
                          "reasons": [q.reason for q in ingested.log.quarantine]}))
        """
    )
    done = run_python(code, str(path))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    [reason] = result["reasons"]
    assert reason.endswith("refused as a decompression bomb")
    assert "the compressed bytes read" in reason
    # against the same reader on a small gzip file (the imports alone take 150-250 MiB,
    # depending on the machine): the bomb adds its 64 MiB cap and buffers, not gigabytes
    small = tmp_path / "small.jsonl.gz"
    small.write_bytes(gzip.compress(b'{"resourceSpans": []}\n' * 1000, mtime=0))
    plain = run_python(code, str(small))
    assert plain.returncode == 0, plain.stderr
    baseline = json.loads(plain.stdout)["peak_mib"]
    assert result["peak_mib"] - baseline < 200, (result["peak_mib"], baseline)
