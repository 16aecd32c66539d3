"""The JSON path polars' ``str.json_path_match`` reads one top-level key of a JSON object text
with (run attributes, a tool call's arguments)."""

from __future__ import annotations

__all__ = ["key_path"]


def key_path(key: str) -> str:
    """``$['key']``. ValueError for a key holding a quote or a backslash: the path syntax polars
    reads has no escape that works for every such key (``$['a\\'\\'b']`` does not compile)."""
    if "'" in key or "\\" in key:
        raise ValueError(f"attribute name {key!r} holds a quote or a backslash")
    return f"$['{key}']"
