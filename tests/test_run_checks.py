"""The check runner: findings frame, ordering, crash isolation, coverage, capped answers."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl
import pytest
from factories import tables

import analyzer.checks as checks
from analyzer.checks import FINDING_SCHEMA, evaluate
from analyzer.checks.base import Check, CheckContext, RunFinding
from analyzer.pack import Pack, pack_from_mapping
from analyzer.runs import ANSWER_CAP, build_runs


def one_run(index: int, answer: str | None, *, tools=(), agent_output=None, case=None):
    trace = f"{index:032x}"
    agent = f"{index:08x}{0:08x}"
    rows = [
        dict(
            trace_id=trace,
            span_id=agent,
            role="agent",
            start_ns=0,
            end_ns=1000,
            output_text=agent_output,
            attrs={"app.case_id": case} if case else {},
        )
    ]
    t = 10
    for n, tool in enumerate(tools, start=1):
        rows.append(
            dict(
                trace_id=trace,
                span_id=f"{index:08x}{n:08x}",
                parent_span_id=agent,
                role="tool_call",
                tool_name=tool,
                start_ns=t,
                end_ns=t + 5,
            )
        )
        t += 10
    rows.append(
        dict(
            trace_id=trace,
            span_id=f"{index:08x}{99:08x}",
            parent_span_id=agent,
            role="model_call",
            start_ns=t,
            end_ns=t + 5,
            output_text=answer,
            finish_reasons=["stop"],
        )
    )
    return rows


def runset(*runs):
    return build_runs(*tables([row for rows in runs for row in rows]))


def pack(name, *rules) -> Pack:
    return pack_from_mapping({"pack": name, "rules": list(rules)})


def test_findings_frame_has_the_contract_columns_and_case_ids():
    rs = runset(one_run(1, "ok", tools=["b"], case="K-9"), one_run(2, "ok", tools=["a"]))
    result = evaluate([pack("p", {"id": "allowed", "type": "allowed_tools", "tools": ["a"]})], rs)
    found = result.findings
    assert result.errors == []
    assert found.schema == pl.Schema(FINDING_SCHEMA)
    assert found.rows(named=True) == [
        dict(
            run_id=f"{1:032x}",
            rule_id="allowed",
            kind="wrong_tool",
            severity="medium",
            tool="b",
            argument=None,
            detail="b is not an allowed tool (tool call 1; allowed: a)",
            span_ids=[f"{1:08x}{1:08x}"],
            case_id="K-9",
            pack="p",
        )
    ]


def test_no_pack_gives_empty_frames_with_their_schemas():
    result = evaluate([], runset(one_run(1, "ok")))
    assert result.findings.schema == pl.Schema(FINDING_SCHEMA)
    assert result.findings.height == 0 and result.coverage.height == 0 and result.errors == []


def test_order_is_by_run_then_rule_whatever_the_pack_order():
    rs = runset(one_run(2, "— x", tools=["z"]), one_run(1, "—", tools=["z"]))
    a = pack("a", {"id": "b-rule", "type": "forbidden_text", "patterns": ["—"]})
    b = pack("b", {"id": "a-rule", "type": "allowed_tools", "tools": ["y"]})
    first = evaluate([a, b], rs).findings
    assert first.equals(evaluate([b, a], rs).findings)
    assert first.select("run_id", "rule_id").rows() == [
        (f"{1:032x}", "a-rule"),
        (f"{1:032x}", "b-rule"),
        (f"{2:032x}", "a-rule"),
        (f"{2:032x}", "b-rule"),
    ]


def test_answer_longer_than_the_cap_is_read_in_full_from_the_model_output():
    long = "x" * (ANSWER_CAP + 500) + " — end"
    rs = runset(one_run(1, long))
    assert len(rs.runs.get_column("answer")[0]) == ANSWER_CAP
    result = evaluate([pack("p", {"id": "t", "type": "forbidden_text", "patterns": ["—"]})], rs)
    assert result.findings.get_column("detail").to_list() == ["'—' found 1 time in the answer"]
    assert result.coverage.get_column("status").to_list() == ["checked"]


def test_capped_agent_output_that_the_steps_do_not_hold_is_unverifiable():
    rs = runset(one_run(1, "short", agent_output="y" * (ANSWER_CAP + 1)))
    result = evaluate([pack("p", {"id": "t", "type": "forbidden_text", "patterns": ["—"]})], rs)
    assert result.findings.height == 0
    assert result.coverage.row(0, named=True)["status"] == "unverifiable"
    assert result.coverage.row(0, named=True)["reason"] == (
        f"answer longer than {ANSWER_CAP} characters and its full text was not kept"
    )


@dataclass(frozen=True, kw_only=True)
class AlwaysFails(Check):
    """Crashes on any batch."""

    def check(self, ctx: CheckContext) -> pl.DataFrame:
        raise RuntimeError(f"bad luck with {ctx.runs.height} runs")


@dataclass(frozen=True, kw_only=True)
class ReturnsAList(Check):
    """Returns the wrong type: a list, but of dicts (a list of frames is fine)."""

    def check(self, ctx: CheckContext):
        return [{"run_id": "x"}]


def test_a_plugin_s_mapping_findings_are_placed_by_their_pos():
    rule = {"id": "ranked", "type": "plugin_example:Ranked"}
    p = pack_from_mapping({"pack": "p", "rules": [rule]}, allow_plugins=True)
    findings = evaluate([p], runset(one_run(1, "a"))).findings
    assert findings.get_column("kind").to_list() == ["zulu", "alpha"]


def test_a_check_crashing_everywhere_is_isolated_to_single_runs():
    rs = runset(one_run(1, "a"), one_run(2, "b"), one_run(3, "c"))
    p = Pack(name="p", rules=(AlwaysFails(id="boom"),))
    result = evaluate([p], rs)
    assert [(e.run_id[-1], e.error) for e in result.errors] == [
        ("1", "RuntimeError: bad luck with 1 runs"),
        ("2", "RuntimeError: bad luck with 1 runs"),
        ("3", "RuntimeError: bad luck with 1 runs"),
    ]
    assert result.errors[0].location.startswith("test_run_checks.py:")
    assert result.coverage.get_column("status").to_list() == ["error"] * 3


def test_isolation_stops_at_its_budget_and_says_so(monkeypatch):
    monkeypatch.setattr(checks, "_ISOLATION_BUDGET", 1)
    rs = runset(one_run(1, "a"), one_run(2, "b"))
    result = evaluate([Pack(name="p", rules=(AlwaysFails(id="boom"),))], rs)
    assert [e.error for e in result.errors] == [
        "RuntimeError: bad luck with 2 runs [failed on a batch of 2 runs, not isolated further]"
    ] * 2


def test_a_check_returning_the_wrong_type_is_a_check_error():
    result = evaluate([Pack(name="p", rules=(ReturnsAList(id="w"),))], runset(one_run(1, "a")))
    assert [e.error for e in result.errors] == [
        "TypeError: check returned dict, not a polars DataFrame"
    ]
    assert result.findings.height == 0


def test_check_errors_do_not_stop_other_rules():
    rs = runset(one_run(1, "a", tools=["z"]))
    p = Pack(name="p", rules=(AlwaysFails(id="boom"),))
    q = pack("q", {"id": "allowed", "type": "allowed_tools", "tools": ["a"]})
    result = evaluate([p, q], rs)
    assert result.findings.get_column("rule_id").to_list() == ["allowed"]
    assert [e.rule_id for e in result.errors] == ["boom"]


@pytest.mark.parametrize("status", ["nonsense"])
def test_unknown_coverage_status_is_a_bug_not_a_mark(status):
    ctx = CheckContext(checks._Shared(runset(one_run(1, "a"))), None)
    with pytest.raises(ValueError, match="unknown coverage status"):
        ctx.mark(["x"], status, "why")


def test_output_schema_without_jsonschema_rs_gives_the_same_findings(tmp_path, monkeypatch):
    import analyzer.checks.output_schema as output_schema

    (tmp_path / "s.json").write_text(
        '{"type": "object", "required": ["decision"], '
        '"properties": {"decision": {"enum": ["approve", "reject"]}}}'
    )
    rs = runset(
        one_run(1, '{"decision": "approve"}'),
        one_run(2, '{"decision": "maybe"}'),
        one_run(3, "approve"),
    )
    rule = {"id": "v", "type": "output_schema", "schema": str(tmp_path / "s.json")}
    fast = evaluate([pack("p", rule)], rs).findings
    monkeypatch.setattr(output_schema, "jsonschema_rs", None)
    slow_pack = pack("p", rule)
    assert slow_pack.rules[0].validator.fast is None
    slow = evaluate([slow_pack], rs).findings
    same = ["run_id", "kind", "argument", "span_ids"]
    assert slow.select(same).equals(fast.select(same))
    assert fast.get_column("detail").to_list() == [
        'answer fails the schema at $.decision: "maybe" is not one of "approve" or "reject"',
        "answer is not JSON (Expecting value at char 0): 'approve'",
    ]
    assert slow.get_column("detail").to_list() == [
        "answer fails the schema at $.decision: 'maybe' is not one of ['approve', 'reject']",
        "answer is not JSON (Expecting value at char 0): 'approve'",
    ]


@dataclass(frozen=True, kw_only=True)
class PerAnswer(Check):
    """Flags answers equal to 'flag', crashes on 'bad', once per distinct answer."""

    def check(self, ctx: CheckContext) -> pl.DataFrame:
        calls: list[str] = []

        def judge(text: str):
            calls.append(text)
            if text == "bad":
                raise KeyError(text)
            return [RunFinding("flagged", f"answer is {text}")] if text == "flag" else []

        out = ctx.each_distinct(ctx.mark_answers(), "text", judge, evidence="answer_span_id")
        assert sorted(calls) == ["bad", "flag", "ok"]  # each distinct text once
        return out


def test_each_distinct_judges_a_value_once_and_isolates_the_values_that_crash():
    rs = runset(
        one_run(1, "flag"),
        one_run(2, "bad"),
        one_run(3, "flag"),
        one_run(4, "bad"),
        one_run(5, "ok"),
    )
    result = evaluate([Pack(name="p", rules=(PerAnswer(id="d"),))], rs)
    assert result.findings.select("run_id", "detail", "span_ids").rows() == [
        (f"{1:032x}", "answer is flag", [f"{1:08x}{99:08x}"]),
        (f"{3:032x}", "answer is flag", [f"{3:08x}{99:08x}"]),
    ]
    assert [(e.run_id, e.error) for e in result.errors] == [
        (f"{2:032x}", "KeyError: 'bad'"),
        (f"{4:032x}", "KeyError: 'bad'"),
    ]
    assert result.coverage.get_column("status").to_list() == [
        "checked",
        "error",
        "checked",
        "error",
        "checked",
    ]


@pytest.mark.parametrize("kinds", [5, 70])
def test_each_runs_reasons_are_its_distinct_reasons_sorted_and_joined(kinds: int) -> None:
    reasons = [f"reason {k:02d}" for k in range(kinds)]
    rows = []
    for run in range(300):
        picked = {reasons[(run * 7 + j) % kinds] for j in range(run % 4)}
        rows += [(f"r{run:03d}", "partial", reason) for reason in sorted(picked, reverse=True) * 2]
        if run % 5 == 0:
            rows.append((f"r{run:03d}", "partial", None))
    marks = pl.DataFrame(rows, schema=["run_id", "status", "reason"], orient="row")
    ids = marks.select("run_id").unique()
    got = checks._coverage(ids, [marks], []).sort("run_id")
    expected = {}
    for run_id, _, reason in rows:
        expected.setdefault(run_id, set())
        if reason is not None:
            expected[run_id].add(reason)
    assert got.get_column("status").unique().to_list() == ["partial"]
    assert dict(zip(got["run_id"], got["reason"], strict=True)) == {
        run: "; ".join(sorted(found)) for run, found in expected.items()
    }
