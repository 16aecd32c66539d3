"""Rule packs: YAML read, validated against their JSON Schema, every problem at once.

A pack that cannot be used is refused with one `RulePackError` listing every problem found in
every pack given, each with its file, line, path inside the file (``rules[2].max_steps``), what
is wrong and the valid choices. Relative paths inside a pack are relative to the pack file.

The JSON Schema (`pack_schema`, written to schemas/rulepack.schema.json for editors and users)
is generated from the rule types: each option's type from its field, its description from the
Options section of the rule type's docstring.
"""

from __future__ import annotations

import hashlib
import math
import re
import types
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from analyzer.checks.base import (
    COMMON_FIELDS,
    Check,
    LoadEnv,
    Pack,
    did_you_mean,
    doc_sections,
    json_path,
    rule_types,
)
from analyzer.checks.plugin import PLUGIN_TYPE, build_plugin
from analyzer.errors import RulePackError
from analyzer.resources import schema
from analyzer.yamlplace import load_yaml, path_text, read_document, show, yaml_line

if TYPE_CHECKING:  # jsonschema is imported where a pack is read (not by a pool's workers)
    from jsonschema import Draft202012Validator, ValidationError

__all__ = [
    "DEFAULT_PACK",
    "Pack",
    "load_default_pack",
    "load_packs",
    "pack_from_mapping",
    "pack_schema",
    "read_tool_specs",
]


@dataclass(frozen=True, order=True)
class _Problem:
    file_order: int
    line: int
    where: str
    message: str
    file: str = field(compare=False)

    def render(self) -> str:
        loc = f"{self.file}:{self.line}" if self.line else self.file
        return f"{loc}: {self.where}: {self.message}" if self.where else f"{loc}: {self.message}"


class _Problems:
    """Collects problems across every pack; raises them together."""

    def __init__(self) -> None:
        self.items: list[_Problem] = []
        self.files: list[str] = []

    def add(self, file: str, line: int | None, where: str, message: str) -> None:
        if file not in self.files:
            self.files.append(file)
        problem = _Problem(self.files.index(file), line or 0, where, message, file)
        if problem not in self.items:
            self.items.append(problem)

    def raise_if_any(self) -> None:
        if not self.items:
            return
        n = len(self.items)
        files = ", ".join(self.files)
        head = f"{n} problem{'s' if n > 1 else ''} in rule pack{'s' if len(self.files) > 1 else ''}"
        lines = [f"  {p.render()}" for p in sorted(self.items)]
        raise RulePackError(f"{head} {files}:\n" + "\n".join(lines))


# --- public API -------------------------------------------------------------------------------


def load_packs(paths: Iterable[str | Path], allow_plugins: bool = False) -> list[Pack]:
    """Load and validate rule packs; raise one RulePackError listing every problem.

    Each is a file, or the name of a pack that ships with agenttrace (``default``, ``kyc``:
    `analyzer.resources.bundled_pack_names`) where no such file exists. Rule ids are unique
    within a pack, pack names across the packs given together (findings name a rule by
    pack and id). Plugin rule types (``module:Class``) are refused unless ``allow_plugins``.
    """
    from analyzer.resources import bundled_pack_names, bundled_rules_text

    problems = _Problems()
    packs: list[tuple[Pack, str]] = []
    for raw_path in paths:
        path = Path(raw_path)
        shown = str(raw_path)
        bundled = not path.exists() and str(raw_path) in bundled_pack_names()
        try:
            if bundled:
                path = Path(f"{raw_path}.yaml")
                shown = f"<built-in {raw_path} pack>"
                raw = bundled_rules_text(path.name).encode("utf-8")
            else:
                raw = path.read_bytes()
        except OSError as err:
            known = ", ".join(bundled_pack_names())
            problems.add(
                shown,
                None,
                "",
                f"cannot read the rule pack: {err.strerror or err} (built-in packs: {known})",
            )
            continue
        pack = _load_bytes(raw, path, shown, allow_plugins, problems, bundled=bundled)
        if pack is not None:
            packs.append((pack, shown))
    first: dict[str, str] = {}
    for pack, shown in packs:
        if pack.name in first:
            problems.add(
                shown,
                None,
                "pack",
                f"pack name {pack.name!r} is also the name of {first[pack.name]}; the packs "
                "used together need names of their own",
            )
        first.setdefault(pack.name, shown)
    problems.raise_if_any()
    return [pack for pack, _ in packs]


DEFAULT_PACK = "default.yaml"


def load_default_pack() -> Pack:
    """The built-in pack (``rules/default.yaml``), used by ``report`` when no pack is given."""
    from analyzer.resources import bundled_rules_text

    problems = _Problems()
    raw = bundled_rules_text(DEFAULT_PACK).encode("utf-8")
    pack = _load_bytes(
        raw, Path(DEFAULT_PACK), "<built-in default pack>", False, problems, bundled=True
    )
    problems.raise_if_any()
    assert pack is not None
    return pack


def pack_from_mapping(
    data: Any,
    source: str | Path | None = None,
    *,
    allow_plugins: bool = False,
) -> Pack:
    """A pack from already-parsed YAML; relative paths resolve next to ``source`` (else cwd)."""
    problems = _Problems()
    path = Path(source) if source is not None else None
    shown = str(source) if source is not None else "<pack>"
    pack = _build(data, None, path, shown, allow_plugins, problems, sha256=None)
    problems.raise_if_any()
    assert pack is not None
    return pack


# --- one pack ---------------------------------------------------------------------------------


def _load_bytes(
    raw: bytes,
    path: Path,
    shown: str,
    allow_plugins: bool,
    problems: _Problems,
    bundled: bool = False,
) -> Pack | None:
    """The pack in `raw`; one `bundled` with the package is not checked against the JSON
    Schema (the tests do), so that a `report` with the default pack never imports jsonschema."""
    sha = hashlib.sha256(raw).hexdigest()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        problems.add(shown, None, "", f"not UTF-8 text (byte {err.start})")
        return None
    try:
        data, root = load_yaml(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        what = getattr(err, "problem", None) or str(err).splitlines()[0]
        problems.add(shown, line, "", f"not valid YAML: {what}")
        return None
    return _build(data, root, path, shown, allow_plugins, problems, sha256=sha, bundled=bundled)


def _build(
    data: Any,
    root: yaml.Node | None,
    path: Path | None,
    shown: str,
    allow_plugins: bool,
    problems: _Problems,
    *,
    sha256: str | None,
    bundled: bool = False,
) -> Pack | None:
    base_dir = path.resolve().parent if path is not None else Path.cwd()

    def report(where: tuple[str | int, ...], message: str) -> None:
        problems.add(shown, yaml_line(root, where), _render_path(where, data), message)

    if root is not None:
        for where, key in _duplicate_keys(root):
            report(where, f"duplicate key {key!r} (YAML would silently keep the last one)")
    if not isinstance(data, dict):
        report((), "a rule pack is a mapping with at least `pack:` and `rules:`")
        return None

    # A rule whose whole shape is wrong (bad type, missing key) is not built; one with wrong
    # keys is built without them, so that its other problems are reported in the same round.
    broken: set[int] = set()
    bad_keys: dict[int, set[str]] = {}
    for where, message in [] if bundled else _schema_problems(data):
        report(where, message)
        if len(where) >= 2 and where[0] == "rules" and isinstance(where[1], int):
            if len(where) == 2 or where[2] in ("id", "type"):
                broken.add(where[1])
            else:
                bad_keys.setdefault(where[1], set()).add(str(where[2]))
    rules_raw = data.get("rules") if isinstance(data.get("rules"), list) else []

    tools = _tools(data, base_dir, report)

    checks: list[Check] = []
    first_at: dict[str, int] = {}
    for i, raw in enumerate(rules_raw):
        if not isinstance(raw, dict):
            continue
        rule_id = raw.get("id")
        if isinstance(rule_id, str):
            if rule_id in first_at:
                report(
                    ("rules", i, "id"),
                    f"duplicate rule id {rule_id!r} (first used at rules[{first_at[rule_id]}])",
                )
            else:
                first_at[rule_id] = i
        if i in broken:
            continue
        usable = {k: v for k, v in raw.items() if k not in bad_keys.get(i, ())}
        rule = _rule(usable, i, base_dir, tools, allow_plugins, report)
        if rule is not None:
            checks.append(rule)
    if problems.items:
        return None
    return Pack(
        name=data["pack"],
        rules=tuple(checks),
        path=path,
        description=data.get("description"),
        tools=tools,
        sha256=sha256,
    )


def _rule(
    raw: dict[str, Any],
    i: int,
    base_dir: Path,
    tools: Mapping[str, Any],
    allow_plugins: bool,
    report,
) -> Check | None:
    options = {k: v for k, v in raw.items() if k != "type"}
    env = LoadEnv(
        base_dir=base_dir,
        tools=tools,
        report=lambda where, message: report(("rules", i, *where), message),
        allow_plugins=allow_plugins,
    )
    kind = raw["type"]
    try:
        if kind in rule_types():
            cls = rule_types()[kind]
            if any(k not in options for k in _required(cls)):
                return None  # already reported by the schema
            return cls.from_options(options, env)
        if not allow_plugins:
            env.report(
                ("type",),
                f"plugin rule type {kind} runs Python code from the pack, so it loads only when "
                "allowed: pass --allow-plugins (allow_plugins=True in the API)",
            )
            return None
        return build_plugin(kind, options, env)
    except (TypeError, ValueError) as err:  # a constructor refusing a value the schema let by
        env.report((), str(err))
        return None


def _required(cls: type[Check]) -> list[str]:
    return [
        f.name
        for f in fields(cls)
        if f.init and f.default is MISSING and f.default_factory is MISSING
    ]


# --- tool specs -------------------------------------------------------------------------------


def _tools(data: dict[str, Any], base_dir: Path, report) -> dict[str, Any]:
    tools: dict[str, Any] = {}
    spec_file = data.get("tool_specs")
    if isinstance(spec_file, str):
        try:
            tools.update(read_tool_specs(base_dir / spec_file))
        except ValueError as err:
            report(("tool_specs",), str(err))
    inline = data.get("tools")
    if isinstance(inline, dict):
        for name, schema in inline.items():
            if name in tools:
                report(("tools", name), f"tool {name!r} is also defined in {spec_file}")
                continue
            problem = _schema_error(schema)
            if problem:
                report(("tools", name), f"not a valid JSON Schema: {problem}")
                continue
            tools[name] = schema
    return dict(sorted(tools.items()))


def _schema_error(schema: Any) -> str | None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as err:
        where = json_path(err.absolute_path)[1:].lstrip(".")
        return f"{err.message}" + (f" at {where}" if where else "")
    return None


def read_tool_specs(path: Path) -> dict[str, Any]:
    """Tool name -> argument JSON Schema from a tool-definition file.

    Accepts a JSON or YAML list (or ``{"tools": [...]}`` / ``{"functions": [...]}``) of OpenAI
    chat (``{"type": "function", "function": {"name", "parameters"}}``), OpenAI responses or
    legacy functions (``{"name", "parameters"}``), Anthropic (``{"name", "input_schema"}``) or
    MCP (``{"name", "inputSchema"}``) definitions. ValueError says what is wrong.
    """
    doc = read_document(path, "tool specs file")
    items = doc
    if isinstance(doc, dict):
        items = doc.get("tools", doc.get("functions"))
    if not isinstance(items, list):
        raise ValueError(f"tool specs file {path} holds no list of tool definitions")
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        fn = item.get("function") if isinstance(item, dict) else None
        fn = fn if isinstance(fn, dict) else item
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(name, str) or not name:
            raise ValueError(f"tool specs file {path}: definition {i} has no name")
        schema = next(
            (fn[k] for k in ("parameters", "input_schema", "inputSchema") if k in fn),
            {"type": "object"},
        )
        problem = _schema_error(schema)
        if problem:
            raise ValueError(f"tool specs file {path}: {name}: not a valid JSON Schema: {problem}")
        if name in out:
            raise ValueError(f"tool specs file {path}: tool {name!r} defined twice")
        out[name] = schema
    return out


# --- the pack's JSON Schema ------------------------------------------------------------------

#: The ``$comment`` of the parts of schemas/rulepack.schema.json that `pack_schema` writes.
_GENERATED = "generated from the rule types by analyzer.pack.pack_schema"
_OPTION_DOC = re.compile(r"^(\w+) : .*\n((?:[ \t]+\S.*\n?)+)", re.MULTILINE)


def pack_schema() -> dict[str, Any]:
    """The JSON Schema of a rule pack (schemas/rulepack.schema.json): the keys of the pack, of
    every rule and of plugin rules as written in that file, and a branch per rule type
    (`rule_types`) generated from its fields and the Options of its docstring."""
    written = schema("rulepack.schema.json")
    defs = {k: v for k, v in written["$defs"].items() if v.get("$comment") != _GENERATED}
    common = {name: {"$ref": f"#/$defs/common/properties/{name}"} for name in COMMON_FIELDS}
    types = rule_types()
    defs.update((name, _rule_schema(cls, common)) for name, cls in types.items())
    plugin = {"type": "string", "pattern": PLUGIN_TYPE.pattern}
    branches = [*((name, {"const": name}) for name in types), ("plugin", plugin)]
    defs["rule"] = {
        "$comment": _GENERATED,
        "title": "rule",
        "description": "One rule: an id, a type and the type's own keys.",
        "type": "object",
        "required": ["id", "type"],
        "properties": {
            "id": common["id"],
            "type": {
                "title": "rule type",
                "description": "A built-in rule type, or module:Class for a plugin.",
                "anyOf": [{"enum": list(types)}, plugin],
            },
        },
        "allOf": [
            {
                "if": {"properties": {"type": test}, "required": ["type"]},
                "then": {"$ref": f"#/$defs/{name}"},
            }
            for name, test in branches
        ],
    }
    return {**written, "$defs": defs}


def _rule_schema(cls: type[Check], common: dict[str, Any]) -> dict[str, Any]:
    """A rule type's branch: each option's type from its field (`_json_type`, then the
    ``schema`` of the field's metadata), its description from the docstring's Options."""
    sections = doc_sections(cls)
    docs = {m[1]: " ".join(m[2].split()) for m in _OPTION_DOC.finditer(sections["Options"] + "\n")}
    hints = typing.get_type_hints(cls)
    kind = {"title": "rule type", "description": f"The rule type: {cls.type}.", "const": cls.type}
    props = {**common, "type": kind}
    for f in fields(cls):
        if f.name in cls.option_names():
            props[f.name] = {
                "title": f.name,
                "description": docs[f.name].replace("``", "`"),  # KeyError: not documented
                **_json_type(hints[f.name]),
                **f.metadata.get("schema", {}),
            }
    branch = {
        "$comment": _GENERATED,
        "title": f"{cls.type} rule",
        "description": f"{' '.join(sections[''].split())} (kinds: {', '.join(cls.kinds)})",
        "type": "object",
        "required": ["id", "type", *(k for k in _required(cls) if k != "id")],
        "additionalProperties": False,
        "properties": props,
    }
    if re.search(r"^At least one \w+ is required", sections["Options"], re.MULTILINE):
        branch["anyOf"] = [{"required": [name]} for name in cls.option_names()]
    return branch


#: The JSON Schema of the field types that need no more than their name.
_JSON_TYPES_OF = {
    str: {"type": "string", "minLength": 1},
    bool: {"type": "boolean"},
    int: {"type": "integer", "minimum": 0},
    float: {"type": "number", "minimum": 0},
}


def _json_type(hint: Any) -> dict[str, Any]:
    """The JSON Schema of a field's type: texts and lists are not empty, numbers not negative,
    lists hold distinct items, mappings at least one key."""
    args = typing.get_args(hint)
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        members = [_json_type(a) for a in args if a is not type(None)]
        return members[0] if len(members) == 1 else {"anyOf": members}
    if origin is tuple:
        return {"type": "array", "minItems": 1, "uniqueItems": True, "items": _json_type(args[0])}
    if origin in (Mapping, dict):
        inner = {"additionalProperties": _json_type(args[1])} if args[1] is not Any else {}
        return {"type": "object", "minProperties": 1, **inner}
    return dict(_JSON_TYPES_OF.get(hint, {}))


# --- schema validation and its messages -------------------------------------------------------


@lru_cache(maxsize=1)
def _validator(types: tuple[type[Check], ...]) -> Draft202012Validator:
    """The validator of packs, for the rule types ``types`` (the tests add some)."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(pack_schema())


_JSON_TYPES = {
    "array": "a list",
    "object": "a mapping",
    "string": "a text",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


def _schema_problems(data: dict[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    validator = _validator(tuple(rule_types().values()))
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.path])
    found = [problem for err in errors for problem in _explain(err, data)]
    infinite = [(where, f"{number} is not a finite number") for where, number in _non_finite(data)]
    return found + infinite


def _non_finite(node: Any, where: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple, float]]:
    """Where YAML's ``.nan`` and ``.inf`` stand: they pass every bound of the schema."""
    if isinstance(node, float) and not math.isfinite(node):
        yield where, node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _non_finite(value, (*where, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _non_finite(value, (*where, i))


def _explain(err: ValidationError, data: Any) -> list[tuple[tuple[str | int, ...], str]]:
    where = tuple(err.path)
    value = err.instance
    schema = err.schema if isinstance(err.schema, dict) else {}
    # untitled: named by its key, a list item by its list and index (tools[0])
    title = (
        schema.get("title")
        or path_text(where[-2 if where and isinstance(where[-1], int) else -1 :])
        or "pack"
    )
    is_type_key = len(where) == 3 and where[0] == "rules" and where[2] == "type"
    v = err.validator
    if is_type_key and v in ("anyOf", "enum", "pattern", "type"):
        return [(where, _type_message(value))]
    if v == "additionalProperties":
        props = sorted(schema.get("properties", {}))
        extra = sorted(k for k in value if k not in props)
        owner = _owner(where, data)
        return [
            (
                (*where, key),
                f"unknown key {key!r}{owner}{did_you_mean(key, props)} "
                f"(valid keys: {', '.join(props)})",
            )
            for key in extra
        ]
    if v == "required":
        missing = [k for k in err.validator_value if isinstance(value, dict) and k not in value]
        return [(where, f"missing required key {k!r}{_owner(where, data)}") for k in missing]
    if v == "enum":
        choices = [str(c) for c in err.validator_value]
        hint = did_you_mean(str(value), choices) if isinstance(value, str) else ""
        return [
            (
                where,
                f"{show(value)} is not a valid {title}{hint}; choose one of {', '.join(choices)}",
            )
        ]
    if v == "anyOf" and all(set(b) == {"required"} for b in err.validator_value):
        keys = [k for b in err.validator_value for k in b["required"]]
        return [(where, f"needs at least one of {', '.join(keys)}{_owner(where, data)}")]
    if v in ("type", "anyOf"):
        expected = err.validator_value
        if v == "anyOf":  # branches of one type each
            expected = [b.get("type") for b in expected]
        elif not isinstance(expected, list):
            expected = [expected]
        wanted = " or ".join(
            _JSON_TYPES.get(t, t) if isinstance(t, str) else "a value" for t in expected
        )
        return [(where, f"expected {wanted}, got {_kind(value)} {show(value)}")]
    if v == "minItems" and err.validator_value == 1:
        return [(where, f"{title} must list at least one item")]
    if v == "minLength" or (v == "minProperties" and err.validator_value == 1):
        return [(where, f"{title} must not be empty")]
    if v == "uniqueItems":
        dups = sorted({str(x) for x in value if value.count(x) > 1})
        return [(where, f"{title} lists {', '.join(dups)} more than once")]
    if v == "pattern":
        return [(where, f"{show(value)} is not a valid {title} (must match {err.validator_value})")]
    if v == "propertyNames":
        return [(where, f"{title}: {err.message}")]
    return [(where, err.message)]


def _type_message(value: Any) -> str:
    choices = list(rule_types())
    listing = f"rule types: {', '.join(choices)}; or module:Class for a plugin"
    if not isinstance(value, str):
        return f"rule type must be a text, got {_kind(value)} {show(value)} ({listing})"
    if ":" in value and not PLUGIN_TYPE.match(value):
        return f"{value!r} is not a plugin path of the form package.module:ClassName"
    return f"unknown rule type {value!r}{did_you_mean(value, choices)} ({listing})"


def _owner(where: tuple[str | int, ...], data: Any) -> str:
    """' for rule type X' when ``where`` is a rule, else ''."""
    if len(where) == 2 and where[0] == "rules":
        node = _get(data, where)
        if isinstance(node, dict) and isinstance(node.get("type"), str):
            return f" for rule type {node['type']}"
    return ""


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    kinds = (("text", str), ("integer", int), ("number", float), ("list", list), ("mapping", dict))
    for name, t in kinds:
        if isinstance(value, t):
            return name
    return "null" if value is None else type(value).__name__


# --- paths and line numbers -------------------------------------------------------------------


def _get(data: Any, where: Sequence[str | int]) -> Any:
    for part in where:
        in_dict = isinstance(data, dict) and part in data
        in_list = isinstance(data, list) and isinstance(part, int) and part < len(data)
        if not (in_dict or in_list):
            return None
        data = data[part]
    return data


def _render_path(where: Sequence[str | int], data: Any) -> str:
    out = path_text(where)
    if len(where) >= 2 and where[0] == "rules" and isinstance(where[1], int):
        rule = _get(data, where[:2])
        if isinstance(rule, dict) and isinstance(rule.get("id"), str):
            out += f" (rule {rule['id']})"
    return out


def _duplicate_keys(node: yaml.Node, where: tuple[str | int, ...] = ()):
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, val in node.value:
            k = key.value if isinstance(key, yaml.ScalarNode) else str(key)
            if k in seen:
                yield (*where, k), k
            seen.add(k)
            yield from _duplicate_keys(val, (*where, k))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _duplicate_keys(item, (*where, i))
