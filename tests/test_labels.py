"""Golden labels: loading (errors name file and line), field matches, tools, and the summary."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from jsonschema import Draft202012Validator

from analyzer.cli import main
from analyzer.engine import analyze_paths
from analyzer.errors import InputError
from analyzer.metrics.labels import (
    FieldLabel,
    field_matches,
    load_labels,
    normalize_text,
    parse_number,
    score_labels,
)
from analyzer.metrics.summary import build_summary
from analyzer.pack import load_packs
from analyzer.render.terminal import terminal_summary
from analyzer.resources import schema

ROOT = Path(__file__).resolve().parent.parent
KYC = ROOT / "sample_traces" / "kyc"
KYC_LABELS = ROOT / "rules" / "kyc-labels.jsonl"
KYC_PACK = ROOT / "rules" / "kyc.yaml"


def write(tmp_path: Path, *lines: object) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text(
        "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n",
        encoding="utf-8",
    )
    return path


# --- loading -------------------------------------------------------------------------------------


def test_load_reads_fields_tools_and_arguments(tmp_path):
    path = write(
        tmp_path,
        {"case_id": "A", "fields": {"decision": "approve"}},
        "",  # blank lines are allowed
        {
            "case_id": "B",
            "fields": {
                "amount": {"expected": 12.5, "match": "numeric", "tolerance": 0.05},
                "id": {"expected": "X-\\d+", "match": "regex", "critical": True, "path": "a.b"},
            },
            "tools": ["t1", "t2"],
            "arguments": {"t1": {"x": 1}},
        },
    )
    labels = load_labels(path)
    assert sorted(labels.cases) == ["A", "B"]
    assert labels.cases["A"].fields == (FieldLabel(name="decision", expected="approve"),)
    assert labels.cases["A"].tools is None and labels.cases["A"].line == 1
    b = labels.cases["B"]
    assert b.line == 3 and b.tools == ("t1", "t2") and b.arguments == {"t1": {"x": 1}}
    assert b.fields == (
        FieldLabel("amount", Decimal("12.5"), "numeric", None, Decimal("0.05"), Decimal(0)),
        FieldLabel("id", "X-\\d+", "regex", "a.b", critical=True),
    )
    assert len(labels.sha256) == 64


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "labels.jsonl:2: not a JSON object"),
        ({"case": "A"}, "labels.jsonl:2: 'case_id' is a required property"),
        ({"case_id": "B", "extra": 1}, "labels.jsonl:2: Additional properties are not allowed"),
        (
            {"case_id": "B", "fields": {"f": {"expected": 1, "match": "fuzzy"}}},
            "labels.jsonl:2: fields.f: ",
        ),
        (
            {"case_id": "B", "fields": {"f": {"expected": "x", "tolerance": 1}}},
            "labels.jsonl:2: fields.f: ",  # a tolerance needs match numeric
        ),
        (
            {"case_id": "B", "fields": {"f": {"expected": "[", "match": "regex"}}},
            "labels.jsonl:2: fields.f.expected: invalid regular expression",
        ),
        (
            {"case_id": "B", "fields": {"f": {"expected": "about ten", "match": "numeric"}}},
            "labels.jsonl:2: fields.f.expected: 'about ten' is not a number",
        ),
        ({"case_id": "A"}, "labels.jsonl:2: case_id 'A' already labelled on line 1"),
    ],
)
def test_bad_line_is_refused_with_file_and_line(tmp_path, line, message):
    path = write(tmp_path, {"case_id": "A"}, line)
    with pytest.raises(InputError) as err:
        load_labels(path)
    assert f"invalid labels file {path}" in str(err.value)
    assert f"{tmp_path}/{message}" in str(err.value)


@pytest.mark.parametrize("value", ["NaN", "Infinity"])  # -Infinity: below the minimum
def test_a_tolerance_that_is_not_a_finite_number_is_refused(tmp_path, value):
    path = tmp_path / "labels.jsonl"
    path.write_text(
        '{"case_id": "c", "fields": {"amount": {"expected": 12, "match": "numeric", '
        f'"relative_tolerance": {value}}}}}}}\n'
    )
    with pytest.raises(InputError, match=r"fields.amount.relative_tolerance: .* is not a finite"):
        load_labels(path)


def test_every_problem_is_reported_at_once(tmp_path):
    path = write(tmp_path, "[1]", {"case_id": ""}, "nope")
    with pytest.raises(InputError) as err:
        load_labels(path)
    text = str(err.value)
    assert "(3 problems)" in text
    assert ":1: [1] is not of type 'object'" in text
    assert ":2: case_id: '' should be non-empty" in text
    assert ":3: not a JSON object" in text


def test_empty_or_missing_file_is_refused(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="no labels"):
        load_labels(empty)
    with pytest.raises(InputError, match="cannot read labels file"):
        load_labels(tmp_path / "absent.jsonl")


def test_labels_schema_ships_and_validates_the_sample_file():
    validator = Draft202012Validator(schema("labels.schema.json"))
    Draft202012Validator.check_schema(schema("labels.schema.json"))
    for line in KYC_LABELS.read_text(encoding="utf-8").splitlines():
        assert list(validator.iter_errors(json.loads(line))) == []


# --- comparing values ----------------------------------------------------------------------------


def label(expected, match="exact", **kw):
    return FieldLabel("f", expected, match, **kw)


@pytest.mark.parametrize(
    ("expected", "value", "ok"),
    [
        ("approve", "Approve", True),  # case-folded
        ("approve", "APPROVE", True),
        ("Straße", "STRASSE", True),  # casefold, not lower
        ("approve", " approve", False),  # near miss: whitespace is not folded by exact
        ("Élise", "Elise", False),  # near miss: accents are not folded by exact
        (12, Decimal("12.0"), True),  # numbers as numbers
        (12, "12", True),  # text form of a number
        (12, Decimal("12.01"), False),
        (True, True, True),
        (True, "yes", False),
        (["a", "B"], ["A", "b"], True),
        (None, None, True),
        (None, "x", False),
    ],
)
def test_exact_match(expected, value, ok):
    assert field_matches(label(expected), value) is ok


@pytest.mark.parametrize(
    ("expected", "value", "ok"),
    [
        ("Élise  Roche", "elise roche", True),  # accents, case and whitespace
        ("Noé Lambert", " NOE\tLAMBERT ", True),
        ("1977-08-16", "16/08/1977", True),  # day first
        ("1977-08-16", "16.08.1977", True),
        ("1977-08-16", "16 août 1977", True),
        ("1977-08-16", "August 16, 1977", True),
        ("né le 1977-08-16", "Né le 16 Aug 1977", True),  # a date inside a text
        ("1er octobre 2026", "2026-10-01", True),
        ("1977-08-16", "17/08/1977", False),  # near miss: another day
        ("1977-08-16", "08/16/1977", False),  # month first is not read (month 16)
        ("Élise Roche", "Elise Rocher", False),
    ],
)
def test_normalized_match(expected, value, ok):
    assert field_matches(label(expected, "normalized"), value) is ok


def test_normalize_text():
    assert (
        normalize_text("  Dossier   du 3 MARS 2026 à Zürich ") == "dossier du 2026-03-03 a zurich"
    )
    assert normalize_text("2026/3/7") == "2026-03-07"
    assert normalize_text("31/02/2026") == "2026-02-31"  # not a calendar check, a format fold
    assert normalize_text("45/02/2026") == "45/02/2026"  # no month or day that large: left as is


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("1234.56", Decimal("1234.56")),
        ("1 234,56 €", Decimal("1234.56")),
        ("1\u202f234,56\u00a0€", Decimal("1234.56")),
        ("$1,234.56", Decimal("1234.56")),
        ("1.234,56", Decimal("1234.56")),
        ("1,234", Decimal("1234")),  # a lone comma before three digits groups thousands
        ("3,2 %", Decimal("3.2")),
        ("-12", Decimal("-12")),
        ("1.234.567", Decimal("1234567")),
        ("12.", Decimal("12")),
        ("between 3 and 5", None),  # two numbers: not one value
        ("n/a", None),
        ("1,23,4", None),
    ],
)
def test_parse_number(text, number):
    assert parse_number(text) == number


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (Decimal("100.5"), True),  # the bound is included
        (Decimal("99.5"), True),
        (Decimal("100.51"), False),  # near miss just past the bound
        (Decimal("99.49"), False),
        ("100,50 €", True),
        ("about 100", True),
        ("100 to 101", False),
        (True, False),
        (None, False),
    ],
)
def test_numeric_match_with_absolute_tolerance(value, ok):
    assert field_matches(label(100, "numeric", tolerance=Decimal("0.5")), value) is ok


def test_numeric_match_with_relative_tolerance_and_decimal_arithmetic():
    rel = label(Decimal("200"), "numeric", relative_tolerance=Decimal("0.01"))
    assert field_matches(rel, Decimal("202")) and field_matches(rel, Decimal("198"))
    assert not field_matches(rel, Decimal("202.01"))
    # 0.1 + 0.2 written by a model as 0.3 matches 0.3 exactly (decimal, not binary floats)
    assert field_matches(label(Decimal("0.3"), "numeric"), Decimal("0.3"))
    assert not field_matches(label(Decimal("0.3"), "numeric"), Decimal("0.30000000000000004"))
    # the larger of the two tolerances applies
    both = label(10, "numeric", tolerance=Decimal(1), relative_tolerance=Decimal("0.5"))
    assert field_matches(both, 15) and not field_matches(both, Decimal("15.1"))


def test_numeric_match_of_a_number_beyond_the_decimal_range_is_a_miss_not_a_crash():
    huge = Decimal("1e999999999999999999")  # an answer parsed with parse_float=Decimal
    assert not field_matches(label(100, "numeric", tolerance=Decimal("0.5")), huge)
    assert not field_matches(
        label(100, "numeric", tolerance=Decimal("0.5")), Decimal("-1e999999999999999999")
    )
    assert field_matches(label(huge, "numeric"), huge)
    assert not field_matches(
        label(huge, "numeric", relative_tolerance=Decimal("0.1")), Decimal("-1e999999999999999999")
    )
    assert not field_matches(label(huge, "exact"), Decimal(100))
    nan, inf = Decimal("NaN"), Decimal("Infinity")
    assert not field_matches(label(100, "numeric", tolerance=Decimal("0.5")), nan)
    assert not field_matches(label(nan, "numeric"), nan)
    assert field_matches(label(inf, "numeric"), inf)
    assert not field_matches(label(inf, "numeric", relative_tolerance=Decimal(1)), -inf)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("KYC-2026-0001", True),
        ("KYC-2026-00011", False),  # the whole value must match
        ("xKYC-2026-0001", False),
        ("kyc-2026-0001", False),  # regex is case-sensitive unless it says (?i)
        (Decimal("2026"), False),
        ({"id": "KYC-2026-0001"}, False),
    ],
)
def test_regex_match(value, ok):
    assert field_matches(label("KYC-2026-\\d{4}", "regex"), value) is ok


def test_regex_on_a_number_uses_its_written_form():
    assert field_matches(label("\\d+\\.50", "regex"), Decimal("249.50"))
    assert field_matches(label("(?i)approve", "regex"), "APPROVE")


# --- scoring against runs ------------------------------------------------------------------------


def frames(answers: dict[str, str | None], calls: list[tuple[str, str, int, str | None]]):
    """runs (run_id = case id, answer at t=100) and tool-call steps (run, tool, start, args)."""
    runs = pl.DataFrame(
        {
            "run_id": list(answers),
            "case_id": list(answers),
            "answer": list(answers.values()),
            "answer_ns": [100 if a is not None else None for a in answers.values()],
        },
        schema={
            "run_id": pl.String,
            "case_id": pl.String,
            "answer": pl.String,
            "answer_ns": pl.Int64,
        },
    )
    steps = pl.DataFrame(
        [(r, i, "tool_call", t, s, a) for i, (r, t, s, a) in enumerate(calls)],
        schema={
            "run_id": pl.String,
            "index": pl.Int32,
            "kind": pl.String,
            "name": pl.String,
            "start_ns": pl.Int64,
            "arguments": pl.String,
        },
        orient="row",
    )
    return runs, steps


def test_fields_missing_wrong_and_nested(tmp_path):
    labels = load_labels(
        write(
            tmp_path,
            {
                "case_id": "r1",
                "fields": {
                    "decision": {"expected": "approve", "critical": True},
                    "owner": {"expected": "Élise Roche", "match": "normalized", "path": "p.name"},
                    "amount": {"expected": 1234.56, "match": "numeric", "tolerance": 0.01},
                },
            },
            {
                "case_id": "r2",
                "fields": {
                    "decision": "approve",
                    "whole": {"expected": "(?s).*ok.*", "match": "regex", "path": "$"},
                },
            },
            {"case_id": "r3", "fields": {"decision": "approve"}},
            {"case_id": "r4", "fields": {"decision": "approve"}},
            {"case_id": "gone", "fields": {"decision": "approve"}},
        )
    )
    runs, steps = frames(
        {
            "r1": '{"decision": "APPROVE", "p": {"name": "elise  roche"}, "amount": "1 234,57 €"}',
            "r2": "ok, approved",  # not JSON: decision missing, the whole-text regex passes
            "r3": None,  # no answer
            "r4": '{"decision": null}',
            "other": '{"decision": "approve"}',  # no label for its case
        },
        [],
    )
    scored = score_labels(labels, runs, steps)
    assert scored.fields.sort("run_id", "field").select("run_id", "field", "status").rows() == [
        ("r1", "amount", "correct"),  # 1234.57 within 0.01 of 1234.56
        ("r1", "decision", "correct"),
        ("r1", "owner", "correct"),
        ("r2", "decision", "missing"),
        ("r2", "whole", "correct"),
        ("r3", "decision", "missing"),
        ("r4", "decision", "missing"),
    ]
    assert scored.passed().rows() == [("r1", True), ("r2", False), ("r3", False), ("r4", False)]
    out = scored.summary()
    assert (out["cases"], out["matched_cases"], out["matched_runs"]) == (5, 4, 4)
    assert out["unmatched_cases"] == ["gone"] and out["unlabelled_runs"] == 1
    assert out["all_fields_correct"] == {
        "k": 1,
        "n": 4,
        "rate": 0.25,
        "lo": pytest.approx(0.045587, abs=1e-6),
        "hi": pytest.approx(0.699358, abs=1e-6),
    }
    # decision: right in r1 only; 3 missing. Critical only in r1's label: 1/1.
    decision = next(f for f in out["fields"] if f["field"] == "decision")
    assert {k: decision[k] for k in ("critical", "runs", "correct", "wrong", "missing")} == {
        "critical": True,
        "runs": 4,
        "correct": 1,
        "wrong": 0,
        "missing": 3,
    }
    assert [f["field"] for f in out["critical_fields"]] == ["decision"]
    assert out["all_critical_correct"]["k"] == 1 and out["all_critical_correct"]["n"] == 1


def test_hostile_numbers_in_answers_and_labels_are_scored_not_a_crash(tmp_path):
    huge = "1e99999999999999999999"  # beyond the exponents a Decimal holds
    path = tmp_path / "labels.jsonl"
    path.write_text(
        f'{{"case_id": "r1", "fields": {{"amount": {{"expected": 12, "match": "numeric"}}}}}}\n'
        f'{{"case_id": "r2", "fields": {{"amount": {{"expected": {huge}, "match": "numeric"}}}}}}\n'
        '{"case_id": "r3", "fields": {"amount": {"expected": 12, "match": "numeric"}}}\n'
        # a Decimal holds this one, but as an int it would have 10**18 digits
        '{"case_id": "r4", "fields": {"amount": {"expected": 1e999999999999999999}}}\n'
    )
    runs, steps = frames(
        {
            "r1": f'{{"amount": {huge}}}',
            "r2": f'{{"amount": {huge}}}',
            "r3": '{"amount": NaN}',
            "r4": '{"amount": 1E+999999999999999999}',
        },
        [],
    )
    scored = score_labels(load_labels(path), runs, steps)
    assert scored.fields.sort("run_id").select("run_id", "status").rows() == [
        ("r1", "wrong"),
        ("r2", "correct"),  # both read as the same infinity
        ("r3", "wrong"),
        ("r4", "correct"),
    ]


def test_tools_recall_omission_wrong_tool_and_argument_precision(tmp_path):
    labels = load_labels(
        write(
            tmp_path,
            {
                "case_id": "r1",
                "tools": ["search", "escalate"],
                "arguments": {"search": {"order": "CMD-127745", "qty": 2}},
            },
            {"case_id": "r2", "tools": ["search", "escalate"]},
            {"case_id": "r3", "tools": ["search"], "arguments": {"search": {"order": "CMD-1"}}},
        )
    )
    runs, steps = frames(
        {"r1": "done", "r2": "done", "r3": None},
        [
            # r1: search twice (first with the customer's spelling, second with a wrong qty),
            # escalate after the answer (t=150 > 100): omitted; refund is a wrong tool
            ("r1", "search", 10, '{"order": " cmd-127745 ", "qty": "2"}'),
            ("r1", "search", 20, '{"order": "CMD-127745", "qty": 3}'),
            ("r1", "refund", 30, "{}"),
            ("r1", "escalate", 150, "{}"),
            # r2: both tools before the answer
            ("r2", "escalate", 10, "{}"),
            ("r2", "search", 20, "{}"),
            # r3 has no answer: every call counts; its arguments are not JSON
            ("r3", "search", 500, '{"order": "CMD-1"'),
            ("r3", "refund", 600, "{}"),
            ("r3", "refund", 700, "{}"),
        ],
    )
    tools = score_labels(labels, runs, steps).summary()["tools"]
    # expected pairs: r1 search (yes), r1 escalate (no: after the answer), r2 x 2 (yes),
    # r3 search (yes): 4/5
    assert (tools["runs"], tools["recall"]["k"], tools["recall"]["n"]) == (3, 4, 5)
    assert [
        (t["tool"], t["expected_runs"], t["omitted_runs"]) for t in tools["omission_by_tool"]
    ] == [
        ("escalate", 2, 1),
        ("search", 3, 0),
    ]
    # refund once in r1, twice in r3
    assert {k: tools["wrong_tool"][k] for k in ("calls", "tools", "k", "n")} == {
        "calls": 3,
        "tools": ["refund"],
        "k": 2,
        "n": 3,
    }
    # (call, argument) pairs: r1 call 1 order ok (folded), qty ok ("2" = 2); call 2 order ok,
    # qty wrong (3); r3: arguments not JSON -> wrong. 3 of 5.
    assert (tools["argument_precision"]["k"], tools["argument_precision"]["n"]) == (3, 5)
    assert tools["argument_precision"]["rate"] == 0.6


# --- the KYC sample labels (rules/kyc-labels.jsonl) ----------------------------------------------
#
# The file labels the 16 KYC cases with the four tools, decision (critical), risk_level
# (normalized) and dossier_id, and the account the documents name. It disagrees with the
# agent on KYC-2026-0004 (escalate/high: screening was skipped) and -0008 (approve/low: the
# agent looked up ACC-55120, the documents say ACC-55210); -0013 has no answer.


@pytest.fixture(scope="module")
def kyc_summary():
    analysis = analyze_paths([KYC], packs=tuple(load_packs([KYC_PACK])))
    return analysis, build_summary(analysis, load_labels(KYC_LABELS))


def test_kyc_labels_summary(kyc_summary):
    _, summary = kyc_summary
    labels = summary["labels"]
    assert labels["file"] == str(KYC_LABELS)
    assert (labels["cases"], labels["matched_cases"], labels["matched_runs"]) == (16, 16, 16)
    assert labels["unmatched_cases"] == [] and labels["unlabelled_runs"] == 0
    # Wilson: 13/16 -> [0.56991119, 0.934084009]; 15/16 -> [0.716712624, 0.988880655]
    thirteen = {"rate": 0.8125, "rate_lo": 0.56991119, "rate_hi": 0.934084009}
    decision = {
        "field": "decision",
        "critical": True,
        "matches": ["exact"],
        "runs": 16,
        "correct": 13,
        "wrong": 2,
        "missing": 1,
        **thirteen,
    }
    assert labels["fields"] == [
        decision,
        {
            "field": "dossier_id",
            "critical": False,
            "matches": ["exact"],
            "runs": 16,
            "correct": 15,
            "wrong": 0,
            "missing": 1,
            "rate": 0.9375,
            "rate_lo": 0.716712624,
            "rate_hi": 0.988880655,
        },
        # 0004 said low (label high), 0008 medium (label low)
        {
            "field": "risk_level",
            "critical": False,
            "matches": ["normalized"],
            "runs": 16,
            "correct": 13,
            "wrong": 2,
            "missing": 1,
            **thirteen,
        },
    ]
    assert labels["critical_fields"] == [decision]
    rate13 = {"k": 13, "n": 16, "rate": 0.8125, "lo": 0.56991119, "hi": 0.934084009}
    assert labels["all_fields_correct"] == rate13
    assert labels["all_critical_correct"] == rate13
    # Tools called before the answer (KYC-2026-0013 has none: all its calls count):
    # 0004 lacks screen_sanctions, 0006 screened after the answer, 0007 lacks owners, 0009
    # lacks both: 64 expected pairs, 5 missing -> 59/64, Wilson [0.829804626, 0.966168823].
    # Argument precision: one lookup_account call per run, 0008 wrong (ACC-55120 vs
    # ACC-55210), 0010's acc-30418 matches ACC-30418 (case folding): 15/16.
    assert labels["tools"] == {
        "runs": 16,
        "recall": {"k": 59, "n": 64, "rate": 0.921875, "lo": 0.829804626, "hi": 0.966168823},
        "omission_by_tool": [
            {
                "tool": "fetch_documents",
                "expected_runs": 16,
                "omitted_runs": 0,
                "rate": 0.0,
                "rate_lo": 0.0,
                "rate_hi": 0.193607681,
            },
            {
                "tool": "lookup_account",
                "expected_runs": 16,
                "omitted_runs": 0,
                "rate": 0.0,
                "rate_lo": 0.0,
                "rate_hi": 0.193607681,
            },
            {
                "tool": "lookup_beneficial_owners",
                "expected_runs": 16,
                "omitted_runs": 2,
                "rate": 0.125,
                "rate_lo": 0.034977488,
                "rate_hi": 0.360228273,
            },
            {
                "tool": "screen_sanctions",
                "expected_runs": 16,
                "omitted_runs": 3,
                "rate": 0.1875,
                "rate_lo": 0.065915991,
                "rate_hi": 0.43008881,
            },
        ],
        "wrong_tool": {
            "calls": 0,
            "tools": [],
            "k": 0,
            "n": 16,
            "rate": 0.0,
            "lo": 0.0,
            "hi": 0.193607681,
        },
        "argument_precision": {
            "k": 15,
            "n": 16,
            "rate": 0.9375,
            "lo": 0.716712624,
            "hi": 0.988880655,
        },
    }


def test_labels_decide_correct_runs_and_pass_hat_k(kyc_summary):
    _, summary = kyc_summary
    # 13 runs with every field right (all but 0004, 0008, 0013): 0.0752328 / 13 = 0.005787138
    assert summary["metrics"]["cost"] | {"unpriced_models": []} == {
        "total_usd": 0.0752328,
        "recorded_total_usd": None,
        "priced_runs": 16,
        "unpriced_runs": 0,
        "unpriced_models": [],
        "retry_cost_usd": 0.0,
        "retry_cost_unknown_runs": 0,
        "judged_runs": 16,
        "judged_cost_usd": 0.0752328,
        "correct_runs": 13,
        "cost_per_correct_run_usd": 0.005787138,
        "correct_by": "labels",
        "correct_threshold": None,
    }
    assert summary["metrics"]["trials"]["pass_hat_k"] == [
        {"k": 1, "cases": 16, "trials": 16, "value": 0.8125}
    ]
    assert list(Draft202012Validator(schema("summary.schema.json")).iter_errors(summary)) == []


def test_terminal_shows_label_accuracy(kyc_summary):
    _, summary = kyc_summary
    lines = terminal_summary(summary)
    start = lines.index(next(line for line in lines if line.startswith("labels ")))
    assert lines[start:] == [
        "labels   16 cases, 16 runs matched (0 cases without a run, 0 runs without a label)",
        "  all fields correct    13/16 81.2% [57.0%, 93.4%]",
        "  all critical correct  13/16 81.2% [57.0%, 93.4%]",
        "  decision *                 13/16   81.2%  [57.0%, 93.4%]  (1 missing)",
        "  dossier_id                 15/16   93.8%  [71.7%, 98.9%]  (1 missing)",
        "  risk_level                 13/16   81.2%  [57.0%, 93.4%]  (1 missing)",
        # each wrong or missing field, by case (sample_traces/README.md)
        "  fields wrong or missing, by case (7; expected -> answered):",
        "    KYC-2026-0004  decision: 'escalate' -> 'approve'",
        "    KYC-2026-0004  risk_level: 'high' -> 'low'",
        "    KYC-2026-0008  decision: 'approve' -> 'escalate'",
        "    KYC-2026-0008  risk_level: 'low' -> 'medium'",
        "    KYC-2026-0013  decision: 'approve' -> (missing)",
        "    KYC-2026-0013  dossier_id: 'KYC-2026-0013' -> (missing)",
        "    KYC-2026-0013  risk_level: 'low' -> (missing)",
        "  tool recall           59/64 92.2% [83.0%, 96.6%]",
        "  wrong tool            0/16 runs (0 calls)",
        "  argument precision    15/16 93.8% [71.7%, 98.9%]",
        "  (* critical field)",
    ]
    assert "per correct run $0.005787 (13 of 16 runs: all label fields right)" in "\n".join(lines)


def test_cli_labels_option(tmp_path):
    runner = CliRunner()
    ok = runner.invoke(
        main,
        [
            "report",
            str(KYC),
            "--rules",
            str(KYC_PACK),
            "--labels",
            str(KYC_LABELS),
            "--format",
            "json",
        ],
    )
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["labels"]["all_fields_correct"]["k"] == 13
    bad = write(tmp_path, {"case_id": "KYC-2026-0001"}, {"case_id": "KYC-2026-0002", "x": 1})
    result = runner.invoke(main, ["report", str(KYC), "--labels", str(bad)])
    assert result.exit_code == 2
    assert f"Error: invalid labels file {bad} (1 problems):" in result.output
    assert f"{bad}:2: Additional properties are not allowed ('x' was unexpected)" in result.output


def test_breakdowns_carry_label_correct_rates(kyc_summary):
    _, summary = kyc_summary
    cols = (
        "group",
        "label_runs",
        "label_correct_runs",
        "label_correct_rate",
        "label_correct_rate_lo",
        "label_correct_rate_hi",
        "label_cost_per_correct_run",
    )

    def table(key):
        return [tuple(r[c] for c in cols) for r in summary["metrics"]["breakdowns"][key]]

    # Label-wrong runs: 0004 (kyc, temperature 0), 0008 (kyc, 0.7), 0013 (kyc, 0).
    # kyc: 9/12 -> Wilson [0.467694665, 0.911058332], cost 0.057896 / 9; renewals 4/4.
    assert table("case_class") == [
        ("kyc", 12, 9, 0.75, 0.467694665, 0.911058332, 0.006432889),
        ("kyc_renewal", 4, 4, 1.0, 0.510109164, 1.0, 0.0043342),
    ]
    # temperature 0: 10/12, (0.0752328 - 0.01972) / 10; 0.7: 3/4, 0.01972 / 3
    assert table("temperature") == [
        (0.0, 12, 10, 0.833333333, 0.551969138, 0.953034858, 0.00555128),
        (0.7, 4, 3, 0.75, 0.300641843, 0.954412739, 0.006573333),
    ]
    assert table("agent") == [
        ("kyc-reviewer", 16, 13, 0.8125, 0.56991119, 0.934084009, 0.005787138)
    ]
    # without labels the columns are absent
    analysis, _ = kyc_summary
    plain = build_summary(analysis)["metrics"]["breakdowns"]["agent"][0]
    assert not any(key.startswith("label_") for key in plain)


def test_partitioned_labels_summary_is_the_in_process_one(kyc_summary):
    """Labels score the whole runs and steps, which a partitioned analysis reads from its
    spill for them; the rest of the summary comes from its merged facts."""
    from analyzer.engine import analyze_paths

    _, reference = kyc_summary
    packs = tuple(load_packs([KYC_PACK]))
    analysis = analyze_paths([KYC], partitions=3, jobs=1, packs=packs)
    assert build_summary(analysis, load_labels(KYC_LABELS)) == reference
