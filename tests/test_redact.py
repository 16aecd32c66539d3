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
from analyzer.pack import load_packs
from analyzer.pipeline import analyze_paths
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
    # '365 000 €' is in the content; 365000 as written is not: left as is
    assert r.detail(detail, "ungrounded_figure", content) == (
        f"amount '{r.token('365 000 €')}' appears in no prior source (read as 365000)"
    )
    assert r.detail(detail, "ungrounded_figure", content + " 365000") == (
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
    assert redacted.runs.runs.select("run_id", "case_id", "model_calls").equals(
        analysis.runs.runs.select("run_id", "case_id", "model_calls")
    )
    attrs = [a for row in redacted.ingested.spans.column("attributes").to_pylist() for a in row]
    by_key = {a["key"]: a["str"] for a in attrs if a["str"] is not None}
    assert by_key["gen_ai.operation.name"] in ("chat", "execute_tool", "invoke_agent")
    assert TOKEN_RE.fullmatch(by_key["gen_ai.tool.call.arguments"] or "") or by_key[
        "gen_ai.tool.call.arguments"
    ].startswith("{")


def test_partitioned_report_redacts_the_same(tmp_path: Path):
    whole, _, _ = _report(tmp_path / "whole", "kyc", "--redact-salt", SALT, "--partitions", "0")
    parts, _, _ = _report(tmp_path / "parts", "kyc", "--redact-salt", SALT, "--partitions", "2")
    assert (parts / "findings.jsonl").read_text() == (whole / "findings.jsonl").read_text()
    steps = pq.read_table(parts / "steps.parquet").to_pylist()
    assert "ACC-55120" not in json.dumps(steps)
    assert any(Redactor(SALT).token("ACC-55120") in (s["arguments"] or "") for s in steps)
