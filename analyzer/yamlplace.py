"""Where a problem sits in a YAML file (its line and a readable path), and the error that lists
the problems of a file (price tables, gate files; rule packs list theirs across files)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import yaml

__all__ = ["path_text", "problems_text", "show", "yaml_line"]


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
