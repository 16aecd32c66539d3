"""Price tables: validation messages, model-name matching, step and run costs, unpriced models."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from analyzer.errors import AgentTraceError, PriceTableError
from analyzer.pricing import (
    NO_MODEL_CALL,
    apply_prices,
    load_prices,
    match_models,
    price_runs,
    price_steps,
    prices_from_mapping,
    unpriced_models,
)

ROOT = Path(__file__).resolve().parents[1]
REAL_TRACES = Path("/work/shared/real-traces")


def _table(*models: dict) -> object:
    return prices_from_mapping({"currency": "USD", "as_of": "2026-11-01", "models": list(models)})


def _priced_as(names: list[str], table) -> dict[str, str | None]:
    return dict(match_models(names, table).select("model", "priced_as").iter_rows())


# --- the bundled table ------------------------------------------------------------------------


def test_bundled_table_is_dated_usd():
    table = load_prices(None)
    assert table.currency == "USD"
    assert table.as_of == "2026-12-02"
    assert table.source == "<built-in rules/prices.yaml>"
    assert table.models.height == 38
    assert len(table.sha256 or "") == 64


# Every model name seen in sample_traces and /work/shared/real-traces, and what prices it.
SEEN = {
    "gpt-4.1": "gpt-4.1",
    "gpt-4.1-2025-04-14": "gpt-4.1",
    "gpt-4.1-mini-2025-04-14": "gpt-4.1-mini",
    "gpt-4o-mini-2024-07-18": "gpt-4o-mini",
    "mistral/mistral-small-latest": "mistral-small-latest",
    "claude-sonnet-4-5-20250929": "claude-sonnet-4-5",
    "gemini-2.0-flash": "gemini-2.0-flash",
    "gpt-5-mini-2025-08-07": "gpt-5-mini",
    "gpt-5-2025-08-07": "gpt-5",
}


def test_every_model_seen_in_the_sample_and_real_traces_is_priced():
    assert _priced_as(list(SEEN), load_prices(None)) == SEEN


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # provider prefixes and dated snapshots
        ("openai/gpt-4.1", "gpt-4.1"),
        ("azure/gpt-4o-2024-08-06", "gpt-4o"),
        ("openrouter/openai/gpt-4.1-nano", "gpt-4.1-nano"),
        ("GPT-4.1-Mini", "gpt-4.1-mini"),  # case-insensitive
        (" gpt-4o ", "gpt-4o"),  # surrounding spaces ignored
        ("gpt-5-chat-latest", "gpt-5"),
        ("gpt-5-nano-2025-08-07", "gpt-5-nano"),
        ("o3-2025-04-16", "o3"),
        ("o3-mini", "o3-mini"),
        ("o4-mini-2025-04-16", "o4-mini"),
        ("anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
        ("anthropic.claude-3-5-sonnet-20240620-v1:0", "claude-3-5-sonnet"),
        ("claude-3-7-sonnet-latest", "claude-3-7-sonnet"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-haiku-4-5", "claude-haiku-4-5"),
        ("models/gemini-2.0-flash", "gemini-2.0-flash"),
        ("gemini-2.0-flash-001", "gemini-2.0-flash"),
        ("gemini-2.5-flash-lite", "gemini-2.5-flash-lite"),
        ("mistral-large-2411", "mistral-large-2411"),
        # the exact name of the first gpt-4o snapshot wins over the gpt-4o pattern
        ("gpt-4o-2024-05-13", "gpt-4o-2024-05-13"),
        # near misses: a sibling model is never priced as its neighbour
        ("gpt-4.10", None),
        ("gpt-4.1-2025-04", None),
        ("gpt-4.1-mini-x", None),
        ("gpt-5-pro", None),
        ("claude-sonnet-4-7", None),
        ("gemini-2.5-flash-preview-05-20", None),
        ("o3-pro", None),
        ("llama-3.1-70b", None),
    ],
)
def test_bundled_patterns(name, expected):
    assert _priced_as([name], load_prices(None)) == {name: expected}


def test_mistral_small_latest_is_priced_at_what_the_alias_points_to_on_as_of():
    table = load_prices(None)
    row = match_models(["mistral/mistral-small-latest", "mistral-small-2506"], table).rows()
    assert row == [
        ("mistral-small-2506", "mistral-small-2506", 0.10, 0.30, None),
        ("mistral/mistral-small-latest", "mistral-small-latest", 0.15, 0.60, None),
    ]


# --- matching rules ---------------------------------------------------------------------------


def test_exact_name_wins_over_an_earlier_pattern_and_first_pattern_wins():
    table = _table(
        {"model": "broad", "match": "^m", "input": 1, "output": 1},
        {"model": "m-special", "input": 2, "output": 2},
        {"model": "later", "match": "^m-", "input": 3, "output": 3},
    )
    assert _priced_as(["m-special", "m-other", "x"], table) == {
        "m-special": "m-special",  # exact, although `broad` (earlier) matches too
        "m-other": "broad",  # both patterns match: the first in file order
        "x": None,
    }


def test_the_same_names_are_priced_by_each_table_its_own_way():
    # the matches of the patterns are kept per process, by names and patterns
    names = ["acme-large-2", "acme-small-2", "other"]
    first = _table(
        {"model": "acme-large", "match": "^acme-large", "input": 1, "output": 2},
        {"model": "acme", "match": "^acme", "input": 3, "output": 4},
    )
    second = _table(
        {"model": "acme", "match": "^acme", "input": 3, "output": 4},
        {"model": "acme-large", "match": "^acme-large", "input": 1, "output": 2},
    )
    for _ in range(2):
        assert _priced_as(names, first) == {
            "acme-large-2": "acme-large",
            "acme-small-2": "acme",
            "other": None,
        }
        assert _priced_as(names, second) == {
            "acme-large-2": "acme",
            "acme-small-2": "acme",
            "other": None,
        }


def test_patterns_are_searched_not_anchored():
    table = _table({"model": "a", "match": "mini", "input": 1, "output": 1})
    assert _priced_as(["gpt-mini-x", "gpt-max"], table) == {"gpt-mini-x": "a", "gpt-max": None}


def test_match_models_ignores_nulls_and_duplicates_and_sorts():
    table = _table({"model": "b", "input": 1, "output": 2})
    out = match_models(["b", None, "a", "b"], table)
    assert out.get_column("model").to_list() == ["a", "b"]
    assert out.get_column("priced_as").to_list() == [None, "b"]


# --- costs ------------------------------------------------------------------------------------

TABLE = {
    "currency": "USD",
    "as_of": "2026-11-01",
    "models": [
        {"model": "m1", "input": 2.0, "output": 8.0, "cached_input": 0.5},
        {"model": "m2", "input": 1.0, "output": 4.0},  # no cached price: cached priced as input
    ],
}

_STEP_SCHEMA = {
    "run_id": pl.String,
    "index": pl.Int32,
    "kind": pl.String,
    "model": pl.String,
    "status": pl.String,
    "input_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "cached_input_tokens": pl.Int64,
    "recorded_cost_usd": pl.Float64,
}


def _steps() -> pl.DataFrame:
    rows = [
        # run, i, kind, model, status, in, out, cached, recorded
        ("r1", 0, "model_call", "m1", "ok", 1000, 100, 200, 0.9),
        ("r1", 1, "tool_call", None, "ok", None, None, None, None),
        ("r1", 2, "model_call", "m2", "ok", 300, 50, 100, None),
        ("r2", 0, "model_call", "unknown-x", "ok", 10, 10, None, None),
        ("r2", 1, "model_call", "m1", "ok", 1000, None, None, None),
        ("r3", 0, "model_call", "m1", "error", None, None, None, None),
        ("r4", 0, "model_call", "m1", "ok", None, None, None, None),
        ("r5", 0, "model_call", "m1", "ok", 100, 0, 300, None),
        ("r6", 0, "tool_call", None, "ok", None, None, None, None),
        ("r7", 0, "model_call", None, "ok", 5, 5, None, None),
        ("r8", 0, "model_call", "M1", "ok", 200, 0, 200, None),
    ]
    return pl.DataFrame(rows, schema=_STEP_SCHEMA, orient="row")


def test_price_steps_hand_computed():
    out = price_steps(_steps(), prices_from_mapping(TABLE))
    costs = out.get_column("cost_usd").to_list()
    expected = [
        # (1000 - 200) * 2 + 200 * 0.5 + 100 * 8 = 1600 + 100 + 800 = 2500 per 1e6
        0.0025,
        None,  # tool call
        # (300 - 100) * 1 + 100 * 1 (m2 has no cached price) + 50 * 4 = 500
        0.0005,
        None,  # unknown model
        0.002,  # output not recorded counts as 0: 1000 * 2
        0.0,  # failed call with no usage: not billed
        None,  # successful call with no usage: unknown
        # more cached (300) than input (100): input excludes the cache -> 100 * 2 + 300 * 0.5
        0.00035,
        None,  # tool call
        None,  # model name not recorded
        # cached == input (near miss of the rule above): 0 * 2 + 200 * 0.5 = 100
        0.0001,
    ]
    for got, want in zip(costs, expected, strict=True):
        assert (got is None) == (want is None)
        if want is not None:
            assert got == pytest.approx(want, abs=1e-15)
    assert out.get_column("priced_as").to_list() == [
        "m1", None, "m2", None, "m1", "m1", "m1", "m1", None, None, "m1",
    ]  # fmt: skip
    # Order, other columns and the span's own recorded cost are kept as they were.
    assert out.select(list(_STEP_SCHEMA)).equals(_steps())


def test_a_call_costs_the_same_bits_priced_alone_or_with_other_calls():
    # polars divides a column by a number as a product with its inverse for some frames and
    # exactly for others (45 / 1e6 is 4.5e-05 alone, 4.4999999999999996e-05 among others): a
    # partition holding one call must not price it otherwise than the whole input does
    steps = pl.concat([_steps()] * 40).with_columns(
        input_tokens=pl.int_range(0, 440, dtype=pl.Int64) * 7 + 3,
        output_tokens=pl.int_range(0, 440, dtype=pl.Int64) * 13 % 997,
    )
    table = prices_from_mapping(TABLE)
    together = price_steps(steps, table).get_column("cost_usd").to_list()
    alone = [price_steps(steps.slice(i, 1), table).get_column("cost_usd")[0] for i in range(440)]
    assert alone == together
    assert sum(c is not None for c in together) > 200


def test_price_runs_null_when_any_call_is_unknown_or_none_was_recorded():
    steps = price_steps(_steps(), prices_from_mapping(TABLE))
    runs = pl.DataFrame({"run_id": ["r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9"]})
    out = price_runs(runs, steps)
    assert out.get_column("run_id").to_list() == runs.get_column("run_id").to_list()
    assert dict(out.iter_rows()) == {
        "r1": pytest.approx(0.003),  # 0.0025 + 0.0005
        "r2": None,  # one call of an unknown model: never a partial sum
        "r3": 0.0,  # only a failed call without usage
        "r4": None,
        "r5": pytest.approx(0.00035),
        "r6": None,  # tool calls, no model call: the calls were not exported
        "r7": None,
        "r8": pytest.approx(0.0001),
        "r9": None,  # no steps
    }


def test_unpriced_models_lists_models_and_reasons_with_token_counts():
    steps = price_steps(_steps(), prices_from_mapping(TABLE))
    runs = pl.DataFrame({"run_id": ["r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9"]})
    out = unpriced_models(steps, runs)
    assert out.columns == [
        "model", "reason", "model_calls", "runs",
        "input_tokens", "output_tokens", "cached_input_tokens",
    ]  # fmt: skip
    assert out.rows() == [
        ("m1", "no token counts", 1, 1, 0, 0, 0),
        ("unknown-x", "no price", 1, 1, 10, 10, 0),
        (None, NO_MODEL_CALL, 0, 2, 0, 0, 0),  # r6 (tool calls only) and r9 (no step)
        (None, "no price", 1, 1, 5, 5, 0),
    ]
    # every run with a model call: no such row
    assert unpriced_models(steps, runs.filter(pl.col("run_id") == "r1")).height == 3


def test_price_steps_replaces_an_earlier_cost():
    once = price_steps(_steps(), prices_from_mapping(TABLE))
    twice = price_steps(once, prices_from_mapping(TABLE))
    assert twice.equals(once)


# --- loading and validation -------------------------------------------------------------------


def test_contract_example_loads(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text(
        "currency: USD\n"
        'as_of: "2026-11-01"\n'
        "models:\n"
        "  - {model: gpt-4.1-mini, input: 0.40, output: 1.60, cached_input: 0.10}\n"
        '  - {model: gpt-4.1, match: "^gpt-4\\\\.1(-\\\\d{4}-\\\\d{2}-\\\\d{2})?$", input: 2.00,'
        " output: 8.00}\n"
    )
    table = load_prices(path)
    assert table.as_of == "2026-11-01"
    assert table.models.rows() == [
        (0, "gpt-4.1-mini", None, 0.40, 1.60, 0.10),
        (1, "gpt-4.1", r"^gpt-4\.1(-\d{4}-\d{2}-\d{2})?$", 2.00, 8.00, None),
    ]
    assert _priced_as(["gpt-4.1-2025-04-14", "gpt-4.1-mini-2025-04-14"], table) == {
        "gpt-4.1-2025-04-14": "gpt-4.1",
        "gpt-4.1-mini-2025-04-14": None,  # the example lists only the exact mini name
    }


def test_unquoted_date_is_kept_as_written(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("currency: USD\nas_of: 2026-11-01\nmodels: [{model: a, input: 1, output: 2}]\n")
    assert load_prices(path).as_of == "2026-11-01"


BAD = """\
currency: EUR
as_of: 2026-02-30
models:
  - {model: gpt-4.1, input: -1, output: 8}
  - model: gpt-4.1
    input: 1
    output: 2
    ouput: 3
  - {model: x, match: "gpt-(", input: 1, output: 2}
  - {model: y, output: "2"}
  - {model: GPT-4.1 , input: 1, output: 2}
"""


def test_every_problem_is_reported_with_file_line_and_path(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    with pytest.raises(PriceTableError) as info:
        load_prices(path)
    assert str(info.value).splitlines() == [
        f"9 problems in price table {path}:",
        f'  {path}:1: currency: "EUR" is not supported; prices must be in USD',
        f"  {path}:2: as_of: '2026-02-30' is not a calendar date",
        f"  {path}:4: models[0].input: -1 is negative; prices are USD per million tokens, >= 0",
        f"  {path}:5: models[1].model: 'gpt-4.1' is already priced in models[0]",
        f"  {path}:8: models[1].ouput: unknown key 'ouput' (did you mean 'output'?);"
        " expected one of cached_input, input, match, model, output",
        f"  {path}:9: models[2].match: not a valid pattern: unclosed group",
        f"  {path}:10: models[3]: missing required key 'input'",
        f'  {path}:10: models[3].output: expected number, got a text "2"',
        f"  {path}:11: models[4].model: 'GPT-4.1' is already priced in models[0]",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "a price table is a mapping, not null"),
        ("currency: USD\nas_of: '2026-1-01'\nmodels: [{model: a, input: 1, output: 2}]\n",
         "as_of: \"2026-1-01\" is not a date written YYYY-MM-DD"),
        ("currency: USD\nas_of: '2026-01-01'\nmodels: []\n", "models: [] should be non-empty"),
        ("currency: USD\nas_of: '2026-01-01'\nmodels: [{model: a, input: true, output: 2}]\n",
         "models[0].input: expected number, got a boolean true"),
        ("currency: USD\nas_of: '2026-01-01'\n", "missing required key 'models'"),
    ],
)  # fmt: skip
def test_single_problems(tmp_path, text, message):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(PriceTableError) as info:
        load_prices(path)
    assert message in str(info.value)


def test_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(PriceTableError, match="cannot read the price table"):
        load_prices(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("currency: [USD\n")
    with pytest.raises(PriceTableError, match=r"bad\.yaml:2: not valid YAML"):
        load_prices(bad)


def test_price_table_errors_are_user_errors():
    # The CLI turns every AgentTraceError into exit code 2.
    assert issubclass(PriceTableError, AgentTraceError)


# --- on real runs -----------------------------------------------------------------------------


@pytest.mark.skipif(not REAL_TRACES.is_dir(), reason="real traces not available")
def test_real_traces_computed_costs_agree_with_recorded_costs():
    from analyzer.engine import analyze_paths

    runset = apply_prices(analyze_paths([REAL_TRACES]).runs)
    rows = (
        runset.runs.select(
            pl.col("models").list.first().alias("model"),
            "input_tokens",
            "output_tokens",
            "cost_usd",
            "recorded_cost_usd",
        )
        .sort("model", "input_tokens")
        .rows()
    )
    # Where the list price has not moved since the trace was recorded, our cost is the one
    # the tracer recorded (claude 34 * 3 + 232 * 15 = 3582 per 1e6, gpt-5 62 * 1.25 + 85 * 10
    # = 927.5, gpt-5-mini 293 * 0.25 + 106 * 2 = 285.25, ...).
    expected = [
        ("claude-sonnet-4-5-20250929", 34, 232, 0.003582, 0.003582),
        ("gemini-2.0-flash", 67, 9, 0.0000103, 0.0000103),
        ("gpt-4.1-2025-04-14", 140, 44, 0.000632, 0.000632),
        ("gpt-5-2025-08-07", 62, 85, 0.0009275, 0.0009275),
        ("gpt-5-mini-2025-08-07", 293, 106, 0.00028525, 0.00028525),
        # mistral-small-latest was Small 3.x (0.10/0.30) when recorded; on as_of it points to
        # Small 4 (0.15/0.60): 1020 * 0.15 + 76 * 0.60 = 198.6 vs 1020 * 0.1 + 76 * 0.3 = 124.8.
        ("mistral/mistral-small-latest", 1020, 76, 0.0001986, 0.0001248),
        ("mistral/mistral-small-latest", 2251, 86, 0.00038925, 0.0002509),
    ]
    assert len(rows) == len(expected)
    for got, want in zip(rows, expected, strict=True):
        assert got[:3] == want[:3]
        assert got[3] == pytest.approx(want[3], abs=1e-15)
        assert got[4] == pytest.approx(want[4], abs=1e-12)  # tracers round
    assert unpriced_models(runset.steps, runset.runs).is_empty()
    # The span's own cost stays beside ours on the steps too.
    assert "recorded_cost_usd" in runset.steps.columns


def test_sample_traces_are_all_priced():
    from analyzer.engine import analyze_paths

    runset = apply_prices(analyze_paths([ROOT / "sample_traces"]).runs)
    assert runset.runs.get_column("cost_usd").null_count() == 0
    assert unpriced_models(runset.steps, runset.runs).is_empty()
    # The failed gpt-4.1 call (HTTP 429, no usage) costs 0 and keeps its run priced.
    failed = runset.steps.filter(pl.col("status") == "error", pl.col("kind") == "model_call")
    assert failed.select("model", "cost_usd").rows() == [("gpt-4.1", 0.0)]
