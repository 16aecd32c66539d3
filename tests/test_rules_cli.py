"""`agenttrace rules list | explain | check`, and the rule types' documentation."""

from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from analyzer.checks import REGISTRY
from analyzer.checks.base import COMMON_FIELDS, DOC_SECTIONS, doc_sections
from analyzer.checks.plugin import PluginCheck
from analyzer.cli import main
from analyzer.pack import load_packs

ALL_TYPES = [*sorted(REGISTRY), "plugin"]


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize("name", ALL_TYPES)
def test_every_rule_type_documents_flags_why_options_and_an_example(name):
    cls = REGISTRY.get(name, PluginCheck)
    parts = doc_sections(cls)
    assert parts[""], f"{name}: no summary line"
    for title in DOC_SECTIONS:
        assert parts.get(title), f"{name}: no {title!r} section"
    for kind in cls.kinds:
        assert f"``{kind}``" in parts["Flags"], f"{name}: kind {kind} not explained"
    for option in cls.option_names():
        if name != "plugin":
            assert f"{option} :" in parts["Options"], f"{name}: option {option} undocumented"


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_documented_example_is_a_valid_pack(name, tmp_path):
    example = doc_sections(REGISTRY[name])["Example"]
    rules = yaml.safe_load(example)
    for rule in rules:
        assert rule["type"] == name
        if "schema" in rule:  # output_schema: the example refers to a file next to the pack
            (tmp_path / rule["schema"]).write_text('{"type": "object"}')
    pack = tmp_path / "example.yaml"
    pack.write_text(yaml.safe_dump({"pack": "example", "rules": rules}, allow_unicode=True))
    (loaded,) = load_packs([pack])
    assert [r.type for r in loaded.rules] == [name] * len(rules)


def test_rules_list_names_every_type_with_its_kinds():
    result = run("rules", "list")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert [line.split()[0] for line in lines] == ALL_TYPES
    traj = next(line for line in lines if line.startswith("trajectory "))
    assert "missing_step, forbidden_tool, max_steps, argument_mismatch" in traj
    assert traj.endswith("The run's tool calls follow the expected trajectory.")


def test_rules_explain_prints_the_docstring_sections():
    result = run("rules", "explain", "required_tools")
    assert result.exit_code == 0
    out = result.output
    assert out.startswith("required_tools: Required tools were called before the answer.\n")
    assert "kinds: omission, premature_answer, no_answer\n" in out
    for title in DOC_SECTIONS:
        assert f"\n{title}\n{'-' * len(title)}\n" in out
    assert "tools: [screen_sanctions, lookup_beneficial_owners]" in out
    assert f"Every rule also takes: {', '.join(COMMON_FIELDS)}" in out


def test_rules_explain_unknown_type_suggests_and_exits_2():
    result = run("rules", "explain", "trajectroy")
    assert result.exit_code == 2
    assert "unknown rule type 'trajectroy'; did you mean trajectory?" in result.output


def test_rules_explain_a_plugin_needs_allow_plugins():
    assert run("rules", "explain", "plugin_example:MaxLength").exit_code == 2
    result = run("rules", "explain", "plugin_example:MaxLength", "--allow-plugins")
    assert result.exit_code == 0
    assert result.output == (
        "plugin_example:MaxLength: Answers are at most max_chars characters long.\n"
    )


def test_rules_check_summarizes_a_valid_pack(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.yaml").write_text(
        "pack: support\nrules:\n"
        "  - {id: allowed, type: allowed_tools, tools: [a], severity: high, weight: 20,"
        " when: {agent: bot}}\n"
        "  - {id: budget, type: budget, max_tokens: 100}\n"
        "  - {id: short, type: 'plugin_example:MaxLength', max_chars: 3}\n"
    )
    result = run("rules", "check", "p.yaml", "--allow-plugins")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("pack support (p.yaml, sha256 ")
    assert lines[0].endswith("): 3 rules, 0 tool specs")
    assert lines[1:] == [
        "  allowed                  allowed_tools    high     weight 20  when agent in (bot)",
        "  budget                   budget           medium   no weight  when every run",
        "  short                    plugin_example:MaxLength medium   no weight  when every run",
    ]


def test_rules_check_bad_pack_lists_every_problem_and_exits_2(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.yaml").write_text(
        "pack: p\nrules:\n  - {id: a, type: budgt}\n  - {id: short, type: 'plugin_example:X'}\n"
    )
    result = run("rules", "check", "p.yaml")
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        "Error: 2 problems in rule pack p.yaml:",
        "  p.yaml:3: rules[0].type (rule a): unknown rule type 'budgt'; did you mean budget? "
        f"(rule types: {', '.join(sorted(REGISTRY))}; or module:Class for a plugin)",
        "  p.yaml:4: rules[1].type (rule short): plugin rule type plugin_example:X runs Python "
        "code from the pack, so it loads only when allowed: pass --allow-plugins "
        "(allow_plugins=True in the API)",
    ]


def test_option_names_exclude_common_and_internal_fields():
    from analyzer.checks.output_schema import OutputSchema

    assert OutputSchema.option_names() == ["schema"]
    assert {f.name for f in fields(OutputSchema)} >= {"validator", *COMMON_FIELDS}


def test_docs_rules_md_is_the_generated_reference():
    """docs/rules.md is `agenttrace rules reference`: a rule type's docstring changed without
    regenerating it fails here (AGENTTRACE_UPDATE_GOLDEN=1 rewrites it)."""
    from analyzer.checks.reference import reference

    path = Path(__file__).resolve().parents[1] / "docs" / "rules.md"
    text = reference()
    if os.environ.get("AGENTTRACE_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == text
    for name in [*REGISTRY, "plugin"]:  # each type has its section and a row in the index
        assert f"\n## {name}\n" in text and f"| [`{name}`](#{name}) |" in text
    result = CliRunner().invoke(main, ["rules", "reference"])
    assert result.exit_code == 0 and result.output == text
