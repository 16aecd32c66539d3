"""Small builders for span tables and normalized tables used across tests."""

from __future__ import annotations

from typing import Any

import polars as pl
import pyarrow as pa

from analyzer.conventions.schema import NORMALIZED_SCHEMA
from analyzer.spans import SpanBatchBuilder, attrs_from_mapping

TRACE = "0af7651916cd43dd8448eb211c80319c"

_SPAN_KEYS = {"trace_id", "span_id", "parent_span_id", "name", "start_ns", "end_ns", "status"}


def tables(rows: list[dict[str, Any]]) -> tuple[pa.Table, pl.DataFrame]:
    """A span table and its normalized table from rows of normalized fields.

    Each row needs span_id, start_ns, end_ns; `attrs` / `resource` give raw span attributes,
    `scope` the instrumentation scope name.
    Unnamed normalized fields are null; role defaults to "other".
    """
    builder = SpanBatchBuilder()
    normalized = []
    for pos, row in enumerate(rows):
        trace = row.get("trace_id", TRACE)
        builder.add(
            trace_id=trace,
            span_id=row["span_id"],
            parent_span_id=row.get("parent_span_id"),
            name=row.get("span_name", row.get("role", "span")),
            kind="internal",
            start_ns=row["start_ns"],
            end_ns=row["end_ns"],
            status_code=row.get("status", "unset"),
            scope_name=row.get("scope"),
            attributes=attrs_from_mapping(row.get("attrs", {})),
            resource_attributes=attrs_from_mapping(row.get("resource", {"service.name": "svc"})),
            source_file="mem",
            source_pos=pos,
        )
        out = {name: None for name in NORMALIZED_SCHEMA.names}
        out.update({k: v for k, v in row.items() if k in NORMALIZED_SCHEMA.names})
        out["trace_id"] = trace
        out["span_name"] = row.get("span_name", row.get("role", "span"))
        out["role"] = row.get("role", "other")
        out["status"] = row.get("status", "unset")
        out.setdefault("convention", "test")
        for listy in ("input_messages", "requested_calls", "finish_reasons"):
            out[listy] = row.get(listy, [])
        out["has_content"] = row.get("has_content", True)
        normalized.append(out)
    spans = pa.Table.from_batches([builder.flush()])
    return spans, pl.DataFrame(pa.Table.from_pylist(normalized, schema=NORMALIZED_SCHEMA))


def msg(role: str, content: str, tool_call_id: str | None = None) -> dict[str, Any]:
    return {"role": role, "content": content, "tool_call_id": tool_call_id, "name": None}


def call(name: str, arguments: str = "{}", id: str | None = None) -> dict[str, Any]:
    return {"id": id, "name": name, "arguments": arguments}


def otlp_attr(key: str, value: str | int) -> dict[str, Any]:
    """One OTLP JSON attribute (an int as ``intValue``, anything else as ``stringValue``)."""
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def otlp_span(
    trace: str, span_id: str, parent: str, name: str, start: int, end: int, attrs: dict
) -> dict[str, Any]:
    """One OTLP JSON span, times in ms after 2023-11-14T22:13:20Z."""
    return {
        "traceId": trace,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + start * 1_000_000),
        "endTimeUnixNano": str(1_700_000_000_000_000_000 + end * 1_000_000),
        "attributes": [otlp_attr(k, v) for k, v in attrs.items()],
        "status": {},
    }


def robust_lines(stream, log):
    """Every line of an OTLP JSON lines stream through the robust path alone (no native reader,
    no blocks or threads): the reference the lines reader is tested against."""
    from analyzer.ingest.otlp_json import _robust_line

    builder = SpanBatchBuilder()
    for i, line in enumerate(stream.read().removeprefix(b"\xef\xbb\xbf").split(b"\n")):
        if line and not line.isspace():
            log.records += 1
            _robust_line(line, i + 1, builder, log)
    batch = builder.flush()
    if batch is not None:
        yield batch
