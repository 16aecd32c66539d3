"""--redact: no trace content in any output byte, and the same value gives the same token."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from analyzer.cli import main
from analyzer.engine import analyze_paths
from analyzer.pack import load_packs
from analyzer.redact import TOKEN_RE, Redactor, redact_analysis, redaction_record

ROOT = Path(__file__).resolve().parents[1]
SALT = "pepper-7f3a9c41"
AGENTS = ["kyc", "support", "realestate"]


def _leaves(text: str | None) -> list[str]:
    """The string and number values inside JSON `text`, or the text itself."""
    if not text:
        return []
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return [text]
    out, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            out.append(item)
        elif isinstance(item, int | float) and not isinstance(item, bool):
            out.append(json.dumps(item))
    return out + ([text] if not isinstance(value, str) else [])


def _secrets(agent: str) -> set[str]:
    """Content of the sample traces that must not survive: argument values, results, answers,
    model outputs, message content, 6 characters or more (shorter ones, like "low", also
    appear in the tool's own words), other than ids and names the report keeps."""
    pack = ROOT / "rules" / f"{agent}.yaml"
    analysis = analyze_paths([ROOT / "sample_traces" / agent], packs=tuple(load_packs([pack])))
    steps, runs = analysis.runs.steps, analysis.runs.runs
    texts: list[str | None] = [
        *steps.get_column("arguments").to_list(),
        *steps.get_column("result").to_list(),
        *steps.get_column("output_text").to_list(),
        *runs.get_column("answer").to_list(),
        *analysis.runs.sources.get_column("text").to_list(),
    ]
    found = {leaf for text in texts for leaf in _leaves(text)}
    kept = {
        *runs.get_column("run_id").to_list(),
        *runs.get_column("case_id").drop_nulls().to_list(),
        *steps.get_column("name").drop_nulls().to_list(),
    }
    # the rule pack, the tool definitions and the words of finding details (quoted values
    # taken out) are no trace content, even where a tool's message says the same
    details = [
        re.sub(r"'[^']*'", "''", d) for d in analysis.evaluation.findings.get_column("detail")
    ]
    words = "\n".join(
        [pack.read_text(), *runs.get_column("tool_definitions").explode().drop_nulls(), *details]
    )
    return {s for s in found if len(s) >= 6 and s not in kept and s not in words}


def _shows(text: str, secret: str) -> bool:
    """Whether `text` holds `secret` (a number only as a whole number, not inside a time)."""
    if re.fullmatch(r"[\d.]+", secret):
        return re.search(rf"(?<![\d.]){re.escape(secret)}(?![\d.])", text) is not None
    return secret in text


def _report(tmp_path: Path, agent: str, *extra: str) -> tuple[Path, str, str]:
    out = tmp_path / agent
    args = ["report", str(ROOT / "sample_traces" / agent)]
    args += ["--rules", str(ROOT / "rules" / f"{agent}.yaml"), "--out", str(out), *extra]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return out, result.stdout, result.stderr


def _output_texts(out: Path) -> dict[str, str]:
    """Each output file as text: its bytes, and for Parquet its decoded rows as JSON."""
    texts = {}
    for path in sorted(out.iterdir()):
        texts[path.name] = path.read_bytes().decode("utf-8", "replace")
        if path.suffix == ".parquet":
            rows = pq.read_table(path).to_pylist()
            texts[path.name + " (rows)"] = json.dumps(rows, ensure_ascii=False, default=str)
    return texts


@pytest.mark.parametrize("agent", AGENTS)
def test_no_secret_in_any_output_byte_or_on_the_terminal(tmp_path: Path, agent: str):
    secrets = _secrets(agent)
    # the unredacted report shows many of them (the others are input messages, in no output)
    plain, _, _ = _report(tmp_path / "plain", agent)
    plain_texts = "".join(_output_texts(plain).values())
    assert sum(_shows(plain_texts, s) for s in secrets) > 20
    out, stdout, stderr = _report(tmp_path, agent, "--redact-salt", SALT)
    texts = _output_texts(out)
    assert {"findings.jsonl", "steps.parquet", "runs.parquet", "summary.json"} <= set(texts)
    texts["terminal"] = stdout + stderr
    leaks = sorted((name, s) for name, text in texts.items() for s in secrets if _shows(text, s))
    assert leaks == []
    assert not any(SALT in text for text in texts.values())


def test_findings_stay_joinable_with_the_steps(tmp_path: Path):
    out, _, _ = _report(tmp_path, "kyc", "--redact-salt", SALT)
    token = Redactor(SALT).token("ACC-55120")  # the account id the agent made up
    findings = [json.loads(line) for line in (out / "findings.jsonl").read_text().splitlines()]
    [hallucinated] = [f for f in findings if f["kind"] == "hallucinated_argument"]
    assert hallucinated["detail"] == f"account_id '{token}' appears in no prior source"
    assert hallucinated["argument"] == "account_id" and hallucinated["tool"] == "lookup_account"
    steps = pq.read_table(out / "steps.parquet").to_pylist()
    [call] = [s for s in steps if s["span_id"] in hallucinated["span_ids"]]
    assert json.loads(call["arguments"]) == {"account_id": token}
    parquet = pq.read_table(out / "findings.parquet").to_pylist()
    assert [f["detail"] for f in parquet] == [f["detail"] for f in findings]


def test_manifest_records_the_salt_source_never_the_salt(tmp_path: Path, monkeypatch):
    monkeypatch.setattr("sys.argv", ["agenttrace", "report", "x", "--redact-salt", SALT])
    out, _, stderr = _report(tmp_path, "kyc", "--redact-salt", SALT)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["redaction"] == redaction_record(SALT, given=True)
    assert manifest["redaction"]["salt_source"] == "given"
    assert manifest["command"] == ["agenttrace", "report", "x", "--redact-salt", "***"]
    assert "redaction salt" not in stderr
    plain, _, _ = _report(tmp_path / "plain", "kyc")
    assert json.loads((plain / "manifest.json").read_text())["redaction"] is None


def test_generated_salt_is_printed_once_and_written_nowhere(tmp_path: Path):
    out, stdout, stderr = _report(tmp_path, "kyc", "--redact")
    [line] = [ln for ln in stderr.splitlines() if ln.startswith("redaction salt")]
    salt = line.rsplit(": ", 1)[1]
    assert len(salt) == 32 and salt not in stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["redaction"] == redaction_record(salt, given=False)
    assert not any(salt in text for text in _output_texts(out).values())
    token = Redactor(salt).token("ACC-55120")
    assert token in (out / "findings.jsonl").read_text()


def test_same_value_same_token_and_another_salt_another_token(tmp_path: Path):
    a, b, c = Redactor("one"), Redactor("one"), Redactor("two")
    digest = hmac.new(b"one", b"ACC-55120", hashlib.sha256).hexdigest()[:16]
    assert a.token("ACC-55120") == b.token("ACC-55120") == f"[redacted:{digest}]"
    assert TOKEN_RE.fullmatch(a.token("ACC-55120"))
    assert a.token("ACC-55120") != c.token("ACC-55120")
    assert a.token("ACC-55120") != a.token("ACC-55121")  # near miss
    # a value is the same token as an argument, inside a result and quoted in a detail
    args = a.json_text('{"account_id": "ACC-55120", "n": 3, "ok": true, "none": null}')
    assert json.loads(args) == {
        "account_id": a.token("ACC-55120"),
        "n": a.token("3"),
        "ok": True,
        "none": None,
    }
    assert a.json_text("not json ACC-55120") == a.token("not json ACC-55120")
    detail = a.detail("account_id 'ACC-55120' appears in no prior source", "x", "")
    assert detail == f"account_id '{a.token('ACC-55120')}' appears in no prior source"
    first, _, _ = _report(tmp_path / "one", "kyc", "--redact-salt", "one")
    second, _, _ = _report(tmp_path / "two", "kyc", "--redact-salt", "two")
    again, _, _ = _report(tmp_path / "again", "kyc", "--redact-salt", "one")
    read = lambda out: (out / "findings.jsonl").read_text()  # noqa: E731
    assert read(first) == read(again) != read(second)


def test_detail_tokenizes_only_what_the_run_holds():
    r = Redactor(SALT)
    content = 'the price is 365 000 € for "Rue d\'Alesia"'
    detail = "amount '365 000 €' appears in no prior source (read as 365000)"
    # '365 000 €' is in the content; how it was read comes from it too, whatever the content
    assert r.detail(detail, "ungrounded_figure", content) == (
        f"amount '{r.token('365 000 €')}' appears in no prior source (read as {r.token('365000')})"
    )
    # a pattern of the pack, not in the content, stays; a quote inside a value is no end
    assert r.detail("'—' found 2 in the answer", "forbidden_text", content) == (
        "'—' found 2 in the answer"
    )
    assert r.detail("street 'Rue d'Alesia' is odd", "x", content) == (
        f"street '{r.token(chr(82) + 'ue d' + chr(39) + 'Alesia')}' is odd"
    )


def test_redact_analysis_leaves_the_original_untouched():
    pack = ROOT / "rules" / "kyc.yaml"
    analysis = analyze_paths([ROOT / "sample_traces" / "kyc"], packs=tuple(load_packs([pack])))
    before = analysis.runs.steps.get_column("arguments").to_list()
    redacted = redact_analysis(analysis, SALT)
    assert analysis.runs.steps.get_column("arguments").to_list() == before
    assert redacted.runs.steps.height == analysis.runs.steps.height
    assert redacted.runs.runs.select("run_id", "model_calls").equals(
        analysis.runs.runs.select("run_id", "model_calls")
    )
    # the case id is a join key: hashed, the same value the same token
    r = Redactor(SALT)
    cases = analysis.runs.runs.get_column("case_id").to_list()
    assert redacted.runs.runs.get_column("case_id").to_list() == [r.text(c) for c in cases]
    # a run's attributes: the kept keys in clear, the others tokenized
    attrs = json.loads(redacted.runs.runs.get_column("attributes").to_list()[0])
    assert (attrs["service.name"], attrs["gen_ai.operation.name"]) == ("kyc-agent", "invoke_agent")
    assert TOKEN_RE.fullmatch(attrs["app.case_id"]) and TOKEN_RE.fullmatch(
        attrs["gen_ai.conversation.id"]
    )


def test_partitioned_report_redacts_the_same(tmp_path: Path):
    whole, _, _ = _report(tmp_path / "whole", "kyc", "--redact-salt", SALT, "--partitions", "0")
    parts, _, _ = _report(tmp_path / "parts", "kyc", "--redact-salt", SALT, "--partitions", "2")
    assert (parts / "findings.jsonl").read_text() == (whole / "findings.jsonl").read_text()
    steps = pq.read_table(parts / "steps.parquet").to_pylist()
    assert "ACC-55120" not in json.dumps(steps)
    assert any(Redactor(SALT).token("ACC-55120") in (s["arguments"] or "") for s in steps)


# --- what used to leak ----------------------------------------------------------------------

_TOOLS = [
    {
        "type": "function",
        "name": "lookup_customer",
        "description": "Finds the customer file of Jane Roe-Kowalski by account",
        "parameters": {
            "type": "object",
            "properties": {
                "account_id": {"type": "string", "description": "Account of Jane's employer"},
                "region": {"type": "string", "enum": ["north-atlantic-desk"]},
                "desk": {"type": "object", "examples": [{"name": "desk of Jane Roe"}]},
            },
            "required": ["account_id"],
        },
    }
]
# Clear values that must not survive --redact (the ids and names the user's traces hold).
_LEAKS = {
    "enduser.id": "enduser-4471-secret",
    "user.name": "jane.roe.kowalski",
    "customer.name": "Kowalski Holdings",
    "error.type": "CustomerLockedError-JaneRoe",
    "tool description": "Finds the customer file of Jane Roe-Kowalski by account",
    "parameter description": "Account of Jane's employer",
    "enum": "north-atlantic-desk",
    "example": "desk of Jane Roe",
}


def _leaky_trace(path: Path) -> Path:
    """One run: its root records end-user ids and names, its model call the tool definitions,
    its tool call malformed arguments (a finding "line 1 col N") and an error type."""
    from factories import otlp_attr, otlp_span

    trace = "5f0c3a1b2d4e6f708192a3b4c5d6e7f8"
    root = otlp_span(
        trace,
        "a000000000000001",
        "",
        "invoke_agent support",
        0,
        900,
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "support",
            "enduser.id": _LEAKS["enduser.id"],
            "user.name": _LEAKS["user.name"],
            "customer.name": _LEAKS["customer.name"],
        },
    )
    chat = otlp_span(
        trace,
        "a000000000000002",
        "a000000000000001",
        "chat gpt-4.1",
        10,
        100,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4.1",
            "gen_ai.tool.definitions": json.dumps(_TOOLS),
            "gen_ai.usage.input_tokens": 100,
            "gen_ai.usage.output_tokens": 10,
        },
    )
    tool = otlp_span(
        trace,
        "a000000000000003",
        "a000000000000001",
        "execute_tool lookup_customer",
        200,
        300,
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "lookup_customer",
            "gen_ai.tool.call.arguments": '{"account_id": "ACC-1" "region": 24}',
            "error.type": _LEAKS["error.type"],
        },
    )
    tool["status"] = {"code": 2, "message": "locked"}
    answer = otlp_span(
        trace,
        "a000000000000004",
        "a000000000000001",
        "chat gpt-4.1",
        400,
        500,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4.1",
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "Done, 1 file."}]}]
            ),
        },
    )
    doc = {
        "resourceSpans": [
            {
                "resource": {"attributes": [otlp_attr("service.name", "support-agent")]},
                "scopeSpans": [{"scope": {"name": "t"}, "spans": [root, chat, tool, answer]}],
            }
        ]
    }
    path.write_text(json.dumps(doc) + "\n")
    return path


@pytest.fixture()
def leaky(tmp_path: Path) -> tuple[Path, str, str]:
    """(output folder, stdout, stderr) of `report --redact-salt` on `_leaky_trace`."""
    trace = _leaky_trace(tmp_path / "leaky.jsonl")
    out = tmp_path / "out"
    args = ["report", str(trace), "--out", str(out), "--redact-salt", SALT, "--fail-on", "never"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return out, result.stdout, result.stderr


def _leaked(out: Path, stdout: str, stderr: str) -> list[tuple[str, str]]:
    texts = _output_texts(out)
    texts["terminal"] = stdout + stderr
    return sorted((f, w) for f, text in texts.items() for w, v in _LEAKS.items() if v in text)


def test_the_clear_values_of_the_leaky_trace_reach_the_outputs_without_redact(tmp_path: Path):
    trace = _leaky_trace(tmp_path / "leaky.jsonl")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["report", str(trace), "--out", str(out)])
    assert result.exit_code in (0, 1), result.output
    shown = {w for _, w in _leaked(out, result.stdout, result.stderr)}
    assert shown == set(_LEAKS)  # the test below would prove nothing otherwise


@pytest.mark.parametrize("what", sorted(_LEAKS))
def test_redact_leaves_no_run_attribute_error_type_or_tool_description_in_clear(leaky, what):
    assert [f for f, w in _leaked(*leaky) if w == what] == []


def test_redacted_run_attributes_keep_only_the_allow_list(leaky):
    out, _, _ = leaky
    [run] = pq.read_table(out / "runs.parquet").to_pylist()
    attrs = json.loads(run["attributes"])
    r = Redactor(SALT)
    assert attrs["enduser.id"] == r.token(_LEAKS["enduser.id"])
    assert attrs["user.name"] == r.token(_LEAKS["user.name"])
    assert attrs["customer.name"] == r.token(_LEAKS["customer.name"])
    assert attrs["gen_ai.agent.name"] == "support" and attrs["service.name"] == "support-agent"
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    [tools] = run["tool_definitions"]
    [tool] = json.loads(tools)
    assert tool["name"] == "lookup_customer"
    assert tool["description"] == r.token(_LEAKS["tool description"])
    params = tool["parameters"]
    assert params["required"] == ["account_id"]
    assert set(params["properties"]) == {"account_id", "region", "desk"}
    assert params["properties"]["account_id"] == {
        "type": "string",
        "description": r.token(_LEAKS["parameter description"]),
    }
    steps = pq.read_table(out / "steps.parquet").to_pylist()
    assert [s["error_type"] for s in steps if s["error_type"]] == [r.token(_LEAKS["error.type"])]


def test_a_detail_keeps_the_numbers_of_its_own_wording(leaky):
    out, _, _ = leaky
    findings = [json.loads(line) for line in (out / "findings.jsonl").read_text().splitlines()]
    [malformed] = [f for f in findings if f["kind"] == "malformed_arguments"]
    # the run holds 1 and 24 ("ACC-1", "region": 24): still the position of the JSON error
    assert malformed["detail"] == (
        "lookup_customer arguments are not valid JSON (line 1 col 24: Expecting ',' delimiter)"
    )


def test_detail_redacts_the_trace_content_and_keeps_the_wording_around_it():
    r = Redactor(SALT)
    content = '{"account_id": "ACC-1" "region": 26} 5 12 3'
    detail = "lookup arguments are not valid JSON (line 1 col 26: Expecting ',' delimiter)"
    assert r.detail(detail, "malformed_arguments", content) == detail
    detail = "lookup arguments fail schema at $.region: 26 is less than the minimum of 5 (+3 more)"
    assert r.detail(detail, "malformed_arguments", content) == (
        f"lookup arguments fail schema at $.region: {r.token('26')} is less than the minimum "
        "of 5 (+3 more)"
    )
    detail = "answer is not JSON (Expecting value at char 12): 'ACC-1'"
    assert r.detail(detail, "output_schema", content) == (
        f"answer is not JSON (Expecting value at char 12): '{r.token('ACC-1')}'"
    )
    detail = "lookup region 26 in its first call, expected 3"
    assert r.detail(detail, "argument_mismatch", content) == (
        f"lookup region {r.token('26')} in its first call, expected 3"
    )
    # a schema's words and the arguments' names, quoted by the message, are no trace value
    content += ' {"name": "integer"}'
    for detail in (
        "lookup arguments fail schema at $.region: 'ACC-1' is not of type 'integer'",
        "lookup arguments fail schema: 'account_id' is a required property",
        "lookup arguments fail schema: Additional properties are not allowed ('account_id', "
        "'name' were unexpected)",
    ):
        assert r.detail(detail, "malformed_arguments", content) == detail.replace(
            "'ACC-1'", f"'{r.token('ACC-1')}'"
        )


def test_show_finds_a_case_by_its_id_and_shows_it_hashed():
    args = ["show", "KYC-2026-0002", str(ROOT / "sample_traces" / "kyc"), "--redact-salt", SALT]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "KYC-2026-0002" not in result.stdout
    assert f"case {Redactor(SALT).token('KYC-2026-0002')}" in result.stdout


def test_labels_are_scored_on_the_real_answers_then_redacted(tmp_path: Path):
    """--labels with --redact: the same verdicts as without (13 of 16 KYC runs all right),
    and no case id, expected or answered value in clear in any output."""
    kyc, labels = str(ROOT / "sample_traces" / "kyc"), str(ROOT / "rules" / "kyc-labels.jsonl")
    outs = {}
    for name, extra in (("clear", []), ("redacted", ["--redact-salt", "s1"])):
        outs[name] = tmp_path / name
        args = ["report", kyc, "--rules", "kyc", "--labels", labels, "--out", str(outs[name])]
        result = CliRunner().invoke(main, [*args, *extra])
        assert result.exit_code == 0, result.output
    summaries = {n: json.loads((o / "summary.json").read_text()) for n, o in outs.items()}
    clear, redacted = (summaries[n]["labels"] for n in ("clear", "redacted"))
    assert clear["all_fields_correct"]["k"] == redacted["all_fields_correct"]["k"] == 13
    assert [f["correct"] for f in clear["fields"]] == [f["correct"] for f in redacted["fields"]]
    assert len(redacted["wrong_fields"]) == len(clear["wrong_fields"]) > 0
    fields = pq.read_table(outs["redacted"] / "labels.parquet").to_pylist()
    assert len(fields) == 48
    for row in fields:
        assert TOKEN_RE.fullmatch(row["case_id"])
        assert row["actual"] is None or TOKEN_RE.fullmatch(row["actual"])
    for path in outs["redacted"].iterdir():
        assert b"KYC-2026-" not in path.read_bytes(), path.name
