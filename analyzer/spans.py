"""The span table: one Arrow row per span, whatever file format or convention it came from.

Every reader yields record batches of `SPAN_SCHEMA` (the partitioned path keeps each
resource's attributes once: `SHARED_SCHEMA`). Ids are lowercase hex (32 chars for
traces, 16 for spans), times are integer nanoseconds since the epoch, attributes keep their
OTLP type: exactly one of ``str``/``int``/``float``/``bool``/``json`` is set per attribute,
``json`` holding arrays and key-value lists as plain JSON text (bytes as a base64 JSON string).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import msgspec
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "ATTR",
    "ATTRS",
    "KINDS",
    "SHARED_ATTRS",
    "SHARED_SCHEMA",
    "SPAN_SCHEMA",
    "STATUSES",
    "SpanBatchBuilder",
    "attribute_lists",
    "attrs_from_mapping",
    "compact_resources",
    "empty_table",
    "is_shared",
    "plain_resources",
    "shared_resources",
]

ATTR = pa.struct(
    [
        ("key", pa.string()),
        ("str", pa.string()),
        ("int", pa.int64()),
        ("float", pa.float64()),
        ("bool", pa.bool_()),
        ("json", pa.string()),
    ]
)
ATTRS = pa.list_(ATTR)
EVENT = pa.struct([("time_ns", pa.int64()), ("name", pa.string()), ("attributes", ATTRS)])
LINK = pa.struct([("trace_id", pa.string()), ("span_id", pa.string()), ("attributes", ATTRS)])

#: Span kinds, as OTLP names them without the SPAN_KIND_ prefix, lower case.
KINDS = ("unspecified", "internal", "server", "client", "producer", "consumer")
#: Status codes, lower case.
STATUSES = ("unset", "ok", "error")

SPAN_SCHEMA = pa.schema(
    [
        ("trace_id", pa.string()),
        ("span_id", pa.string()),
        ("parent_span_id", pa.string()),  # null for a root
        ("name", pa.string()),
        ("kind", pa.string()),  # one of KINDS
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("status_code", pa.string()),  # one of STATUSES
        ("status_message", pa.string()),
        ("scope_name", pa.string()),
        ("scope_version", pa.string()),
        ("attributes", ATTRS),
        ("resource_attributes", ATTRS),
        ("events", pa.list_(EVENT)),
        ("links", pa.list_(LINK)),
        ("source_file", pa.string()),  # the path as given (after walking folders)
        ("source_pos", pa.int64()),  # line (1-based) for text formats, byte offset for frames
    ]
)


#: ``resource_attributes`` stored once per resource: a dictionary whose values are the
#: resources' lists and whose indices are the spans'. The native reader gives it and the spill
#: keeps it (a resource's list is a third of a span's bytes); a span's list is the same.
SHARED_ATTRS = pa.dictionary(pa.int32(), ATTRS)
_RESOURCE = SPAN_SCHEMA.get_field_index("resource_attributes")
#: `SPAN_SCHEMA` with ``resource_attributes`` shared (`SHARED_ATTRS`).
SHARED_SCHEMA = SPAN_SCHEMA.set(_RESOURCE, pa.field("resource_attributes", SHARED_ATTRS))

Spans = TypeVar("Spans", pa.Table, pa.RecordBatch)


def attribute_lists(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The lists of an attributes column, shared or not, as one `ATTRS` array."""
    if isinstance(column, pa.ChunkedArray):
        column = (
            _one_dictionary(column.chunks, column.type)
            if pa.types.is_dictionary(column.type)
            else column.combine_chunks()
        )
    if pa.types.is_dictionary(column.type):
        return column.dictionary.take(column.indices)
    return column


def is_shared(spans: pa.Table | pa.RecordBatch) -> bool:
    """Whether the resource attributes of `spans` are shared (`SHARED_ATTRS`)."""
    return pa.types.is_dictionary(spans.schema.field(_RESOURCE).type)


def shared_resources(spans: Spans) -> Spans:
    """`spans` in `SHARED_SCHEMA`, their resource attributes in one dictionary (plain lists
    become their own: one entry a span)."""
    column = spans.column(_RESOURCE)
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    if not is_shared(spans):
        chunks = [pa.DictionaryArray.from_arrays(_arange(len(c)), c) for c in chunks]
    elif len(chunks) == 1:
        return spans
    return spans.set_column(_RESOURCE, SHARED_SCHEMA.field(_RESOURCE), _one_dictionary(chunks))


def plain_resources(spans: Spans) -> Spans:
    """`spans` in `SPAN_SCHEMA`: each span's resource attributes as its own list."""
    if not is_shared(spans):
        return spans
    lists = attribute_lists(spans.column(_RESOURCE))
    return spans.set_column(_RESOURCE, SPAN_SCHEMA.field(_RESOURCE), lists)


def compact_resources(spans: pa.Table) -> pa.Table:
    """`spans` (shared) in one dictionary that keeps only the entries they use."""
    spans = shared_resources(spans)
    column = spans.column(_RESOURCE).chunk(0)
    used = pc.unique(column.indices)
    if len(used) == len(column.dictionary):
        return spans
    used = used.take(pc.sort_indices(used))
    indices = pc.index_in(column.indices, value_set=used).cast(pa.int32())
    compact = pa.DictionaryArray.from_arrays(indices, column.dictionary.take(used))
    return spans.set_column(_RESOURCE, SHARED_SCHEMA.field(_RESOURCE), compact)


def _one_dictionary(chunks: list[pa.DictionaryArray], typ: pa.DataType = SHARED_ATTRS) -> pa.Array:
    """Dictionary chunks as one array: their dictionaries concatenated, the indices shifted."""
    if not chunks:
        return pa.DictionaryArray.from_arrays(_arange(0), pa.array([], typ.value_type))
    if len(chunks) == 1:
        return chunks[0]
    first = chunks[0].dictionary
    if all(_same_array(chunk.dictionary, first) for chunk in chunks[1:]):  # slices of one
        return pa.DictionaryArray.from_arrays(pa.concat_arrays([c.indices for c in chunks]), first)
    indices, start = [], 0
    for chunk in chunks:
        indices.append(pc.add(chunk.indices, pa.scalar(start, pa.int32())))
        start += len(chunk.dictionary)
    dictionary = pa.concat_arrays([chunk.dictionary for chunk in chunks])
    return pa.DictionaryArray.from_arrays(pa.concat_arrays(indices), dictionary)


def _same_array(a: pa.Array, b: pa.Array) -> bool:
    """Whether `a` and `b` view the same memory (not a comparison of values)."""

    def view(array: pa.Array) -> tuple:
        buffers = [None if buf is None else (buf.address, buf.size) for buf in array.buffers()]
        return len(array), array.offset, buffers

    return view(a) == view(b)


def _arange(n: int) -> pa.Array:
    return pa.array(np.arange(n, dtype=np.int32))


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table of `schema` with no rows (pyarrow's ``Schema.empty_table`` imports pandas,
    a third of a second in every worker process)."""
    return pa.Table.from_batches([], schema=schema)


def _attr(key: str, value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    field, typed = "json", value
    if isinstance(value, bool):
        field = "bool"
    elif isinstance(value, int):
        field, typed = ("int", value) if -(2**63) <= value < 2**63 else ("str", str(value))
    elif isinstance(value, float | str):
        field = "float" if isinstance(value, float) else "str"
    elif isinstance(value, bytes):
        typed = orjson.dumps(base64.b64encode(value).decode()).decode()
    else:
        try:
            typed = orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
        except orjson.JSONEncodeError:  # an integer beyond 64 bits, or nested over 254 levels
            typed = msgspec.json.encode(value, enc_hook=str).decode()
    return {"key": key, "str": None, "int": None, "float": None, "bool": None, "json": None} | {
        field: typed
    }


def attrs_from_mapping(mapping: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Typed attribute rows from a plain ``{key: value}`` mapping (SDK JSON, dumps).

    Keys are sorted so the same mapping always gives the same rows.
    """
    if not mapping:
        return []
    rows = (_attr(str(k), v) for k, v in sorted(mapping.items(), key=lambda kv: str(kv[0])))
    return [r for r in rows if r is not None]


class SpanBatchBuilder:
    """Collects spans as Python values and emits `SPAN_SCHEMA` record batches.

    For the small and irregular formats (SDK console JSON, framework dumps) and for the records
    the columnar decoder refuses; the bulk OTLP path builds Arrow columns directly.
    """

    def __init__(self) -> None:
        self._cols: dict[str, list[Any]] = {name: [] for name in SPAN_SCHEMA.names}

    def __len__(self) -> int:
        return len(self._cols["trace_id"])

    def add(
        self,
        *,
        trace_id: str,
        span_id: str,
        parent_span_id: str | None,
        name: str,
        kind: str,
        start_ns: int,
        end_ns: int,
        status_code: str = "unset",
        status_message: str | None = None,
        scope_name: str | None = None,
        scope_version: str | None = None,
        attributes: Iterable[Mapping[str, Any]] = (),
        resource_attributes: Iterable[Mapping[str, Any]] = (),
        events: Iterable[Mapping[str, Any]] = (),
        links: Iterable[Mapping[str, Any]] = (),
        source_file: str,
        source_pos: int,
    ) -> None:
        """Add one span; ids must already be lowercase hex, times int ns."""
        c = self._cols
        c["trace_id"].append(trace_id)
        c["span_id"].append(span_id)
        c["parent_span_id"].append(parent_span_id or None)
        c["name"].append(name)
        c["kind"].append(kind)
        c["start_ns"].append(start_ns)
        c["end_ns"].append(end_ns)
        c["status_code"].append(status_code)
        c["status_message"].append(status_message or None)
        c["scope_name"].append(scope_name)
        c["scope_version"].append(scope_version)
        c["attributes"].append(list(attributes))
        c["resource_attributes"].append(list(resource_attributes))
        c["events"].append(list(events))
        c["links"].append(list(links))
        c["source_file"].append(source_file)
        c["source_pos"].append(source_pos)

    def flush(self) -> pa.RecordBatch | None:
        """The spans added since the last flush as one batch (None when there are none)."""
        if not len(self):
            return None
        batch = pa.RecordBatch.from_pydict(self._cols, schema=SPAN_SCHEMA)
        self._cols = {name: [] for name in SPAN_SCHEMA.names}
        return batch
