"""Recognise a trace file by its content (not its name) and open it decompressed."""

from __future__ import annotations

import gzip
import io
import re
from typing import BinaryIO

import zstandard

from analyzer.errors import TraceFormatError

__all__ = ["MAX_DECOMPRESSED_RATIO", "DecompressionBomb", "open_decompressed", "sniff"]

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
PARQUET_MAGIC = b"PAR1"
SNIFF_BYTES = 1 << 16

#: A compressed file may expand this many times before it is refused as a decompression bomb
#: (only counted past `_BOMB_FLOOR` bytes, so small files with long runs pass).
MAX_DECOMPRESSED_RATIO = 1000
_BOMB_FLOOR = 64 << 20

_OTLP_LINE = re.compile(rb'^\s*\{\s*"(resourceSpans|resource_spans)"\s*:\s*\[')
_OTLP_DOC = re.compile(rb'^\s*\{\s*"(resourceSpans|resource_spans)"\s*:')


class DecompressionBomb(TraceFormatError):
    """A compressed file that expands far beyond any plausible trace dump."""


class _GuardedReader(io.RawIOBase):
    """A decompressing stream that refuses to expand past a ratio of its compressed size."""

    def __init__(self, inner: BinaryIO, compressed_size: int, path: str) -> None:
        self._inner = inner
        self._limit = max(_BOMB_FLOOR, compressed_size * MAX_DECOMPRESSED_RATIO)
        self._count = 0
        self._path = path

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        data = self._inner.read(len(buffer))
        n = len(data)
        self._count += n
        if self._count > self._limit:
            raise DecompressionBomb(
                f"{self._path}: expands past {self._limit:,} bytes "
                f"({MAX_DECOMPRESSED_RATIO}x its compressed size); refused as a decompression bomb"
            )
        buffer[:n] = data
        return n


def open_decompressed(raw: BinaryIO, size: int, path: str) -> tuple[BinaryIO, list[str]]:
    """Peel gzip/zstd layers (nested ones too) off `raw`; return the stream and the layers."""
    layers: list[str] = []
    stream: BinaryIO = raw
    for _ in range(4):
        head = _peek(stream, 4)
        if head.startswith(GZIP_MAGIC):
            layers.append("gzip")
            inner: BinaryIO = gzip.GzipFile(fileobj=stream, mode="rb")  # type: ignore[assignment]
        elif head.startswith(ZSTD_MAGIC):
            # The collector's zstd proto files start with a 4-byte length, never with the magic.
            layers.append("zstd")
            inner = zstandard.ZstdDecompressor().stream_reader(stream, read_across_frames=True)  # type: ignore[assignment]
        else:
            break
        stream = io.BufferedReader(_GuardedReader(inner, size, path), buffer_size=1 << 20)
    return stream, layers


def _peek(stream: BinaryIO, n: int) -> bytes:
    peek = getattr(stream, "peek", None)
    if peek is not None:
        return peek(n)[:n]
    pos = stream.tell()
    data = stream.read(n)
    stream.seek(pos)
    return data


def sniff(stream: BinaryIO, size: int = -1) -> str:
    """The format of a stream: jsonl, otlp-json, json, proto, parquet, empty or unknown.

    `size` is the stream's length when known (-1 for a decompressed stream).
    """
    head = _peek(stream, SNIFF_BYTES)
    text = head.lstrip()
    if not text:
        return "empty"
    if head.startswith(PARQUET_MAGIC):
        return "parquet"
    if text[:1] in (b"{", b"["):
        lines = [ln for ln in head.split(b"\n", 8)[:8] if ln.strip()]
        first = lines[0].strip() if lines else b""
        if first not in (b"{", b"[") and any(_OTLP_LINE.match(ln) for ln in lines):
            return "jsonl"
        if _OTLP_DOC.match(text):
            return "otlp-json"
        return "json"
    from analyzer.ingest.otlp_proto import looks_like_frames

    if looks_like_frames(head, size):
        return "proto"
    return "unknown"
