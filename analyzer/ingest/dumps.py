"""Span dumps that are not OTLP: Langfuse, any-agent, Phoenix, Jaeger, Zipkin, JS SDK spans,
CloudWatch span records and AgentOps trace exports.

Each ``*_row`` function turns one span object of its format into a `SpanRow`, or raises
`SpanError` with the reason it cannot (the caller quarantines that span and keeps the others).
`span_shape` tells which function reads a given object. Nothing here reads a file: the whole
documents are taken apart in `analyzer.ingest.documents`.

What each format loses, and what is recovered:

- Langfuse stores the original OTel attributes, resource and scope as a JSON string in each
  observation's ``metadata``; those become the span's attributes (values kept exactly as
  Langfuse stringified them), resource attributes and scope. Langfuse also moved some of the
  original attributes into observation fields (``input``, ``output``, ``model``,
  ``usageDetails``...); they are added as ``langfuse.observation.*`` attributes, never
  replacing an attribute the span carried. The span kind is lost (``unspecified``).
- Phoenix moves ``openinference.span.kind`` into ``span_kind``; it is put back.
- A CloudWatch span record (the ``aws/spans`` log group of AWS X-Ray Transaction Search and
  Bedrock AgentCore) is one OTLP span with its resource and scope inline, its attributes as a
  plain map, its kind and status as names; log events that carry one (a field holding the
  record, or its JSON text: CloudWatch's ``message``, Logs Insights' ``@message``) are
  unwrapped (`unwrap_log_event`).
- AgentOps (its API's trace detail, ``{"trace": {...}, "spans": [...]}``) keeps the trace id
  once, in ``trace``, nests the attributes by their dotted names (``span_attributes``, put back
  flat as Phoenix's are) and writes events and links as parallel arrays; the scope is lost.
- Jaeger and Zipkin keep kind, status and scope in tags, which become the matching columns.
  Zipkin tags are all strings and stay strings (as Langfuse values do); the conventions layer
  reads numbers out of strings.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator, Mapping
from typing import Any

from analyzer.ingest.ids import normalize_id, opaque_id
from analyzer.ingest.otlp_objects import dumps
from analyzer.ingest.sdk_json import (
    SpanError,
    SpanRow,
    as_mapping,
    as_text,
    kind_name,
    read_id,
    read_links,
    read_time,
    required,
    sdk_span_row,
    status_name,
)

__all__ = [
    "FINAL_OUTPUT_ATTR",
    "LANGFUSE_PREFIX",
    "add_final_output",
    "agentops_span_row",
    "cloudwatch_span_row",
    "jaeger_span_row",
    "js_span_row",
    "langfuse_observations",
    "langfuse_span_row",
    "phoenix_span_row",
    "span_shape",
    "unwrap_log_event",
    "zipkin_span_row",
]

#: Attribute given to the root span of an any-agent dump for its ``final_output``.
FINAL_OUTPUT_ATTR = "agenttrace.final_output"
#: Prefix of the attributes recovered from Langfuse observation fields.
LANGFUSE_PREFIX = "langfuse.observation."


def span_shape(obj: Any) -> str | None:
    """Which reader takes this span object: ``sdk`` (Python SDK, any-agent), ``phoenix``,
    ``js``, ``js-console``, ``langfuse``, ``jaeger``, ``zipkin``, ``cloudwatch``, ``agentops``,
    ``otlp`` (a bare OTLP span); None when it is no span object known."""
    if not isinstance(obj, Mapping):
        return None
    context = obj.get("context")
    if isinstance(context, Mapping) and ("trace_id" in context or "span_id" in context):
        return "phoenix" if ("span_kind" in obj or "status_code" in obj) else "sdk"
    if isinstance(obj.get("spanContext"), Mapping) or isinstance(obj.get("_spanContext"), Mapping):
        return "js"
    if "traceID" in obj and "spanID" in obj:
        return "jaeger"
    if "span_id" in obj and "span_attributes" in obj:
        return "agentops"
    if "trace_id" in obj and "span_id" in obj and "start_time" in obj:
        return "sdk"  # the SDK's fields with the context's ids at the top (strands-agents evals)
    has_ids = ("traceId" in obj or "trace_id" in obj) and ("spanId" in obj or "span_id" in obj)
    if has_ids and ("startTimeUnixNano" in obj or "start_time_unix_nano" in obj):
        # a bare OTLP span has attributes as a key-value list and no resource of its own
        flat = "resource" in obj or isinstance(obj.get("attributes"), Mapping)
        return "cloudwatch" if flat else "otlp"
    if "traceId" in obj and "startTime" in obj and ("type" in obj or "parentObservationId" in obj):
        return "langfuse"
    if "traceId" in obj and "id" in obj:
        # The JS console exporter and Zipkin share traceId/id/timestamp/duration; only the
        # JS spans have OTel attributes, only Zipkin spans have string tags.
        return "js-console" if "attributes" in obj else "zipkin"
    return None


def unwrap_log_event(obj: Any) -> Any:
    """The span record a log event carries, or `obj` itself: an object that is no span but
    has a field holding a span object, or the JSON text of one (CloudWatch Logs events'
    ``message``, Logs Insights' ``@message``), is read as that span."""
    if not isinstance(obj, Mapping) or span_shape(obj) is not None:
        return obj
    for value in obj.values():
        if isinstance(value, str) and value[:1] == "{":
            try:
                value = json.loads(value)
            except (ValueError, RecursionError):
                continue
        if span_shape(value) is not None:
            return value
    return obj


def _hex_id(value: Any, nbytes: int, what: str) -> str | None:
    """Ids of Jaeger and Zipkin: hex, where a 64-bit trace id may come as 16 chars."""
    if isinstance(value, str):
        text = value.strip()
        if 0 < len(text) < 2 * nbytes and all(c in "0123456789abcdefABCDEF" for c in text):
            value = text.rjust(2 * nbytes, "0")
    return read_id(value, nbytes, what)


def _start_end(span: Mapping[str, Any], start: str) -> tuple[int, int]:
    """Start and end (ns) of a Jaeger or Zipkin span: its `start` and duration in µs."""
    start_ns = read_time(span.get(start), start, unit_ns=1000)
    duration = span.get("duration")
    return start_ns, start_ns + (
        0 if duration is None else read_time(duration, "duration", unit_ns=1000)
    )


# ---------------------------------------------------------------------------------------------
# Phoenix span JSON


def _flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """OpenInference dotted keys from nested attributes (Phoenix stores them unflattened)."""
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(_flatten(value, f"{name}."))
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            for i, item in enumerate(value):
                out.update(_flatten(item, f"{name}.{i}."))
        else:
            out[name] = value
    return out


def phoenix_span_row(span: Mapping[str, Any]) -> SpanRow:
    """A Phoenix span (REST ``/v1/projects/{id}/spans`` item or ``px`` span JSON)."""
    row = sdk_span_row(span)
    row.attributes = _flatten(row.attributes)
    kind = span.get("span_kind")
    if isinstance(kind, str) and kind and kind.upper() != "UNKNOWN":
        row.attributes.setdefault("openinference.span.kind", kind.upper())
    return row


# ---------------------------------------------------------------------------------------------
# any-agent AgentTrace


def _json_nodes(value: Any, depth: int = 0) -> Iterator[Any]:
    """`value` and everything inside it, reading JSON held in strings (a few levels deep)."""
    yield value
    if isinstance(value, str):
        if depth < 4 and value.lstrip()[:1] in ("{", "["):
            try:
                parsed = json.loads(value)
            except ValueError:
                return
            yield from _json_nodes(parsed, depth + 1)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _json_nodes(item, depth)
    elif isinstance(value, list):
        for item in value:
            yield from _json_nodes(item, depth)


def add_final_output(rows: list[SpanRow], final_output: Any) -> bool:
    """Record an any-agent ``final_output`` on the root span, unless a span already holds it.

    "Holds it" means some attribute value equals it, directly or as a part of JSON held in
    the value (the model's last answer, a ``final_output`` tool's arguments). The value is
    kept as text (JSON text when it is not a string). Returns True when it was added.
    """
    if final_output is None or final_output == "" or not rows:
        return False
    for row in rows:
        for value in row.attributes.values():
            if any(node == final_output for node in _json_nodes(value)):
                return False
    roots = [r for r in rows if r.parent_span_id is None]
    target = roots[0] if roots else min(rows, key=lambda r: r.start_ns)
    # otlp_objects.dumps: orjson, or msgspec for integers beyond 64 bits and deep nesting
    text = final_output if isinstance(final_output, str) else dumps(final_output)
    if FINAL_OUTPUT_ATTR in target.attributes:
        return False
    target.attributes[FINAL_OUTPUT_ATTR] = text
    return True


# ---------------------------------------------------------------------------------------------
# Langfuse trace export


def langfuse_observations(doc: Mapping[str, Any]) -> tuple[list[Any], Any]:
    """The observations of a Langfuse export and the trace id to fall back on.

    The export repeats the observations under ``trace`` with an empty ``metadata``; the
    top-level list is the full one, so it is read first, then any observation only the
    trace lists (by id).
    """
    trace = as_mapping(doc.get("trace")) if "trace" in doc else doc
    top = doc.get("observations") if "trace" in doc else None
    inner = trace.get("observations")
    observations: list[Any] = list(top) if isinstance(top, list) else []
    if isinstance(inner, list):
        seen = {_observation_id(o) for o in observations} - {None}
        observations += [o for o in inner if _observation_id(o) not in seen]
    return observations, trace.get("id")


def _observation_id(observation: Any) -> str | int | None:
    """The id of an observation, None where it has none that can be one (a list, an object)."""
    value = observation.get("id") if isinstance(observation, Mapping) else None
    return value if isinstance(value, str | int) else None


#: Observation fields that held span data, and the attribute (after the prefix) each becomes.
_LANGFUSE_FIELDS = (
    ("type", "type"),
    ("name", "name"),
    ("model", "model"),
    ("input", "input"),
    ("output", "output"),
    ("usageDetails", "usage_details"),
    ("costDetails", "cost_details"),
    ("modelParameters", "model_parameters"),
    ("providedUsageDetails", "provided_usage_details"),
    ("providedCostDetails", "provided_cost_details"),
    ("completionStartTime", "completion_start_time"),
    ("level", "level"),
    ("version", "version"),
    ("promptName", "prompt_name"),
    ("promptVersion", "prompt_version"),
    ("toolDefinitions", "tool_definitions"),
    ("toolCalls", "tool_calls"),
    ("toolCallNames", "tool_call_names"),
    ("environment", "environment"),
)
#: Values that only say "nothing set", skipped so every span does not carry them.
_LANGFUSE_DEFAULTS = {"level": "DEFAULT", "environment": "default"}


def _langfuse_id(value: Any, nbytes: int, what: str) -> tuple[str | None, bool]:
    """An observation or trace id as hex, and whether it had to be derived.

    Observations ingested from OTel keep their hex ids. Those created by Langfuse's own SDK
    have UUIDs or free strings: a dashed UUID that fits is used without its dashes, anything
    else is mapped to the first bytes of its SHA-256 so that parent links still match.
    """
    if value is None or value == "":
        return None, False
    try:
        return normalize_id(value, nbytes), False
    except ValueError:
        pass
    if not isinstance(value, str):
        raise SpanError(f"{what}: id has type {type(value).__name__}")
    try:
        out = normalize_id(value.replace("-", ""), nbytes)
        if out is not None:
            return out, True
    except ValueError:
        pass
    return opaque_id(value, nbytes), True


def _langfuse_metadata(value: Any) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    if isinstance(value, str) and value.strip():
        try:
            parsed = json.loads(value)
        except ValueError:
            return {"metadata": value}
        return parsed if isinstance(parsed, Mapping) else {"metadata": parsed}
    return {}


def langfuse_span_row(obs: Mapping[str, Any], trace_id_fallback: Any = None) -> SpanRow:
    """One Langfuse observation (from a trace export or the observations API)."""
    raw_trace = obs.get("traceId") or trace_id_fallback
    trace_id, trace_derived = _langfuse_id(raw_trace, 16, "traceId")
    span_id, span_derived = _langfuse_id(obs.get("id"), 8, "id")
    parent_id, _ = _langfuse_id(obs.get("parentObservationId"), 8, "parentObservationId")
    start_ns = read_time(obs.get("startTime"), "startTime")
    # EVENT observations (and unfinished ones) have no end: they take no time.
    end_raw = obs.get("endTime")
    end_ns = start_ns if end_raw is None else read_time(end_raw, "endTime")

    metadata = _langfuse_metadata(obs.get("metadata"))
    attributes = dict(as_mapping(metadata.get("attributes")))
    resource = dict(as_mapping(metadata.get("resourceAttributes")))
    scope = as_mapping(metadata.get("scope"))
    for key, value in metadata.items():
        if key not in ("attributes", "resourceAttributes", "scope") and value not in (None, ""):
            attributes.setdefault(f"langfuse.metadata.{key}", value)

    for source, target in _LANGFUSE_FIELDS:
        value = obs.get(source)
        if value is None or value in ("", {}, []) or _LANGFUSE_DEFAULTS.get(target) == value:
            continue
        if target in ("input", "output") and not isinstance(value, str):
            value = dumps(value)  # orjson, or msgspec beyond 64 bits
        attributes.setdefault(LANGFUSE_PREFIX + target, value)
    if trace_derived:
        attributes.setdefault("langfuse.trace.id", str(raw_trace))
    if span_derived:
        attributes.setdefault(LANGFUSE_PREFIX + "id", str(obs.get("id")))

    return SpanRow(
        trace_id=required(trace_id, "traceId"),
        span_id=required(span_id, "id"),
        parent_span_id=parent_id,
        name=as_text(obs.get("name")),
        kind="unspecified",
        start_ns=start_ns,
        end_ns=end_ns,
        status_code="error" if obs.get("level") == "ERROR" else "unset",
        status_message=as_text(obs.get("statusMessage")) or None,
        scope_name=as_text(scope.get("name")) or None,
        scope_version=as_text(scope.get("version")) or None,
        attributes=attributes,
        resource=resource,
    )


# ---------------------------------------------------------------------------------------------
# Jaeger JSON

#: Tags the OTel -> Jaeger/Zipkin mapping uses for span fields; read into columns.
_STATUS_TAGS = ("otel.status_code", "otel.status_description", "error")
_SCOPE_TAGS = ("otel.scope.name", "otel.scope.version", "otel.library.name", "otel.library.version")


def _jaeger_value(tag: Mapping[str, Any]) -> Any:
    kind = str(tag.get("type") or tag.get("vType") or "string").lower()
    value = tag.get("value")
    try:
        if kind == "bool":
            return value if isinstance(value, bool) else str(value).lower() == "true"
        if kind == "int64" and not isinstance(value, int):
            return int(value)
        if kind == "float64" and not isinstance(value, float):
            return float(value)
        if kind == "binary" and isinstance(value, str):
            return base64.b64decode(value, validate=True)
    except (ValueError, TypeError, binascii.Error):
        return value
    return value


def _jaeger_tags(tags: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for tag in tags or ():
        if isinstance(tag, Mapping) and isinstance(tag.get("key"), str):
            out[tag["key"]] = _jaeger_value(tag)
    return out


def _status_and_scope(tags: dict[str, Any]) -> dict[str, Any]:
    """Pop the status and scope tags out of `tags`: the `SpanRow` fields they give
    (``status_code``, ``status_message``, ``scope_name``, ``scope_version``)."""
    code, message, error = (tags.pop(key, None) for key in _STATUS_TAGS)
    status = status_name(code)
    if code is None and error is not None and str(error).lower() not in ("false", "0"):
        status = "error"
        if message is None and isinstance(error, str) and error.lower() not in ("true", ""):
            message = error  # Zipkin puts the error description in the `error` tag
    name, version, library_name, library_version = (tags.pop(key, None) for key in _SCOPE_TAGS)
    return {
        "status_code": status,
        "status_message": as_text(message) or None,
        "scope_name": as_text(name or library_name) or None,
        "scope_version": as_text(version or library_version) or None,
    }


def jaeger_span_row(span: Mapping[str, Any], processes: Mapping[str, Any]) -> SpanRow:
    """One Jaeger span; `processes` is its trace's ``processes`` map (the resource)."""
    trace_id = required(_hex_id(span.get("traceID"), 16, "traceID"), "traceID")
    span_id = required(_hex_id(span.get("spanID"), 8, "spanID"), "spanID")
    parent_id = None
    links: list[tuple[str, str, Mapping[str, Any]]] = []
    for i, ref in enumerate(span.get("references") or ()):
        ref = as_mapping(ref)
        ref_trace = _hex_id(ref.get("traceID", span.get("traceID")), 16, f"reference {i + 1}")
        ref_span = _hex_id(ref.get("spanID"), 8, f"reference {i + 1}")
        if ref_trace is None or ref_span is None:
            raise SpanError(f"reference {i + 1}: ids missing")
        if parent_id is None and ref.get("refType") == "CHILD_OF" and ref_trace == trace_id:
            parent_id = ref_span  # the first CHILD_OF is the parent, as OTel's Jaeger mapping
        else:
            links.append((ref_trace, ref_span, {"jaeger.ref_type": ref.get("refType")}))
    if parent_id is None and span.get("parentSpanID"):
        parent_id = _hex_id(span.get("parentSpanID"), 8, "parentSpanID")

    start_ns, end_ns = _start_end(span, "startTime")

    tags = _jaeger_tags(span.get("tags"))
    kind = kind_name(tags.pop("span.kind", None) or "internal")
    status_and_scope = _status_and_scope(tags)

    process = as_mapping(processes.get(span.get("processID"))) or as_mapping(span.get("process"))
    resource = _jaeger_tags(process.get("tags"))
    if process.get("serviceName"):
        resource.setdefault("service.name", process["serviceName"])

    events = []
    for i, log in enumerate(span.get("logs") or ()):
        log = as_mapping(log)
        fields = _jaeger_tags(log.get("fields"))
        name = fields.pop("event", "")
        when = read_time(log.get("timestamp"), f"log {i + 1}", unit_ns=1000)
        events.append((when, as_text(name), fields))

    return SpanRow(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent_id,
        name=as_text(span.get("operationName")),
        kind=kind,
        start_ns=start_ns,
        end_ns=end_ns,
        **status_and_scope,
        attributes=tags,
        resource=resource,
        events=events,
        links=links,
    )


# ---------------------------------------------------------------------------------------------
# Zipkin v2 JSON


def zipkin_span_row(span: Mapping[str, Any]) -> SpanRow:
    """One Zipkin v2 span (tags stay strings)."""
    trace_id = required(_hex_id(span.get("traceId"), 16, "traceId"), "traceId")
    span_id = required(_hex_id(span.get("id"), 8, "id"), "id")
    parent_id = _hex_id(span.get("parentId"), 8, "parentId")
    start_ns, end_ns = _start_end(span, "timestamp")

    tags = {str(k): v for k, v in as_mapping(span.get("tags")).items()}
    status_and_scope = _status_and_scope(tags)
    # Zipkin has no INTERNAL kind: a span without one is internal.
    kind = kind_name(span.get("kind") or "internal")

    local = as_mapping(span.get("localEndpoint"))
    resource = {"service.name": local["serviceName"]} if local.get("serviceName") else {}
    remote = as_mapping(span.get("remoteEndpoint"))
    if remote.get("serviceName"):
        tags.setdefault("peer.service", remote["serviceName"])

    events = [
        (
            read_time(a.get("timestamp"), f"annotation {i + 1}", unit_ns=1000),
            as_text(a.get("value")),
            {},
        )
        for i, a in enumerate(as_mapping(a) for a in span.get("annotations") or ())
    ]
    return SpanRow(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent_id,
        name=as_text(span.get("name")),
        kind=kind,
        start_ns=start_ns,
        end_ns=end_ns,
        **status_and_scope,
        attributes=tags,
        resource=resource,
        events=events,
    )


# ---------------------------------------------------------------------------------------------
# JS SDK spans: ReadableSpan serialised with JSON.stringify, and the console exporter's objects


def _js_resource(resource: Any) -> dict[str, Any]:
    resource = as_mapping(resource)
    for key in ("attributes", "_attributes"):
        if isinstance(resource.get(key), Mapping):
            return dict(resource[key])
    raw = resource.get("_rawAttributes")
    if isinstance(raw, list):  # SDK 2.x keeps [key, value] pairs
        return {str(p[0]): p[1] for p in raw if isinstance(p, list) and len(p) == 2}
    return {}


def js_span_row(span: Mapping[str, Any]) -> SpanRow:
    """A JS SDK span: ``ReadableSpan`` JSON (``spanContext``, hrtime ``[s, ns]`` times) or the
    console exporter's object (``traceId``/``id``, ``timestamp``/``duration`` in µs)."""
    context = as_mapping(span.get("spanContext") or span.get("_spanContext"))
    console = not context
    if console:
        trace_raw, span_raw = span.get("traceId"), span.get("id")
    else:
        trace_raw, span_raw = context.get("traceId"), context.get("spanId")
    trace_id = required(read_id(trace_raw, 16, "traceId"), "traceId")
    span_id = required(read_id(span_raw, 8, "spanId"), "spanId")
    parent_raw = span.get("parentSpanId") or span.get("parentId")
    if parent_raw is None:
        parent_raw = as_mapping(span.get("parentSpanContext")).get("spanId")
    parent_id = read_id(parent_raw, 8, "parent span id")

    # Plain numbers are µs in the console exporter, ms (Date.now()) in a ReadableSpan.
    unit = 1000 if console else 1_000_000
    start_ns = read_time(
        span.get("timestamp" if console else "startTime"), "start time", unit_ns=unit
    )
    if span.get("endTime") is not None:
        end_ns = read_time(span.get("endTime"), "endTime", unit_ns=unit)
    elif span.get("duration") is not None:
        end_ns = start_ns + read_time(span.get("duration"), "duration", unit_ns=unit)
    else:
        raise SpanError("end time missing")

    status = as_mapping(span.get("status"))
    scope = as_mapping(span.get("instrumentationScope") or span.get("instrumentationLibrary"))
    events = []
    for i, event in enumerate(span.get("events") or ()):
        event = as_mapping(event)
        when = read_time(event.get("time"), f"event {i + 1} time", unit_ns=unit)
        events.append((when, as_text(event.get("name")), as_mapping(event.get("attributes"))))
    return SpanRow(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent_id,
        name=as_text(span.get("name")),
        kind=kind_name(span.get("kind"), js=True),
        start_ns=start_ns,
        end_ns=end_ns,
        status_code=status_name(status.get("code")),
        status_message=as_text(status.get("message")) or None,
        scope_name=as_text(scope.get("name")) or None,
        scope_version=as_text(scope.get("version")) or None,
        attributes=dict(as_mapping(span.get("attributes"))),
        resource=_js_resource(span.get("resource")),
        events=events,
        links=read_links(span, "traceId", "spanId"),
    )


# ---------------------------------------------------------------------------------------------
# AgentOps trace export


def _parallel(span: Mapping[str, Any], *keys: str) -> list[tuple[Any, ...]]:
    """The items of a span's parallel arrays `keys` (AgentOps' events and links), side by side;
    a `SpanError` when their lengths differ."""
    arrays = [span.get(key) or [] for key in keys]
    if any(not isinstance(a, list) or len(a) != len(arrays[0]) for a in arrays):
        raise SpanError(f"{', '.join(keys)}: not arrays of one length")
    return list(zip(*arrays, strict=True))


def agentops_span_row(span: Mapping[str, Any], trace_id: Any = None) -> SpanRow:
    """An AgentOps span (an item of its trace export's ``spans``), in the trace `trace_id`
    (the export's ``trace.trace_id``) unless it carries its own."""
    trace_id = required(read_id(span.get("trace_id", trace_id), 16, "trace_id"), "trace_id")
    span_id = required(read_id(span.get("span_id"), 8, "span_id"), "span_id")
    events = [
        (read_time(when, f"event {i + 1} timestamp"), as_text(name), as_mapping(attributes))
        for i, (when, name, attributes) in enumerate(
            _parallel(span, "event_timestamps", "event_names", "event_attributes")
        )
    ]
    keys = ("link_trace_ids", "link_span_ids", "link_trace_states", "link_attributes")
    links = [
        {"trace_id": trace, "span_id": span_, "attributes": attributes}
        for trace, span_, _, attributes in _parallel(span, *keys)
    ]
    return SpanRow(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=read_id(span.get("parent_span_id") or None, 8, "parent_span_id"),
        name=as_text(span.get("span_name")),
        kind=kind_name(span.get("span_kind")),
        start_ns=read_time(span.get("start_time"), "start_time"),
        end_ns=read_time(span.get("end_time"), "end_time"),
        status_code=status_name(span.get("status_code")),
        status_message=as_text(span.get("status_message")) or None,
        attributes={
            **_flatten(as_mapping(span.get("attributes"))),
            **_flatten(as_mapping(span.get("span_attributes"))),
        },
        resource=_flatten(as_mapping(span.get("resource_attributes"))),
        events=events,
        links=read_links({"links": links}, "trace_id", "span_id", in_context=False),
    )


# ---------------------------------------------------------------------------------------------
# CloudWatch span records


def cloudwatch_span_row(span: Mapping[str, Any]) -> SpanRow:
    """A CloudWatch ``aws/spans`` record: OTLP field names (hex ids, integer nanoseconds),
    the resource's and the span's attributes as plain maps, kind and status code as names
    (``SERVER``, ``ERROR``)."""
    trace_id = required(read_id(span.get("traceId"), 16, "traceId"), "traceId")
    span_id = required(read_id(span.get("spanId"), 8, "spanId"), "spanId")
    parent_id = read_id(span.get("parentSpanId") or None, 8, "parentSpanId")
    status = as_mapping(span.get("status"))
    scope = as_mapping(span.get("scope"))
    events = []
    for i, event in enumerate(span.get("events") or ()):
        event = as_mapping(event)
        when = read_time(event.get("timeUnixNano"), f"event {i + 1} timeUnixNano")
        events.append((when, as_text(event.get("name")), dict(as_mapping(event.get("attributes")))))
    return SpanRow(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent_id,
        name=as_text(span.get("name")),
        kind=kind_name(span.get("kind")),
        start_ns=read_time(span.get("startTimeUnixNano"), "startTimeUnixNano"),
        end_ns=read_time(span.get("endTimeUnixNano"), "endTimeUnixNano"),
        status_code=status_name(status.get("code")),
        status_message=as_text(status.get("message")) or None,
        scope_name=as_text(scope.get("name")) or None,
        scope_version=as_text(scope.get("version")) or None,
        attributes=dict(as_mapping(span.get("attributes"))),
        resource=dict(as_mapping(as_mapping(span.get("resource")).get("attributes"))),
        events=events,
        links=read_links(span, "traceId", "spanId", in_context=False),
    )
