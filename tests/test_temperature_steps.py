"""The seed method's fourth axis (temperature) and cost versus quality per step, in
summary.json and report.html (issue 35, point 2): hand-computed on seven small runs.

The runs (agent ``a``; a required_tools rule requires lookup and screen, severity high, so a
run omitting one is not correct; prices per million input tokens: m-small $1, m-big $10, m-x
unpriced; every call's cost = input tokens x price):

    run  case  temp  tools           answer  model calls (input tokens)
    r1   C1    0     lookup, screen  "Yes"   m-small 1000, m-small 2000
    r2   C1    0     lookup, screen  "yes "  m-small 1000, m-big 1000
    r3   C2    0     lookup          "No"    m-small 3000, m-big 2000      (omits screen)
    r4   C2    0     lookup, screen  "Maybe" m-small 1000, m-small 4000
    r5   C1    0.7   lookup, screen  "yes"   m-small 1000, m-big 3000
    r6   C3    0.7   screen          "a"     m-small 2000, m-small 1000    (omits lookup)
    r7   C3    0.7   lookup, screen  "A"     m-small 1000, m-small 1000, m-x 500
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from analyzer.cli import main
from analyzer.engine import analyze_paths
from analyzer.metrics.summary import build_summary
from analyzer.pack import load_packs
from analyzer.pricing import load_prices

ROOT = Path(__file__).resolve().parent.parent

RUNS = [
    ("r1", "C1", 0.0, ["lookup", "screen"], "Yes", [("m-small", 1000), ("m-small", 2000)]),
    ("r2", "C1", 0.0, ["lookup", "screen"], "yes ", [("m-small", 1000), ("m-big", 1000)]),
    ("r3", "C2", 0.0, ["lookup"], "No", [("m-small", 3000), ("m-big", 2000)]),
    ("r4", "C2", 0.0, ["lookup", "screen"], "Maybe", [("m-small", 1000), ("m-small", 4000)]),
    ("r5", "C1", 0.7, ["lookup", "screen"], "yes", [("m-small", 1000), ("m-big", 3000)]),
    ("r6", "C3", 0.7, ["screen"], "a", [("m-small", 2000), ("m-small", 1000)]),
    (
        "r7",
        "C3",
        0.7,
        ["lookup", "screen"],
        "A",
        [("m-small", 1000), ("m-small", 1000), ("m-x", 500)],
    ),
]


def _attr(key: str, value: str | int | float) -> dict:
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _span(trace: str, n: int, parent: str, name: str, start: int, attrs: dict) -> dict:
    return {
        "traceId": trace,
        "spanId": f"{n:016x}",
        "parentSpanId": parent,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + start * 1_000_000),
        "endTimeUnixNano": str(1_700_000_000_000_000_000 + (start + 5) * 1_000_000),
        "attributes": [_attr(k, v) for k, v in attrs.items()],
        "status": {},
    }


def _trace(i: int, case: str, temp: float, tools: list[str], answer: str, calls) -> dict:
    trace = f"{i + 1:032x}"
    root = f"{(i + 1) * 100:016x}"
    spans = [
        {
            **_span(trace, (i + 1) * 100, "", "invoke_agent a", 0, {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "a",
                "app.case_id": case,
            }),
            "endTimeUnixNano": str(1_700_000_000_000_000_000 + 1000 * 1_000_000),
        }
    ]  # fmt: skip
    n, t = (i + 1) * 100 + 1, 10
    # the first call, the tools, then the other calls (the last one answers)
    first, *rest = calls
    order = [("chat", first), *[("tool", name) for name in tools], *[("chat", c) for c in rest]]
    for pos, (what, item) in enumerate(order):
        if what == "tool":
            attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": item}
            spans.append(_span(trace, n, root, f"execute_tool {item}", t, attrs))
        else:
            model, tokens = item
            attrs = {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": model,
                "gen_ai.request.temperature": temp,
                "gen_ai.usage.input_tokens": tokens,
                "gen_ai.usage.output_tokens": 0,
            }
            if pos == len(order) - 1:
                attrs["gen_ai.output.messages"] = json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
                )
            spans.append(_span(trace, n, root, f"chat {model}", t, attrs))
        n, t = n + 1, t + 10
    return {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("temperature")
    traces = folder / "traces"
    traces.mkdir()
    lines = [json.dumps(_trace(i, *run[1:])) for i, run in enumerate(RUNS)]
    (traces / "a.jsonl").write_text("\n".join(lines[:4]) + "\n")
    (traces / "b.jsonl").write_text("\n".join(lines[4:]) + "\n")
    (folder / "pack.yaml").write_text(
        "pack: p\nrules:\n  - {id: req, type: required_tools, tools: [lookup, screen], "
        "severity: high}\n"
    )
    (folder / "prices.yaml").write_text(
        'currency: USD\nas_of: "2026-12-01"\nmodels:\n'
        "  - {model: m-small, match: '^m-small$', input: 1.0, output: 0.0, cached_input: 0.0}\n"
        "  - {model: m-big, match: '^m-big$', input: 10.0, output: 0.0, cached_input: 0.0}\n"
    )
    return {
        "traces": traces,
        "packs": tuple(load_packs([folder / "pack.yaml"])),
        "prices": load_prices(folder / "prices.yaml"),
        "pack": folder / "pack.yaml",
        "prices_path": folder / "prices.yaml",
    }


@pytest.fixture(scope="module")
def summary(inputs) -> dict:
    analysis = analyze_paths([inputs["traces"]], packs=inputs["packs"], prices=inputs["prices"])
    assert analysis.runs.runs.height == 7
    return build_summary(analysis)


def _wilson(k: int, n: int) -> tuple[float, float]:
    from analyzer.metrics.stats import wilson

    lo, hi = wilson(k, n)
    return round(lo, 9), round(hi, 9)


def _rate(k: int, n: int) -> dict:
    lo, hi = _wilson(k, n)
    return {"k": k, "n": n, "rate": round(k / n, 9), "lo": lo, "hi": hi}


def test_omission_rate_per_temperature(summary):
    # at 0: r1-r4 required both tools; r3 omitted screen: lookup 0/4, screen 1/4. At 0.7:
    # r5-r7; r6 omitted lookup: lookup 1/3, screen 0/3. Over all temperatures: 1/7 each.
    rows = summary["metrics"]["temperature"]["omission_rates"]
    got = [(r["temperature"], r["tool"], r["required_runs"], r["omitted_runs"]) for r in rows]
    assert got == [
        (0.0, "lookup", 4, 0),
        (0.0, "screen", 4, 1),
        (0.7, "lookup", 3, 1),
        (0.7, "screen", 3, 0),
    ]
    assert rows[1]["rate"] == 0.25 and (rows[1]["rate_lo"], rows[1]["rate_hi"]) == _wilson(1, 4)
    # near miss: the overall rates are not those of either temperature
    overall = [(r["tool"], r["required_runs"], r["omitted_runs"]) for r in summary["metrics"][
        "omission_rates"]]  # fmt: skip
    assert overall == [("lookup", 7, 1), ("screen", 7, 1)]


def test_trial_disagreement_per_temperature(summary):
    # at 0: C1 (r1 "Yes", r2 "yes ": same once folded; same tools) and C2 (r3 "No" lookup,
    # r4 "Maybe" lookup+screen: both differ): answers 1/2, trajectories 1/2. At 0.7: C3 (r6 "a"
    # screen, r7 "A" lookup+screen): answers 0/1, trajectories 1/1; C1 has one run at 0.7
    # (r5): not a case with trials there, though it has three trials over all temperatures.
    rows = summary["metrics"]["temperature"]["disagreement"]
    assert rows == [
        {
            "temperature": 0.0,
            "cases_with_trials": 2,
            "runs": 4,
            "answers": _rate(1, 2),
            "trajectories": _rate(1, 2),
        },
        {
            "temperature": 0.7,
            "cases_with_trials": 1,
            "runs": 2,
            "answers": _rate(0, 1),
            "trajectories": _rate(1, 1),
        },
    ]
    # near miss: over all temperatures, C1 (r1, r2, r5) agrees, C2 disagrees, C3 agrees
    trials = summary["metrics"]["trials"]
    assert trials["cases_with_trials"] == 3
    assert trials["disagreement"]["answers"] == _rate(1, 3)


def test_temperature_breakdown_gives_correct_rate_and_cost(summary):
    # correct: no high finding. At 0: r3 omits a tool -> 3/4; at 0.7: r6 -> 2/3 (r7 unpriced)
    rows = {r["group"]: r for r in summary["metrics"]["breakdowns"]["temperature"]}
    assert (rows[0.0]["runs"], rows[0.0]["passed_runs"]) == (4, 3)
    assert (rows[0.7]["runs"], rows[0.7]["passed_runs"]) == (3, 2)
    # r1 0.003, r2 0.011, r3 0.023, r4 0.005
    assert rows[0.0]["total_cost_usd"] == 0.042


def test_cost_and_quality_per_step(summary):
    steps = summary["metrics"]["steps"]
    key = [(r["agent"], r["step"], r["model"]) for r in steps]
    assert key == [("a", 1, "m-small"), ("a", 2, "m-big"), ("a", 2, "m-small"), ("a", 3, "m-x")]
    small1, big2, small2, x3 = steps
    # step 1: every run's first call, m-small: 0.001 x5, 0.002 (r6), 0.003 (r3); mean 0.01/7;
    # p95: h = 6 x 0.95 = 5.7 -> 0.002 + 0.7 x 0.001 = 0.0027. Correct: all but r3, r6.
    assert small1 == {
        "agent": "a",
        "step": 1,
        "model": "m-small",
        "calls": 7,
        "priced_calls": 7,
        "mean_cost_usd": round(0.01 / 7, 9),
        "p95_cost_usd": 0.0027,
        "runs": 7,
        "judged_runs": 7,
        "correct_runs": 5,
        "correct_rate": round(5 / 7, 9),
        "correct_rate_lo": _wilson(5, 7)[0],
        "correct_rate_hi": _wilson(5, 7)[1],
    }
    # step 2 on m-big: r2 0.01, r3 0.02, r5 0.03; mean 0.02, p95 h = 1.9 -> 0.029; r3 wrong
    assert (big2["calls"], big2["mean_cost_usd"], big2["p95_cost_usd"]) == (3, 0.02, 0.029)
    assert (big2["runs"], big2["correct_runs"], big2["correct_rate"]) == (3, 2, 0.666666667)
    # step 2 on m-small: r1 0.002, r4 0.004, r6 0.001, r7 0.001: mean 0.002; p95 h = 2.85 ->
    # 0.002 + 0.85 x 0.002 = 0.0037; r6 wrong
    assert (small2["calls"], small2["mean_cost_usd"], small2["p95_cost_usd"]) == (4, 0.002, 0.0037)
    assert (small2["runs"], small2["correct_runs"]) == (4, 3)
    # step 3: r7's unpriced call: no cost, its run correct
    assert (x3["calls"], x3["priced_calls"], x3["mean_cost_usd"], x3["p95_cost_usd"]) == (
        1, 0, None, None,
    )  # fmt: skip
    assert (x3["runs"], x3["correct_runs"], x3["correct_rate"]) == (1, 1, 1.0)


def test_a_step_is_a_position_among_model_calls_only(summary):
    # near miss: by position among all steps (tool calls included), r1's second call would be
    # step 4, r3's step 3; here every second model call is step 2, whatever the tools between
    assert {r["step"] for r in summary["metrics"]["steps"]} == {1, 2, 3}


def test_the_last_step_counts_the_later_calls_and_each_run_once(inputs, monkeypatch):
    from analyzer.metrics import steps as step_module

    monkeypatch.setattr(step_module, "STEP_CAP", 1)
    analysis = analyze_paths([inputs["traces"]], packs=inputs["packs"], prices=inputs["prices"])
    steps = build_summary(analysis)["metrics"]["steps"]
    # every call is step 1: m-small's 11 calls come from 7 runs (counted once each)
    got = [(r["step"], r["model"], r["calls"], r["runs"], r["correct_runs"]) for r in steps]
    assert got == [(1, "m-big", 3, 3, 2), (1, "m-small", 11, 7, 5), (1, "m-x", 1, 1, 1)]


def test_partitioned_summaries_are_the_one_of_one_partition(inputs, summary):
    from analyzer.engine import analyze_paths

    for jobs in (1, 2):
        analysis = analyze_paths(
            [inputs["traces"]], partitions=2, jobs=jobs, packs=inputs["packs"],
            prices=inputs["prices"],
        )  # fmt: skip
        assert analysis.facts is not None and len(analysis.facts.parts) == 2
        assert build_summary(analysis) == summary


def test_samples_in_memory_and_partitioned_agree():
    samples = str(ROOT / "sample_traces")
    out = []
    for extra in ([], ["--partitions", "2"]):
        result = CliRunner().invoke(
            main, ["report", samples, "--rules", "kyc", "--format", "json", *extra]
        )
        assert result.exit_code == 0, result.output
        out.append(json.loads(result.output))
    assert out[0] == out[1]
    metrics = out[0]["metrics"]
    temperatures = {r["temperature"] for r in metrics["temperature"]["omission_rates"]}
    assert temperatures == {0.0, 0.7}  # the samples run at two temperatures
    assert metrics["steps"] and all(r["runs"] <= r["calls"] for r in metrics["steps"])


def test_report_html_shows_both(inputs):
    result = CliRunner().invoke(
        main,
        [
            "report", str(inputs["traces"]), "--rules", str(inputs["pack"]),
            "--prices", str(inputs["prices_path"]), "--format", "html",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    page = result.output
    assert '<section id="temperature">' in page and '<section id="steps">' in page
    assert 'href="#temperature"' in page and 'href="#steps"' in page
    assert "Tool omissions per temperature" in page
    assert "Cost and quality per step and model" in page
    assert "5 of 7 (71.4%)" in page  # step 1 on m-small
    assert "$0.00143 / $0.00270" in page  # its mean / p95 cost of a call
    assert "1 of 2 (50.0%; " in page  # answers disagreeing at temperature 0


def test_steps_render_escaped():
    from analyzer.render.html import _steps

    row = {
        "agent": "<script>x</script>",
        "step": 1,
        "model": "<img src=x>",
        "calls": 2,
        "priced_calls": 1,
        "mean_cost_usd": 0.5,
        "p95_cost_usd": 0.5,
        "runs": 2,
        "judged_runs": 2,
        "correct_runs": 1,
        "correct_rate": 0.5,
        "correct_rate_lo": 0.1,
        "correct_rate_hi": 0.9,
    }
    out = _steps({"metrics": {"steps": [row]}})
    assert "<script>x" not in out and "<img src" not in out
    assert "&lt;script&gt;" in out and "(1 unpriced)" in out


def test_steps_judge_runs_by_the_labels_when_given():
    """With labels, "correct" is the labels' (metrics.methods.correct): every run has a first
    model call, so the step-1 rows add up to the labelled runs and those all right."""
    from analyzer.metrics.labels import load_labels

    analysis = analyze_paths([ROOT / "sample_traces" / "kyc"], packs=tuple(load_packs(["kyc"])))
    metrics = build_summary(analysis, load_labels(ROOT / "rules" / "kyc-labels.jsonl"))["metrics"]
    first = [r for r in metrics["steps"] if r["step"] == 1]
    (agent,) = metrics["breakdowns"]["agent"]
    assert sum(r["judged_runs"] for r in first) == agent["label_runs"] == 16
    assert sum(r["correct_runs"] for r in first) == agent["label_correct_runs"] == 13


def test_steps_of_runs_with_no_priced_call():
    """Calls with no cost (an unpriced model) still count; no priced call is no error."""
    from analyzer.metrics.steps import step_rows

    frame = pl.DataFrame(
        {
            "agent": ["a", "a"],
            "call_models": [["m"], ["m", "m"]],
            "call_costs": [[None], [None, None]],
            "correct": [True, False],
        },
        schema={
            "agent": pl.String,
            "call_models": pl.List(pl.String),
            "call_costs": pl.List(pl.Float64),
            "correct": pl.Boolean,
        },
    )
    rows = step_rows(frame)
    assert [(r["step"], r["calls"], r["priced_calls"], r["runs"]) for r in rows] == [
        (1, 2, 0, 2),
        (2, 1, 0, 1),
    ]
