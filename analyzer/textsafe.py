"""Making untrusted trace text safe to print on a terminal."""

from __future__ import annotations

import re

__all__ = ["clip", "terminal_safe"]

# C0/C1 controls (ESC starts every terminal escape sequence), DEL, and bidi overrides that can
# make a line read differently from what it contains.
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: object) -> str:
    """`text` with control characters shown as escapes and newlines/tabs as spaces."""
    s = "" if text is None else str(text)
    s = s.replace("\n", " ").replace("\r", " ").replace("\t", " ")
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode(), s)


def clip(text: object, width: int) -> str:
    """Terminal-safe `text` cut to `width` characters, with an ellipsis when cut."""
    s = terminal_safe(text)
    return s if len(s) <= width else s[: max(0, width - 1)] + "…"
