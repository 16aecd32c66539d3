"""Making untrusted trace text safe for where it is shown: a terminal, JSON read on a terminal,
Markdown posted as a CI comment (files keep the exact text)."""

from __future__ import annotations

import html
import re

__all__ = [
    "MARKDOWN_LIMIT",
    "clip",
    "clip_markdown",
    "json_safe",
    "markdown_safe",
    "terminal_lines",
    "terminal_safe",
]

#: Bytes a GitHub comment or job summary holds (64 KB): `clip_markdown` keeps a text within.
MARKDOWN_LIMIT = 65_536

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


# Markdown's metacharacters (HTML is escaped apart), each shown as itself after a backslash.
_MARKDOWN_META = str.maketrans({ch: "\\" + ch for ch in "\\`*_[]|#~"})
# What GitHub makes live in a comment: "@name" (a mention, which notifies), "x://" and "www."
# (links). A zero-width joiner after "@" and a zero-width space in "://" and "www." leave
# the text reading the same, inert.
_LIVE = re.compile(r"@|://|(?<![\w.])www\.", re.IGNORECASE)
_INERT = {"@": "@\u200d", "://": ":\u200b//"}


def markdown_safe(text: object) -> str:
    """Untrusted `text` inside one line of Markdown (a sentence, a table cell): terminal-safe
    (`terminal_safe`), HTML escaped, Markdown's metacharacters escaped, and no mention or
    link that GitHub would make live."""
    s = html.escape(terminal_safe(text), quote=False).translate(_MARKDOWN_META)
    return _LIVE.sub(lambda m: _INERT.get(m.group()) or m.group()[:3] + "\u200b.", s)


def clip_markdown(text: str, limit: int = MARKDOWN_LIMIT, *, whole: str = "") -> str:
    """Markdown `text` within `limit` bytes (UTF-8): cut at a line's end, a last line saying
    how many lines and bytes were left out (and `whole`: where to find them)."""
    size = len(text.encode("utf-8"))
    if size <= limit:
        return text
    lines = text.splitlines(keepends=True)
    budget, kept = limit - 200 - len(whole.encode("utf-8")), 0  # room for the note
    for line in lines:
        n = len(line.encode("utf-8"))
        if n > budget:
            break
        budget -= n
        kept += 1
    head = "".join(lines[:kept])
    left = size - len(head.encode("utf-8"))
    if head and not head.endswith("\n"):
        head += "\n"
    return (
        f"{head}\n**Clipped**: {len(lines) - kept:,} more lines ({left:,} bytes) left out to "
        f"stay within {limit // 1024} KB{'; ' + whole if whole else ''}.\n"
    )
