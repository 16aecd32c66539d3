"""docs/rule-types.md walks through writing a rule type: its example module and case file,
taken from the page, load and pass like a built-in rule type's, so the page cannot rot."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
import test_check_cases as cases
import yaml

from analyzer.checks import REGISTRY
from analyzer.checks.reference import explain, reference
from analyzer.errors import RulePackError
from analyzer.pack import pack_from_mapping, pack_schema

DOC = Path(__file__).resolve().parents[1] / "docs" / "rule-types.md"


def _block(language: str) -> str:
    (block,) = re.findall(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    return block


def test_the_example_rule_type_passes_its_case_file(tmp_path, monkeypatch):
    module_path = tmp_path / "answer_length.py"
    module_path.write_text(_block("python"), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("answer_length", module_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "answer_length", module)
    spec.loader.exec_module(module)
    # what rule_types() finds for a module of analyzer/checks
    monkeypatch.setitem(REGISTRY, "answer_length", module.AnswerLength)

    case = tmp_path / "answer_length.yaml"
    case.write_text(_block("yaml"), encoding="utf-8")
    cases.test_case_files_hold_failing_passing_and_near_miss_runs(case)
    for run in yaml.safe_load(case.read_text(encoding="utf-8"))["runs"]:
        cases.test_case(case, run["name"])

    branch = pack_schema()["$defs"]["answer_length"]
    assert branch["required"] == ["id", "type", "max_chars"]
    assert branch["properties"]["max_chars"] == {
        "title": "max_chars",
        "description": "Most characters an answer may have.",
        "type": "integer",
        "minimum": 0,
    }
    with pytest.raises(RulePackError, match=r"rules\[0\]\.max_chars .*-1 is less than"):
        pack_from_mapping(
            {"pack": "p", "rules": [{"id": "a", "type": "answer_length", "max_chars": -1}]}
        )
    assert "\n## answer_length\n" in reference()
    assert explain("answer_length").startswith("answer_length: The answer is at most")
