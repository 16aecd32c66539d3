"""The normalized-span table: every span mapped to one canonical shape, whatever its convention.

`analyzer.conventions.normalize(span_table)` returns one row per span of the input, in the same
order, with this schema (a polars frame: `NORMALIZED_COLUMNS`). Downstream code (runs, checks,
metrics) reads only these columns and never an attribute name: attribute names live in
`analyzer.conventions.semconv`.
"""

from __future__ import annotations

import polars as pl
import pyarrow as pa

__all__ = ["MESSAGE", "NORMALIZED_COLUMNS", "NORMALIZED_SCHEMA", "REQUESTED_CALL", "ROLES"]

#: What a span is in an agent run.
ROLES = ("model_call", "tool_call", "agent", "other")

MESSAGE = pa.struct(
    [
        ("role", pa.string()),  # system | user | assistant | tool
        ("content", pa.string()),  # text; structured content as JSON text
        ("tool_call_id", pa.string()),  # for role=tool: the call this message answers
        ("name", pa.string()),  # for role=tool: the tool's name, when recorded
    ]
)

REQUESTED_CALL = pa.struct(
    [
        ("id", pa.string()),  # the provider's tool call id, when recorded
        ("name", pa.string()),
        ("arguments", pa.string()),  # JSON text as the model produced it (may be malformed)
    ]
)

NORMALIZED_SCHEMA = pa.schema(
    [
        ("trace_id", pa.string()),
        ("span_id", pa.string()),
        ("parent_span_id", pa.string()),
        ("span_name", pa.string()),
        ("role", pa.string()),  # one of ROLES
        ("convention", pa.string()),  # family that classified the span: genai, openinference, ...
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("status", pa.string()),  # unset | ok | error (error.type or an exception event => error)
        ("error_type", pa.string()),
        ("model", pa.string()),  # response model, else request model
        ("provider", pa.string()),
        ("temperature", pa.float64()),
        ("input_tokens", pa.int64()),  # null when the span recorded none
        ("output_tokens", pa.int64()),
        ("cached_input_tokens", pa.int64()),
        # the tokens were filled in by the exporting backend (Langfuse's usage details), not
        # recorded by the span's instrumentation: they tell no two spans' calls apart
        ("backend_usage", pa.bool_()),
        # a cost the span itself carries; never summed with ours
        ("recorded_cost_usd", pa.float64()),
        ("tool_name", pa.string()),
        ("named_tool", pa.string()),  # the tool an attribute names on the span, whatever its role
        ("tool_call_id", pa.string()),
        ("arguments", pa.string()),  # tool-call arguments, JSON text as recorded
        ("result", pa.string()),  # tool result as text
        ("input_messages", pa.list_(MESSAGE)),  # what a model call (or agent) was given
        ("output_text", pa.string()),  # a model call's text output; an agent's final output
        # the output marked its reasoning apart and output_text leaves it out (`content.Output`)
        ("output_reasoning_apart", pa.bool_()),
        ("requested_calls", pa.list_(REQUESTED_CALL)),  # tool calls a model call asked for
        ("finish_reasons", pa.list_(pa.string())),
        ("agent_name", pa.string()),
        ("agent_version", pa.string()),
        ("prompt_id", pa.string()),  # prompt name/version when recorded, for the config hash
        ("tool_definitions", pa.string()),  # JSON array of {name, description, parameters}
        ("http_resend_count", pa.int64()),
        ("conversation_id", pa.string()),
        ("has_content", pa.bool_()),  # the span recorded message content or tool arguments
        # event-style spans of one call (`semconv.EVENT_SPAN_NAME`) share this key: stem#n
        ("event_call", pa.string()),
    ]
)

#: `NORMALIZED_SCHEMA` as polars types: the columns of the frame `normalize` returns.
# (not `empty_table()`: it imports pandas, where installed, for nothing)
NORMALIZED_COLUMNS = pl.from_arrow(pa.Table.from_batches([], NORMALIZED_SCHEMA)).schema
