"""CLI error paths, golden: the exact stderr and exit code 2 (CONTRACT.md section 5: bad usage,
an unreadable rule pack or price table, or no input at all), next to the near misses that run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from analyzer.cli import main

ROOT = Path(__file__).resolve().parents[1]
KYC = str(ROOT / "sample_traces" / "kyc")

BAD_PACK = """\
pack: p
rules:
  - {id: a, type: required_tools}
  - {id: a, type: nope}
  - {type: budget, max_cost_usd: -1}
"""
BAD_PRICES = """\
currency: USD
models:
  - {model: x, input: -1}
  - {input: 2}
"""
#: A price the cost sum overflows with (1e308) used to end in an OverflowError traceback.
HUGE_PRICES = """\
currency: USD
as_of: "2026-12-01"
models:
  - {model: gpt-4.1, input: 1.0e+308, output: 1}
"""
PLUGIN_PACK = "pack: p\nrules:\n  - {id: short, type: 'plugin_example:MaxLength', max_chars: 4}\n"
TRACE_LINE = (
    '{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c",'
    '"spanId":"00000000000000a1","name":"chat","startTimeUnixNano":"1","endTimeUnixNano":"2",'
    '"attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}}]}]}]}]}\n'
)


@pytest.fixture
def here(tmp_path: Path, monkeypatch) -> Path:
    """A working folder holding the inputs (relative paths keep messages stable)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad.yaml").write_text(BAD_PACK)
    (tmp_path / "prices.yaml").write_text(BAD_PRICES)
    (tmp_path / "plugin.yaml").write_text(PLUGIN_PACK)
    (tmp_path / "data.csv").write_text("trace_id,span_id\n1,2\n")
    (tmp_path / "blob.bin").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "trace.jsonl").write_text(TRACE_LINE)
    (tmp_path / "huge.yaml").write_text(HUGE_PRICES)
    (tmp_path / "nan.yaml").write_text(HUGE_PRICES.replace("1.0e+308", ".nan"))
    (tmp_path / "inf.yaml").write_text(HUGE_PRICES.replace("1.0e+308", ".inf"))
    return tmp_path


def run(*args: str):
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


UNKNOWN_RULE_TYPES = (
    "allowed_tools, argument_schema, budget, forbidden_text, grounded_arguments, "
    "grounded_figures, output_pattern, output_schema, required_tools, retries, tool_errors, "
    "tool_requests, trajectory"
)
NOT_A_TRACE = "not a trace file (no known format recognised)"

GOLDEN = {
    "missing path": (
        ["report", "nope.jsonl"],
        "Error: nope.jsonl: no such file or folder\n",
    ),
    "missing path among good ones": (
        ["report", "trace.jsonl", "nope"],
        "Error: nope: no such file or folder\n",
    ),
    "no path": (
        ["report"],
        "Error: no input: give at least one trace file or folder\n",
    ),
    "empty folder": (
        ["report", "empty"],
        "Error: no input: empty holds no file\n",
    ),
    "bad pack, every mistake at once": (
        ["report", "trace.jsonl", "--rules", "bad.yaml"],
        "Error: 5 problems in rule pack bad.yaml:\n"
        "  bad.yaml:3: rules[0] (rule a): missing required key 'tools' for rule type "
        "required_tools\n"
        "  bad.yaml:4: rules[1].id (rule a): duplicate rule id 'a' (first used at rules[0])\n"
        f"  bad.yaml:4: rules[1].type (rule a): unknown rule type 'nope' (rule types: "
        f"{UNKNOWN_RULE_TYPES}; or module:Class for a plugin)\n"
        "  bad.yaml:5: rules[2]: missing required key 'id' for rule type budget\n"
        "  bad.yaml:5: rules[2].max_cost_usd: -1 is less than the minimum of 0\n",
    ),
    "missing pack": (
        ["report", "trace.jsonl", "--rules", "gone.yaml"],
        "Error: 1 problem in rule pack gone.yaml:\n"
        "  gone.yaml: cannot read the rule pack: No such file or directory (built-in packs: "
        "default, kyc, realestate, support)\n",
    ),
    "bad prices file": (
        ["report", "trace.jsonl", "--prices", "prices.yaml"],
        "Error: 5 problems in price table prices.yaml:\n"
        "  prices.yaml:1: missing required key 'as_of'\n"
        "  prices.yaml:3: models[0]: missing required key 'output'\n"
        "  prices.yaml:3: models[0].input: -1 is negative; prices are USD per million tokens, "
        ">= 0\n"
        "  prices.yaml:4: models[1]: missing required key 'model'\n"
        "  prices.yaml:4: models[1]: missing required key 'output'\n",
    ),
    "price too large to sum": (
        ["report", "trace.jsonl", "--prices", "huge.yaml"],
        "Error: 1 problem in price table huge.yaml:\n"
        "  huge.yaml:4: models[0].input: 1e+308 is greater than the maximum of 1000000\n",
    ),
    "price .inf": (
        ["report", "trace.jsonl", "--prices", "inf.yaml"],
        "Error: 1 problem in price table inf.yaml:\n"
        "  inf.yaml:4: models[0].input: inf is greater than the maximum of 1000000\n",
    ),
    "price .nan": (
        ["report", "trace.jsonl", "--prices", "nan.yaml"],
        "Error: 1 problem in price table nan.yaml:\n"
        "  nan.yaml:4: models[0].input: not a number (.nan)\n",
    ),
    "--out names a file": (
        ["report", "trace.jsonl", "--out", "data.csv"],
        "Error: data.csv: --out names a file; give a folder (new or existing)\n",
    ),
    "diff --out names a file": (
        ["diff", "trace.jsonl", "trace.jsonl", "--out", "data.csv"],
        "Error: data.csv: --out names a file; give a folder (new or existing)\n",
    ),
    "missing prices file": (
        ["report", "trace.jsonl", "--prices", "gone.yaml"],
        "Error: gone.yaml: cannot read the price table: No such file or directory\n",
    ),
    "unknown file format": (
        ["report", "data.csv"],
        f"Error: no input: no trace file among the 1 read (data.csv: {NOT_A_TRACE})\n",
    ),
    "unknown file formats, runs too": (
        ["runs", "blob.bin", "data.csv"],
        "Error: no input: no trace file among the 2 read "
        f"(blob.bin: {NOT_A_TRACE}; data.csv: {NOT_A_TRACE})\n",
    ),
    "plugin refused": (
        ["report", "trace.jsonl", "--rules", "plugin.yaml"],
        "Error: 1 problem in rule pack plugin.yaml:\n"
        "  plugin.yaml:3: rules[0].type (rule short): plugin rule type plugin_example:MaxLength "
        "runs Python code from the pack, so it loads only when allowed: pass --allow-plugins "
        "(allow_plugins=True in the API)\n",
    ),
    "no such run": (
        ["show", "abc", "trace.jsonl"],
        "Error: no run or case with id 'abc' in the input (1 runs read)\n",
    ),
}


@pytest.mark.parametrize("case", list(GOLDEN))
def test_error_paths_exit_2_with_their_exact_message(here: Path, case: str):
    args, expected = GOLDEN[case]
    code, stdout, stderr = run(*args)
    assert (code, stderr, stdout) == (2, expected, "")


def test_a_trace_beside_a_file_that_is_none_is_read_and_the_other_named(here: Path):
    code, stdout, stderr = run("report", "trace.jsonl", "data.csv", "--format", "json")
    assert (code, stderr) == (0, "")
    ingest = json.loads(stdout)["ingest"]
    assert (ingest["spans_kept"], ingest["records_quarantined"]) == (1, 1)
    assert [(Path(q["file"]).name, q["position"], q["reason"]) for q in ingest["quarantine"]] == [
        ("data.csv", "file", NOT_A_TRACE)
    ]


def test_an_empty_trace_file_is_input_not_an_error(here: Path):
    (here / "fresh.jsonl").write_text("")
    code, stdout, _ = run("report", "fresh.jsonl", "--format", "json")
    assert code == 0
    assert json.loads(stdout)["ingest"]["spans_read"] == 0


def test_plugin_runs_when_allowed(here: Path):
    code, stdout, stderr = run(
        "report", KYC, "--rules", "plugin.yaml", "--allow-plugins", "--format", "json"
    )
    assert (code, stderr) == (0, "")
    by_rule = json.loads(stdout)["findings"]["by_rule"]
    assert {(r["rule_id"], r["kind"]) for r in by_rule if r["findings"]} == {("short", "too_long")}


def test_usage_errors_exit_2(here: Path):
    code, _, stderr = run("report", "trace.jsonl", "--fail-on", "urgent")
    assert code == 2
    assert "Invalid value for '--fail-on': 'urgent' is not one of" in stderr


@pytest.mark.parametrize(
    ("option", "name"),
    [
        ("--case-key", "o'k"),
        ("--case-class", "a''b"),
        ("--case-class", "a\\"),
        ("--case-key", "\\"),
    ],
)
def test_an_attribute_name_with_a_quote_or_backslash_is_refused_up_front(
    here: Path, option: str, name: str
):
    # such a name cannot be put in the JSON path the attributes are read with; it stopped the
    # analysis with an internal error (exit 3) once a run held it
    (here / "quoted.jsonl").write_text(
        TRACE_LINE.replace(
            '"attributes":[',
            '"attributes":[{"key":' + json.dumps(name) + ',"value":{"stringValue":"c1"}},',
        )
    )
    code, stdout, stderr = run("report", "quoted.jsonl", option, name)
    assert (code, stdout) == (2, "")
    assert (
        f"Invalid value for '{option}': attribute name {name!r} holds a quote or a backslash"
        in (stderr)
    )
