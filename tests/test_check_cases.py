"""One generic runner for the per-rule-type case files in tests/checks/*.yaml.

A case file holds a rule pack (``pack:``) and runs described compactly (``runs:``); each run
lists its steps and the findings expected, in order. All the runs of a file go into one
RunSet and are checked together, as the real batch does.

Steps (times in ns, each step starts 1 after the previous one ended unless ``at`` is given,
``dur`` defaults to 10):

- ``model`` or ``{model: {...}}``: a model call that asks for tools (finish reason
  tool_calls); labels m1, m2, ... count every model call; ``{model: {content: false}}``
  records no output content.
- ``{tool: NAME, args: {...} | "raw", result, status, requested_only}``: a tool call, labels
  t1, t2, ...; ``requested_only: true`` makes it a call the previous model call requested and
  that never ran (its evidence is that model call); ``id`` is the tool span's call id and
  ``requested: ID`` records that the previous model call requested it under that id.
- ``{answer: TEXT}``: the final model call with that output; ``answer: null`` records no
  content.

Any step also takes ``status`` (error: a failed call), ``resend`` (its
``http.request.resend_count``) and ``tool_defs`` (the tool definitions the span recorded, a list
of ``{name, parameters}``).

Model calls (``model`` and ``answer`` steps) record as input messages the run's ``input`` and
their own ``{model: {input: ...}}``: a text (one user message) or a list of ``{role: text}``
(a tool message may add ``id``, the call it answers); without any, a run has no message source
(as when content capture is off).

Run keys: ``name``, ``attrs`` (root span attributes), ``agent``, ``agent_output``, ``input``,
``duration_s`` (the agent span's length), ``cost_usd`` (added as the runs' cost column),
``findings`` (rule, kind, tool, argument, detail, spans as labels; rule defaults to the only
rule), ``coverage`` ({rule: status}; default: every rule that applies says checked),
``errors`` ([{rule, error}] check errors expected).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from factories import call, msg, tables

from analyzer.checks import REGISTRY, evaluate
from analyzer.pack import pack_from_mapping
from analyzer.runs import build_runs

CASES = Path(__file__).parent / "checks"


def _case_files() -> list[Path]:
    return sorted(CASES.glob("*.yaml"))


def _messages(given: Any) -> list[dict[str, Any]]:
    """Input messages from a case: a text (one user message) or a list of {role: text} (a tool
    message may add ``id``: the call it answers)."""
    if given is None:
        return []
    if isinstance(given, str):
        return [msg("user", given)]
    out = []
    for item in given:
        fields = dict(item)
        call_id = fields.pop("id", None)
        ((role, text),) = fields.items()
        out.append(msg(role, text, call_id))
    return out


def _run_rows(index: int, run: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    trace = f"{index + 1:032x}"
    agent_span = f"{index + 1:08x}{0:08x}"
    labels = {"agent": agent_span}
    rows: list[dict[str, Any]] = []
    clock = 10
    counts = {"m": 0, "t": 0}
    last_model: dict[str, Any] | None = None
    for raw in run["steps"]:
        step = {"model": {}} if raw == "model" else dict(raw)
        start = step.get("at", clock)
        end = start + step.get("dur", 10)
        base = dict(
            trace_id=trace,
            parent_span_id=agent_span,
            start_ns=start,
            end_ns=end,
            status=step.get("status", "unset"),
        )
        if "tool" in step and step.get("requested_only"):
            assert last_model is not None, "requested_only needs a model step before it"
            args = step.get("args")
            args = args if isinstance(args, str) or args is None else json.dumps(args)
            last_model["requested_calls"].append(call(step["tool"], args))
            counts["t"] += 1
            labels[step.get("label", f"t{counts['t']}")] = last_model["span_id"]
            continue
        kind = "t" if "tool" in step else "m"
        counts[kind] += 1
        span = f"{index + 1:08x}{len(rows) + 1:08x}"
        labels[step.get("label", f"{kind}{counts[kind]}")] = span
        if "tool" in step:
            args = step.get("args")
            row = dict(
                base,
                span_id=span,
                role="tool_call",
                tool_name=step["tool"],
                tool_call_id=step.get("id"),
                arguments=args if isinstance(args, str) or args is None else json.dumps(args),
                result=step.get("result"),
            )
            if "requested" in step:
                assert last_model is not None, "requested needs a model step before it"
                last_model["requested_calls"].append(
                    call(step["tool"], row["arguments"] or "{}", step["requested"])
                )
        else:
            options = step.get("model") or {}
            row = dict(base, span_id=span, role="model_call", model="test-model")
            tokens = step.get(
                "tokens", options.get("tokens") if isinstance(options, dict) else None
            )
            if tokens:
                row.update(input_tokens=tokens[0], output_tokens=tokens[1])
            given = options.get("input") if isinstance(options, dict) else None
            messages = _messages(run.get("input")) + _messages(given)
            if messages:  # what the call was given: sources from its start
                row["input_messages"] = messages
            if "answer" in step:
                row.update(output_text=step["answer"], finish_reasons=["stop"])
                if step["answer"] is None:
                    row["has_content"] = False
            else:
                row.update(finish_reasons=["tool_calls"], requested_calls=[])
                if isinstance(options, dict) and options.get("content") is False:
                    row["has_content"] = False  # output not recorded: its requests unknown
                last_model = row
        if "resend" in step:  # HTTP resends recorded on the span
            row["http_resend_count"] = step["resend"]
        if "tool_defs" in step:  # tools offered, as the normalizer writes them
            row["tool_definitions"] = json.dumps(step["tool_defs"], sort_keys=True)
        rows.append(row)
        clock = end + 1
    agent_end = max([r["end_ns"] for r in rows] + [0]) + 5
    if "duration_s" in run:
        agent_end = int(run["duration_s"] * 1e9)
    agent = dict(
        trace_id=trace,
        span_id=agent_span,
        role="agent",
        start_ns=0,
        end_ns=agent_end,
        agent_name=run.get("agent", "test-agent"),
        attrs=run.get("attrs", {}),
        output_text=run.get("agent_output"),
    )
    return [agent, *rows], labels


@cache
def _evaluate(path: Path):
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    rows: list[dict[str, Any]] = []
    labels: dict[str, dict[str, str]] = {}
    run_ids: dict[str, str] = {}
    costs: dict[str, float] = {}
    for i, run in enumerate(data["runs"]):
        run_rows, run_labels = _run_rows(i, run)
        rows.extend(run_rows)
        run_ids[run["name"]] = run_rows[0]["trace_id"]
        labels[run["name"]] = run_labels
        if "cost_usd" in run:
            costs[run_rows[0]["trace_id"]] = run["cost_usd"]
    runset = build_runs(*tables(rows))
    if costs:
        runset.runs = runset.runs.with_columns(
            cost_usd=pl.col("run_id").replace_strict(costs, default=None, return_dtype=pl.Float64)
        )
    pack = pack_from_mapping(
        data["pack"], source=path, allow_plugins=data.get("allow_plugins", False)
    )
    return data, pack, run_ids, labels, evaluate([pack], runset)


def _cases() -> list[Any]:
    out = []
    for path in _case_files():
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        out.extend(
            pytest.param(path, run["name"], id=f"{path.stem}:{run['name']}") for run in data["runs"]
        )
    return out


@pytest.mark.parametrize(("path", "name"), _cases())
def test_case(path: Path, name: str) -> None:
    data, pack, run_ids, labels, result = _evaluate(path)
    run = next(r for r in data["runs"] if r["name"] == name)
    run_id = run_ids[name]
    by_span: dict[str, str] = {}
    for label, span in labels[name].items():  # a requested-only call shows as its model call
        by_span.setdefault(span, label)
    rules = {r.id: r for r in pack.rules}
    only = next(iter(rules)) if len(rules) == 1 else None

    found = result.findings.filter(pl.col("run_id") == run_id)
    actual = [
        {
            "rule": f["rule_id"],
            "kind": f["kind"],
            "tool": f["tool"],
            "argument": f["argument"],
            "detail": f["detail"],
            "spans": [by_span.get(s, s) for s in f["span_ids"]],
        }
        for f in found.iter_rows(named=True)
    ]
    expected = [
        {
            "rule": f.get("rule", only),
            "kind": f["kind"],
            "tool": f.get("tool"),
            "argument": f.get("argument"),
            "detail": f["detail"],
            "spans": f.get("spans", []),
        }
        for f in run.get("findings") or []
    ]
    assert actual == expected

    for f in found.iter_rows(named=True):
        assert f["severity"] == rules[f["rule_id"]].severity
        assert f["case_id"] == run.get("attrs", {}).get("app.case_id")
        assert f["pack"] == pack.name

    coverage = {
        r["rule_id"]: r["status"]
        for r in result.coverage.filter(pl.col("run_id") == run_id).iter_rows(named=True)
    }
    if "coverage" in run:
        assert coverage == run["coverage"]
    else:
        assert set(coverage.values()) <= {"checked"}

    errors = [{"rule": e.rule_id, "error": e.error} for e in result.errors if e.run_id == run_id]
    assert errors == run.get("errors", [])


def test_every_rule_type_has_a_case_file() -> None:
    assert {p.stem for p in _case_files()} >= set(REGISTRY)


@pytest.mark.parametrize("path", _case_files(), ids=lambda p: p.stem)
def test_case_files_hold_failing_passing_and_near_miss_runs(path: Path) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    runs = data["runs"]
    assert any(r.get("findings") for r in runs), "no failing run"
    assert any(not r.get("findings") for r in runs), "no passing run"
    assert any("near miss" in (r.get("why") or "") for r in runs), "no near miss"
    names = [r["name"] for r in runs]
    assert len(names) == len(set(names))
