"""Where a problem sits in a YAML file (its line and a readable path), the error that lists
the problems of a file (price tables, gate files; rule packs list theirs across files), and the
one YAML loader of every file agenttrace reads (`load_yaml`: aliases bounded)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "MAX_YAML_NODES",
    "SAFE_LOADER",
    "YamlAliasBomb",
    "load_yaml",
    "path_text",
    "problems_text",
    "read_document",
    "show",
    "yaml_line",
]

#: Nodes a YAML document may hold once its aliases are expanded (each alias counts the nodes
#: it stands for). A "billion laughs" document of nine nested aliases holds 10^9 and would
#: hang every walk over it; the largest bundled file holds a few thousand.
MAX_YAML_NODES = 1_000_000

#: The safe loader every YAML file is read with: libyaml's when PyYAML was built with it (the
#: same data and node lines as the pure-Python one, several times faster); a syntax error is
#: still told in the pure-Python parser's words.
SAFE_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlAliasBomb(yaml.YAMLError):
    """A YAML document whose aliases expand past `MAX_YAML_NODES` nodes, or refer to themselves."""


def load_yaml(text: str, loader: type = SAFE_LOADER) -> tuple[Any, yaml.Node | None]:
    """The data of the YAML document `text` (as ``yaml.load`` with `loader`, a safe loader)
    and its node tree as written (for `yaml_line`), composed and constructed in one parse (two
    when the text holds a merge key ``<<``, which constructing flattens into the tree).

    Raises `YamlAliasBomb` (a ``yaml.YAMLError``) before constructing a document whose aliases
    expand past `MAX_YAML_NODES` nodes or that holds itself; other errors as ``yaml.load``.
    """
    parser = loader(text)
    try:
        try:
            root = parser.get_single_node()
        except yaml.YAMLError:
            yaml.compose(text, Loader=yaml.SafeLoader)  # its message says more than libyaml's
            raise
        if root is None:
            return None, None
        if "*" in text:  # no alias without an asterisk: nothing to count
            _check_expansion(root)
        data = parser.construct_document(root)
    finally:
        parser.dispose()
    if "<<" in text:  # merge keys were flattened into the tree: the tree as written, anew
        again = loader(text)
        try:
            root = again.get_single_node()
        finally:
            again.dispose()
    return data, root


def read_document(path: Path, what: str) -> Any:
    """The JSON document in the file ``path``, YAML when its suffix is ``.yaml`` or ``.yml``;
    ValueError names it as ``what`` (``schema file``) and says what is wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ValueError(f"cannot read {what} {path}: {err.strerror or err}") from err
    try:
        return load_yaml(text)[0] if path.suffix.lower() in (".yaml", ".yml") else json.loads(text)
    except (ValueError, yaml.YAMLError) as err:
        raise ValueError(f"{what} {path} is not valid JSON/YAML: {err}") from err


def _check_expansion(root: yaml.Node) -> None:
    """Raise `YamlAliasBomb` when `root` expands to more than `MAX_YAML_NODES` nodes.

    An alias is the very node its anchor names, so the tree is a graph: each distinct node is
    sized once (post-order, iterative) and the sizes of shared nodes add up as they expand.
    """
    cap = MAX_YAML_NODES + 1
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_nodes.discard(key)
            total = 1
            if isinstance(node, yaml.SequenceNode):
                total += sum(sizes[id(child)] for child in node.value)
            elif isinstance(node, yaml.MappingNode):
                total += sum(sizes[id(k)] + sizes[id(v)] for k, v in node.value)
            if total > MAX_YAML_NODES:
                line = node.start_mark.line + 1 if node.start_mark is not None else "?"
                raise YamlAliasBomb(
                    f"aliases expand the document past {MAX_YAML_NODES:,} nodes (from line "
                    f"{line}): refused as an alias bomb"
                )
            sizes[key] = min(total, cap)
            continue
        if key in sizes:
            continue
        open_nodes.add(key)
        stack.append((node, True))
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            continue
        for child in children:
            if id(child) in open_nodes:
                line = child.start_mark.line + 1 if child.start_mark is not None else "?"
                raise YamlAliasBomb(f"an alias holds itself (line {line}): refused")
            if id(child) not in sizes:
                stack.append((child, False))


def show(value: Any, limit: int = 40) -> str:
    """``value`` as short JSON for an error message, clipped with an ellipsis."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def path_text(where: Sequence[str | int]) -> str:
    """``("rules", 1, "tools")`` as ``rules[1].tools``; odd keys are quoted."""
    out = ""
    for part in where:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    return out


def yaml_line(root: yaml.Node | None, where: Sequence[str | int]) -> int | None:
    """1-based line of the deepest YAML node found along ``where`` (a mapping entry: its key)."""
    if root is None:
        return None
    node = root
    line = node.start_mark.line + 1
    for part in where:
        nxt = None
        if isinstance(node, yaml.MappingNode):
            for key, val in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                    nxt = val
                    line = key.start_mark.line + 1
        elif (
            isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value)
        ):
            nxt = node.value[part]
            line = nxt.start_mark.line + 1
        if nxt is None:
            break
        node = nxt
    return line


def problems_text(
    problems: Sequence[tuple[Sequence[str | int], str]],
    root: yaml.Node | None,
    source: str,
    what: str,
) -> str:
    """The error listing `problems` ((path, message) pairs) of the YAML file `source` whose
    parsed node tree is `root` (None: no line numbers), in file order: ``N problems in <what>
    <source>:``, then ``  source:line: path: message`` a problem."""
    lines = []
    for where, message in sorted(problems, key=lambda p: (yaml_line(root, p[0]) or 0, p[0])):
        line = yaml_line(root, where)
        loc = f"{source}:{line}" if line else source
        path = path_text(where)
        lines.append(f"  {loc}: {path}: {message}" if path else f"  {loc}: {message}")
    n = len(lines)
    return "\n".join([f"{n} problem{'s' if n > 1 else ''} in {what} {source}:", *lines])
