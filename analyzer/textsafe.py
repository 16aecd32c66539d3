"""Making untrusted trace text safe to print on a terminal (files keep the exact text)."""

from __future__ import annotations

import re

__all__ = ["clip", "json_safe", "terminal_lines", "terminal_safe"]

# C0/C1 controls (ESC starts every terminal escape sequence, and C1 0x9b is a one-character
# CSI), DEL, line and paragraph separators, and bidi marks and overrides that can make a line
# read differently from what it contains.
_UNSAFE = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
# What json.dumps(ensure_ascii=False) leaves raw that a terminal could act on (it escapes C0).
_JSON_UNSAFE = re.compile(r"[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: object) -> str:
    """`text` with control characters shown as escapes and newlines/tabs as spaces."""
    s = "" if text is None else str(text)
    s = s.replace("\n", " ").replace("\r", " ").replace("\t", " ")
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode(), s)


def terminal_lines(text: object) -> str:
    """`terminal_safe` line by line: the newlines of a multi-line message are kept."""
    s = "" if text is None else str(text)
    return "\n".join(terminal_safe(line) for line in s.split("\n"))


def json_safe(text: str) -> str:
    """JSON text (as ``json.dumps(..., ensure_ascii=False)`` writes it) for a terminal: the
    characters a terminal could act on become ``\\uXXXX`` escapes. They can only occur inside
    JSON strings, so the JSON value, and every text in it, is exactly the same."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def clip(text: object, width: int) -> str:
    """Terminal-safe `text` cut to `width` characters, with an ellipsis when cut."""
    s = terminal_safe(text)
    return s if len(s) <= width else s[: max(0, width - 1)] + "…"
