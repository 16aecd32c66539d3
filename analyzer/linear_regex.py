"""Regular expressions from untrusted text (traces, labels) on a linear-time engine.

Patterns recorded in a trace (a tool definition's JSON Schema ``pattern``) and the ``match:
regex`` of labels run on RE2 (the ``google-re2`` package): matching takes time linear in the
text whatever the pattern, so ``^(a+)+$`` against ``"a" * 40 + "!"`` answers at once where
Python's backtracking ``re`` runs for minutes. RE2 has no backreferences and no lookaround: a
pattern using them raises `UnsupportedPattern` (the caller then leaves the value unjudged).
Rule packs' own patterns run on polars (Rust's regex crate), linear as well.
"""

from __future__ import annotations

import functools

import re2

__all__ = ["UnsupportedPattern", "compile_linear", "fullmatch", "search"]


class UnsupportedPattern(ValueError):
    """A pattern the linear-time engine cannot compile (invalid, or backreferences/lookaround)."""


_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print each refused pattern on stderr


@functools.lru_cache(maxsize=1024)
def compile_linear(pattern: str):
    """`pattern` compiled by RE2; `UnsupportedPattern` says why it cannot be."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as err:
        reason = err.args[0] if err.args else err
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise UnsupportedPattern(
            f"pattern {pattern!r} is not supported by the linear-time regex engine (RE2: "
            f"{reason}; no backreferences or lookaround)"
        ) from None


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches somewhere in `text` (JSON Schema ``pattern``), in linear time."""
    return compile_linear(pattern).search(text) is not None


def fullmatch(pattern: str, text: str) -> bool:
    """Whether `pattern` matches the whole of `text`, in linear time."""
    return compile_linear(pattern).fullmatch(text) is not None
