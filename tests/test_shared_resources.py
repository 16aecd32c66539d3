"""Resource attributes stored once per resource (`SHARED_SCHEMA`): the native reader gives them,
the spill keeps them, and whoever reads the span table sees each span's own list."""

from __future__ import annotations

import orjson
import pyarrow as pa
from test_ingest_otlp import S1, S2, span  # the reader tests' span builder

from analyzer.ingest import limits, otlp_json
from analyzer.ingest.accounting import FileLog
from analyzer.ingest.reader import cap_values
from analyzer.runs import span_attribute
from analyzer.spans import (
    SHARED_SCHEMA,
    SPAN_SCHEMA,
    attribute_lists,
    compact_resources,
    plain_resources,
    shared_resources,
)

S3 = "eee19b7ec3c1b172"


def _block(service: str | None, *spans: dict, **more: str) -> dict:
    values = ({"service.name": service} if service else {}) | more
    attributes = [{"key": k, "value": {"stringValue": v}} for k, v in values.items()]
    return {"resource": {"attributes": attributes}, "scopeSpans": [{"spans": list(spans)}]}


def _native(*requests: list[dict]) -> pa.RecordBatch:
    """The native reader's batch of one line per request (a list of resource blocks)."""
    lines = [orjson.dumps({"resourceSpans": blocks}) for blocks in requests]
    n = len(lines)
    batch, refused, _ = otlp_json._native_lines(lines, list(range(1, n + 1)), list(range(n)), "f")
    assert refused == [] and batch.schema == SHARED_SCHEMA
    return batch


def _services(lists: pa.Array) -> list[list[str]]:
    return [[a["str"] for a in row] for row in lists.to_pylist()]


def test_shared_and_plain_give_each_span_the_same_list():
    first = _native(
        [_block("a", span(), span(spanId=S2)), _block(None, span(spanId=S3))],
        [_block("b", span())],
    )
    second = _native([_block("c", span(), span(spanId=S2))])
    assert len(first.column("resource_attributes").dictionary) == 3  # a, no attributes, b
    plain = plain_resources(first)
    assert plain.schema == SPAN_SCHEMA
    assert _services(plain.column("resource_attributes")) == [["a"], ["a"], [], ["b"]]
    # plain lists become their own dictionary, and back
    own = shared_resources(plain)
    assert own.schema == SHARED_SCHEMA
    assert len(own.column("resource_attributes").dictionary) == 4
    assert plain_resources(own).equals(plain)
    # chunks of different dictionaries: one dictionary, every span's list unchanged
    table = pa.Table.from_batches([first, second], schema=SHARED_SCHEMA)
    one = shared_resources(table)
    (column,) = one.column("resource_attributes").chunks
    assert len(column.dictionary) == 4
    assert column.indices.to_pylist() == [0, 0, 1, 2, 3, 3]
    decoded = [["a"], ["a"], [], ["b"], ["c"], ["c"]]
    assert _services(attribute_lists(one.column("resource_attributes"))) == decoded
    assert _services(attribute_lists(table.column("resource_attributes"))) == decoded
    assert plain_resources(one).equals(pa.Table.from_batches([plain, plain_resources(second)]))
    # a slice keeps only the resources its spans use, in dictionary order
    part = compact_resources(one.slice(2, 3))
    (column,) = part.column("resource_attributes").chunks
    assert _services(column.dictionary) == [[], ["b"], ["c"]]
    assert column.indices.to_pylist() == [0, 1, 2]
    assert plain_resources(part).equals(plain_resources(one.slice(2, 3)).combine_chunks())


def test_chunks_of_one_dictionary_are_compacted_without_repeating_it():
    first = _native([_block("a", span(), span(spanId=S2)), _block("b", span(spanId=S3))])
    second = _native([_block("c", span())])
    table = shared_resources(pa.Table.from_batches([first, second]))
    # a filter cuts the shared column where the other columns' chunks end: two slices of one
    kept = table.filter(pa.array([True, False, False, True]))
    assert kept.column("resource_attributes").num_chunks == 2
    (one,) = shared_resources(kept).column("resource_attributes").chunks
    assert len(one.dictionary) == 3
    part = compact_resources(kept)
    (column,) = part.column("resource_attributes").chunks
    assert _services(column.dictionary) == [["a"], ["c"]]
    assert _services(attribute_lists(column)) == [["a"], ["c"]]
    # chunks of different dictionaries, every entry used: one dictionary still (a spill file
    # holds one)
    whole = compact_resources(pa.Table.from_batches([first, second]))
    assert whole.column("resource_attributes").num_chunks == 1
    assert _services(attribute_lists(whole.column("resource_attributes"))) == [["a"]] * 2 + [
        ["b"],
        ["c"],
    ]


def test_a_resource_value_over_the_cap_is_cut_and_warned_as_in_plain_lists(monkeypatch):
    monkeypatch.setattr(limits, "MAX_ATTRIBUTE_BYTES", 8)
    long = "x" * 20
    batch = _native(
        # one resource of two spans, then the same key again in a second resource of the line
        [_block("a", span(), span(spanId=S2), tag=long), _block("b", span(spanId=S3), tag=long)],
        [_block("c", span())],
        [_block("d", span(), tag=long)],
    )
    shared_log, plain_log = FileLog("f.jsonl", format="jsonl"), FileLog("f.jsonl", format="jsonl")
    shared = cap_values(batch, shared_log)
    plain = cap_values(plain_resources(batch), plain_log)
    assert shared.schema == SHARED_SCHEMA
    assert plain_resources(shared).equals(plain)
    mark = "…[agenttrace: truncated from 20 bytes to 8]"
    tags = [[a["str"] for a in row][1:] for row in plain.column("resource_attributes").to_pylist()]
    assert tags == [["x" * 8 + mark]] * 3 + [[]] + [["x" * 8 + mark]]
    # one warning per line and key, at its first span, either way
    reason = "resource attribute 'tag': value of 20 bytes cut to 8 and marked"
    assert [(w.position, w.reason) for w in shared_log.warnings] == [
        (f"line 1, span {S1}", reason),
        (f"line 3, span {S1}", reason),
    ]
    assert shared_log == plain_log


def test_an_attribute_read_from_shared_resources_is_read_as_from_plain_ones():
    batch = _native(
        [_block("a", span(), span(spanId=S2, traceId="0" * 31 + "1"))],
        [_block(None, span(spanId=S3)), _block("b", span(spanId=S3, attributes=[]))],
    )
    # a span's own attribute wins over its resource's
    own = {"key": "service.name", "value": {"stringValue": "own"}}
    batch = pa.Table.from_batches(
        [batch, _native([_block("c", span(attributes=[own]))])], schema=SHARED_SCHEMA
    )
    expected = ["a", "a", None, "b", "own"]
    assert span_attribute(batch, "service.name").to_list() == expected
    assert span_attribute(plain_resources(shared_resources(batch)), "service.name").to_list() == (
        expected
    )
