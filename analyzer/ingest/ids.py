"""Trace and span ids in every spelling exporters use, normalised to lowercase hex."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re

__all__ = ["normalize_id", "opaque_id"]

_HEX = re.compile(r"[0-9a-fA-F]+")


def normalize_id(value: object, nbytes: int) -> str | None:
    """Return `value` as ``2*nbytes`` lowercase hex chars, None for an absent/all-zero id.

    Accepts hex (OTLP JSON), ``0x`` hex (SDK console), base64 (protobuf JSON mapping),
    raw bytes (protobuf) and decimal integers (any-agent dumps). Raises ValueError otherwise.
    """
    if value is None or value == "" or value == b"":
        return None
    if isinstance(value, bool):
        raise ValueError(f"id is a boolean: {value!r}")
    if isinstance(value, int):
        if value < 0 or value >= 1 << (8 * nbytes):
            raise ValueError(f"id {value} does not fit in {nbytes} bytes")
        out = f"{value:0{2 * nbytes}x}"
    elif isinstance(value, bytes | bytearray):
        if len(value) != nbytes:
            raise ValueError(f"id has {len(value)} bytes, expected {nbytes}")
        out = bytes(value).hex()
    elif isinstance(value, str):
        text = value.strip()
        if text[:2] in ("0x", "0X"):
            text = text[2:]
        if len(text) == 2 * nbytes and _HEX.fullmatch(text):
            out = text.lower()
        else:
            try:
                raw = base64.b64decode(text, validate=True)
            except (binascii.Error, ValueError):
                raw = b""
            if len(raw) != nbytes:
                raise ValueError(f"id {value[:60]!r} is neither {2 * nbytes} hex chars nor base64")
            out = raw.hex()
    else:
        raise ValueError(f"id has type {type(value).__name__}")
    return None if out.strip("0") == "" else out


def opaque_id(value: str, nbytes: int) -> str:
    """An id for a text that is no id encoding (sanitized fixtures: ``"span-1"``), as
    ``2*nbytes`` lowercase hex chars: the first bytes of its SHA-256. The same text gives the
    same id, so parent links between such ids still hold."""
    return hashlib.sha256(value.encode()).hexdigest()[: 2 * nbytes]
