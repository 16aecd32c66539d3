"""Golden test: the example packs on the sample traces give exactly the planted findings.

The expected rows are the table "Planted problems and near misses" of sample_traces/README.md,
written out; `test_readme_table_agrees` reads that table back so the two cannot drift apart.
The built-in pack's findings on all samples are pinned too (documented in the same README).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from analyzer.checks import REGISTRY
from analyzer.engine import analyze_paths
from analyzer.pack import load_default_pack, load_packs

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
README = (SAMPLES / "README.md").read_text(encoding="utf-8")

SCENARIOS = {
    "kyc": None,
    "support": "session.id",
    "realestate": "traceloop.association.properties.question_id",
}

# (case id, rule id, kind, severity, tool, argument, detail, evidence span ids)
EXPECTED = {
    "kyc": [
        (
            "KYC-2026-0004",
            "kyc-required-checks",
            "omission",
            "critical",
            "screen_sanctions",
            None,
            "screen_sanctions never called",
            ("c2e603f530439850",),
        ),
        (
            "KYC-2026-0004",
            "kyc-required-checks",
            "premature_answer",
            "critical",
            None,
            None,
            "answered after 1 of 2 required tools; not called before the answer: screen_sanctions",
            ("c2e603f530439850",),
        ),
        (
            "KYC-2026-0006",
            "kyc-required-checks",
            "omission",
            "critical",
            "screen_sanctions",
            None,
            "screen_sanctions called only after the answer (1 call)",
            ("927395981e52942d", "bb9e418b224499e0"),
        ),
        (
            "KYC-2026-0006",
            "kyc-required-checks",
            "premature_answer",
            "critical",
            None,
            None,
            "answered after 1 of 2 required tools; not called before the answer: screen_sanctions",
            ("927395981e52942d",),
        ),
        (
            "KYC-2026-0007",
            "kyc-required-checks",
            "omission",
            "critical",
            "lookup_beneficial_owners",
            None,
            "lookup_beneficial_owners never called",
            ("349e8556c58e1deb",),
        ),
        (
            "KYC-2026-0007",
            "kyc-required-checks",
            "premature_answer",
            "critical",
            None,
            None,
            "answered after 1 of 2 required tools; not called before the answer: "
            "lookup_beneficial_owners",
            ("349e8556c58e1deb",),
        ),
        (
            "KYC-2026-0008",
            "grounded-account-ids",
            "hallucinated_argument",
            "high",
            "lookup_account",
            "account_id",
            "account_id 'ACC-55120' appears in no prior source",
            ("3386f07e77b6270e",),
        ),
        (
            "KYC-2026-0009",
            "kyc-required-checks",
            "omission",
            "critical",
            "lookup_beneficial_owners",
            None,
            "lookup_beneficial_owners never called",
            ("1a809f9293aabf6c",),
        ),
        (
            "KYC-2026-0009",
            "kyc-required-checks",
            "omission",
            "critical",
            "screen_sanctions",
            None,
            "screen_sanctions never called",
            ("1a809f9293aabf6c",),
        ),
        (
            "KYC-2026-0011",
            "tool-arguments",
            "malformed_arguments",
            "medium",
            "screen_sanctions",
            None,
            "screen_sanctions arguments are not valid JSON (line 1 col 55: Expecting ',' "
            "delimiter)",
            ("3cf41b7d35a1441d",),
        ),
        (
            "KYC-2026-0012",
            "no-retries",
            "retry",
            "low",
            None,
            None,
            "1 retry > max 0: 1 model call after failure",
            ("99f64afc9a0ea1df",),
        ),
        (
            "KYC-2026-0013",
            "kyc-required-checks",
            "no_answer",
            "critical",
            None,
            None,
            "no answer; 2 of 2 required tools called",
            ("c1171316ce543d68",),
        ),
        (
            "KYC-2026-0014",
            "no-retries",
            "retry",
            "low",
            None,
            None,
            "1 retry > max 0: 1 HTTP resend",
            ("3ab0e3168f7e6cb2",),
        ),
    ],
    "support": [
        (
            "TCK-1003",
            "escalation-policy",
            "forbidden_tool",
            "high",
            "creer_remboursement",
            None,
            "forbidden tool creer_remboursement called (tool call 2)",
            ("c7735b75d5500f6e",),
        ),
        (
            "TCK-1003",
            "escalation-policy",
            "missing_step",
            "high",
            "escalader_humain",
            None,
            "escalader_humain never called (sequence step 2 of 2)",
            ("938104498ef67172",),
        ),
        (
            "TCK-1005",
            "escalation-policy",
            "max_steps",
            "high",
            None,
            None,
            "4 tool calls > max_steps 3",
            ("65d20fabe9fa868f",),
        ),
        (
            "TCK-1006",
            "order-cmd-127745",
            "argument_mismatch",
            "high",
            "chercher_commande",
            "numero",
            "chercher_commande numero 'CMD-127754' in its first call, expected 'CMD-127745'",
            ("5525184991238f8a",),
        ),
        (
            "TCK-1007",
            "no-retries",
            "retry",
            "low",
            None,
            None,
            "1 retry > max 0: 1 repeated tool call chercher_commande",
            ("2b8caf062f342d07",),
        ),
    ],
    "realestate": [
        (
            "RE-04",
            "grounded-figures",
            "ungrounded_figure",
            "high",
            None,
            None,
            "amount '365 000 €' appears in no prior source (read as 365000)",
            ("710b69d3cf0aba7b",),
        ),
        (
            "RE-11",
            "grounded-figures",
            "ungrounded_figure",
            "high",
            None,
            None,
            "number '86' appears in no prior source",
            ("9cd7182e8b64ac66",),
        ),
    ],
}

# The built-in pack (rules/default.yaml) on all of sample_traces/, no case key given:
# (trace id, rule id, kind, severity, tool, argument, detail, evidence span ids)
EXPECTED_DEFAULT = [
    (
        "21a0b62da853b044e36bb4cbf2e5f0c9",
        "retries",
        "retry",
        "low",
        None,
        None,
        "1 retry > max 0: 1 HTTP resend",
        ("3ab0e3168f7e6cb2",),
    ),
    (
        "2e5d703ccaf65bdb40b2d5faaa303940",
        "grounded-ids",
        "hallucinated_argument",
        "high",
        "lookup_account",
        "account_id",
        "account_id 'ACC-55120' appears in no prior source",
        ("3386f07e77b6270e",),
    ),
    (
        "82a3b4d4c5c916c41846c16d6c3e606b",
        "retries",
        "retry",
        "low",
        None,
        None,
        "1 retry > max 0: 1 repeated tool call chercher_commande",
        ("2b8caf062f342d07",),
    ),
    (
        "a97c3b67fb96ad913eeea0cd7e3c1f5b",
        "tool-arguments",
        "malformed_arguments",
        "medium",
        "screen_sanctions",
        None,
        "screen_sanctions arguments are not valid JSON (line 1 col 55: Expecting ',' delimiter)",
        ("3cf41b7d35a1441d",),
    ),
    (
        "ae064840adad5d190ef6e3f71cf44b53",
        "answered",
        "no_answer",
        "high",
        None,
        None,
        "no answer: the run ended without a final answer",
        ("c1171316ce543d68",),
    ),
    (
        "d8c351775f818ea57c50321fc5f9e785",
        "retries",
        "retry",
        "low",
        None,
        None,
        "1 retry > max 0: 1 model call after failure",
        ("99f64afc9a0ea1df",),
    ),
    (
        "eb27126367bff1712e1fb9a0cc01d1d2",
        "grounded-ids",
        "hallucinated_argument",
        "high",
        "chercher_commande",
        "numero",
        "numero 'CMD-127754' appears in no prior source",
        ("5525184991238f8a",),
    ),
]

FINDING_KINDS = {kind for check in REGISTRY.values() for kind in check.kinds}

_COLUMNS = ["rule_id", "kind", "severity", "tool", "argument", "detail", "span_ids"]


def _rows(findings: pl.DataFrame, key: str) -> list[tuple]:
    rows = [
        (r[key], *(tuple(r[c]) if c == "span_ids" else r[c] for c in _COLUMNS))
        for r in findings.iter_rows(named=True)
    ]
    return sorted(rows, key=lambda row: tuple("" if v is None else str(v) for v in row))


@pytest.fixture(scope="module")
def analyses():
    return {
        name: analyze_paths(
            [SAMPLES / name], packs=load_packs([ROOT / "rules" / f"{name}.yaml"]), case_key=key
        )
        for name, key in SCENARIOS.items()
    }


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_example_pack_findings_are_exactly_the_planted_ones(analyses, scenario):
    analysis = analyses[scenario]
    expected = sorted(
        EXPECTED[scenario], key=lambda row: tuple("" if v is None else str(v) for v in row)
    )
    assert _rows(analysis.evaluation.findings, "case_id") == expected
    assert not analysis.evaluation.errors


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_evidence_spans_belong_to_the_run(analyses, scenario):
    analysis = analyses[scenario]
    span_runs = analysis.runs.span_runs
    for row in analysis.evaluation.findings.iter_rows(named=True):
        own = set(span_runs.filter(pl.col("run_id") == row["run_id"]).get_column("span_id"))
        assert row["span_ids"], row
        assert set(row["span_ids"]) <= own, row


def test_re08_is_unverifiable_not_passing(analyses):
    coverage = analyses["realestate"].evaluation.coverage
    re08 = "f4c858e8d888f22651f404204938d673"
    status = coverage.filter(pl.col("run_id") == re08).get_column("status").to_list()
    assert status == ["unverifiable"]
    others = coverage.filter(pl.col("run_id") != re08).get_column("status").unique().to_list()
    assert others == ["checked"]


def _planted_table() -> dict[str, Counter]:
    """Case id -> finding kinds the README's planted-problems table says it must yield."""
    section = README.split("## Planted problems and near misses", 1)[1].split("\n## ", 1)[0]
    expected: dict[str, Counter] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not re.match(r"(KYC|TCK|RE)-", cells[0]):
            continue
        ids = [cells[0].split(",")[0].strip()]
        ids += [ids[0][: ids[0].rfind("-")] + t.strip() for t in cells[0].split(",")[1:]]
        kinds: Counter = Counter()
        # a clause such as "no `premature_answer`" or "is not a `retry`" names what must NOT
        # come; "2 × `omission`" a count
        for clause in re.split(r"[;,+]", cells[2]):
            clause = clause.strip()
            if re.match(r"(no|the second call is not)\b", clause):
                continue
            for count, kind in re.findall(r"(?:(\d+) × )?`(\w+)`", clause):
                if kind in FINDING_KINDS:  # not a rule type such as `grounded_figures`
                    kinds[kind] += int(count or 1)
        for case in ids:
            expected[case] = kinds
    return expected


def test_readme_table_agrees(analyses):
    table = _planted_table()
    # 27 rows, of which one names two cases (KYC-2026-0003, -0015) and one three (TCK-1002, ...)
    assert len(table) == 30
    found: dict[str, Counter] = {}
    for analysis in analyses.values():
        for row in analysis.evaluation.findings.iter_rows(named=True):
            found.setdefault(row["case_id"], Counter())[row["kind"]] += 1
    assert {case: kinds for case, kinds in table.items() if kinds} == found


def test_default_pack_findings():
    analysis = analyze_paths([SAMPLES], packs=[load_default_pack()])
    assert _rows(analysis.evaluation.findings, "run_id") == sorted(
        EXPECTED_DEFAULT, key=lambda row: tuple("" if v is None else str(v) for v in row)
    )
    assert not analysis.evaluation.errors
