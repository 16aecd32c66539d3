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

from collections.abc import Callable
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
    "add_groups",
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


class _Unreadable(Exception):
    """A request or span that cannot be kept; the message says why."""

    @staticmethod
    def reason(err: Exception, what: str, value: Any) -> str:
        """The quarantine reason of a `what` ("request" or "span"), `value`, whose reading
        raised `err`: an `_Unreadable`, or a RecursionError (nested deeper than can be
        written as JSON)."""
        if isinstance(err, RecursionError):
            return f"unreadable {what}: {nesting_reason(value=value)}"
        return f"not an OTLP trace request: {err}" if what == "request" else str(err)


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


def _plain_items(value: Any, kvlist: bool) -> Any:
    """An ArrayValue as a list, or with `kvlist` a KeyValueList as a dict, of plain values;
    `value` itself when it is malformed."""
    if not isinstance(value, dict):
        return value
    items = value.get("values")
    if items is None:
        return {} if kvlist else []
    if not isinstance(items, list):
        return value
    if not kvlist:
        return [plain_value(item) for item in items]
    if not all(isinstance(item, dict) for item in items):
        return value
    return {_text(item.get("key")): plain_value(item.get("value")) for item in items}


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
        return _plain_items(field, index == 6) if index in (5, 6) else field
    return None


def json_slot(index: int, field: Any) -> tuple[str, Any]:
    """The attribute slot for AnyValue field number `index` (``_VALUE_FIELDS``) holding `field`."""
    if index == 0:
        return ("str", field) if isinstance(field, str) else ("json", dumps(field))
    if index in (1, 2, 3):
        decoder, slot = _SCALARS[index - 1]
        coerced = _coerce(decoder, field)
        return ("json", dumps(field)) if coerced is _BAD else (slot, coerced)
    return "json", dumps(field if index == 4 else _plain_items(field, index == 6))


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
    """OTLP ``[{key, value}]`` as `analyzer.spans.ATTR` rows; raises _Unreadable when malformed."""
    rows = []
    for item in _typed(items, list, what):
        if not isinstance(item, dict):
            raise _Unreadable(f"{what} has an entry that is not an object")
        key = item.get("key")
        if key is None:
            key = ""
        elif not isinstance(key, str):
            raise _Unreadable(f"{what} has a key that is not a string")
        typed = typed_value(item.get("value"))
        if typed is None:
            continue
        row = {"key": key, "str": None, "int": None, "float": None, "bool": None, "json": None}
        row[typed[0]] = typed[1]
        rows.append(row)
    return rows


# --- spans ------------------------------------------------------------------------------------


def _typed(value: Any, kind: type[list] | type[dict], what: str) -> Any:
    """`value`, a `kind` (list or dict); an empty one for None; else raises _Unreadable."""
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise _Unreadable(f"{what} is not {'a list' if kind is list else 'an object'}")
    return value


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else dumps(value)


def _id(
    value: Any, nbytes: int, what: str, *, required: bool = False, opaque: list[str] | None = None
) -> str | None:
    """The id as hex. A text that is no id encoding is hashed (`ids.opaque_id`) and `what`
    appended to `opaque`, where given; elsewhere it is a bad span."""
    try:
        out = normalize_id(value, nbytes)
    except ValueError as exc:
        if opaque is None or not isinstance(value, str) or not value.strip():
            raise _Unreadable(f"bad {what}: {exc}") from None
        opaque.append(what)
        out = opaque_id(value.strip(), nbytes)
    if out is None and required:
        raise _Unreadable(f"missing {what}")
    return out


def _time(value: Any, what: str, *, required: bool = False) -> int | None:
    if value is None:
        if required:
            raise _Unreadable(f"missing {what}")
        return None
    coerced = _coerce(INT64, value)
    if coerced is _BAD:
        raise _Unreadable(f"unreadable {what}: {dumps(value)[:60]}")
    return coerced


def _span_row(span: Any, opaque: list[str]) -> dict[str, Any]:
    """The span's row; the names of its ids read as opaque texts are appended to `opaque`."""
    if not isinstance(span, dict):
        raise _Unreadable("span is not a JSON object")
    trace_id = _id(_get(span, "traceId", "trace_id"), 16, "traceId", required=True, opaque=opaque)
    span_id = _id(_get(span, "spanId", "span_id"), 8, "spanId", required=True, opaque=opaque)
    parent = _id(_get(span, "parentSpanId", "parent_span_id"), 8, "parentSpanId", opaque=opaque)
    start = _time(
        _get(span, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano", required=True
    )
    end = _time(
        _get(span, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano", required=True
    )
    status = _typed(span.get("status"), dict, "status")
    events = []
    for event in _typed(span.get("events"), list, "events"):
        if not isinstance(event, dict):
            raise _Unreadable("an event is not an object")
        events.append(
            {
                "time_ns": _time(_get(event, "timeUnixNano", "time_unix_nano"), "event time"),
                "name": _text(event.get("name")),
                "attributes": _attributes(event.get("attributes"), "event attributes"),
            }
        )
    links = []
    for link in _typed(span.get("links"), list, "links"):
        if not isinstance(link, dict):
            raise _Unreadable("a link is not an object")
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
        "status_message": _text(status.get("message")) or None,
        "attributes": _attributes(span.get("attributes"), "attributes"),
        "events": events,
        "links": links,
    }


def _scope_groups(
    obj: Any,
) -> list[tuple[list[dict[str, Any]], str | None, str | None, list[Any]]]:
    """(resource attributes, scope name, scope version, spans) per scope of a request;
    raises _Unreadable when it is no OTLP trace request."""
    if not isinstance(obj, dict):
        raise _Unreadable("not a JSON object")
    if "resourceSpans" not in obj and "resource_spans" not in obj:
        raise _Unreadable("no resourceSpans")
    groups = []
    for rs in _typed(_get(obj, "resourceSpans", "resource_spans"), list, "resourceSpans"):
        if not isinstance(rs, dict):
            raise _Unreadable("a resourceSpans entry is not an object")
        resource = _typed(rs.get("resource"), dict, "resource")
        res_attrs = _attributes(resource.get("attributes"), "resource attributes")
        scope_spans = []
        for camel, snake in (
            ("scopeSpans", "scope_spans"),
            ("instrumentationLibrarySpans", "instrumentation_library_spans"),
        ):
            scope_spans.extend(_typed(_get(rs, camel, snake), list, camel))
        for ss in scope_spans:
            if not isinstance(ss, dict):
                raise _Unreadable("a scopeSpans entry is not an object")
            scope = ss.get("scope")
            if scope is None:
                scope = _get(ss, "instrumentationLibrary", "instrumentation_library")
            scope = _typed(scope, dict, "scope")
            spans = _typed(ss.get("spans"), list, "spans")
            groups.append(
                (
                    res_attrs,
                    _text(scope.get("name")) or None,
                    _text(scope.get("version")) or None,
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
    try:
        groups = _scope_groups(obj)
    except (_Unreadable, RecursionError) as err:
        log.quarantine_record(position, _Unreadable.reason(err, "request", obj), _shown(obj))
        return

    def read_span(span: Any, where: str) -> dict[str, Any] | None:
        opaque: list[str] = []
        try:
            row = _span_row(span, opaque)
        except (_Unreadable, RecursionError) as err:
            log.quarantine_span(where, _Unreadable.reason(err, "span", span), _shown(span))
            return None
        if opaque:
            log.warn(
                where, f"{', '.join(opaque)} neither hex nor base64: read as an opaque id (hashed)"
            )
        return row

    add_groups(groups, read_span, builder, log, source_pos=source_pos, position=position)


def add_groups(
    groups: list[tuple[list[dict[str, Any]], str | None, str | None, Any]],
    read_span: Callable[[Any, str], dict[str, Any] | None],
    builder: SpanBatchBuilder,
    log: FileLog,
    *,
    source_pos: int,
    position: str,
) -> None:
    """Add the spans of a request's `groups` (resource attributes, scope name, scope version,
    spans) to `builder`, counting each in ``log.spans_read``. ``read_span(span, where)`` gives a
    span's row (`SpanBatchBuilder.add` fields but scope, resource and source), or None once it
    has quarantined the span as `where` ("`position` span N", N counted across the request)."""
    number = 0
    for res_attrs, scope_name, scope_version, spans in groups:
        for span in spans:
            number += 1
            log.spans_read += 1
            row = read_span(span, f"{position} span {number}")
            if row is not None:
                builder.add(
                    **row,
                    scope_name=scope_name,
                    scope_version=scope_version,
                    resource_attributes=res_attrs,
                    source_file=log.path,
                    source_pos=source_pos,
                )
