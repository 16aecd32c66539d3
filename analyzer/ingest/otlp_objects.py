"""The robust OTLP reader: a parsed ``ExportTraceServiceRequest``/``TracesData`` dict to span rows.

This is the reference behaviour of the OTLP JSON readers: the native lines reader in
`analyzer.ingest.otlp_json` must give identical rows for every line it accepts, and sends every
other line here. Scalars are coerced by msgspec's lax decoders (`INT64`, `FLOAT`, `BOOL`,
`ENUM`, ``strict=False``), which settle every spelling in one place: int64 as a string or a
number, doubles as numbers or ``"NaN"``/``"Infinity"``, and so on.

Rules, for both readers:

- ``resourceSpans``/``resource_spans``, ``scopeSpans``/``scope_spans`` and the legacy
  ``instrumentationLibrarySpans``/``instrumentationLibrary`` are all read; at every level the
  lowerCamel name wins over the proto field name.
- A span without a readable trace id, span id, start or end time, or with a bad parent or link
  id, is quarantined on its own; the others are kept. Event times may be absent (null).
- An attribute with an empty value is dropped; a value of the wrong type (``{"intValue":"abc"}``,
  ``{"stringValue":12}``) keeps its JSON text in ``json``; a bare JSON value where an AnyValue
  is expected is typed by its JSON type.
- Arrays and key-value lists become plain JSON text (``NaN`` doubles inside become ``null``).
- Unknown span kinds and status codes become ``unspecified`` and ``unset``.
- Empty ``status.message``, scope name and scope version become null.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
import orjson

from analyzer.ingest.accounting import FileLog
from analyzer.ingest.ids import normalize_id, opaque_id
from analyzer.ingest.limits import nesting_reason
from analyzer.spans import KINDS, STATUSES, SpanBatchBuilder

__all__ = [
    "BOOL",
    "ENUM",
    "FLOAT",
    "INT64",
    "KIND_NAMES",
    "STATUS_NAMES",
    "add_request",
    "dumps",
    "json_slot",
    "kind_name",
    "plain_value",
    "status_name",
    "typed_value",
]

#: An OTLP int64: a JSON number or a decimal string, in range.
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]

# The coercions, as one-value decoders (each value is read as its JSON text would be).
INT64 = msgspec.json.Decoder(Int64 | None, strict=False)
FLOAT = msgspec.json.Decoder(float | None, strict=False)
BOOL = msgspec.json.Decoder(bool | None, strict=False)
ENUM = msgspec.json.Decoder(int | str | None, strict=False)

_BAD = object()
#: Accepted spellings (upper case, without prefix) of span kinds and status codes.
KIND_NAMES = {name.upper(): name for name in KINDS} | {str(i): n for i, n in enumerate(KINDS)}
STATUS_NAMES = {name.upper(): name for name in STATUSES} | {
    str(i): n for i, n in enumerate(STATUSES)
}

# AnyValue fields in the order that decides which one is read when several are set.
_VALUE_FIELDS = (
    ("stringValue", "string_value"),
    ("boolValue", "bool_value"),
    ("intValue", "int_value"),
    ("doubleValue", "double_value"),
    ("bytesValue", "bytes_value"),
    ("arrayValue", "array_value"),
    ("kvlistValue", "kvlist_value"),
)
#: The decoder and attribute slot of AnyValue fields 1-3 (bool, int, double).
_SCALARS = ((BOOL, "bool"), (INT64, "int"), (FLOAT, "float"))


class _BadSpan(Exception):
    """A span that cannot be kept; the message is the quarantine reason."""


class _BadRecord(Exception):
    """A record whose structure is not an OTLP request; the message is the reason."""


def dumps(value: Any) -> str:
    """Compact JSON text, as stored in the ``json`` slot of an attribute."""
    try:
        return orjson.dumps(value, default=str).decode()
    except orjson.JSONEncodeError:  # integers beyond 64 bits
        return msgspec.json.encode(value, enc_hook=str).decode()


def _shown(value: Any) -> str:
    """`value` as JSON text for a quarantine excerpt, or a note when it is too deep to write."""
    try:
        return dumps(value)
    except RecursionError:
        return f"({nesting_reason(value=value)})"


def _coerce(decoder: msgspec.json.Decoder, value: Any) -> Any:
    """`value` as `decoder` reads its JSON text, or `_BAD`."""
    try:
        return decoder.decode(orjson.dumps(value))
    except (msgspec.ValidationError, msgspec.DecodeError, orjson.JSONEncodeError, TypeError):
        return _BAD


def _get(obj: dict[str, Any], camel: str, snake: str) -> Any:
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def _enum(value: Any, names: dict[str, str], prefix: str, default: str) -> str:
    """An OTLP enum (int, digits or ``PREFIX_NAME``, any case) as its lower-case name."""
    coerced = _coerce(ENUM, value)
    if isinstance(coerced, int) and not isinstance(coerced, bool):
        return names.get(str(coerced)) or default
    if isinstance(coerced, str):
        return names.get(coerced.upper().removeprefix(prefix)) or default
    return default


def kind_name(value: Any) -> str:
    """A span kind as one of `analyzer.spans.KINDS`."""
    return _enum(value, KIND_NAMES, "SPAN_KIND_", "unspecified")


def status_name(value: Any) -> str:
    """A status code as one of `analyzer.spans.STATUSES`."""
    return _enum(value, STATUS_NAMES, "STATUS_CODE_", "unset")


# --- attribute values -------------------------------------------------------------------------


def _plain_array(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    items = value.get("values")
    if items is None:
        return []
    if not isinstance(items, list):
        return value
    return [plain_value(item) for item in items]


def _plain_kvlist(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    items = value.get("values")
    if items is None:
        return {}
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        return value
    out: dict[str, Any] = {}
    for item in items:
        key = item.get("key")
        key = "" if key is None else key if isinstance(key, str) else dumps(key)
        out[key] = plain_value(item.get("value"))
    return out


def plain_value(value: Any) -> Any:
    """An AnyValue as a plain JSON value (for arrays and key-value lists)."""
    if not isinstance(value, dict):
        return value
    for index, (camel, snake) in enumerate(_VALUE_FIELDS):
        field = _get(value, camel, snake)
        if field is None:
            continue
        if index in (1, 2, 3):
            coerced = _coerce(_SCALARS[index - 1][0], field)
            return field if coerced is _BAD else coerced
        if index == 5:
            return _plain_array(field)
        return _plain_kvlist(field) if index == 6 else field
    return None


def json_slot(index: int, field: Any) -> tuple[str, Any]:
    """The attribute slot for AnyValue field number `index` (``_VALUE_FIELDS``) holding `field`."""
    if index == 0:
        return ("str", field) if isinstance(field, str) else ("json", dumps(field))
    if index in (1, 2, 3):
        decoder, slot = _SCALARS[index - 1]
        coerced = _coerce(decoder, field)
        return ("json", dumps(field)) if coerced is _BAD else (slot, coerced)
    if index == 4:
        return "json", dumps(field)
    if index == 5:
        return "json", dumps(_plain_array(field))
    return "json", dumps(_plain_kvlist(field))


def typed_value(value: Any) -> tuple[str, Any] | None:
    """The (slot, value) of a top-level attribute value; None when it is empty."""
    if value is None:
        return None
    if not isinstance(value, dict):
        # a bare JSON value where an AnyValue belongs: typed by its JSON type
        if isinstance(value, str):
            return "str", value
        if isinstance(value, bool):
            return "bool", value
        if isinstance(value, int) and -(2**63) <= value < 2**63:
            return "int", value
        if isinstance(value, float):
            return "float", value
        return "json", dumps(value)
    for index, (camel, snake) in enumerate(_VALUE_FIELDS):
        field = _get(value, camel, snake)
        if field is not None:
            return json_slot(index, field)
    return None


def _attributes(items: Any, what: str) -> list[dict[str, Any]]:
    """OTLP ``[{key, value}]`` as `analyzer.spans.ATTR` rows; raises _BadSpan when malformed."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise _BadSpan(f"{what} is not a list")
    rows = []
    for item in items:
        if not isinstance(item, dict):
            raise _BadSpan(f"{what} has an entry that is not an object")
        key = item.get("key")
        if key is None:
            key = ""
        elif not isinstance(key, str):
            raise _BadSpan(f"{what} has a key that is not a string")
        typed = typed_value(item.get("value"))
        if typed is None:
            continue
        row = {"key": key, "str": None, "int": None, "float": None, "bool": None, "json": None}
        row[typed[0]] = typed[1]
        rows.append(row)
    return rows


# --- spans ------------------------------------------------------------------------------------


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else dumps(value)


def _optional_text(value: Any) -> str | None:
    return _text(value) or None


def _id(
    value: Any, nbytes: int, what: str, *, required: bool = False, opaque: list[str] | None = None
) -> str | None:
    """The id as hex. A text that is no id encoding is hashed (`ids.opaque_id`) and `what`
    appended to `opaque`, where given; elsewhere it is a bad span."""
    try:
        out = normalize_id(value, nbytes)
    except ValueError as exc:
        if opaque is None or not isinstance(value, str) or not value.strip():
            raise _BadSpan(f"bad {what}: {exc}") from None
        opaque.append(what)
        out = opaque_id(value.strip(), nbytes)
    if out is None and required:
        raise _BadSpan(f"missing {what}")
    return out


def _time(value: Any, what: str, *, required: bool = False) -> int | None:
    if value is None:
        if required:
            raise _BadSpan(f"missing {what}")
        return None
    coerced = _coerce(INT64, value)
    if coerced is _BAD:
        raise _BadSpan(f"unreadable {what}: {dumps(value)[:60]}")
    return coerced


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _BadSpan(f"{what} is not a list")
    return value


def _span_row(span: dict[str, Any], opaque: list[str]) -> dict[str, Any]:
    """The span's row; the names of its ids read as opaque texts are appended to `opaque`."""
    trace_id = _id(_get(span, "traceId", "trace_id"), 16, "traceId", required=True, opaque=opaque)
    span_id = _id(_get(span, "spanId", "span_id"), 8, "spanId", required=True, opaque=opaque)
    parent = _id(_get(span, "parentSpanId", "parent_span_id"), 8, "parentSpanId", opaque=opaque)
    start = _time(
        _get(span, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano", required=True
    )
    end = _time(
        _get(span, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano", required=True
    )
    status = span.get("status")
    if status is None:
        status = {}
    elif not isinstance(status, dict):
        raise _BadSpan("status is not an object")
    events = []
    for event in _list(span.get("events"), "events"):
        if not isinstance(event, dict):
            raise _BadSpan("an event is not an object")
        events.append(
            {
                "time_ns": _time(_get(event, "timeUnixNano", "time_unix_nano"), "event time"),
                "name": _text(event.get("name")),
                "attributes": _attributes(event.get("attributes"), "event attributes"),
            }
        )
    links = []
    for link in _list(span.get("links"), "links"):
        if not isinstance(link, dict):
            raise _BadSpan("a link is not an object")
        links.append(
            {
                "trace_id": _id(_get(link, "traceId", "trace_id"), 16, "link traceId"),
                "span_id": _id(_get(link, "spanId", "span_id"), 8, "link spanId"),
                "attributes": _attributes(link.get("attributes"), "link attributes"),
            }
        )
    return {
        "trace_id": trace_id,
        "span_id": span_id,
        "parent_span_id": parent,
        "name": _text(span.get("name")),
        "kind": kind_name(span.get("kind")),
        "start_ns": start,
        "end_ns": end,
        "status_code": status_name(status.get("code")),
        "status_message": _optional_text(status.get("message")),
        "attributes": _attributes(span.get("attributes"), "attributes"),
        "events": events,
        "links": links,
    }


def _scope_groups(
    obj: dict[str, Any],
) -> list[tuple[list[dict[str, Any]], str | None, str | None, list[Any]]]:
    """(resource attributes, scope name, scope version, spans) per scope; raises _BadRecord."""
    resource_spans = _get(obj, "resourceSpans", "resource_spans")
    if resource_spans is None:
        return []
    if not isinstance(resource_spans, list):
        raise _BadRecord("resourceSpans is not a list")
    groups = []
    for rs in resource_spans:
        if not isinstance(rs, dict):
            raise _BadRecord("a resourceSpans entry is not an object")
        resource = rs.get("resource")
        if resource is not None and not isinstance(resource, dict):
            raise _BadRecord("resource is not an object")
        try:
            res_attrs = _attributes((resource or {}).get("attributes"), "resource attributes")
        except _BadSpan as exc:
            raise _BadRecord(str(exc)) from None
        scope_spans = []
        for camel, snake in (
            ("scopeSpans", "scope_spans"),
            ("instrumentationLibrarySpans", "instrumentation_library_spans"),
        ):
            entries = _get(rs, camel, snake)
            if entries is None:
                continue
            if not isinstance(entries, list):
                raise _BadRecord(f"{camel} is not a list")
            scope_spans.extend(entries)
        for ss in scope_spans:
            if not isinstance(ss, dict):
                raise _BadRecord("a scopeSpans entry is not an object")
            scope = ss.get("scope")
            if scope is None:
                scope = _get(ss, "instrumentationLibrary", "instrumentation_library")
            if scope is None:
                scope = {}
            if not isinstance(scope, dict):
                raise _BadRecord("scope is not an object")
            spans = ss.get("spans")
            if spans is None:
                spans = []
            if not isinstance(spans, list):
                raise _BadRecord("spans is not a list")
            groups.append(
                (
                    res_attrs,
                    _optional_text(scope.get("name")),
                    _optional_text(scope.get("version")),
                    spans,
                )
            )
    return groups


def add_request(
    obj: Any, builder: SpanBatchBuilder, log: FileLog, *, source_pos: int, position: str
) -> None:
    """Add every span of one parsed OTLP trace request to `builder`.

    `position` names the record in quarantine entries ("line 12"); spans are "line 12 span 3",
    counted from 1 across the whole request. Counts ``log.spans_read`` for every span object
    (the caller counts the record). A record that is not an OTLP trace request is quarantined
    whole; a span that cannot be read is quarantined on its own.
    """
    if not isinstance(obj, dict):
        log.quarantine_record(position, "not an OTLP trace request: not a JSON object", _shown(obj))
        return
    if _get(obj, "resourceSpans", "resource_spans") is None and not (
        "resourceSpans" in obj or "resource_spans" in obj
    ):
        log.quarantine_record(position, "not an OTLP trace request: no resourceSpans", _shown(obj))
        return
    try:
        groups = _scope_groups(obj)
    except _BadRecord as exc:
        log.quarantine_record(position, f"not an OTLP trace request: {exc}", _shown(obj))
        return
    except RecursionError:  # resource attributes nested deeper than can be written as JSON
        log.quarantine_record(
            position, f"unreadable request: {nesting_reason(value=obj)}", _shown(obj)
        )
        return
    number = 0
    for res_attrs, scope_name, scope_version, spans in groups:
        for span in spans:
            number += 1
            log.spans_read += 1
            where = f"{position} span {number}"
            if not isinstance(span, dict):
                log.quarantine_span(where, "span is not a JSON object", dumps(span))
                continue
            opaque: list[str] = []
            try:
                row = _span_row(span, opaque)
            except _BadSpan as exc:
                log.quarantine_span(where, str(exc), _shown(span))
                continue
            except RecursionError:  # an attribute nested deeper than can be written as JSON
                log.quarantine_span(
                    where, f"unreadable span: {nesting_reason(value=span)}", _shown(span)
                )
                continue
            if opaque:
                log.warn(
                    where,
                    f"{', '.join(opaque)} neither hex nor base64: read as an opaque id (hashed)",
                )
            builder.add(
                **row,
                scope_name=scope_name,
                scope_version=scope_version,
                resource_attributes=res_attrs,
                source_file=log.path,
                source_pos=source_pos,
            )
