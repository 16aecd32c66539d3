"""Accounting of an ingest: what was read, kept, dropped as a duplicate or quarantined.

Invariant, per batch and per file: every span read is in exactly one of kept, duplicate or
quarantined. A record that cannot be parsed at all (a truncated line, a corrupt frame) is
quarantined as a record; the spans it held cannot be counted, so it adds to
``records_quarantined`` and to no span count.

Warnings name what was kept but altered or suspect (an attribute value cut at the size limit,
a span that ends before it starts, parent ids that form a cycle); they change no count.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = [
    "EXCERPT_BYTES",
    "MAX_WARNINGS",
    "FileLog",
    "IngestLog",
    "QuarantineEntry",
    "excerpt",
    "merge_warnings",
    "warning_lines",
]

#: How much of a rejected record is kept in the quarantine list.
EXCERPT_BYTES = 200


def excerpt(raw: bytes | str | None) -> str:
    """The first `EXCERPT_BYTES` of a rejected record, with every non-printable byte escaped."""
    if raw is None:
        return ""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    text = raw[:EXCERPT_BYTES].decode("utf-8", "backslashreplace")
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode() for ch in text)


#: Warnings of one kind listed per file (`QuarantineEntry.kind`); the rest are counted in one
#: last warning, "N more spans <kind>".
MAX_WARNINGS = 100


@dataclass(frozen=True)
class QuarantineEntry:
    """One rejected record or span: where it was, why, and what it started with."""

    file: str
    position: str  # "line 12", "byte 4096", "span 3", "file", "trace T span S"
    reason: str
    excerpt: str
    spans: int = 0  # spans lost with it, when they could be counted (a warning: concerned)
    #: A warning listed under the cap (`MAX_WARNINGS`) of its kind, and where its span is in
    #: the file (the first ones are listed); not written out.
    kind: str = field(default="", compare=False)
    order: tuple = field(default=(), compare=False)

    def as_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.compare}


@dataclass
class FileLog:
    """What one file yielded; readers update it as they go."""

    path: str
    format: str = "unknown"
    sha256: str = ""
    size: int = 0
    records: int = 0  # lines, frames, documents or span objects read
    spans_read: int = 0  # spans found, including those quarantined one by one
    records_quarantined: int = 0
    spans_quarantined: int = 0
    spans_kept: int = 0  # filled after de-duplication
    duplicates: int = 0  # filled after de-duplication
    quarantine: list[QuarantineEntry] = field(default_factory=list)
    warnings: list[QuarantineEntry] = field(default_factory=list)

    def warn(
        self,
        position: str,
        reason: str,
        raw: bytes | str | None = None,
        spans: int = 1,
        *,
        kind: str = "",
        order: tuple = (),
    ) -> None:
        """Note something kept but altered or suspect; `spans` is how many spans it concerns;
        `kind` and `order`: a warning listed under a cap (`QuarantineEntry`)."""
        entry = QuarantineEntry(self.path, position, reason, excerpt(raw), spans, kind, order)
        self.warnings.append(entry)

    def quarantine_record(
        self, position: str, reason: str, raw: bytes | str | None, *, lost: int = 0
    ) -> None:
        """Reject a whole record that could not be read (its spans are not counted), or whose
        reading broke off: `lost` of its spans, counted in ``spans_read`` but not kept, are
        quarantined with it."""
        self.records_quarantined += 1
        self.spans_quarantined += lost
        self.quarantine.append(QuarantineEntry(self.path, position, reason, excerpt(raw), lost))

    def quarantine_span(self, position: str, reason: str, raw: bytes | str | None) -> None:
        """Reject one span that was read (and counted in ``spans_read``)."""
        self.spans_quarantined += 1
        self.quarantine.append(QuarantineEntry(self.path, position, reason, excerpt(raw), 1))


_COUNTED = re.compile(r"(\d[\d,]*) (.+)", re.DOTALL)


def merge_warnings(entries: Iterable[QuarantineEntry]) -> list[QuarantineEntry]:
    """One file's warnings from the partitions of an input, as the input read whole gives
    them, however it was cut: of each kind listed under a cap, the first `MAX_WARNINGS` in
    the file (each partition listed its own first ones); the warnings on a span or a trace by
    position (numbers in it compared as numbers); then the file-level warnings that count
    spans (``"3 spans record a call ..."``, ``"N more spans <kind>"``) merged into one per
    text, their counts added, sorted by text."""
    others: list[QuarantineEntry] = []
    listed: dict[str, list[QuarantineEntry]] = {}
    counted: dict[str, QuarantineEntry] = {}

    def count(entry: QuarantineEntry, text: str, spans: int) -> None:
        spans += counted[text].spans if text in counted else 0
        counted[text] = dataclasses.replace(entry, reason=f"{spans:,} {text}", spans=spans)

    for entry in entries:
        if entry.kind and entry.position != "file":
            listed.setdefault(entry.kind, []).append(entry)
            continue
        found = _COUNTED.fullmatch(entry.reason) if entry.position == "file" else None
        if found is None or entry.spans <= 0 or int(found[1].replace(",", "")) != entry.spans:
            others.append(entry)
        else:
            count(entry, found[2], entry.spans)
    for kind, items in listed.items():
        items.sort(key=lambda e: e.order)
        others += items[:MAX_WARNINGS]
        if len(items) > MAX_WARNINGS:
            more = QuarantineEntry(items[0].file, "file", "", "", kind=kind)
            count(more, f"more spans {kind}", len(items) - MAX_WARNINGS)
    # stable: a span's or a trace's warnings all come from the one partition that holds it
    others.sort(key=lambda e: _natural(e.position))
    return others + [counted[text] for text in sorted(counted)]


def _natural(text: str) -> list[str | int]:
    """`text` with its runs of digits as numbers ("line 9" before "line 10")."""
    return [int(part) if i % 2 else part for i, part in enumerate(re.split(r"(\d+)", text))]


def _total(name: str) -> property:
    """The sum over the files of a `FileLog` count."""
    return property(lambda self: sum(getattr(f, name) for f in self.files))


def _every(name: str) -> property:
    """The entries of a `FileLog` list, file after file."""
    return property(lambda self: [e for f in self.files for e in getattr(f, name)])


@dataclass
class IngestLog:
    """The accounting of a whole batch of files."""

    files: list[FileLog] = field(default_factory=list)
    orphans: int = 0  # kept spans whose parent is in no file of the batch
    #: kept spans in no run: their trace (or run-key group) holds no agent, model or tool span,
    #: or they sit above the several top-level agent spans that make its runs
    outside_runs: int = 0
    runs: int = 0

    records = _total("records")
    spans_read = _total("spans_read")
    spans_kept = _total("spans_kept")
    duplicates = _total("duplicates")
    spans_quarantined = _total("spans_quarantined")
    records_quarantined = _total("records_quarantined")
    quarantine = _every("quarantine")
    warnings = _every("warnings")

    def balanced(self) -> bool:
        """True when every span read is kept, a duplicate or quarantined."""
        return self.spans_read == self.spans_kept + self.duplicates + self.spans_quarantined

    def as_dict(self) -> dict[str, object]:
        """The ``ingest`` block of summary.json."""
        return {
            "files": len(self.files),
            "records_read": self.records,
            "spans_read": self.spans_read,
            "spans_kept": self.spans_kept,
            "duplicate_spans": self.duplicates,
            "spans_quarantined": self.spans_quarantined,
            "records_quarantined": self.records_quarantined,
            "orphan_spans": self.orphans,
            "spans_outside_runs": self.outside_runs,
            "runs": self.runs,
            "quarantine": [q.as_dict() for q in self.quarantine],
            "warnings": [w.as_dict() for w in self.warnings],
        }


def warning_lines(warnings: list[dict[str, object]], limit: int = 5) -> list[str]:
    """Terminal lines (100 columns at most) for the ``warnings`` of summary.json's ingest
    block: how many, then the first `limit` of them; none when there is none."""
    from pathlib import Path

    from analyzer.textsafe import clip

    if not warnings:
        return []
    lines = [f"WARNINGS {len(warnings):,} (kept, but altered or suspect; see summary.json):"]
    for w in warnings[:limit]:
        lines.append(clip(f"  {Path(str(w['file'])).name} {w['position']}: {w['reason']}", 100))
    return lines
