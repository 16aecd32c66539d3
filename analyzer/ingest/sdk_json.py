"""Python SDK span JSON (``ReadableSpan.to_json`` / ``ConsoleSpanExporter``) and its look-alikes.

One converter reads every span object shaped like the Python SDK's: a ``context`` holding
``trace_id``/``span_id``. That covers the SDK itself (``0x`` hex ids, ISO times with
microseconds, ``"SpanKind.INTERNAL"``, status names), any-agent dumps (decimal integer ids,
integer-nanosecond times, ``parent: {span_id}``) and Phoenix span JSON (plain hex ids,
``status_code`` at top level, ``span_kind``). Framework-specific extras live in
`analyzer.ingest.dumps`; the dispatch on a whole document in `analyzer.ingest.documents`.

The helpers here (`SpanRow`, `SpanError`, `iso_to_ns`, `time_ns`, `kind_name`, `status_name`,
`read_id`, `as_text`...) are shared by every document reader.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from analyzer.ingest.ids import normalize_id
from analyzer.spans import KINDS, STATUSES, SpanBatchBuilder, attrs_from_mapping

__all__ = [
    "SpanError",
    "SpanRow",
    "as_mapping",
    "as_text",
    "iso_to_ns",
    "kind_name",
    "read_id",
    "read_links",
    "read_time",
    "required",
    "sdk_span_row",
    "status_name",
    "time_ns",
]


class SpanError(ValueError):
    """One span object that cannot be turned into a row (its reason goes to the quarantine)."""


@dataclass(slots=True)
class SpanRow:
    """One span read from a document, before it becomes a row of the span table.

    Attributes stay a plain mapping until `add_to`, so a reader can add keys it recovers from
    elsewhere (never overwriting one the span carried).
    """

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: str
    start_ns: int
    end_ns: int
    status_code: str = "unset"
    status_message: str | None = None
    scope_name: str | None = None
    scope_version: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[int, str, Mapping[str, Any]]] = field(default_factory=list)
    links: list[tuple[str, str, Mapping[str, Any]]] = field(default_factory=list)

    def add_to(self, builder: SpanBatchBuilder, source_file: str, source_pos: int) -> None:
        """Append this span to `builder` (attributes sorted by key)."""
        builder.add(
            trace_id=self.trace_id,
            span_id=self.span_id,
            parent_span_id=self.parent_span_id,
            name=self.name,
            kind=self.kind,
            start_ns=self.start_ns,
            end_ns=self.end_ns,
            status_code=self.status_code,
            status_message=self.status_message,
            scope_name=self.scope_name,
            scope_version=self.scope_version,
            attributes=attrs_from_mapping(self.attributes),
            resource_attributes=attrs_from_mapping(self.resource),
            events=[
                {"time_ns": t, "name": n, "attributes": attrs_from_mapping(a)}
                for t, n, a in self.events
            ],
            links=[
                {"trace_id": t, "span_id": s, "attributes": attrs_from_mapping(a)}
                for t, s, a in self.links
            ],
            source_file=source_file,
            source_pos=source_pos,
        )


# ---------------------------------------------------------------------------------------------
# Field readers shared by all document formats

_ISO = re.compile(
    r"\s*(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?"
    r"\s*(Z|z|[+-]\d{2}(?::?\d{2})?)?\s*"
)


def iso_to_ns(text: str) -> int:
    """Nanoseconds since the epoch of an ISO-8601 time, exact to the digits given.

    Any number of fraction digits (the SDK writes 6, Langfuse 3, Go 9); a missing zone means
    UTC. Integer arithmetic, so no float rounding. Raises ValueError for anything else.
    """
    m = _ISO.fullmatch(text)
    if m is None:
        raise ValueError(f"not an ISO-8601 time: {text[:40]!r}")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    frac = (m.group(7) or "")[:9].ljust(9, "0")
    zone = m.group(8)
    if zone and zone not in ("Z", "z"):
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset = int(digits[:2]) * 3600 + int(digits[2:4] or 0) * 60
        seconds -= sign * offset
    return seconds * 1_000_000_000 + int(frac)


def time_ns(value: Any, *, unit_ns: int = 1) -> int:
    """A timestamp as int ns: an ISO string, a number in `unit_ns` nanoseconds, or a JS
    ``[seconds, nanoseconds]`` pair. Raises ValueError when it is none of these."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"no time: {value!r}")
    if isinstance(value, int):
        return value * unit_ns
    if isinstance(value, float):
        return round(value * unit_ns)
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return int(text) * unit_ns
        return iso_to_ns(text)
    if (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        return value[0] * 1_000_000_000 + value[1]
    raise ValueError(f"not a time: {str(value)[:40]!r}")


def _enum(value: Any, names: tuple[str, ...], prefixes: tuple[str, ...]) -> str:
    """`value`, an index into `names` or a name (any case, with or without one of `prefixes`),
    as one of `names`; the first for anything else."""
    if isinstance(value, int) and not isinstance(value, bool):
        return names[value] if 0 <= value < len(names) else names[0]
    text = "" if value is None or isinstance(value, bool) else str(value).strip().lower()
    for prefix in prefixes:
        text = text.removeprefix(prefix)
    return text if text in names else names[0]


def kind_name(value: Any, *, js: bool = False) -> str:
    """A span kind in any spelling (``SpanKind.CLIENT``, ``SPAN_KIND_CLIENT``, ``client``, an
    OTLP enum number, or with ``js=True`` a JS SDK enum number) as one of `KINDS`."""
    if js and isinstance(value, int) and not isinstance(value, bool):
        value += 1  # the JS SDK numbers kinds from INTERNAL=0, OTLP from UNSPECIFIED=0
    return _enum(value, KINDS, ("spankind.", "span_kind_"))


def status_name(value: Any) -> str:
    """A status code in any spelling (``OK``, ``STATUS_CODE_ERROR``, ``StatusCode.OK``, 0-2)
    as one of `STATUSES` (``unset``, ``ok`` or ``error``)."""
    return _enum(value, STATUSES, ("statuscode.", "status_code_"))


def read_id(value: Any, nbytes: int, what: str) -> str | None:
    """`normalize_id`, with a `SpanError` naming the field when the id is unreadable."""
    try:
        return normalize_id(value, nbytes)
    except ValueError as err:
        raise SpanError(f"{what}: {err}") from None


def required(value: str | None, what: str) -> str:
    """`value`, or a `SpanError` saying that `what` is missing."""
    if value is None:
        raise SpanError(f"{what} missing")
    return value


def read_time(value: Any, what: str, *, unit_ns: int = 1) -> int:
    """`time_ns`, with a `SpanError` naming the field when the time is unreadable."""
    try:
        return time_ns(value, unit_ns=unit_ns)
    except ValueError as err:
        raise SpanError(f"{what}: {err}") from None


def read_links(
    span: Mapping[str, Any], trace_key: str, span_key: str, *, in_context: bool = True
) -> list[tuple[str, str, Mapping[str, Any]]]:
    """(trace id, span id, attributes) of each of a span's ``links``: the ids at `trace_key`
    and `span_key` of the link's ``context`` (of the link itself without `in_context`); a
    `SpanError` naming the first id missing or unreadable."""
    links = []
    for i, link in enumerate(span.get("links") or ()):
        link = as_mapping(link)
        ids = as_mapping(link.get("context")) if in_context else link
        trace_what, span_what = f"link {i + 1} {trace_key}", f"link {i + 1} {span_key}"
        links.append(
            (
                required(read_id(ids.get(trace_key), 16, trace_what), trace_what),
                required(read_id(ids.get(span_key), 8, span_what), span_what),
                as_mapping(link.get("attributes")),
            )
        )
    return links


def as_mapping(value: Any) -> Mapping[str, Any]:
    """`value` when it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def as_text(value: Any) -> str:
    """`value` when it is a string, "" for None, else ``str(value)`` (``as_text(v) or None``
    gives None for None and "")."""
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


# ---------------------------------------------------------------------------------------------
# The Python-SDK-shaped span


def sdk_span_row(span: Mapping[str, Any]) -> SpanRow:
    """Convert one SDK-shaped span object (SDK console, any-agent, Phoenix) to a `SpanRow`.

    Raises `SpanError` when its trace id, span id, parent id or times cannot be read.
    """
    # the ids sit in the span's context, or at its top in flattened dumps
    context = as_mapping(span.get("context")) or span
    trace_id = required(read_id(context.get("trace_id"), 16, "trace_id"), "trace_id")
    span_id = required(read_id(context.get("span_id"), 8, "span_id"), "span_id")
    if "parent_id" in span or "parent_span_id" in span:
        parent_raw = span.get("parent_id", span.get("parent_span_id"))
    else:  # any-agent keeps the parent's whole context (ids None for a root)
        parent_raw = as_mapping(span.get("parent")).get("span_id")
    parent_id = read_id(parent_raw, 8, "parent span id")

    start_ns = read_time(span.get("start_time"), "start_time")
    end_ns = read_time(span.get("end_time"), "end_time")

    status = span.get("status")
    if isinstance(status, Mapping):  # SDK and any-agent
        status_code = status_name(status.get("status_code", status.get("code")))
        status_message = status.get("description") or status.get("message")
    else:  # Phoenix keeps them at the top level
        status_code = status_name(span.get("status_code"))
        status_message = span.get("status_message")

    scope = as_mapping(
        span.get("instrumentation_scope")
        or span.get("instrumentation_info")
        or span.get("instrumentation_library")
        or span.get("scope")
    )
    attributes = dict(as_mapping(span.get("attributes")))
    resource = dict(as_mapping(as_mapping(span.get("resource")).get("attributes")))

    events = []
    for i, event in enumerate(span.get("events") or span.get("span_events") or ()):
        if not isinstance(event, Mapping):
            raise SpanError(f"event {i + 1} is not an object")
        when = event.get("timestamp", event.get("time_unix_nano"))
        events.append(
            (
                read_time(when, f"event {i + 1} timestamp"),
                str(event.get("name") or ""),
                as_mapping(event.get("attributes")),
            )
        )
    return SpanRow(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent_id,
        name=as_text(span.get("name")),
        kind=kind_name(span.get("kind")),
        start_ns=start_ns,
        end_ns=end_ns,
        status_code=status_code,
        status_message=str(status_message) if status_message else None,
        scope_name=as_text(scope.get("name")) or None,
        scope_version=as_text(scope.get("version")) or None,
        attributes=attributes,
        resource=resource,
        events=events,
        links=read_links(span, "trace_id", "span_id"),
    )
