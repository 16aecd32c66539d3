"""The limits of what an ingest keeps, in one place, and the messages given when one is hit.

A longer attribute value is cut and marked, with a warning (the span is kept); a longer JSON
line or protobuf frame is quarantined unread (a JSON document file is one value read whole:
only the decompression guard, `analyzer.ingest.detect.MAX_DECOMPRESSED_RATIO`, bounds it);
JSON nested deeper than `MAX_NESTING` is read as far as Python's parsers and writers allow
(about 900 levels) and otherwise quarantined with the reason `nesting_reason` gives.

Readers look these up at call time (``limits.MAX_RECORD_BYTES``), so changing them here, or
setting them on this module, changes every reader.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "MAX_ATTRIBUTE_BYTES",
    "MAX_NESTING",
    "MAX_RECORD_BYTES",
    "json_depth",
    "nesting_reason",
    "record_too_long",
    "truncate_text",
    "value_depth",
]

#: Bytes of an attribute value kept (UTF-8); the rest is cut and marked.
MAX_ATTRIBUTE_BYTES = 1 << 20
#: Bytes of one JSON line or protobuf frame read; a longer record is quarantined unread.
#: A collector batch of 8,192 spans is about 11 MB a line: this leaves a wide margin.
MAX_RECORD_BYTES = 256 << 20
#: Nesting levels of JSON always read (objects and arrays; OTLP itself needs about 8).
MAX_NESTING = 512

_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(rb"[^\[\]{}]+")


def truncate_text(text: str) -> tuple[str, int]:
    """`text`, longer than `MAX_ATTRIBUTE_BYTES` in UTF-8, cut to that many bytes (never inside
    a character) and marked "…[agenttrace: truncated from 2,000,000 bytes to 1,048,576]"; and
    its size in bytes."""
    data = text.encode("utf-8", "surrogatepass")
    kept = data[:MAX_ATTRIBUTE_BYTES].decode("utf-8", "ignore")  # drops a cut character only
    marker = f"…[agenttrace: truncated from {len(data):,} bytes to {MAX_ATTRIBUTE_BYTES:,}]"
    return kept + marker, len(data)


def json_depth(data: bytes | bytearray | memoryview | str) -> int:
    """The deepest nesting of arrays and objects in JSON text (0 for a scalar).

    Brackets inside strings are not counted. Columnar (Arrow kernels over the bracket bytes):
    only called on records a parser refused, which may be megabytes of brackets.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    brackets = _NOT_BRACKET.sub(b"", _STRINGS.sub(b"", raw))
    if not brackets:
        return 0
    codes = pa.Array.from_buffers(pa.uint8(), len(brackets), [None, pa.py_buffer(brackets)])
    opens = pc.or_(pc.equal(codes, ord("[")), pc.equal(codes, ord("{")))
    steps = pc.if_else(opens, pa.scalar(1, pa.int64()), pa.scalar(-1, pa.int64()))
    return max(0, pc.max(pc.cumulative_sum(steps)).as_py())


def value_depth(value: object) -> int:
    """The deepest nesting of lists and dicts in a parsed JSON value (0 for a scalar).

    Iterative, so it measures values too deep for any recursive walk.
    """
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list | tuple):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in item)
    return deepest


def nesting_reason(*, text: bytes | bytearray | memoryview | str | None = None, value=None) -> str:
    """The quarantine reason for a record refused for its nesting: "nesting deeper than 512
    levels (10,002 found)", measured on its JSON `text` or its parsed `value`."""
    depth = json_depth(text) if text is not None else value_depth(value)
    return f"nesting deeper than {MAX_NESTING:,} levels ({depth:,} found)"


def record_too_long(size: int) -> str:
    """The quarantine reason for a record longer than `MAX_RECORD_BYTES`."""
    return f"record of {size:,} bytes, longer than the {MAX_RECORD_BYTES:,} read at most"
