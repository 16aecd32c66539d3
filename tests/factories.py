"""Small builders for span tables and normalized tables used across tests."""

from __future__ import annotations

import json
from pathlib import Path
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


# --- spans in no run ---------------------------------------------------------------------------

#: tests/data/real_corpus files with spans in no run: 2 one-span traces of embeddings (its
#: NOTES.md), and a root span above three top-level agent spans (3 runs, the root in none)
REAL_NO_RUN = tuple(
    Path(__file__).parent / "data" / "real_corpus" / name
    for name in (
        "Arize-ai__openinference__all-spans.json",
        "langfuse__pydantic-ai-tools-2025-12-04.trace.json",
    )
)
WEB, LATE = "1" * 32, "2" * 32
SID = {name: name.rjust(16, "0") for name in ("a1", "a2", "b1", "b2", "b3")}


def _request(*spans: dict) -> str:
    resource = {"attributes": [otlp_attr("service.name", "web")]}
    return json.dumps(
        {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": list(spans)}]}]}
    )


def no_run_files(folder: Path) -> tuple[Path, Path]:
    """first.jsonl: a web request of 2 spans (no run), and the root of trace LATE alone;
    second.jsonl: LATE's agent and its model call, under that root (LATE is then one run)."""
    first, second = folder / "first.jsonl", folder / "second.jsonl"
    first.write_text(
        _request(
            otlp_span(WEB, SID["a1"], "", "GET /", 0, 50, {"http.method": "GET"}),
            otlp_span(
                WEB,
                SID["a2"],
                SID["a1"],
                "SELECT",
                10,
                20,
                {"db.system": "postgresql"},
            ),
            otlp_span(LATE, SID["b1"], "", "POST /review", 100, 300, {"http.method": "POST"}),
        )
        + "\n",
        encoding="utf-8",
    )
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "reviewer"}
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 2,
    }
    second.write_text(
        _request(
            otlp_span(
                LATE,
                SID["b2"],
                SID["b1"],
                "invoke_agent reviewer",
                110,
                290,
                agent,
            ),
            otlp_span(LATE, SID["b3"], SID["b2"], "chat gpt-4o", 120, 280, chat),
        )
        + "\n",
        encoding="utf-8",
    )
    return first, second
