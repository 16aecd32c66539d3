"""Rule pack loading: every problem at once, with file, line, path and the valid choices."""

from __future__ import annotations

import functools
import json
import os
from dataclasses import MISSING, fields
from pathlib import Path

import pytest

from analyzer.checks import REGISTRY
from analyzer.checks.base import COMMON_FIELDS, When
from analyzer.checks.trajectory import Trajectory
from analyzer.errors import RulePackError
from analyzer.pack import (
    load_default_pack,
    load_packs,
    pack_from_mapping,
    pack_schema,
    read_tool_specs,
)

ROOT = Path(__file__).resolve().parent.parent


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def problems(paths, **kw) -> list[str]:
    with pytest.raises(RulePackError) as err:
        load_packs(paths, **kw)
    return str(err.value).splitlines()


GOOD = """\
pack: kyc-review
description: KYC file review
tools:
  screen_sanctions: {type: object, required: [full_name], properties: {full_name: {type: string}}}
rules:
  - id: kyc-required
    type: required_tools
    when: {attributes: {app.case_type: [kyc, kyc_renewal], app.tier: 2}}
    tools: [screen_sanctions, lookup_owners]
    severity: critical
    weight: 30
  - id: refund
    type: trajectory
    sequence: [chercher_commande, escalader_humain]
    forbidden: [creer_remboursement]
    max_steps: 3
    args: {chercher_commande: {numero: CMD-127745}, screen_sanctions: {full_name: Eve}}
  - {id: verdict, type: output_schema, schema: schemas/verdict.json}
  - {id: budget, type: budget, max_cost_usd: 0.05, max_model_calls: 12, when: {agent: kyc}}
"""


def test_valid_pack_loads_with_immutable_rules_and_paths_relative_to_the_pack(
    tmp_path, monkeypatch
):
    write(tmp_path / "packs/schemas/verdict.json", '{"type": "object"}')
    path = write(tmp_path / "packs/kyc.yaml", GOOD)
    monkeypatch.chdir(tmp_path)  # the schema path resolves next to the pack, not here
    (pack,) = load_packs([path])
    assert pack.name == "kyc-review"
    assert pack.description == "KYC file review"
    assert list(pack.tools) == ["screen_sanctions"]
    assert pack.sha256 is not None and len(pack.sha256) == 64
    assert [r.id for r in pack.rules] == ["kyc-required", "refund", "verdict", "budget"]
    req = pack.rules[0]
    assert (req.type, req.tools, req.severity, req.weight) == (
        "required_tools",
        ("screen_sanctions", "lookup_owners"),
        "critical",
        30,
    )
    assert req.when == When(
        attributes=(("app.case_type", ("kyc", "kyc_renewal")), ("app.tier", ("2",))),
        agents=(),
    )
    traj = pack.rules[1]
    assert isinstance(traj, Trajectory)
    assert traj.sequence == ("chercher_commande", "escalader_humain")
    assert traj.severity == "medium"  # the default
    assert pack.rules[3].when == When(agents=("kyc",))
    assert pack.rules[2].validator is not None


def test_every_problem_is_reported_at_once_with_line_path_and_choices(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path / "bad.yaml",
        """\
pack: kyc
rules:
  - id: req
    type: required_tool
    tools: [screen_sanctions]
  - id: traj
    type: trajectory
    sequence: [chercher_commande]
    max_step: 3
  - {id: b, type: budget, severity: urgent, max_tokens: 10}
  - {id: t2, type: trajectory}
  - {id: ok, type: allowed_tools, tools: [a, a], when: {agent: 3}}
""",
    )
    assert problems(["bad.yaml"]) == [
        "6 problems in rule pack bad.yaml:",
        "  bad.yaml:4: rules[0].type (rule req): unknown rule type 'required_tool'; did you mean "
        f"required_tools? (rule types: {', '.join(sorted(REGISTRY))}; or module:Class for a "
        "plugin)",
        "  bad.yaml:9: rules[1].max_step (rule traj): unknown key 'max_step' for rule type "
        "trajectory; did you mean max_steps? (valid keys: args, description, forbidden, id, "
        "max_steps, sequence, severity, type, weight, when)",
        '  bad.yaml:10: rules[2].severity (rule b): "urgent" is not a valid severity; choose one '
        "of critical, high, medium, low",
        "  bad.yaml:11: rules[3] (rule t2): needs at least one of sequence, forbidden, max_steps, "
        "args for rule type trajectory",
        "  bad.yaml:12: rules[4].tools (rule ok): tools lists a more than once",
        "  bad.yaml:12: rules[4].when.agent (rule ok): expected a text or a list, got integer 3",
    ]


def test_problems_of_several_packs_come_in_one_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "a.yaml", "pack: a\nrules:\n  - {id: x, type: budget}\n")
    write(tmp_path / "b.yaml", "pack: b\nrules: []\n")
    assert problems(["a.yaml", "b.yaml", "missing.yaml"]) == [
        "3 problems in rule packs a.yaml, b.yaml, missing.yaml:",
        "  a.yaml:3: rules[0] (rule x): needs at least one of max_cost_usd, max_model_calls, "
        "max_tool_calls, max_tokens, max_duration_s for rule type budget",
        "  b.yaml:2: rules: rules must list at least one item",
        "  missing.yaml: cannot read the rule pack: No such file or directory (built-in "
        "packs: default, kyc, realestate, support)",
    ]


def test_rule_ids_unique_within_a_pack_pack_names_across_packs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path / "a.yaml",
        "pack: a\nrules:\n  - {id: r1, type: allowed_tools, tools: [x]}\n"
        "  - {id: r1, type: allowed_tools, tools: [y]}\n",
    )
    write(tmp_path / "b.yaml", "pack: b\nrules:\n  - {id: r1, type: allowed_tools, tools: [x]}\n")
    write(tmp_path / "c.yaml", "pack: b\nrules:\n  - {id: r2, type: allowed_tools, tools: [x]}\n")
    assert problems(["a.yaml", "b.yaml"])[1:] == [
        "  a.yaml:4: rules[1].id (rule r1): duplicate rule id 'r1' (first used at rules[0])",
    ]
    assert problems(["b.yaml", "c.yaml"])[1:] == [
        "  c.yaml: pack: pack name 'b' is also the name of b.yaml; the packs used together "
        "need names of their own",
    ]
    # two packs may share a rule id: findings name a rule by pack and id
    [b] = load_packs(["b.yaml"])
    [c] = load_packs(["c.yaml"])
    assert (b.name, c.name) == ("b", "b")


def test_bundled_packs_load_by_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no file named kyc or default here
    from analyzer.resources import bundled_pack_names

    assert bundled_pack_names() == ["default", "kyc", "realestate", "support"]
    default, kyc = load_packs(["default", "kyc"])
    assert (default.name, kyc.name) == ("default", "kyc-review")
    assert default.sha256 == load_default_pack().sha256
    root = Path(__file__).resolve().parents[1]
    [from_file] = load_packs([root / "rules" / "kyc.yaml"])
    assert kyc.rules == from_file.rules and kyc.sha256 == from_file.sha256
    # a file of that name wins over the built-in pack
    write(tmp_path / "kyc", "pack: mine\nrules:\n  - {id: r, type: allowed_tools, tools: [x]}\n")
    assert load_packs(["kyc"])[0].name == "mine"


def test_unknown_tools_and_arguments_in_args(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path / "p.yaml",
        """\
pack: p
rules:
  - id: t
    type: trajectory
    sequence: [chercher_commande]
    args: {chercher_comande: {numero: CMD-1}}
""",
    )
    assert problems(["p.yaml"])[1:] == [
        "  p.yaml:6: rules[0].args.chercher_comande (rule t): unknown tool 'chercher_comande' in "
        "args: not in sequence; did you mean chercher_commande?"
    ]
    write(
        tmp_path / "q.yaml",
        """\
pack: q
tools:
  lookup_account: {type: object, properties: {account_id: {type: string}}}
rules:
  - id: t
    type: trajectory
    args:
      lookup_acount: {account_id: A}
      lookup_account: {acount_id: A}
""",
    )
    assert problems(["q.yaml"])[1:] == [
        "  q.yaml:8: rules[0].args.lookup_acount (rule t): unknown tool 'lookup_acount' in args: "
        "not in sequence or the pack's tools; did you mean lookup_account?",
        "  q.yaml:9: rules[0].args.lookup_account.acount_id (rule t): lookup_account has no "
        "argument 'acount_id' in its schema; did you mean account_id? (arguments: account_id)",
    ]


def test_contradictory_trajectory_options(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path / "p.yaml",
        "pack: p\nrules:\n  - {id: t, type: trajectory, sequence: [a, b], forbidden: [b], "
        "max_steps: 1}\n",
    )
    assert problems(["p.yaml"])[1:] == [
        "  p.yaml:3: rules[0].forbidden (rule t): b is both in sequence and forbidden",
        "  p.yaml:3: rules[0].max_steps (rule t): max_steps 1 < 2 tools in sequence: no run can "
        "pass",
    ]


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({}, "cannot read schema file <dir>/v.json: No such file or directory"),
        (
            {"v.json": "{not json"},
            "schema file <dir>/v.json is not valid JSON/YAML: Expecting "
            "property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
        (
            {"v.json": '{"type": "nonsense"}'},
            "schema file <dir>/v.json is not a valid JSON "
            "Schema at $.type: 'nonsense' is not valid under any of the given schemas",
        ),
        (
            {"v.json": '{"$ref": "https://example.com/s.json"}'},
            "schema file <dir>/v.json refers "
            "to https://example.com/s.json: agenttrace never fetches schemas from the network; "
            "copy it next to the schema and refer to the local file",
        ),
        (
            {"v.json": '{"$ref": "other.json"}'},
            "cannot read schema file <dir>/other.json: No such file or directory",
        ),
    ],
    ids=["missing", "not-json", "invalid-schema", "remote-ref", "missing-ref"],
)
def test_unreadable_or_invalid_referenced_schemas(tmp_path, monkeypatch, files, message):
    monkeypatch.chdir(tmp_path)
    for name, text in files.items():
        write(tmp_path / name, text)
    write(
        tmp_path / "p.yaml", "pack: p\nrules:\n  - {id: v, type: output_schema, schema: v.json}\n"
    )
    lines = problems(["p.yaml"])
    assert [line.replace(str(tmp_path.resolve()), "<dir>") for line in lines[1:]] == [
        f"  p.yaml:3: rules[0].schema (rule v): {message}"
    ]


def test_invalid_patterns_are_pack_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path / "p.yaml",
        "pack: p\nrules:\n"
        "  - {id: a, type: output_pattern, pattern: '(?<=x)y'}\n"
        "  - {id: b, type: forbidden_text, patterns: [ok, 'x*', '(']}\n",
    )
    lines = problems(["p.yaml"])
    assert lines[1] == (
        "  p.yaml:3: rules[0].pattern (rule a): invalid regular expression: look-around, "
        "including look-ahead and look-behind, is not supported"
    )
    assert lines[2] == (
        "  p.yaml:4: rules[1].patterns[1] (rule b): invalid pattern 'x*': it matches the empty "
        "text, so every answer would be flagged"
    )
    assert lines[3].startswith("  p.yaml:4: rules[1].patterns[2] (rule b): invalid pattern '(':")
    assert len(lines) == 4


def test_plugins_refused_unless_allowed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path / "p.yaml",
        "pack: p\nrules:\n  - {id: short, type: 'plugin_example:MaxLength', max_chars: 4}\n",
    )
    assert problems(["p.yaml"])[1:] == [
        "  p.yaml:3: rules[0].type (rule short): plugin rule type plugin_example:MaxLength runs "
        "Python code from the pack, so it loads only when allowed: pass --allow-plugins "
        "(allow_plugins=True in the API)"
    ]
    (pack,) = load_packs(["p.yaml"], allow_plugins=True)
    rule = pack.rules[0]
    assert (rule.id, rule.target, dict(rule.options)) == (
        "short",
        "plugin_example:MaxLength",
        {"max_chars": 4},
    )
    assert rule.instance.max_chars == 4


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (
            "{id: x, type: 'no_such_module:C'}",
            "rules[0].type (rule x): cannot import "
            "no_such_module: ModuleNotFoundError: No module named 'no_such_module'",
        ),
        (
            "{id: x, type: 'plugin_example:Nope'}",
            "rules[0].type (rule x): module plugin_example has no class Nope",
        ),
        (
            "{id: x, type: 'plugin_example:MaxLength', max_char: 4}",
            "rules[0] (rule x): "
            "plugin_example:MaxLength(max_char) failed: TypeError: MaxLength.__init__() got an "
            "unexpected keyword argument 'max_char'",
        ),
        (
            "{id: x, type: 'json:JSONDecoder'}",
            "rules[0].type (rule x): json:JSONDecoder has no check_run(run, steps) method",
        ),
        (
            "{id: x, type: 'a.b:C:D'}",
            "rules[0].type (rule x): 'a.b:C:D' is not a plugin path of "
            "the form package.module:ClassName",
        ),
    ],
    ids=["no-module", "no-class", "bad-key", "no-check-run", "bad-path"],
)
def test_plugin_load_errors(tmp_path, monkeypatch, rule, message):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "p.yaml", f"pack: p\nrules:\n  - {rule}\n")
    assert problems(["p.yaml"], allow_plugins=True)[1:] == [f"  p.yaml:3: {message}"]


def test_retries_and_argument_schema_options_are_validated(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path / "p.yaml",
        "pack: p\nrules:\n"
        "  - {id: r, type: retries, max: -1}\n"
        "  - {id: a, type: argument_schema, tools: []}\n"
        "  - {id: b, type: argument_schema, tool: [x]}\n",
    )
    assert problems(["p.yaml"])[1:] == [
        "  p.yaml:3: rules[0].max (rule r): -1 is less than the minimum of 0",
        "  p.yaml:4: rules[1].tools (rule a): tools must list at least one item",
        "  p.yaml:5: rules[2].tool (rule b): unknown key 'tool' for rule type argument_schema; "
        "did you mean tools? (valid keys: description, id, severity, tools, type, weight, when)",
    ]
    write(
        tmp_path / "q.yaml",
        "pack: q\nrules:\n  - {id: r, type: retries}\n"
        "  - {id: a, type: argument_schema, tools: [lookup_account]}\n",
    )
    (pack,) = load_packs(["q.yaml"])
    assert [(r.type, r.option_names()) for r in pack.rules] == [
        ("retries", ["max"]),
        ("argument_schema", ["tools"]),
    ]
    assert (pack.rules[0].max, pack.rules[1].tools) == (0, ("lookup_account",))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "pack: p\nrules: [\n",
            "p.yaml:3: not valid YAML: expected the node content, but found '<stream end>'",
        ),
        (
            "pack: p\npack: q\nrules:\n  - {id: a, type: allowed_tools, tools: [x]}\n",
            "p.yaml:2: pack: duplicate key 'pack' (YAML would silently keep the last one)",
        ),
        (
            "- just a list\n",
            "p.yaml:1: a rule pack is a mapping with at least `pack:` and `rules:`",
        ),
        (
            "pack: p\nrules:\n  - {id: a, type: allowed_tools, tools: [x]}\nextra: 1\n",
            "p.yaml:4: extra: unknown key 'extra' (valid keys: description, pack, rules, "
            "tool_specs, tools)",
        ),
        (
            "pack: p\nrules:\n  - {id: a, type: budget, max_cost_usd: .nan}\n",
            "p.yaml:3: rules[0].max_cost_usd (rule a): nan is not a finite number",
        ),
        (
            "pack: p\nrules:\n  - {id: a, type: budget, max_tokens: 10,\n     weight: .inf}\n",
            "p.yaml:4: rules[0].weight (rule a): inf is not a finite number",
        ),
    ],
    ids=[
        "yaml-syntax",
        "duplicate-key",
        "not-a-mapping",
        "unknown-top-level-key",
        "nan-passes-every-bound",
        "infinity-too",
    ],
)
def test_document_level_problems(tmp_path, monkeypatch, text, message):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "p.yaml", text)
    assert problems(["p.yaml"])[1:] == [f"  {message}"]


def test_tool_specs_file_in_openai_anthropic_and_mcp_formats(tmp_path):
    openai = [
        {"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}},
        {"name": "b", "input_schema": {"type": "object", "properties": {"x": {}}}},
        {"name": "c", "inputSchema": {"type": "object"}},
        {"name": "d"},
    ]
    path = write(tmp_path / "tools.json", json.dumps({"tools": openai}))
    assert read_tool_specs(path) == {
        "a": {"type": "object"},
        "b": {"type": "object", "properties": {"x": {}}},
        "c": {"type": "object"},
        "d": {"type": "object"},
    }
    pack_file = write(
        tmp_path / "p.yaml",
        "pack: p\ntool_specs: tools.json\ntools: {e: {type: object}}\n"
        "rules:\n  - {id: t, type: trajectory, args: {b: {x: 1}}}\n",
    )
    (pack,) = load_packs([pack_file])
    assert list(pack.tools) == ["a", "b", "c", "d", "e"]
    write(tmp_path / "bad.json", json.dumps([{"name": "a", "parameters": {"type": 3}}]))
    with pytest.raises(ValueError, match="a: not a valid JSON Schema"):
        read_tool_specs(tmp_path / "bad.json")


def test_pack_from_mapping_raises_the_same_errors():
    with pytest.raises(RulePackError, match=r"<pack>:0?.*unknown rule type 'budgt'; did you mean"):
        pack_from_mapping({"pack": "p", "rules": [{"id": "a", "type": "budgt"}]})
    pack = pack_from_mapping(
        {"pack": "p", "rules": [{"id": "a", "type": "budget", "max_tokens": 5}]}
    )
    assert pack.rules[0].max_tokens == 5 and pack.path is None and pack.sha256 is None


# --- the schema file itself --------------------------------------------------------------------


def _schema() -> dict:
    return json.loads((ROOT / "schemas" / "rulepack.schema.json").read_text(encoding="utf-8"))


def test_the_schema_file_is_the_generated_schema():
    """schemas/rulepack.schema.json is `pack_schema()`: a rule type changed without
    regenerating it fails here (AGENTTRACE_UPDATE_GOLDEN=1 rewrites it)."""
    path = ROOT / "schemas" / "rulepack.schema.json"
    text = json.dumps(pack_schema(), indent=2, ensure_ascii=False) + "\n"
    if os.environ.get("AGENTTRACE_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == text


def _resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node and "title" not in node:
        path = node["$ref"].removeprefix("#/").split("/")
        node = schema
        for part in path:
            node = node[part]
    return node


def test_schema_has_a_title_and_description_on_every_property():
    schema = _schema()
    missing = []

    def walk(node, where):
        if isinstance(node, dict):
            for name, prop in (node.get("properties") or {}).items():
                target = _resolve(schema, prop)
                if not (target.get("title") and target.get("description")):
                    missing.append(f"{where}.{name}")
            for key, value in node.items():
                if key != "if":  # conditions name no property of their own
                    walk(value, f"{where}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}[{i}]")

    walk(schema, "$")
    assert missing == []


def test_schema_branches_match_the_registered_rule_types():
    schema = _schema()
    defs = schema["$defs"]
    assert set(defs["rule"]["properties"]["type"]["anyOf"][0]["enum"]) == set(REGISTRY)
    branches = {b["if"]["properties"]["type"].get("const") for b in defs["rule"]["allOf"]}
    assert branches - {None} == set(REGISTRY)
    for name, cls in REGISTRY.items():
        branch = defs[name]
        assert branch["additionalProperties"] is False, name
        keys = {f.name for f in fields(cls) if f.init and not f.metadata.get("internal")}
        assert set(branch["properties"]) == keys | {"type"}, name
        required = {
            f.name
            for f in fields(cls)
            if f.init and f.default is MISSING and f.default_factory is MISSING
        }
        assert set(branch["required"]) == required | {"type"}, name
        assert set(COMMON_FIELDS) <= set(branch["properties"]), name


def test_the_bundled_pack_and_prices_follow_their_schemas():
    # they are not checked against them when loaded (`load_default_pack`, `load_prices`)
    import yaml

    from analyzer import pack, pricing
    from analyzer.resources import bundled_rules_text

    assert pack._schema_problems(yaml.safe_load(bundled_rules_text(pack.DEFAULT_PACK))) == []
    prices = yaml.safe_load(bundled_rules_text(pricing.BUNDLED_PRICES))
    problems = functools.partial(
        pricing.schema_problems, name="prices.schema.json", explain=pricing._explain
    )
    assert problems(prices) == []
    assert problems({**prices, "currency": 3})  # the check itself works
