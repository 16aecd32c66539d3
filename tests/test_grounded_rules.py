"""grounded_arguments and grounded_figures beyond the case files: both argument readers agree,
pack-time checks, and the problems planted in sample_traces/ (README, "Planted problems")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import polars as pl
import pytest
import yaml
from factories import tables
from hypothesis import given, settings
from hypothesis import strategies as st
from test_check_cases import _run_rows

from analyzer.checks import evaluate, grounded_arguments
from analyzer.checks.grounded_arguments import argument_leaves
from analyzer.checks.grounded_figures import GroundedFigures
from analyzer.engine import analyze_paths
from analyzer.errors import RulePackError
from analyzer.pack import pack_from_mapping
from analyzer.runs import build_runs

ROOT = Path(__file__).resolve().parent.parent


#: The two readers of tool-call arguments: flat objects in C (the rest in Python), and
#: everything in Python (as where the C extension is not built).
READERS = ("native", "python")


@contextmanager
def reading_with(reader: str) -> Iterator[None]:
    """Arguments read by ``reader``: "python" as where the C extension is not built."""
    saved = grounded_arguments._native
    if reader == "python":
        grounded_arguments._native = None
    try:
        yield
    finally:
        grounded_arguments._native = saved


def leaves(arguments: list[str | None], reader: str) -> tuple[list[tuple], list[int]]:
    calls = pl.DataFrame(
        {"run_id": ["r"] * len(arguments), "arguments": arguments},
        schema={"run_id": pl.String, "arguments": pl.String},
    ).with_row_index("_call")
    with reading_with(reader):
        found, malformed = argument_leaves(calls)
    return (
        found.sort("_call", "leaf_no").rows(),
        sorted(malformed.get_column("_call").to_list()),
    )


def same_leaves_every_way(arguments: list[str]) -> None:
    assert leaves(arguments, "native") == leaves(arguments, "python")


def test_the_native_reader_of_arguments_is_built():
    # built by `pip install` with the package, as the native OTLP reader
    assert grounded_arguments._native is not None


ARGUMENTS = [
    '{"account_id": "ACC-55210", "n": 12, "ok": true, "x": null}',
    '{"fields": ["name", 3, false, null, "tier"], "e": []}',
    '{ "a" : -1.5e3 , "b":"  spaced  " }',
    '{"a": 1, "b": 2, "a": 3}',  # duplicate key: Python keeps the last value at the first place
    '{"client": {"account_id": "ACC-1"}, "lines": [{"sku": "S-1"}, {"sku": "S-2"}]}',
    '{"q": "Soci\\u00e9t\\u00e9 \\"SG\\""}',
    '{"clé": "Zoé", "emoji": "🙂"}',
    '{"account_id": "ACC-55210"',  # not JSON
    '["ACC-1"]',  # not an object
    '"ACC-1"',
    "{}",
    '{"deep": [[1, 2], {"k": [true, "v"]}]}',
]


@pytest.mark.parametrize("reader", READERS)
def test_argument_leaves_as_listed(reader):
    rows, malformed = leaves(ARGUMENTS, reader)
    by_call: dict[int, list[tuple]] = {}
    for call, leaf_no, path, name, value, is_number in rows:
        by_call.setdefault(call, []).append((leaf_no, path, name, value, is_number))
    assert by_call[0] == [
        (0, "account_id", "account_id", "ACC-55210", False),
        (1, "n", "n", "12", True),
    ]
    assert by_call[1] == [
        (0, "fields[0]", "fields", "name", False),
        (1, "fields[1]", "fields", "3", True),
        (2, "fields[4]", "fields", "tier", False),
    ]
    assert by_call[2] == [(0, "a", "a", "-1.5e3", True), (1, "b", "b", "  spaced  ", False)]
    assert by_call[3] == [(0, "a", "a", "3", True), (1, "b", "b", "2", True)]
    assert by_call[4] == [
        (0, "client.account_id", "account_id", "ACC-1", False),
        (1, "lines[0].sku", "sku", "S-1", False),
        (2, "lines[1].sku", "sku", "S-2", False),
    ]
    assert by_call[5] == [(0, "q", "q", 'Société "SG"', False)]
    assert by_call[6] == [(0, "clé", "clé", "Zoé", False), (1, "emoji", "emoji", "🙂", False)]
    assert by_call[11] == [
        (0, "deep[0][0]", "deep", "1", True),
        (1, "deep[0][1]", "deep", "2", True),
        (2, "deep[1].k[1]", "k", "v", False),
    ]
    assert 10 not in by_call  # {} has no leaf, and is not malformed
    assert malformed == [7, 8, 9]


def test_argument_readers_agree_on_the_listed_arguments():
    same_leaves_every_way(ARGUMENTS)


#: Flat objects, and near misses of the flat grammar (each left to Python, which decides).
NEAR_MISSES = [
    '{"a": 0, "b": -0, "c": 0.5, "d": 1e9, "e": 1E-2, "f": -12.50e+3}',
    ' \t\r\n{ \n"a"\t:\r"x" ,"b" : [ 1 , "y" , true ] }\n ',
    '{"a": 01}',
    '{"a": 1.}',
    '{"a": .5}',
    '{"a": 1e}',
    '{"a": -}',
    '{"a": +1}',
    '{"a": 1,}',
    '{"a": [1,]}',
    '{"a": [,]}',
    '{"a" 1}',
    "{a: 1}",
    "{'a': 1}",
    '{"a": tru}',
    '{"a": truex}',
    '{"a": nul}',
    '{"a": True}',
    '{"a": "x\ty"}',
    '{"a": "x\u0001y"}',
    '{"a": "x\\"y"}',
    '{"a\\"b": 1}',
    '{"a": "unterminated}',
    '{"a": 1} x',
    '{"a": 1}}',
    '{"a": [1, [2]]}',
    '{"a": [1, {"b": 2}]}',
    '{"a": {}}',
    '{"": ""}',
    '{"a": "", "b": [""]}',
    '{"a": 1, "a": 1}',
    '{"a": [1], "b": 2, "a": [3]}',
    '{"é": "ü", "ключ": "значение", "🙂": ["🙂", 1]}',
    "{" + ", ".join(f'"k{i}": {i}' for i in range(64)) + "}",
    "{" + ", ".join(f'"k{i}": {i}' for i in range(65)) + "}",
    "{" + ", ".join(f'"k{i}": {i}' for i in range(65)) + ', "k0": 0}',
    "[]",
    "1",
    "",
    " ",
    "{",
    "}",
    "null",
    "NaN",
    '{"a": NaN}',
    '{"a": Infinity}',
]


def test_argument_readers_agree_on_near_misses_of_the_flat_grammar():
    same_leaves_every_way(NEAR_MISSES)


def test_the_native_reader_reads_the_flat_objects_and_leaves_the_rest():
    calls = pl.DataFrame({"arguments": NEAR_MISSES}).with_row_index("_call")
    found, rest = grounded_arguments._flat_native(calls)
    flat = {0, 1, 28, 29, 32, 33}  # 65 keys are left to Python too (keys compared pairwise)
    assert set(rest.get_column("_call")) == set(range(len(NEAR_MISSES))) - flat
    assert set(found.get_column("_call")) == flat
    assert found.filter(pl.col("_call") == 28).rows() == [(28, 0, "", "", "", False)]
    assert found.filter(pl.col("_call") == 29).rows() == [
        (29, 0, "a", "a", "", False),
        (29, 1, "b[0]", "b", "", False),
    ]


def test_the_native_reader_reads_a_slice_of_an_arrow_array_with_nulls():
    import pyarrow as pa

    texts = ['{"x": 0}', None, '{"a": "1"}', '{"b": [2, "c"]}', None, "[3]", '{"d": 4}']
    part = pa.array(texts, pa.large_string()).slice(2, 4)  # an offset, one null, in a bitmap
    validity, offsets, data = part.buffers()
    rest, row, leaf_no, _, path, _, name, _, value, is_number = grounded_arguments._native.leaves(
        validity, offsets, data, part.offset, len(part)
    )
    assert list(rest) == [0, 0, 1, 1]
    assert memoryview(row).cast("q").tolist() == [0, 1, 1]
    assert memoryview(leaf_no).cast("q").tolist() == [0, 0, 1]
    assert (path, name, value, list(is_number)) == (b"ab[0]b[1]", b"abb", b"12c", [0, 1, 0])


def _cuts(text: str) -> list[str]:
    """Every prefix of `text`, every byte left out, every byte doubled."""
    cuts = [text[:i] for i in range(len(text))]
    cuts += [text[:i] + text[i + 1 :] for i in range(len(text))]
    return cuts + [text[:i] + text[i] + text[i:] for i in range(len(text))]


def test_argument_readers_agree_on_every_cut_of_a_flat_object():
    # every prefix, every byte left out, every byte doubled: a native reader that read past
    # a text's end or took a broken text for flat would differ from Python here
    same_leaves_every_way(
        _cuts('{"id": "ACC-1", "n": [1, -2.5e3, "x", null], "ok": false, "s": ""}')
    )


_scalars = st.one_of(
    st.text(max_size=12),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
)
_values = st.one_of(_scalars, st.lists(_scalars, max_size=4))
_objects = st.dictionaries(st.text(max_size=8), _values, max_size=5)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_objects, st.booleans(), st.sampled_from([None, 0, 2])), max_size=6))
def test_argument_readers_agree(objects):
    texts = [json.dumps(o, ensure_ascii=ascii, indent=indent) for o, ascii, indent in objects]
    same_leaves_every_way(texts)


@cache
def _case_findings(reader: str) -> pl.DataFrame:
    data = yaml.safe_load((ROOT / "tests/checks/grounded_arguments.yaml").read_text("utf-8"))
    rows = [row for i, run in enumerate(data["runs"]) for row in _run_rows(i, run)[0]]
    pack = pack_from_mapping(data["pack"])
    with reading_with(reader):
        return evaluate([pack], build_runs(*tables(rows))).findings


def test_case_file_gives_the_same_findings_both_ways():
    fast, slow = _case_findings("native"), _case_findings("python")
    assert fast.height == 19
    assert fast.equals(slow)


def _problems(pack: dict) -> str:
    with pytest.raises(RulePackError) as err:
        pack_from_mapping(pack, source="p.yaml")
    return str(err.value)


def test_arguments_missing_from_the_listed_tools_schemas_are_pack_errors():
    message = _problems(
        {
            "pack": "p",
            "tools": {"lookup_account": {"type": "object", "properties": {"account_id": {}}}},
            "rules": [
                {
                    "id": "g",
                    "type": "grounded_arguments",
                    "tools": ["lookup_account"],
                    "arguments": ["acount_id", "account_id", "account_id.x"],
                }
            ],
        }
    )
    assert message.splitlines()[1:] == [
        "  p.yaml: rules[0].arguments[0] (rule g): no tool of lookup_account has an argument "
        "'acount_id' in its schema; did you mean account_id?"
    ]


def test_arguments_are_not_checked_against_tools_without_a_schema():
    pack = pack_from_mapping(
        {
            "pack": "p",
            "rules": [{"id": "g", "type": "grounded_arguments", "arguments": ["lines[].sku"]}],
        }
    )
    assert pack.rules[0].arguments == ("lines[].sku",)


@pytest.mark.parametrize(
    ("ignore", "message"),
    [
        (["[0-9"], "invalid pattern '[0-9': unclosed character class"),
        (["x?"], "it matches the empty text, so every figure would be ignored"),
    ],
)
def test_bad_ignore_patterns_are_pack_errors(ignore, message):
    got = _problems(
        {"pack": "p", "rules": [{"id": "f", "type": "grounded_figures", "ignore": ignore}]}
    )
    assert "rules[0].ignore[0] (rule f)" in got and message in got


def test_ignore_takes_integers_and_patterns_only():
    got = _problems(
        {"pack": "p", "rules": [{"id": "f", "type": "grounded_figures", "ignore": [-1, 2.5]}]}
    )
    assert "rules[0].ignore[0]" in got and "rules[0].ignore[1]" in got


# --- the sample traces ----------------------------------------------------------------------


@cache
def _samples():
    pack = pack_from_mapping(
        {
            "pack": "samples",
            "rules": [
                {
                    "id": "account-ids",
                    "type": "grounded_arguments",
                    "tools": ["lookup_account"],
                    "arguments": ["account_id"],
                },
                {"id": "figures", "type": "grounded_figures"},
            ],
        }
    )
    analysis = analyze_paths(
        [ROOT / "sample_traces"], case_key="traceloop.association.properties.question_id"
    )
    runs = analysis.runs.runs
    case = pl.coalesce(
        pl.col("attributes").str.json_path_match("$['app.case_id']"),
        pl.col("attributes").str.json_path_match("$['session.id']"),
        pl.col("attributes").str.json_path_match(
            "$['traceloop.association.properties.question_id']"
        ),
    )
    names = dict(runs.select("run_id", case.alias("case")).iter_rows())
    return evaluate([pack], analysis.runs), names


def test_sample_traces_planted_grounding_problems():
    result, names = _samples()
    found = sorted(
        (names[r["run_id"]], r["rule_id"], r["tool"], r["argument"], r["detail"])
        for r in result.findings.iter_rows(named=True)
    )
    assert found == [
        (
            "KYC-2026-0008",
            "account-ids",
            "lookup_account",
            "account_id",
            "account_id 'ACC-55120' appears in no prior source",
        ),
        (
            "RE-04",
            "figures",
            None,
            None,
            "amount '365 000 €' appears in no prior source (read as 365000)",
        ),
        ("RE-11", "figures", None, None, "number '86' appears in no prior source"),
    ]


def test_sample_traces_coverage_of_the_grounding_rules():
    result, names = _samples()
    not_checked = sorted(
        (names[r["run_id"]], r["rule_id"], r["status"], r["reason"])
        for r in result.coverage.filter(pl.col("status") != "checked").iter_rows(named=True)
    )
    assert not_checked == [
        ("KYC-2026-0013", "figures", "not_applicable", "no answer"),
        ("RE-08", "figures", "unverifiable", "answer content not recorded"),
    ]


def test_empty_ignore_checks_small_counts_too():
    frame = pl.DataFrame(
        {
            "figure": ["3", "3ème", "3 €", "12", "LST-1"],
            "kind": ["number", "number", "amount", "number", "identifier"],
            "reading": ["3", "3", "3", "12", None],
            "is_int": [True, True, True, True, False],
        }
    )

    def ignored(rule: GroundedFigures) -> list[bool]:
        return frame.select(rule._ignored()).to_series().to_list()

    assert ignored(GroundedFigures(id="f")) == [True, True, False, False, False]
    assert ignored(GroundedFigures(id="f", ignore=())) == [False] * 5
    assert ignored(GroundedFigures(id="f", ignore=(12, "^LST-"))) == [
        False,
        False,
        False,
        True,
        True,
    ]
