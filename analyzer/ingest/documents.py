"""Read any JSON trace *document* (not OTLP JSON lines) into span batches, dispatched by shape.

A file may hold one JSON value or several concatenated ones (the Python SDK's console exporter
prints pretty span objects back to back). Text that is no JSON value (the program's own prints
captured with the exporter's, a cut object) is quarantined with its line, and reading goes on
at the next line that opens an object in its first column. Each value is then recognised by
its structure:

==========================  ====================================================================
OTLP request                ``{"resourceSpans": ...}`` (or ``resource_spans``); also wrapped:
                            Jaeger API v3 ``{"result": {...}}``, Tempo ``{"batches": [...]}`` and
                            ``{"trace": {"resourceSpans": ...}}``, a list of requests, a list
                            of bare OTLP spans; oteltest ``{"trace_requests": [{"pbreq": ...}]}``
SDK span JSON               one span object, an array of them, or concatenated objects
any-agent ``AgentTrace``    ``{"spans": [...], "final_output": ...}``, decimal integer ids
Langfuse trace export       ``{"trace": {...}, "observations": [...]}``, either part alone, or
                            ``{"data": [observation...]}`` from the observations API
Phoenix span JSON           ``[{context, span_kind, status_code, ...}]`` or ``{"data": [...]}``
JS SDK spans                ``ReadableSpan`` JSON (``spanContext``) or console-exporter objects
CloudWatch span records     ``aws/spans`` records (``traceId``, ``resource``, ``attributes`` as a
                            map), one per line or in an array, or inside log events
                            (``{"message": "<record as JSON>", ...}``), as in the
                            ``{"events": [...]}`` of ``aws logs filter-log-events``; with SDK
                            span JSON in an AgentCore ``{"sessionSpans": [...]}`` (its log
                            records are quarantined: no span)
AgentOps trace export       ``{"trace": {"trace_id", ...}, "spans": [...]}`` (its API's trace
                            detail: ``span_id``, ``span_name``, nested ``span_attributes``)
Jaeger JSON                 ``{"data": [{traceID, spans, processes}]}``, one trace, or a list
Zipkin v2                   ``[{traceId, id, parentId, timestamp, duration, tags}]``, or a list
                            of such lists (``/api/v2/traces``)
==========================  ====================================================================

Anything else raises `TraceFormatError` naming what was found, so the file is skipped whole.

Accounting: every span object counts one record and one span read; an OTLP request counts
one record (its spans are counted by ``otlp_objects.add_request``). A span object whose ids
or times cannot be read is quarantined (``log.quarantine_span``) and the others are kept.

``source_pos``: for a span object that is itself a top-level JSON value (SDK console output),
the 1-based line where it starts, and its quarantine position is ``"line N"``. For a span
inside a container (an array, a Langfuse/any-agent/Jaeger document) the line is not known
without a slow parse, so ``source_pos`` is the span object's 1-based ordinal among all the
span objects of the file, in document order, and the position is ``"span N"``. OTLP requests
get ``source_pos=0`` when the file is one document, their start line when concatenated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import orjson
import pyarrow as pa

from analyzer.errors import TraceFormatError
from analyzer.ingest.accounting import EXCERPT_BYTES, FileLog
from analyzer.ingest.dumps import (
    add_final_output,
    agentops_span_row,
    cloudwatch_span_row,
    jaeger_span_row,
    js_span_row,
    langfuse_observations,
    langfuse_span_row,
    phoenix_span_row,
    span_shape,
    unwrap_log_event,
    zipkin_span_row,
)
from analyzer.ingest.limits import nesting_reason
from analyzer.ingest.sdk_json import SpanError, SpanRow, sdk_span_row
from analyzer.spans import SpanBatchBuilder

__all__ = ["BATCH_SPANS", "OBJECT_LINE", "document_kind", "parse_json_values", "read_json_document"]

#: Spans per record batch yielded.
BATCH_SPANS = 8192

# orjson turns integers beyond 64 bits into floats without a word (any-agent writes 128-bit
# trace ids in decimal), so a document holding such a number is parsed by the json module.
# (Negative ones below -2**63 with exactly 19 digits slip through; none is an id.)
_BIG_INT = re.compile(rb"\d{20}")
_SPACE = re.compile(r"\s*")
#: A line that opens an object in its first column: where reading goes on after text that is
#: no JSON value, and how a file of such text around span objects is told from other text.
OBJECT_LINE = re.compile(r"^\{", re.M)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# json.loads keeps a lone UTF-16 surrogate written as an escape (JS truncating a string, or
# Python's ensure_ascii output of one); Arrow cannot encode it, so it becomes U+FFFD.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")

_CONVERTERS: dict[str, Callable[[Mapping[str, Any]], SpanRow]] = {
    "sdk": sdk_span_row,
    "phoenix": phoenix_span_row,
    "js": js_span_row,
    "js-console": js_span_row,
    "zipkin": zipkin_span_row,
    "langfuse": langfuse_span_row,
    "cloudwatch": cloudwatch_span_row,
    "agentops": agentops_span_row,  # outside its export: the trace id only if it carries one
}


def parse_json_values(data: bytes, log: FileLog) -> list[tuple[Any, int]]:
    """The JSON values in `data` with the 1-based line each starts on.

    One value is parsed with orjson; concatenated values (or numbers orjson cannot hold) with
    the json module, one after another. Unparseable text is quarantined as one record with its
    line, up to the next line that starts with ``{`` (where reading goes on) or to the end when
    there is none.
    """
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if not _BIG_INT.search(data):
        try:
            return [(orjson.loads(data), 1)] if data.strip() else []
        except orjson.JSONDecodeError:
            pass  # concatenated values, NaN, a truncated tail...: take them one by one
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        # kept, with U+FFFD in place of each bad byte (one warning for the file: where first)
        text = data.decode("utf-8", errors="replace")
        bad_line = data.count(b"\n", 0, err.start) + 1
        log.warn(
            f"line {bad_line}",
            f"invalid UTF-8 (first at byte {err.start:,}) replaced by U+FFFD; spans kept",
            data[err.start : err.start + 16],
            spans=0,
        )
    decoder = json.JSONDecoder()
    scrub = _SURROGATE_ESCAPE.search(text) is not None
    values: list[tuple[Any, int]] = []
    index = _SPACE.match(text).end()  # type: ignore[union-attr]
    line = 1 + text.count("\n", 0, index)
    while index < len(text):
        try:
            value, end = decoder.raw_decode(text, index)
            value = _scrub(value) if scrub else value
        except (json.JSONDecodeError, RecursionError) as err:
            log.records += 1
            reason = (
                f"unparseable JSON: {err.msg} (line {err.lineno}, column {err.colno})"
                if isinstance(err, json.JSONDecodeError)
                else f"unparseable JSON: {nesting_reason(text=text[index:])}"
            )
            # read on from the next line that opens an object in its first column (a program's
            # own prints between console-exporter objects, a cut object): none, the rest is lost
            resync = OBJECT_LINE.search(text, text.find("\n", index) + 1 or len(text))
            end = len(text) if resync is None else resync.start()
            excerpt = text[index : min(end, index + EXCERPT_BYTES)]
            log.quarantine_record(f"line {line}", reason, excerpt)
            if resync is None:
                break
        else:
            values.append((value, line))
        following = _SPACE.match(text, end).end()  # type: ignore[union-attr]
        line += text.count("\n", index, following)
        index = following
    return values


def _scrub(value: Any) -> Any:
    """`value` with lone surrogates in its strings replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def _keys(obj: Mapping[str, Any]) -> str:
    keys = [str(k) for k in obj]
    shown = ", ".join(keys[:12]) + (", ..." if len(keys) > 12 else "")
    return f"JSON object with keys [{shown}]" if keys else "empty JSON object"


#: JSON's names of the values a parser gives.
_JSON_TYPES = {type(None): "null", bool: "boolean", int: "number", float: "number", str: "string"}


def _describe(value: Any) -> str:
    if isinstance(value, Mapping):
        return _keys(value)
    if isinstance(value, list):
        if not value:
            return "empty JSON array"
        first = value[0]
        inner = _keys(first) if isinstance(first, Mapping) else _json_type(first)
        return f"JSON array of {len(value)} items, the first a {inner}"
    return _json_type(value)


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "JSON array"
    return f"JSON {_JSON_TYPES.get(type(value), type(value).__name__)}"


#: Fields of a wrapper that hold one OTLP request: Tempo's API (`trace`, `result`), SideSeat's
#: debug files (`{"timestamp", "project_id", "data"}`, one per line).
_OTLP_FIELDS = ("result", "trace", "data")
#: The body of a Bedrock AgentCore Evaluations request: span records (SDK span JSON or
#: CloudWatch records) and log records, one list.
_SESSION_SPANS = "sessionSpans"


def _is_otlp(obj: Any) -> bool:
    return isinstance(obj, Mapping) and ("resourceSpans" in obj or "resource_spans" in obj)


def _is_jaeger_trace(obj: Any) -> bool:
    return (
        isinstance(obj, Mapping)
        and isinstance(obj.get("spans"), list)
        and ("traceID" in obj or "processes" in obj)
    )


def _first_shape(items: Any) -> str | None:
    """The shape of the first item of `items` that is a span of a known shape: a first span
    that cannot be read is quarantined with its reason, not taken for the whole array's."""
    if not isinstance(items, list):
        return None
    return next(
        (shape for item in items if (shape := span_shape(unwrap_log_event(item))) is not None),
        None,
    )


def document_kind(value: Any) -> str:
    """The kind of a parsed JSON trace document, as `read_json_document` reads it.

    One of ``otlp``, ``otlp-wrapped``, ``otlp-requests``, ``otlp-spans``, ``oteltest``,
    ``jaeger``, ``langfuse``, ``agentops``, ``any-agent``, ``span-list``, ``zipkin-traces``, or
    ``span:<shape>``
    for a single span object. Raises `TraceFormatError` when it is no trace document.
    """
    return _kind(value)[0]


def _kind(value: Any) -> tuple[str, Any]:
    """`document_kind` of `value`, and what to read: the span a log event carries for a
    single span (``span:<shape>``), else `value`."""
    if isinstance(value, Mapping):
        if _is_otlp(value):
            return "otlp", value
        if isinstance(value.get("trace_requests"), list):
            return "oteltest", value
        if any(_is_otlp(value.get(k)) for k in _OTLP_FIELDS) or isinstance(
            value.get("batches"), list
        ):
            return "otlp-wrapped", value
        data = value.get("data")
        if isinstance(data, list) and data:
            if _is_jaeger_trace(data[0]):
                return "jaeger", value
            shape = _first_shape(data)
            if shape is not None:
                return "otlp-spans" if shape == "otlp" else "span-list", value
        if _is_jaeger_trace(value):
            return "jaeger", value
        if isinstance(value.get("observations"), list) or (
            isinstance(value.get("trace"), Mapping)
            and ("observations" in value["trace"] or "projectId" in value["trace"])
        ):
            return "langfuse", value
        spans = value.get("spans")
        if isinstance(spans, list):
            shape = _first_shape(spans)
            if "final_output" in value and (not spans or shape is not None):
                return "any-agent", value
            trace = value.get("trace")
            if shape == "agentops" and isinstance(trace, Mapping) and "trace_id" in trace:
                return "agentops", value
            if shape not in (None, "otlp"):
                return "span-list", value
        if _first_shape(value.get(_SESSION_SPANS)) not in (None, "otlp"):
            return "span-list", value
        span = unwrap_log_event(value)
        shape = span_shape(span)
        if shape is not None and shape != "otlp":
            return f"span:{shape}", span
        if shape is None and _first_shape(value.get("events")) not in (None, "otlp"):
            return "span-list", value  # `aws logs filter-log-events` output: log events of spans
    elif isinstance(value, list) and value:
        first = value[0]
        if isinstance(first, list):
            if _first_shape(first) is not None:
                return "zipkin-traces", value
        elif _is_otlp(first):
            return "otlp-requests", value
        elif _is_jaeger_trace(first):
            return "jaeger", value
        else:
            shape = _first_shape(value)
            if shape is not None:
                return "otlp-spans" if shape == "otlp" else "span-list", value
    raise TraceFormatError(
        f"not a trace: {_describe(value)} (expected OTLP, SDK span JSON, Langfuse, any-agent, "
        "Phoenix, Jaeger, Zipkin, JS SDK spans, CloudWatch span records or AgentOps)"
    )


def _span_items(value: Any) -> list[Any]:
    """The span objects of a ``span-list`` or ``otlp-spans`` document."""
    if isinstance(value, Mapping):
        for key in ("data", "spans", _SESSION_SPANS, "events"):
            if isinstance(value.get(key), list) and value[key]:
                return value[key]
        return []
    return value


class _Reader:
    """Turns parsed values into spans in one builder, counting and quarantining as it goes."""

    def __init__(self, log: FileLog, single: bool) -> None:
        self.log = log
        self.single = single  # the file is one JSON value
        self.builder = SpanBatchBuilder()
        self.ordinal = 0  # span objects met so far (the "span N" of positions)
        self.ready: list[pa.RecordBatch] = []  # full batches waiting to be yielded

    # -- one span object ----------------------------------------------------------------------

    def convert(
        self, obj: Any, convert: Callable[[Any], SpanRow] | None, line: int | None
    ) -> tuple[SpanRow, int, str] | None:
        """Count one span object and convert it; None when it went to the quarantine.

        Returns the row, its ``source_pos`` and its quarantine position."""
        self.ordinal += 1
        log = self.log
        log.records += 1
        position = f"line {line}" if line is not None else f"span {self.ordinal}"
        if convert is None:
            reason = f"not a span object: {_describe(obj)}"
            if isinstance(obj, Mapping) and "body" in obj and "observedTimeUnixNano" in obj:
                reason = "an OpenTelemetry log record, not a span (log records are not read)"
            log.quarantine_record(position, reason, _raw(obj))
            return None
        log.spans_read += 1
        try:
            row = convert(obj)
            _check_times(row)
        except SpanError as err:
            log.quarantine_span(position, str(err), _raw(obj))
            return None
        except (
            TypeError,
            ValueError,
            AttributeError,
            KeyError,
            IndexError,
            OverflowError,
            RecursionError,
        ) as err:
            # A field of an unexpected type deep inside one span: that span only is lost.
            reason = f"unreadable span: {type(err).__name__}: {err}"
            log.quarantine_span(position, reason, _raw(obj))
            return None
        return row, (line if line is not None else self.ordinal), position

    def add(self, converted: tuple[SpanRow, int, str] | None) -> None:
        if converted is not None:
            row, pos, position = converted
            try:
                row.add_to(self.builder, self.log.path, pos)
            except RecursionError:  # an attribute value too deep to write as JSON text
                # measured as the span object is: its attribute maps one level below it
                parts = [row.attributes, row.resource, row.events, row.links]
                reason = f"unreadable span: {nesting_reason(value=parts)}"
                self.log.quarantine_span(position, reason, b"")
                return
            if len(self.builder) >= BATCH_SPANS:
                self.ready.append(self.builder.flush())  # type: ignore[arg-type]

    def span_list(self, items: list[Any], *, jaeger_processes: Any = None) -> list[Any]:
        """Convert each item of a span array by its own shape (Jaeger spans with their
        trace's processes); returns the converted rows."""
        out = []
        for item in items:
            if jaeger_processes is not None:
                shape = "jaeger" if isinstance(item, Mapping) else None
                convert = (lambda s: jaeger_span_row(s, jaeger_processes)) if shape else None
            else:
                item = unwrap_log_event(item)
                shape = span_shape(item)
                convert = _CONVERTERS.get(shape) if shape else None
            out.append(self.convert(item, convert, None))
        return out

    # -- whole values ---------------------------------------------------------------------------

    def value(self, value: Any, line: int) -> None:
        """Read one top-level JSON value (its kind already known to be a trace)."""
        kind, span = _kind(value)
        if kind.startswith("span:"):
            self.add(self.convert(span, _CONVERTERS[kind[5:]], line))
        elif kind in ("otlp", "otlp-wrapped"):
            self.otlp(_unwrap_otlp(value), line, "document")
        elif kind == "oteltest":
            for i, request in enumerate(value["trace_requests"]):
                pbreq = request.get("pbreq") if isinstance(request, Mapping) else None
                if _is_otlp(pbreq):
                    self.otlp(pbreq, line, f"trace_requests[{i}]")
                else:
                    self.log.records += 1
                    self.log.quarantine_record(
                        f"trace_requests[{i}]", "no pbreq with resourceSpans", _raw(request)
                    )
        elif kind == "otlp-requests":
            for i, request in enumerate(value):
                if _is_otlp(request):
                    self.otlp(request, line, f"request {i + 1}")
                else:
                    self.log.records += 1
                    reason = f"not an OTLP request: {_describe(request)}"
                    self.log.quarantine_record(f"request {i + 1}", reason, _raw(request))
        elif kind == "otlp-spans":
            # Bare OTLP spans (e.g. Phoenix's otlpv1 REST answer): one request without resource.
            spans = _span_items(value)
            self.otlp({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}, line, "document")
        elif kind == "jaeger":
            traces = value.get("data") if isinstance(value, Mapping) and "data" in value else value
            for i, trace in enumerate(traces if isinstance(traces, list) else [traces]):
                if not _is_jaeger_trace(trace):
                    self.log.records += 1
                    reason = f"not a Jaeger trace: {_describe(trace)}"
                    self.log.quarantine_record(f"trace {i + 1}", reason, _raw(trace))
                    continue
                processes = trace.get("processes")
                processes = processes if isinstance(processes, Mapping) else {}
                for converted in self.span_list(trace["spans"], jaeger_processes=processes):
                    self.add(converted)
        elif kind == "langfuse":
            observations, trace_id = langfuse_observations(value)
            for obs in observations:
                convert = (
                    (lambda o: langfuse_span_row(o, trace_id)) if isinstance(obs, Mapping) else None
                )
                self.add(self.convert(obs, convert, None))
        elif kind == "agentops":
            trace_id = value["trace"]["trace_id"]
            for span in value["spans"]:
                agentops = span_shape(span) == "agentops"
                convert = (lambda s: agentops_span_row(s, trace_id)) if agentops else None
                self.add(self.convert(span, convert, None))
        elif kind == "any-agent":
            converted = self.span_list(value["spans"])
            rows = [c[0] for c in converted if c is not None]
            add_final_output(rows, value.get("final_output"))
            for c in converted:
                self.add(c)
        elif kind == "span-list":
            for converted in self.span_list(_span_items(value)):
                self.add(converted)
        elif kind == "zipkin-traces":
            for trace in value:
                for converted in self.span_list(trace if isinstance(trace, list) else [trace]):
                    self.add(converted)

    def otlp(self, request: Mapping[str, Any], line: int, position: str) -> None:
        from analyzer.ingest.otlp_objects import add_request

        self.log.records += 1
        if self.single:
            add_request(request, self.builder, self.log, source_pos=0, position=position)
        else:
            where = f"line {line}" if position == "document" else f"line {line}, {position}"
            add_request(request, self.builder, self.log, source_pos=line, position=where)


def _check_times(row: SpanRow) -> None:
    """Raise `SpanError` when a time of `row` does not fit the span table's int64 nanoseconds
    (a time or a start plus duration beyond the year 2262 would fail the whole batch)."""
    for what, ns in (("start", row.start_ns), ("end", row.end_ns)):
        if not _INT64_MIN <= ns <= _INT64_MAX:
            raise SpanError(f"{what} time {ns} ns does not fit in int64")
    for i, (ns, _, _) in enumerate(row.events):
        if ns is not None and not _INT64_MIN <= ns <= _INT64_MAX:
            raise SpanError(f"event {i + 1} time {ns} ns does not fit in int64")


def _unwrap_otlp(value: Mapping[str, Any]) -> Mapping[str, Any]:
    if _is_otlp(value):
        return value
    for key in _OTLP_FIELDS:
        if _is_otlp(value.get(key)):
            return value[key]
    return {"resourceSpans": value["batches"]}  # Tempo: each batch is one ResourceSpans


def _raw(obj: Any) -> bytes:
    try:
        return orjson.dumps(obj, default=str, option=orjson.OPT_NON_STR_KEYS)[:EXCERPT_BYTES]
    except (TypeError, orjson.JSONEncodeError):  # an integer beyond 64 bits, deep nesting
        try:
            return json.dumps(obj, default=str)[:EXCERPT_BYTES].encode()
        except RecursionError:
            return f"({nesting_reason(value=obj)})".encode()


def read_json_document(data: bytes, log: FileLog) -> Iterator[pa.RecordBatch]:
    """Yield the span batches of a JSON document (or concatenated JSON values) in `data`.

    Raises `TraceFormatError` when the first value is not a trace in any format read here;
    a later value that is not a trace is quarantined as one record.
    """
    values = parse_json_values(data, log)
    if not values:
        return
    document_kind(values[0][0])  # raises before anything is read when it is not a trace
    reader = _Reader(log, single=len(values) == 1 and log.records_quarantined == 0)
    for value, line in values:
        read, quarantined = log.spans_read, log.spans_quarantined
        rows = len(reader.builder)  # reader.ready is empty here
        try:
            reader.value(value, line)
        except (TraceFormatError, RecursionError) as err:
            # Not a trace, or nested too deep for a helper that walks the whole value (an
            # any-agent final_output, Langfuse metadata...): the spans it counted but did not
            # keep are lost.
            kept = len(reader.builder) + sum(b.num_rows for b in reader.ready) - rows
            lost = log.spans_read - read - kept - (log.spans_quarantined - quarantined)
            reason = str(err)
            if isinstance(err, RecursionError):
                reason = f"unreadable value: {nesting_reason(value=value)}"
            log.records += 1
            log.quarantine_record(f"line {line}", reason, _raw(value), lost=max(0, lost))
        yield from reader.ready
        reader.ready.clear()
        if len(reader.builder) >= BATCH_SPANS:  # an OTLP request may fill it too
            batch = reader.builder.flush()
            if batch is not None:
                yield batch
    batch = reader.builder.flush()
    if batch is not None:
        yield batch
