"""Recognise a trace file by its content (not its name) and open it decompressed."""

from __future__ import annotations

import io
import json
import re
import zlib
from typing import BinaryIO

import zstandard

from analyzer.errors import TraceFormatError

__all__ = [
    "MAX_DECOMPRESSED_RATIO",
    "DecompressionBomb",
    "open_decompressed",
    "sniff",
    "sniff_stream",
    "stream_break",
]

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
PARQUET_MAGIC = b"PAR1"
SNIFF_BYTES = 1 << 16
#: When the first lines do not say whether a JSON file is OTLP JSON lines (they are not JSON,
#: or JSON of another shape), this many lines (in at most `SCAN_BYTES`) are looked at for one
#: that starts like an OTLP request: the file is then read as lines, the others quarantined.
SCAN_LINES = 1000
SCAN_BYTES = 8 << 20

#: A compressed file may expand this many times before it is refused as a decompression bomb
#: (only counted past `_BOMB_FLOOR` bytes, so small files with long runs pass). The ratio is
#: checked as the file is read, against the compressed bytes read so far: a 3 MB gzip of
#: 3 GB is refused after 64 MiB, not after 3 GB.
MAX_DECOMPRESSED_RATIO = 1000
_BOMB_FLOOR = 64 << 20

# Compressed bytes handed to a decompressor at a time. zstd expands at most ~32,768x (a 4-byte
# RLE block gives 128 KiB), so 256 bytes never yield more than 8 MiB at once, bomb or not
# (zstandard's stream_reader, a little faster, cannot tell a cut file from a whole one); zlib
# takes an output limit directly.
_ZSTD_FEED = 1 << 8
_GZIP_FEED = 1 << 16
_GZIP_OUT = 1 << 20

_OTLP_LINE = re.compile(rb'^\s*\{\s*"(resourceSpans|resource_spans)"\s*:\s*\[')
_OTLP_DOC = re.compile(rb'^\s*\{\s*"(resourceSpans|resource_spans)"\s*:')


class DecompressionBomb(TraceFormatError):
    """A compressed file that expands far beyond any plausible trace dump."""


class _Decoder(io.RawIOBase):
    """One gzip or zstd layer as a raw stream, in bounded pieces, guarded against bombs.

    A damaged stream (cut short, corrupt) raises nothing: the stream ends where the damage
    starts and `broken` says why, so every byte decompressed before it is still read (a
    buffered reader loses the bytes of a read that raises half-way).
    """

    name = ""

    def __init__(self, source: BinaryIO, compressed_size: int, path: str) -> None:
        super().__init__()
        self.source = source
        self.delivered = 0  # decompressed bytes handed out
        self.taken = 0  # compressed bytes read from `source`
        self.broken: str | None = None
        self._compressed_size = compressed_size
        self._limit = max(_BOMB_FLOOR, compressed_size * MAX_DECOMPRESSED_RATIO)
        self._path = path
        # the outermost layer: its compressed bytes read are the file's (a nested layer's
        # output counts against the file's bytes read so far, not against its own input)
        outer = getattr(source, "raw", None)
        self._root: _Decoder = outer._root if isinstance(outer, _Decoder) else self
        self._input = b""
        self._out = memoryview(b"")
        self._ended = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        n = 0
        while n < len(view):
            if not self._out:
                if self._ended:
                    break
                self._out = memoryview(self._next())
                continue
            k = min(len(self._out), len(view) - n)
            view[n : n + k] = self._out[:k]
            self._out = self._out[k:]
            n += k
            if self.delivered + n > _BOMB_FLOOR:
                self._guard(self.delivered + n)
        self.delivered += n
        return n

    @property
    def consumed(self) -> int:
        """Compressed bytes the decompressor has taken in (read, less those still waiting)."""
        return self.taken - len(self._input)

    def _guard(self, delivered: int) -> None:
        """Raise `DecompressionBomb` once `delivered` bytes exceed the ratio: to the file's
        compressed size, or to the compressed bytes read so far (a running check)."""
        read = min(self._root.consumed, self._compressed_size)
        limit = max(_BOMB_FLOOR, read * MAX_DECOMPRESSED_RATIO)
        if delivered <= limit:
            return
        self._ended = True
        self._out = memoryview(b"")
        if limit >= self._limit:
            raise DecompressionBomb(
                f"{self._path}: decompresses to more than {self._limit:,} bytes (the limit: "
                f"{MAX_DECOMPRESSED_RATIO}x its {self._compressed_size:,} compressed bytes, "
                f"at least {_BOMB_FLOOR >> 20} MiB); refused as a decompression bomb"
            )
        raise DecompressionBomb(
            f"{self._path}: its first {read:,} compressed bytes decompress to more than "
            f"{limit:,} bytes (the limit: {MAX_DECOMPRESSED_RATIO}x the compressed bytes read, "
            f"at least {_BOMB_FLOOR >> 20} MiB); refused as a decompression bomb"
        )

    def readall(self) -> bytes:
        chunks = []
        while chunk := self.read(1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)

    def _take(self, n: int) -> bytes:
        data = self.source.read(n)
        self.taken += len(data)
        return data

    def _break(self, reason: str) -> bytes:
        self.broken = reason
        self._ended = True
        return b""

    def _truncated(self) -> bytes:
        return self._break(
            f"truncated {self.name} stream: the compressed data ends after {self.taken:,} "
            "bytes, before the end-of-stream marker; what was decompressed before is kept"
        )

    def _next(self) -> bytes:
        """The next decompressed piece (empty only once the stream has ended)."""
        raise NotImplementedError


class _GzipDecoder(_Decoder):
    """gzip members one after the other (zero padding between them allowed, as gzip does)."""

    name = "gzip"

    def __init__(self, source: BinaryIO, compressed_size: int, path: str) -> None:
        super().__init__(source, compressed_size, path)
        self._member: zlib._Decompress | None = None
        self._feed = _GZIP_FEED

    def _next(self) -> bytes:
        while True:
            if not self._input:
                self._input = self._take(_GZIP_FEED)
            if not self._input:
                if self._member is None:
                    self._ended = True
                    return b""
                # the input is over: output a long match still pending, then see if it ended
                out = self._member.decompress(b"", _GZIP_OUT)
                if out:
                    return out
                if self._member.eof:
                    self._member = None
                    continue
                return self._truncated()
            if self._member is None:
                self._input = self._input.lstrip(b"\0")
                if not self._input:
                    continue
                self._member = zlib.decompressobj(zlib.MAX_WBITS | 16)
            at = self.taken - len(self._input)  # where `data` starts in the compressed stream
            data, rest = self._input[: self._feed], self._input[self._feed :]
            saved = self._member.copy() if self._feed > 1 else None
            try:
                out = self._member.decompress(data, _GZIP_OUT)
            except zlib.error as exc:
                if saved is not None:
                    # the output of a call that fails is lost: go back and approach the
                    # damage a byte at a time, so everything before it is still read
                    self._member = saved
                    self._feed = 1
                    continue
                return self._break(f"corrupt gzip stream at compressed byte {at:,}: {exc}")
            if self._member.eof:
                self._input = self._member.unused_data + rest
                self._member = None
            else:
                self._input = self._member.unconsumed_tail + rest
            if out:
                return out


class _ZstdDecoder(_Decoder):
    """zstd frames one after the other (the collector and the zstd tool both write several)."""

    name = "zstd"

    def __init__(self, source: BinaryIO, compressed_size: int, path: str) -> None:
        super().__init__(source, compressed_size, path)
        self._dctx = zstandard.ZstdDecompressor()
        self._frame: zstandard.ZstdDecompressionObj | None = None

    def _next(self) -> bytes:
        while True:
            if not self._input:
                self._input = self._take(_ZSTD_FEED)
                if not self._input:
                    self._ended = True
                    return b"" if self._frame is None else self._truncated()
            if self._frame is None:
                self._frame = self._dctx.decompressobj()
            at = self.taken - len(self._input)  # where `data` starts in the compressed stream
            data, self._input = self._input[:_ZSTD_FEED], self._input[_ZSTD_FEED:]
            try:
                out = self._frame.decompress(data)
            except zstandard.ZstdError as exc:
                return self._break(f"corrupt zstd stream near compressed byte {at:,}: {exc}")
            if self._frame.eof:
                self._input = self._frame.unused_data + self._input
                self._frame = None
            if out:
                return out


def open_decompressed(raw: BinaryIO, size: int, path: str) -> tuple[BinaryIO, list[str]]:
    """Peel gzip/zstd layers (nested ones too) off `raw`; return the stream and the layers.

    A layer that expands past `MAX_DECOMPRESSED_RATIO` times the file's size (and past
    64 MiB) raises `DecompressionBomb` while it is read. A layer that is cut short or corrupt
    ends early instead of raising; `stream_break` then says where and why.
    """
    layers: list[str] = []
    stream: BinaryIO = raw
    for _ in range(4):
        head = _peek(stream, 4)
        decoder: type[_Decoder]
        if head.startswith(GZIP_MAGIC):
            decoder = _GzipDecoder
        elif head.startswith(ZSTD_MAGIC):
            # The collector's zstd proto files start with a 4-byte length, never with the magic.
            decoder = _ZstdDecoder
        else:
            break
        layers.append(decoder.name)
        stream = io.BufferedReader(decoder(stream, size, path), buffer_size=1 << 20)
    return stream, layers


def stream_break(stream: BinaryIO) -> tuple[str, str] | None:
    """Where a stream from `open_decompressed` broke off (a cut or damaged file), if it did:
    the quarantine position ("byte N", N the decompressed bytes read before the break) and the
    reason of the outermost damaged layer (a cut in an outer layer also cuts those inside it).
    """
    decoders: list[_Decoder] = []
    raw = getattr(stream, "raw", None)
    while isinstance(raw, _Decoder):
        decoders.append(raw)
        raw = getattr(raw.source, "raw", None)
    for decoder in reversed(decoders):
        if decoder.broken is not None:
            return f"byte {decoders[0].delivered}", decoder.broken
    return None


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

    `size` is the stream's length when known (-1 for a decompressed stream). See
    `sniff_stream`, which also says how many blank lines it read off a stream that cannot seek.
    """
    return sniff_stream(stream, size)[0]


def sniff_stream(stream: BinaryIO, size: int = -1) -> tuple[str, int]:
    """The format of a stream (as `sniff`) and the newlines read off it to get past blank
    lines at its start (only from a stream that cannot seek: a seekable one is left where it
    was; a reader of lines numbers its first line that many lines on).

    Blank lines at the start are looked past however many there are (a file is empty only
    when it holds nothing else). A file whose first lines are not OTLP JSON lines (garbage,
    or JSON of another shape) is OTLP JSON lines still when one of its first `SCAN_LINES`
    lines starts like an OTLP request and it is no protobuf: its bad lines are quarantined
    one by one as it is read. Else it is a JSON document when a line of its head opens, in
    its first column, an object that is a trace (a program's prints captured with its console
    exporter's span objects): the text before and between the values is quarantined.
    """
    head = _peek(stream, SNIFF_BYTES)
    if head.startswith(PARQUET_MAGIC):
        return "parquet", 0
    text = head.lstrip()
    offset = skipped = 0
    if head and not text:  # blank as far as it was looked at: look past the blank lines
        head, offset, skipped = _past_blanks(stream)
        text = head.lstrip()
    if not text:
        return "empty", skipped
    if text[:1] in (b"{", b"["):
        lines = [ln for ln in head.split(b"\n", 8)[:8] if ln.strip()]
        first = lines[0].strip() if lines else b""
        if first not in (b"{", b"[") and _one_line_request(head, 8):
            return "jsonl", skipped
        if _OTLP_DOC.match(text):
            return "otlp-json", skipped
        if first not in (b"{", b"[") and _otlp_line_ahead(stream, offset):
            return "jsonl", skipped
        return "json", skipped
    from analyzer.ingest.otlp_proto import looks_like_frames

    if not offset and not skipped and looks_like_frames(head, size):
        return "proto", 0
    if _otlp_line_ahead(stream, offset):
        return "jsonl", skipped
    if _trace_value_ahead(head):
        return "json", skipped
    return "unknown", skipped


def _trace_value_ahead(head: bytes) -> bool:
    """Whether the first line of `head` that opens a JSON object in its first column opens a
    trace document or span (console-exporter output captured with the program's own prints)."""
    from analyzer.ingest.documents import OBJECT_LINE, document_kind

    text = head.decode("utf-8", errors="replace")
    found = OBJECT_LINE.search(text)
    if found is None:
        return False
    try:
        document_kind(json.JSONDecoder().raw_decode(text, found.start())[0])
    except (ValueError, RecursionError, TraceFormatError):
        return False
    return True


def _seekable(stream: BinaryIO) -> bool:
    try:
        return stream.seekable()
    except (OSError, ValueError):
        return False


def _past_blanks(stream: BinaryIO) -> tuple[bytes, int, int]:
    """The stream's head from its first byte that is not blank (empty at its end), where that
    is from the stream's position (seekable: the stream is left where it was), and the
    newlines read off the stream (not seekable: the blank bytes are read and dropped, one
    buffer at a time; a decompression bomb of blanks is refused by its guard meanwhile)."""
    if _seekable(stream):
        start = stream.tell()
        offset = 0
        try:
            while chunk := stream.read(1 << 20):
                blank = len(chunk) - len(chunk.lstrip())
                if blank < len(chunk):
                    offset += blank
                    stream.seek(start + offset)
                    return stream.read(SNIFF_BYTES), offset, 0
                offset += blank
            return b"", offset, 0
        finally:
            stream.seek(start)
    newlines = 0
    while True:
        buffered = _peek(stream, SNIFF_BYTES)
        if not buffered:
            return b"", 0, newlines
        blank = len(buffered) - len(buffered.lstrip())
        newlines += buffered.count(b"\n", 0, blank)
        stream.read(blank)
        if blank < len(buffered):
            return _peek(stream, SNIFF_BYTES), 0, newlines


def _otlp_line_ahead(stream: BinaryIO, offset: int) -> bool:
    """Whether one of the first `SCAN_LINES` lines from `offset` bytes past the stream's
    position (within `SCAN_BYTES`; a stream that cannot seek: within what it has buffered)
    starts like an OTLP request. The stream is left where it was."""
    if _seekable(stream):
        start = stream.tell()
        try:
            stream.seek(start + offset)
            data = stream.read(SCAN_BYTES)
        finally:
            stream.seek(start)
    else:
        data = _peek(stream, offset + SCAN_BYTES)[offset:]
    return _one_line_request(data, SCAN_LINES)


def _one_line_request(data: bytes, n: int) -> bool:
    """Whether one of the first `n` lines of `data` holds an OTLP request on one line: it
    starts like one and ends like a JSON object, or runs past `data`. A document that opens
    on the line of its `resourceSpans` (`{"resourceSpans": [` and its items on the lines
    after) is no JSON lines file: its first line ends open."""
    lines = data.split(b"\n", n)
    last = len(lines) - 1
    return any(
        _OTLP_LINE.match(ln) and (i == last or ln.rstrip().endswith(b"}"))
        for i, ln in enumerate(lines[:n])
    )
