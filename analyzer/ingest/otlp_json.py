"""OTLP JSON readers: collector ``file`` exporter lines (fast, columnar) and single documents.

Lines are read by a fast path first. The native one (`analyzer.ingest._otlp_lines`, C, built
with the package) parses each line straight into Arrow buffers. Without it, the msgspec path
decodes each line into typed Structs (the OTLP shapes, ``strict=False`` so int64 and doubles
are read from strings or numbers), keeps each span's attribute list as raw JSON and reads those
lists with polars string kernels. Neither runs Python code per span or per attribute except for
the rare values that need a parser (arrays that are not plain strings, key-value lists).
Every line a fast path refuses, and every line with a span the robust path would quarantine,
goes through `analyzer.ingest.otlp_objects.add_request` instead, and rows are put back in line
order: all paths give identical rows for the same line.
"""

from __future__ import annotations

import codecs
import contextlib
import gc
import io
import mmap
import os
import re
import stat
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import chain, compress, repeat
from operator import attrgetter, is_
from typing import Any, BinaryIO

import msgspec
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from analyzer.ingest import limits
from analyzer.ingest.accounting import EXCERPT_BYTES, FileLog
from analyzer.ingest.ids import normalize_id
from analyzer.ingest.limits import nesting_reason, record_too_long
from analyzer.ingest.otlp_objects import (
    KIND_NAMES,
    STATUS_NAMES,
    Int64,
    add_request,
    dumps,
    enum_name,
    json_slot,
)
from analyzer.spans import (
    ATTR,
    ATTRS,
    EVENT,
    KINDS,
    LINK,
    SHARED_SCHEMA,
    SPAN_SCHEMA,
    STATUSES,
    SpanBatchBuilder,
    plain_resources,
)

try:
    from analyzer.ingest import _otlp_lines as _native
except ImportError:  # built without a C compiler: the msgspec path reads every line
    _native = None

__all__ = ["read_document", "read_lines"]

#: Bytes read at a time; a chunk is cut at its last newline (a longer line is read whole).
CHUNK_BYTES = 32 << 20

#: Lines parsed together at most: a chunk of tiny lines (or a decompressed run of newlines)
#: must not become tens of millions of Python objects at once.
GROUP_LINES = 1 << 16

_CONTENT = re.compile(rb"[^\n]")  # where a line that is not empty starts

_NO_RAW = msgspec.Raw(b"")
_NULL_RAW = b"null"


# --- the OTLP shapes, as the fast path decodes them -------------------------------------------
# The proto field names (snake_case) are declared as `None`: a line that uses them fails the
# typed decode and is read by the robust path, which understands them; nothing is skipped.


class _AnyValue(msgspec.Struct, frozen=True, gc=False):
    stringValue: str | None = None
    boolValue: bool | None = None
    intValue: Int64 | None = None
    doubleValue: float | None = None
    bytesValue: str | None = None
    arrayValue: msgspec.Raw = _NO_RAW  # nested values: read by the robust converter
    kvlistValue: msgspec.Raw = _NO_RAW
    string_value: None = None
    bool_value: None = None
    int_value: None = None
    double_value: None = None
    bytes_value: None = None
    array_value: None = None
    kvlist_value: None = None


_EMPTY_VALUE = _AnyValue()


class _KeyValue(msgspec.Struct, gc=False):
    key: str | None = None
    value: _AnyValue = _EMPTY_VALUE


class _Event(msgspec.Struct, gc=False):
    timeUnixNano: Int64 | None = None
    name: str | None = None
    attributes: list[_KeyValue] = []
    time_unix_nano: None = None


class _Link(msgspec.Struct, gc=False):
    traceId: str | None = None
    spanId: str | None = None
    attributes: list[_KeyValue] = []
    trace_id: None = None
    span_id: None = None


class _Status(msgspec.Struct, frozen=True, gc=False):
    code: int | str | None = None
    message: str | None = None


_EMPTY_STATUS = _Status()


class _Span(msgspec.Struct, gc=False):
    traceId: str | None = None
    spanId: str | None = None
    parentSpanId: str | None = None
    name: str | None = None
    kind: int | str | None = None
    startTimeUnixNano: Int64 | None = None
    endTimeUnixNano: Int64 | None = None
    attributes: msgspec.Raw = _NO_RAW  # parsed columnar by _span_attrs
    events: list[_Event] = []
    links: list[_Link] = []
    status: _Status = _EMPTY_STATUS
    trace_id: None = None
    span_id: None = None
    parent_span_id: None = None
    start_time_unix_nano: None = None
    end_time_unix_nano: None = None


class _Scope(msgspec.Struct, frozen=True, gc=False):
    name: str | None = None
    version: str | None = None


_EMPTY_SCOPE = _Scope()


class _ScopeSpans(msgspec.Struct, gc=False):
    scope: _Scope = _EMPTY_SCOPE
    spans: list[_Span] = []
    instrumentationLibrary: None = None
    instrumentation_library: None = None


class _Resource(msgspec.Struct, gc=False):
    attributes: list[_KeyValue] = []


class _ResourceSpans(msgspec.Struct, gc=False):
    resource: _Resource | None = None
    scopeSpans: list[_ScopeSpans] = []
    scope_spans: None = None
    instrumentationLibrarySpans: None = None
    instrumentation_library_spans: None = None


class _Request(msgspec.Struct, gc=False):
    resourceSpans: list[_ResourceSpans] | None = None
    resource_spans: None = None


_DECODER = msgspec.json.Decoder(_Request, strict=False)
_ATTR_LIST = msgspec.json.Decoder(list[_KeyValue] | None, strict=False)
_STR_LIST = msgspec.json.Decoder(list[str])
_GENERIC = msgspec.json.Decoder()  # the robust path's parser: same JSON grammar as the fast one
# RecursionError: nesting deeper than msgspec's recursion limit; the robust path names it
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)

_get_key = attrgetter("key")
_get_value = attrgetter("value")
_get_attributes = attrgetter("attributes")
_VALUE_GETTERS = [
    (attrgetter("stringValue"), pa.string()),
    (attrgetter("boolValue"), pa.bool_()),
    (attrgetter("intValue"), pa.int64()),
    (attrgetter("doubleValue"), pa.float64()),
]
_EMPTY_RESOURCE_ATTRS: list[_KeyValue] = []


# --- columns ----------------------------------------------------------------------------------


class _BadLines(Exception):
    """Lines the fast path must leave to the robust path (their spans would be quarantined)."""

    def __init__(self, lines: set[int]) -> None:
        super().__init__(f"{len(lines)} lines")
        self.lines = lines


def _ids(values: list[str | None], nbytes: int) -> tuple[pa.Array, list[int]]:
    """Ids as lowercase hex (null for absent/all-zero) and the indices of unreadable ones."""
    arr = pa.array(values, pa.string())
    width = 2 * nbytes
    is_hex = pc.match_substring_regex(arr, f"^[0-9a-fA-F]{{{width}}}$")
    n_hex = pc.sum(is_hex).as_py() or 0
    out = pc.ascii_lower(arr)
    bad: list[int] = []
    if n_hex + arr.null_count < len(arr):
        # base64 (protobuf JSON mapping), 0x-prefixed or broken: columnar base64 first
        other = pc.and_(pc.invert(is_hex.fill_null(False)), arr.is_valid())
        idx = pc.indices_nonzero(other)
        sub = pc.take(arr, idx)
        pattern = f"^[A-Za-z0-9+/]{{{(nbytes // 3) * 4}}}" + (
            "[A-Za-z0-9+/]{2}==$" if nbytes % 3 == 1 else "[A-Za-z0-9+/]{3}=$"
        )
        b64 = pc.match_substring_regex(sub, pattern)
        decoded = pl.from_arrow(pc.if_else(b64, sub, None)).str.decode("base64", strict=False)
        hexed = decoded.bin.encode("hex").to_arrow().cast(pa.string())
        fixed = hexed.to_pylist()
        subs = sub.to_pylist()
        for k, value in enumerate(subs):
            if fixed[k] is None:  # not canonical base64: the robust path's own function decides
                try:
                    fixed[k] = normalize_id(value, nbytes) or "0" * width
                except ValueError:
                    bad.append(idx[k].as_py())
                    fixed[k] = None
        out = pc.replace_with_mask(out, other, pa.array(fixed, pa.string()))
    out = pc.if_else(pc.equal(out, "0" * width), pa.scalar(None, pa.string()), out)
    return out, bad


def _scatter(values: pa.Array, pos: pa.Array | None) -> pa.Array:
    return values if pos is None else pc.take(values, pos)


def _attrs_array(lists: list[list[_KeyValue]]) -> pa.Array:
    """`ATTRS` for each list of decoded attributes (resources, events, links, odd spans)."""
    n_lists = len(lists)
    lengths = list(map(len, lists))
    kvs = list(chain.from_iterable(lists))
    n = len(kvs)
    if n == 0:
        offsets = pa.array([0] * (n_lists + 1), pa.int32())
        return pa.ListArray.from_arrays(offsets, pa.array([], ATTR), type=ATTRS)
    keys = pc.fill_null(pa.array(list(map(_get_key, kvs)), pa.string()), "")
    level = list(map(_get_value, kvs))
    pos: pa.Array | None = None  # full index -> index into `level`
    columns: list[pa.Array] = []
    # Narrow by priority: stringValue wins, then boolValue, intValue, doubleValue; each later
    # field is read only where all earlier ones are absent.
    for getter, typ in _VALUE_GETTERS:
        if not level:
            columns.append(pa.nulls(n, typ))
            continue
        got = list(map(getter, level))
        arr = pa.array(got, typ)
        columns.append(_scatter(arr, pos))
        if arr.null_count == len(arr):
            continue
        missing = list(map(is_, got, repeat(None)))
        level = list(compress(level, missing))
        mask = arr.is_null()
        step = pc.if_else(mask, pc.subtract(pc.cumulative_sum(pc.cast(mask, pa.int64())), 1), None)
        pos = step if pos is None else pc.take(step, pos)
    # bytes, arrays and key-value lists: JSON text, built per value (they are rare)
    json_values: list[str | None] = [None] * len(level)
    empty = [True] * len(level)
    for k, value in enumerate(level):
        if value.bytesValue is not None:
            json_values[k] = dumps(value.bytesValue)
        else:
            for index, raw in ((5, value.arrayValue), (6, value.kvlistValue)):
                if raw and bytes(raw) != _NULL_RAW:
                    json_values[k] = json_slot(index, _GENERIC.decode(raw))[1]
                    break
            else:
                continue
        empty[k] = False
    json_arr = _scatter(pa.array(json_values, pa.string()), pos)
    str_col, bool_col, int_col, float_col = columns
    values = pa.StructArray.from_arrays(
        [keys, str_col, int_col, float_col, bool_col, json_arr], fields=list(ATTR)
    )
    offsets = pc.cumulative_sum(pa.array([0, *lengths], pa.int32()))
    if any(empty):
        # empty values: the attribute is dropped, as the robust path does
        drop = _scatter(pa.array(empty, pa.bool_()), pos).fill_null(False)
        values = values.filter(pc.invert(drop))
        dropped = pc.cumulative_sum(pc.cast(drop, pa.int32()))
        dropped = pa.concat_arrays([pa.array([0], pa.int32()), dropped])
        offsets = pc.subtract(offsets, pc.take(dropped, offsets))
    return pa.ListArray.from_arrays(offsets, values, type=ATTRS)


# Columnar reading of span attributes in the compact form every OTLP JSON marshaler writes:
# [{"key":"K","value":{"T":V}},...]. Quotes are escaped inside JSON strings, so the separators
# below (which contain bare quotes) only ever match structure. A span whose list has any other
# shape (whitespace, field order, key-value lists, escapes in keys, numbers msgspec would read
# differently) is decoded with the typed Structs instead, so the result is the same either way.
_LIST_HEAD = '[{"key":"'
_LIST_TAIL = "}}]"
_ITEM_SEP = '}},{"key":"'
_VALUE_HEAD = '","value":{"'
_INT_RE = r'^(?:"-?(?:0|[1-9][0-9]*)"|-?(?:0|[1-9][0-9]*))$'
_NUM_RE = r"^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?$"
_STR_ARRAY_RE = (
    r'^\{"values":\[(?:\{"stringValue":"[^"\\]*"\}(?:,\{"stringValue":"[^"\\]*"\})*)?\]\}$'
)


def _raw_strings(raws: list[msgspec.Raw]) -> pa.Array:
    """The raw JSON texts as one Arrow string array, without a Python object per text."""
    lengths = pa.array(list(map(len, raws)), pa.int64())
    offsets = pa.concat_arrays([pa.array([0], pa.int64()), pc.cumulative_sum(lengths)])
    data = pa.py_buffer(b"".join(raws))  # UTF-8 was checked for the whole chunk
    return pa.Array.from_buffers(pa.large_string(), len(raws), [None, offsets.buffers()[1], data])


_NULL_STR = pl.Series([None], dtype=pl.String)
_TYPES = ("stringValue", "intValue", "doubleValue", "boolValue", "bytesValue", "arrayValue")


def _masked(n: int, mask: pa.Array, values: pa.Array | pl.Series, typ: pa.DataType) -> pa.Array:
    """A length-`n` array holding `values` where `mask` is set (in order), null elsewhere."""
    if isinstance(values, pl.Series):
        values = values.to_arrow()
    values = values.cast(typ)
    if len(values) == n:
        return values
    ones = pc.cast(mask, pa.int32())
    index = pc.if_else(mask, pc.subtract(pc.cumulative_sum(ones), 1), pa.scalar(None, pa.int32()))
    return values.take(index)


def _span_attrs(raws: list[msgspec.Raw]) -> tuple[pa.Array, list[int]]:
    """`ATTRS` of each span from its raw ``attributes`` JSON, and spans whose list is invalid."""
    n = len(raws)
    t = pl.col("t")
    spans = (
        pl.DataFrame({"t": pl.from_arrow(_raw_strings(raws))})
        .with_row_index("span")
        .with_columns(
            empty=(t == "") | (t == "[]") | (t == "null"),
            canon=t.str.starts_with(_LIST_HEAD)
            & t.str.ends_with(_LIST_TAIL)
            & ~t.str.contains("kvlistValue", literal=True),
        )
    )
    fallback: set[int] = set(spans["span"].filter(~(spans["empty"] | spans["canon"])).to_list())
    # no stripping of the list brackets (a copy of everything): the first key starts with
    # _LIST_HEAD and the last value ends with "}}]", both taken off below
    lists = spans.select("span", item=pl.when(pl.col("canon")).then(t.str.split(_ITEM_SEP)))
    lengths = lists["item"].list.len().fill_null(0).to_arrow().cast(pa.int32())
    kv = pl.col("item").str.splitn(_VALUE_HEAD, 2)
    items = lists.explode("item", empty_as_null=False, keep_nulls=False).select(
        "span",
        key=kv.struct.field("field_0").str.strip_prefix(_LIST_HEAD),
        rest=kv.struct.field("field_1"),
    )
    m = len(items)
    rest = items["rest"]
    item_span = items["span"].to_arrow()
    keys = items["key"].to_arrow().cast(pa.string())
    # an escaped key: the typed path unescapes it
    bad = items["key"].str.contains("\\", literal=True).fill_null(True).to_arrow()
    cols: dict[str, pa.Array] = {}
    false = pa.repeat(pa.scalar(False), m)
    known = false
    arr_mask = false
    arr_texts: list[str] = []  # arrayValue texts that are not plain string arrays
    for name in _TYPES:
        head = f'{name}":'
        mask = rest.str.starts_with(head)
        mask_a = mask.to_arrow()
        if not mask_a.true_count:
            continue
        known = pc.or_(known, mask_a)
        v = rest.filter(mask).str.slice(len(head)).str.strip_suffix(_LIST_TAIL)
        if name in ("stringValue", "bytesValue"):
            inner = v.str.strip_prefix('"').str.strip_suffix('"')
            quoted = v.str.starts_with('"') & v.str.ends_with('"') & (v.str.len_bytes() >= 2)
            plain = quoted & ~inner.str.contains(r'["\\]')
            if name == "bytesValue":
                cols["bytes"] = _masked(m, mask_a, v.zip_with(plain, _NULL_STR), pa.string())
                continue
            values = inner.zip_with(plain, _NULL_STR)
            escaped = quoted & ~plain  # only JSON strings: polars' decoder would take 12 as "12"
            if escaped.any():
                texts = v.filter(escaped)
                try:  # JSON unescaping has one answer for valid JSON strings: polars' is msgspec's
                    decoded = texts.str.json_decode(pl.String)
                except pl.exceptions.ComputeError:
                    out: list[str | None] = []
                    for text in texts.to_list():
                        try:
                            (value,) = _STR_LIST.decode(f"[{text}]".encode())
                        except (msgspec.DecodeError, ValueError):
                            value = None  # left null: the item counts as unread below
                        out.append(value)
                    decoded = pl.Series(out, dtype=pl.String)
                values = values.scatter(escaped.arg_true(), decoded)
            cols["str"] = _masked(m, mask_a, values, pa.string())
        elif name == "intValue":
            ok = v.str.contains(_INT_RE)
            number = v.str.strip_chars('"').cast(pl.Int64, strict=False)
            cols["int"] = _masked(
                m, mask_a, number.zip_with(ok, pl.Series([None], dtype=pl.Int64)), pa.int64()
            )
        elif name == "doubleValue":
            number = v.cast(pl.Float64, strict=False)
            # msgspec reads -0 as 0.0 and refuses overflow: both left to the typed path
            ok = (
                v.str.contains(_NUM_RE)
                & number.is_finite()
                & ~((number == 0) & v.str.starts_with("-"))
            )
            cols["float"] = _masked(
                m, mask_a, number.zip_with(ok, pl.Series([None], dtype=pl.Float64)), pa.float64()
            )
        elif name == "boolValue":
            ok = v.is_in(["true", "false"])
            cols["bool"] = _masked(
                m,
                mask_a,
                (v == "true").zip_with(ok, pl.Series([None], dtype=pl.Boolean)),
                pa.bool_(),
            )
        else:
            simple = v.str.contains(_STR_ARRAY_RE)
            text = (
                v.str.strip_prefix('{"values":[')
                .str.strip_suffix("]}")
                .str.replace_all('{"stringValue":', "", literal=True)
                .str.replace_all('"}', '"', literal=True)
            )
            text = ("[" + text + "]").zip_with(simple, _NULL_STR)
            cols["array"] = _masked(m, mask_a, text, pa.string())
            arr_mask = pc.replace_with_mask(false, mask_a, (~simple).to_arrow())
            arr_texts = v.filter(~simple).to_list()
    str_col = cols.get("str", pa.nulls(m, pa.string()))
    json_col = pc.coalesce(
        cols.get("bytes", pa.nulls(m, pa.string())), cols.get("array", pa.nulls(m, pa.string()))
    )
    if arr_texts:
        out = []
        for text in arr_texts:
            try:
                value = _GENERIC.decode(text.encode())
            except msgspec.DecodeError:
                value = None
            out.append(None if value is None else json_slot(5, value)[1])  # null: typed path
        json_col = pc.replace_with_mask(json_col, arr_mask, pa.array(out, pa.string()))
    int_col = cols.get("int", pa.nulls(m, pa.int64()))
    float_col = cols.get("float", pa.nulls(m, pa.float64()))
    bool_col = cols.get("bool", pa.nulls(m, pa.bool_()))
    read = pc.or_(
        pc.or_(str_col.is_valid(), json_col.is_valid()),
        pc.or_(pc.or_(int_col.is_valid(), float_col.is_valid()), bool_col.is_valid()),
    )
    bad = pc.or_(bad, pc.invert(pc.and_(known, read)))
    if bad.true_count:
        fallback.update(pc.unique(pc.filter(item_span, bad)).to_pylist())
    values = pa.StructArray.from_arrays(
        [keys, str_col, int_col, float_col, bool_col, json_col], fields=list(ATTR)
    )
    if fallback:
        drop = pa.array(sorted(fallback), item_span.type)
        values = values.filter(pc.invert(pc.is_in(item_span, drop)))
        is_fb = pc.is_in(pa.array(range(n), item_span.type), drop)
        lengths = pc.if_else(is_fb, pa.scalar(0, pa.int32()), lengths)
    offsets = pc.cumulative_sum(pa.concat_arrays([pa.array([0], pa.int32()), lengths]))
    canonical = pa.ListArray.from_arrays(offsets, values, type=ATTRS)
    if not fallback:
        return canonical, []
    order = sorted(fallback)
    lists: list[list[_KeyValue]] = []
    bad_spans: list[int] = []
    for i in order:
        raw = raws[i]
        try:
            lists.append((_ATTR_LIST.decode(raw) or []) if len(raw) else [])
        except msgspec.ValidationError:
            lists.append([])
            bad_spans.append(i)
    typed = _attrs_array(lists)
    take = list(range(n))
    for k, i in enumerate(order):
        take[i] = n + k
    return pc.take(pa.concat_arrays([canonical, typed]), pa.array(take, pa.int64())), bad_spans


def _enum_array(values: list[Any], names: dict[str, str], prefix: str, default: str) -> pa.Array:
    """Enum values (ints, or names in any spelling) as lower-case names, as `enum_name` does."""
    try:
        numbers = pa.array(values, pa.int64())  # the spec's spelling: all ints (or absent)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        lookup = {v: enum_name(v, names, prefix) or default for v in set(values)}
        return pa.array(list(map(lookup.__getitem__, values)), pa.string())
    table = [names[str(i)] for i in range(sum(key.isdigit() for key in names))]
    known = pc.and_(pc.greater_equal(numbers, 0), pc.less(numbers, len(table)))
    index = pc.if_else(known.fill_null(False), numbers, len(table))
    return pc.take(pa.array([*table, default], pa.string()), index)


def _empty_lists(n: int, typ: pa.DataType) -> pa.Array:
    offsets = pa.repeat(pa.scalar(0, pa.int32()), n + 1)
    return pa.ListArray.from_arrays(offsets, pa.array([], typ.value_type), type=typ)


def _events_array(event_lists: list[list[_Event]]) -> pa.Array:
    if not any(event_lists):
        return _empty_lists(len(event_lists), pa.list_(EVENT))
    lengths = list(map(len, event_lists))
    events = list(chain.from_iterable(event_lists))
    offsets = pc.cumulative_sum(pa.array([0, *lengths], pa.int32()))
    times = pa.array(list(map(attrgetter("timeUnixNano"), events)), pa.int64())
    names = pc.fill_null(pa.array(list(map(attrgetter("name"), events)), pa.string()), "")
    attrs = _attrs_array(list(map(_get_attributes, events)))
    values = pa.StructArray.from_arrays([times, names, attrs], fields=list(EVENT))
    return pa.ListArray.from_arrays(offsets, values, type=pa.list_(EVENT))


def _links_array(
    link_lists: list[list[_Link]], link_trace: pa.Array, link_span: pa.Array
) -> pa.Array:
    if not len(link_trace):
        return _empty_lists(len(link_lists), pa.list_(LINK))
    lengths = list(map(len, link_lists))
    links = list(chain.from_iterable(link_lists))
    offsets = pc.cumulative_sum(pa.array([0, *lengths], pa.int32()))
    attrs = _attrs_array(list(map(_get_attributes, links)))
    values = pa.StructArray.from_arrays([link_trace, link_span, attrs], fields=list(LINK))
    return pa.ListArray.from_arrays(offsets, values, type=pa.list_(LINK))


def _fast_batch(reqs: list[tuple[int, _Request]], path: str) -> pa.RecordBatch | None:
    """The span rows of decoded lines; raises _BadLines for lines with a span to quarantine."""
    spans: list[_Span] = []
    span_line: list[int] = []
    span_scope: list[int] = []
    span_res: list[int] = []
    scope_names: list[str | None] = []
    scope_versions: list[str | None] = []
    res_attrs: list[list[_KeyValue]] = []
    for line_no, req in reqs:
        for rs in req.resourceSpans or ():
            r = len(res_attrs)
            res_attrs.append(
                rs.resource.attributes if rs.resource is not None else _EMPTY_RESOURCE_ATTRS
            )
            for ss in rs.scopeSpans:
                s = len(scope_names)
                scope_names.append(ss.scope.name or None)
                scope_versions.append(ss.scope.version or None)
                k = len(ss.spans)
                spans.extend(ss.spans)
                span_line.extend(repeat(line_no, k))
                span_scope.extend(repeat(s, k))
                span_res.extend(repeat(r, k))
    n = len(spans)
    if n == 0:
        return None

    # what the robust path would quarantine: leave those lines to it
    bad: set[int] = set()
    trace_id, bad_t = _ids(list(map(attrgetter("traceId"), spans)), 16)
    span_id, bad_s = _ids(list(map(attrgetter("spanId"), spans)), 8)
    parent, bad_p = _ids(list(map(attrgetter("parentSpanId"), spans)), 8)
    start = pa.array(list(map(attrgetter("startTimeUnixNano"), spans)), pa.int64())
    end = pa.array(list(map(attrgetter("endTimeUnixNano"), spans)), pa.int64())
    missing = pc.or_(
        pc.or_(trace_id.is_null(), span_id.is_null()), pc.or_(start.is_null(), end.is_null())
    )
    for i in chain(bad_t, bad_s, bad_p, pc.indices_nonzero(missing).to_pylist()):
        bad.add(span_line[i])
    link_lists = list(map(attrgetter("links"), spans))
    links = list(chain.from_iterable(link_lists)) if any(link_lists) else []
    link_trace, bad_lt = _ids(list(map(attrgetter("traceId"), links)), 16)
    link_span, bad_ls = _ids(list(map(attrgetter("spanId"), links)), 8)
    if bad_lt or bad_ls:
        owner = list(chain.from_iterable(repeat(i, len(ls)) for i, ls in enumerate(link_lists)))
        bad.update(span_line[owner[i]] for i in chain(bad_lt, bad_ls))
    if bad:
        raise _BadLines(bad)

    message = pa.array(list(map(attrgetter("status.message"), spans)), pa.string())
    message = pc.if_else(pc.equal(message, ""), pa.scalar(None, pa.string()), message)
    attributes, bad_a = _span_attrs(list(map(_get_attributes, spans)))
    if bad_a:
        raise _BadLines({span_line[i] for i in bad_a})
    res_array = _attrs_array(res_attrs)
    scope_idx = pa.array(span_scope, pa.int32())
    columns = {
        "trace_id": trace_id,
        "span_id": span_id,
        "parent_span_id": parent,
        "name": pc.fill_null(pa.array(list(map(attrgetter("name"), spans)), pa.string()), ""),
        "kind": _enum_array(
            list(map(attrgetter("kind"), spans)), KIND_NAMES, "SPAN_KIND_", "unspecified"
        ),
        "start_ns": start,
        "end_ns": end,
        "status_code": _enum_array(
            list(map(attrgetter("status.code"), spans)), STATUS_NAMES, "STATUS_CODE_", "unset"
        ),
        "status_message": message,
        "scope_name": pc.take(pa.array(scope_names, pa.string()), scope_idx),
        "scope_version": pc.take(pa.array(scope_versions, pa.string()), scope_idx),
        "attributes": attributes,
        "resource_attributes": pc.take(res_array, pa.array(span_res, pa.int32())),
        "events": _events_array(list(map(attrgetter("events"), spans))),
        "links": _links_array(link_lists, link_trace, link_span),
        "source_file": pa.repeat(pa.scalar(path, pa.string()), n),
        "source_pos": pa.array(span_line, pa.int64()),
    }
    return pa.RecordBatch.from_arrays([columns[f.name] for f in SPAN_SCHEMA], schema=SPAN_SCHEMA)


# --- the native fast path ---------------------------------------------------------------------
# `analyzer.ingest._otlp_lines` (C, built with the package when a compiler is present) reads
# lines straight into Arrow buffers and refuses, whole, every line whose reading is not certain
# to equal the robust path's. Without it, the msgspec path above reads the lines.

_KIND_TABLE = pa.array(KINDS, pa.string())
_STATUS_TABLE = pa.array(STATUSES, pa.string())


def _column(spec: tuple, typ: pa.DataType) -> pa.Array:
    """An Arrow array from the native (length, null count, validity, offsets, data)."""
    n, nulls, valid, offsets, data = spec
    buffers = [None if valid is None else pa.py_buffer(valid)]
    buffers += [pa.py_buffer(b) for b in (offsets, data) if b is not None]
    return pa.Array.from_buffers(typ, n, buffers, null_count=nulls)


def _lists(spec: tuple, values: pa.Array, typ: pa.DataType) -> pa.Array:
    """A list array: the native list offsets over `values`."""
    n, _, _, offsets, _ = spec
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offsets)], children=[values])


def _pool_lists(pool: dict[str, tuple], spec: tuple) -> pa.Array:
    """`ATTRS` lists over one native attribute pool; its pending JSON texts converted here."""
    json = _column(pool["json"], pa.string())
    if pool["pending_index"][0]:
        index = _column(pool["pending_index"], pa.int64())
        kinds = _column(pool["pending_kind"], pa.uint8()).to_pylist()
        texts = json.take(index).to_pylist()
        # the robust path's own conversion (arrays, key-value lists, bytes that are not plain)
        values = [
            json_slot(k, _GENERIC.decode(t.encode()))[1] for k, t in zip(kinds, texts, strict=True)
        ]
        json = pl.from_arrow(json).scatter(index, values).to_arrow().cast(pa.string())
    values = pa.StructArray.from_arrays(
        [
            _column(pool["key"], pa.string()),
            _column(pool["str"], pa.string()),
            _column(pool["int"], pa.int64()),
            _column(pool["float"], pa.float64()),
            _column(pool["bool"], pa.bool_()),
            json,
        ],
        fields=list(ATTR),
    )
    return _lists(spec, values, ATTRS)


def _native_lines(
    lines: list[memoryview | bytes], numbers: list[int], todo: list[int], path: str
) -> tuple[pa.RecordBatch | None, list[int], int]:
    """The native fast path over ``lines[i] for i in todo``: (rows, lines refused, spans read);
    the rows in `SHARED_SCHEMA` (each resource's attributes once)."""
    try:
        cols, refused, spans = _native.parse([lines[i] for i in todo], [numbers[i] for i in todo])
    except OverflowError:  # more than 2 GiB of text in one group: the msgspec path copes
        valid = [i for i in todo if _is_utf8(lines[i])]  # (see `_checks_utf8`)
        batch, refused, spans = _typed_lines(lines, numbers, valid, path)
        return batch, refused + sorted(set(todo) - set(valid)), spans
    refused = [todo[k] for k in refused]
    n = cols["trace_id"][0]
    if n == 0:
        return None, refused, spans
    events = pa.StructArray.from_arrays(
        [
            _column(cols["event_time"], pa.int64()),
            _column(cols["event_name"], pa.string()),
            _pool_lists(cols["event_attrs"], cols["event_attributes"]),
        ],
        fields=list(EVENT),
    )
    links = pa.StructArray.from_arrays(
        [
            _column(cols["link_trace_id"], pa.string()),
            _column(cols["link_span_id"], pa.string()),
            _pool_lists(cols["link_attrs"], cols["link_attributes"]),
        ],
        fields=list(LINK),
    )
    columns = {
        "trace_id": _column(cols["trace_id"], pa.string()),
        "span_id": _column(cols["span_id"], pa.string()),
        "parent_span_id": _column(cols["parent_span_id"], pa.string()),
        "name": _column(cols["name"], pa.string()),
        "kind": _KIND_TABLE.take(_column(cols["kind"], pa.uint8())),
        "start_ns": _column(cols["start_ns"], pa.int64()),
        "end_ns": _column(cols["end_ns"], pa.int64()),
        "status_code": _STATUS_TABLE.take(_column(cols["status_code"], pa.uint8())),
        "status_message": _column(cols["status_message"], pa.string()),
        "scope_name": _column(cols["scope_name"], pa.string()),
        "scope_version": _column(cols["scope_version"], pa.string()),
        "attributes": _pool_lists(cols["span_attrs"], cols["attributes"]),
        "resource_attributes": pa.DictionaryArray.from_arrays(
            _column(cols["resource_index"], pa.int32()),
            _pool_lists(cols["resource_attrs"], cols["resource_attributes"]),
        ),
        "events": _lists(cols["events"], events, pa.list_(EVENT)),
        "links": _lists(cols["links"], links, pa.list_(LINK)),
        "source_file": pa.repeat(pa.scalar(path, pa.string()), n),
        "source_pos": _column(cols["source_pos"], pa.int64()),
    }
    batch = pa.RecordBatch.from_arrays(
        [columns[f.name] for f in SHARED_SCHEMA], schema=SHARED_SCHEMA
    )
    return batch, refused, spans


# --- lines ------------------------------------------------------------------------------------


def _robust_line(
    line: bytes | memoryview, line_no: int, builder: SpanBatchBuilder, log: FileLog
) -> None:
    """One line through the robust path (the caller has counted the record)."""
    if len(line) > limits.MAX_RECORD_BYTES:
        log.quarantine_record(
            f"line {line_no}", record_too_long(len(line)), bytes(line[:EXCERPT_BYTES])
        )
        return
    try:
        obj = _GENERIC.decode(line)
    except msgspec.DecodeError as exc:
        log.quarantine_record(
            f"line {line_no}", f"invalid JSON: {exc}", bytes(line[:EXCERPT_BYTES])
        )
        return
    except RecursionError:
        log.quarantine_record(
            f"line {line_no}", nesting_reason(text=line), bytes(line[:EXCERPT_BYTES])
        )
        return
    add_request(obj, builder, log, source_pos=line_no, position=f"line {line_no}")


def _is_utf8(data: bytes | memoryview) -> bool:
    try:
        codecs.utf_8_decode(data, "strict", True)
    except UnicodeDecodeError:
        return False
    return True


def _blank(line: bytes | memoryview) -> bool:
    return not line or (line[0] in b" \t\r\n\f\v" and not bytes(line).strip())


def _typed_lines(
    lines: list[memoryview | bytes], numbers: list[int], todo: list[int], path: str
) -> tuple[pa.RecordBatch | None, list[int], int]:
    """The msgspec fast path over ``lines[i] for i in todo``: (rows, lines refused, spans read)."""
    reqs: list[tuple[int, _Request]] = []
    refused: list[int] = []
    for i in todo:
        try:
            req = _DECODER.decode(lines[i])
        except _DECODE_ERRORS:
            refused.append(i)
            continue
        if req.resourceSpans is None:
            refused.append(i)
            continue
        reqs.append((numbers[i], req))
    while True:  # each round leaves more lines to the robust path; two rounds at most
        try:
            batch = _fast_batch(reqs, path)
            break
        except _BadLines as exc:
            index = {number: i for i, number in enumerate(numbers)}
            refused.extend(index[line_no] for line_no in exc.lines)
            reqs = [r for r in reqs if r[0] not in exc.lines]
        except RecursionError:
            # an attribute value nested deeper than the converters can follow (the typed
            # decode took it as raw text): which line is unknown, so the robust path,
            # which quarantines that span alone, reads the whole group
            index = {number: i for i, number in enumerate(numbers)}
            refused.extend(index[line_no] for line_no, _ in reqs)
            reqs, batch = [], None
            break
    spans = sum(
        len(ss.spans) for _, req in reqs for rs in req.resourceSpans or () for ss in rs.scopeSpans
    )
    return batch, refused, spans


#: The fast path in use: native when it was built.
_fast_lines = _typed_lines if _native is None else _native_lines


def _checks_utf8() -> bool:
    """Whether the fast path checks that the lines it reads are UTF-8: the native parser does
    (it refuses the others to the robust path, which checks them too), so blocks of lines are
    not checked beforehand (Arrow's validator took 16 ms a block of 32 MB). msgspec does not
    check the fields it skips: its lines are checked first."""
    return _fast_lines is _native_lines


def _process_lines(
    lines: list[memoryview | bytes], numbers: list[int], log: FileLog, utf8: bool
) -> Iterator[pa.RecordBatch]:
    """Rows of `lines` (without their newlines), whose line numbers are `numbers`; in
    `SHARED_SCHEMA` or `SPAN_SCHEMA` (`read_lines` gives the latter)."""
    enabled = gc.isenabled()
    gc.disable()  # millions of young containers: collections would cost more than the work
    try:
        todo: list[int] = []
        robust: list[int] = []
        max_record = limits.MAX_RECORD_BYTES
        for i, line in enumerate(lines):
            if _blank(line):
                continue
            log.records += 1
            if (not utf8 and not _is_utf8(line)) or len(line) > max_record:
                # msgspec does not check the bytes of fields it skips; the robust parser does
                # (and refuses a line over the size limit unread)
                robust.append(i)
            else:
                todo.append(i)
        batch = None
        if todo:
            batch, refused, spans = _fast_lines(lines, numbers, todo, log.path)
            robust.extend(refused)
            log.spans_read += spans
        robust.sort()
        extra = None
        if robust:
            builder = SpanBatchBuilder()
            for i in robust:
                _robust_line(lines[i], numbers[i], builder, log)
            extra = builder.flush()
    finally:
        if enabled:
            gc.enable()
    if extra is None:
        if batch is not None:
            yield batch
        return
    if batch is None:
        yield extra
        return
    table = pa.Table.from_batches([plain_resources(batch), extra])
    order = pc.sort_indices(table, [("source_pos", "ascending")])  # stable: keeps span order
    yield from table.take(order).combine_chunks().to_batches()


def _line_groups(
    buf: bytes | mmap.mmap,
    view: memoryview,
    pos: int,
    end: int,
    cursor: list[int],
    last: bytes | None = None,
) -> Iterator[tuple[list[int], list[memoryview | bytes]]]:
    """The non-empty lines of ``buf[pos:end]`` (views), then `last`, with their line numbers.

    In groups of `GROUP_LINES` at most. ``cursor[0]`` is the number of the line at `pos`; it is
    left at the number of the line after. Empty lines are counted, never made into objects.
    """
    numbers: list[int] = []
    lines: list[memoryview | bytes] = []
    line_no = cursor[0]
    find = buf.find
    search = _CONTENT.search
    while pos < end:
        found = search(buf, pos, end)
        if found is None:  # only newlines left: each ends an empty line
            line_no += end - pos
            break
        start = found.start()
        line_no += start - pos
        nl = find(b"\n", start, end)
        stop = end if nl < 0 else nl
        numbers.append(line_no)
        lines.append(view[start:stop])
        line_no += 1
        pos = stop + 1
        if len(lines) >= GROUP_LINES:
            yield numbers, lines
            numbers, lines = [], []
    if last is not None:
        numbers.append(line_no)
        lines.append(last)
        line_no += 1
    cursor[0] = line_no
    if lines:
        yield numbers, lines


def _line_blocks(
    stream: BinaryIO, size: int, limit: int | None, cursor: list[int]
) -> Iterator[tuple[list[int], list[memoryview | bytes], bool]]:
    """Groups of whole lines (views into blocks of about `size` bytes), their numbers, and
    whether their lines need no UTF-8 check (their block is all ASCII, or `_checks_utf8`).

    Reads `limit` bytes at most; a line that runs past a block is completed with readline.
    """
    remaining = limit
    first = True
    while remaining is None or remaining > 0:
        block = stream.read(size if remaining is None else min(size, remaining))
        if not block:
            return
        if remaining is not None:
            remaining -= len(block)
        tail = b""
        if not block.endswith(b"\n") and (remaining is None or remaining > 0):
            tail = stream.readline(-1 if remaining is None else remaining)
            if remaining is not None:
                remaining -= len(tail)
        if first and block.startswith(b"\xef\xbb\xbf"):
            block = block[3:]  # a UTF-8 byte order mark
        first = False
        ascii_only = _checks_utf8() or (block.isascii() and tail.isascii())
        end = len(block)
        last = None
        if tail:  # the last line, completed by readline: the one line copied
            end = block.rfind(b"\n") + 1
            last = block[end:] + tail
            last = last[:-1] if last.endswith(b"\n") else last
        for numbers, lines in _line_groups(block, memoryview(block), 0, end, cursor, last):
            yield numbers, lines, ascii_only


def _utf8(view: memoryview) -> bool:
    """Whether `view` is valid UTF-8 (Arrow's validator: no copy, no Python string)."""
    offsets = pa.array([0, len(view)], pa.int64()).buffers()[1]
    array = pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, pa.py_buffer(view)])
    try:
        array.cast(pa.large_string())
    except pa.ArrowInvalid:
        return False
    return True


def _mapped_blocks(
    mm: mmap.mmap, start: int, stop: int, size: int, cursor: list[int]
) -> Iterator[tuple[list[int], list[memoryview | bytes], bool]]:
    """Like `_line_blocks`, over bytes [start, stop) of a memory-mapped file: no copies."""
    view = memoryview(mm)
    pos = start
    if start == 0 and mm[:3] == b"\xef\xbb\xbf":
        pos = 3  # a UTF-8 byte order mark
    while pos < stop:
        end = min(pos + size, stop)
        if end < stop:
            nl = mm.rfind(b"\n", pos, end)
            if nl < 0:  # a line longer than a block
                nl = mm.find(b"\n", end, stop)
            end = stop if nl < 0 else nl + 1
        utf8 = _checks_utf8() or _utf8(view[pos:end])
        for numbers, lines in _line_groups(mm, view, pos, end, cursor):
            yield numbers, lines, utf8
        pos = end


def _map(stream: BinaryIO) -> mmap.mmap | None:
    """A read-only map of the regular file behind `stream`, or None."""
    try:
        fd = stream.fileno()
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
            return None
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None


def _read_lines(
    stream: BinaryIO, log: FileLog, cursor: list[int], limit: int | None, jobs: int = 1
) -> Iterator[pa.RecordBatch]:
    """Rows of the lines from the stream's position on (at most `limit` bytes), the first
    numbered ``cursor[0]``; in `SHARED_SCHEMA` or `SPAN_SCHEMA`, batch by batch. Once read,
    ``cursor[0]`` is the number of the line after the last (each newline read counts one)."""
    mm = _map(stream)
    if mm is None:
        yield from _processed(_line_blocks(stream, CHUNK_BYTES, limit, cursor), log, jobs)
        return
    start = stream.tell()
    stop = len(mm) if limit is None else min(len(mm), start + limit)
    try:
        yield from _processed(_mapped_blocks(mm, start, stop, CHUNK_BYTES, cursor), log, jobs)
        stream.seek(stop)
    finally:
        with contextlib.suppress(BufferError):  # a view is still held: the map goes with it
            mm.close()


def _processed(
    groups: Iterator[tuple[list[int], list[memoryview | bytes], bool]], log: FileLog, jobs: int
) -> Iterator[pa.RecordBatch]:
    """`_process_lines` of each group of lines, in order, on `jobs` threads.

    The native parser lets go of the GIL, so threads read groups side by side. Each group
    counts into a log of its own, added to `log` in reading order: the same counts and
    quarantine as one thread. At most `jobs` + 1 groups are in flight.
    """
    if jobs <= 1:
        for numbers, lines, utf8 in groups:
            yield from _process_lines(lines, numbers, log, utf8)
        return

    def run(numbers, lines, utf8, part):
        return list(_process_lines(lines, numbers, part, utf8))

    with ThreadPoolExecutor(jobs, thread_name_prefix="agenttrace-lines") as pool:
        pending: deque[tuple[FileLog, Future[list[pa.RecordBatch]]]] = deque()
        try:
            for numbers, lines, utf8 in groups:
                part = FileLog(log.path)
                pending.append((part, pool.submit(run, numbers, lines, utf8, part)))
                del lines
                while len(pending) > jobs:
                    yield from _done(pending.popleft(), log)
        except Exception:  # the stream broke: first the rows of the lines read before it
            while pending:
                yield from _done(pending.popleft(), log)
            raise
        while pending:
            yield from _done(pending.popleft(), log)


def _done(item: tuple[FileLog, Future[list[pa.RecordBatch]]], log: FileLog) -> list[pa.RecordBatch]:
    """The batches of a finished group; its counts, quarantine and warnings added to `log`."""
    part, future = item
    batches = future.result()
    log.records += part.records
    log.spans_read += part.spans_read
    log.records_quarantined += part.records_quarantined
    log.spans_quarantined += part.spans_quarantined
    log.quarantine.extend(part.quarantine)
    log.warnings.extend(part.warnings)
    return batches


def read_lines(
    stream: BinaryIO, log: FileLog, *, jobs: int = 1, first_line: int = 1
) -> Iterator[pa.RecordBatch]:
    """Spans of an OTLP JSON lines stream (the collector ``file`` exporter): one request a line.

    ``source_pos`` is the 1-based line number (the stream's first line is `first_line`: blank
    lines already read off it are counted). Blank lines are skipped and not counted; a line
    that is not JSON is quarantined as a record; a span that cannot be read is quarantined alone.
    Groups of lines are read on `jobs` threads; rows, counts and quarantine are the same for
    any value.
    """
    for batch in _read_lines(stream, log, [first_line], None, jobs):
        yield plain_resources(batch)


def _robust_lines(stream: BinaryIO, log: FileLog) -> Iterator[pa.RecordBatch]:
    """Every line through the robust path (the reference the fast path is tested against)."""
    builder = SpanBatchBuilder()
    data = stream.read()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for i, line in enumerate(data.split(b"\n")):
        if not line or line.isspace():
            continue
        log.records += 1
        _robust_line(line, i + 1, builder, log)
        if len(builder) >= 50_000:
            yield builder.flush()  # type: ignore[misc]
    batch = builder.flush()
    if batch is not None:
        yield batch


# --- documents --------------------------------------------------------------------------------


def read_document(
    data: bytes | dict, log: FileLog, *, source_pos: int = 0
) -> Iterator[pa.RecordBatch]:
    """Spans of one OTLP JSON document: a request with top-level ``resourceSpans``.

    Also reads a JSON list of requests and the oteltest envelope
    ``{"trace_requests": [{"pbreq": request}]}``. The document counts as one record; its spans
    are positioned "document span 3" (or "document request 2 span 3") in the quarantine.
    """
    log.records += 1
    if isinstance(data, bytes | bytearray | memoryview):
        raw = bytes(data)
        if raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            obj = _GENERIC.decode(raw)
        except msgspec.DecodeError as exc:
            log.quarantine_record("document", f"invalid JSON: {exc}", raw)
            return
        except RecursionError:
            log.quarantine_record("document", nesting_reason(text=raw), raw)
            return
    else:
        obj = data
    requests: list[tuple[str, Any]]
    if isinstance(obj, list):
        requests = [(f"document request {i + 1}", r) for i, r in enumerate(obj)]
    elif (
        isinstance(obj, dict)
        and isinstance(obj.get("trace_requests"), list)
        and not ("resourceSpans" in obj or "resource_spans" in obj)
    ):
        requests = [
            (f"document request {i + 1}", r.get("pbreq", r) if isinstance(r, dict) else r)
            for i, r in enumerate(obj["trace_requests"])
        ]
    else:
        requests = [("document", obj)]
    builder = SpanBatchBuilder()
    for position, request in requests:
        add_request(request, builder, log, source_pos=source_pos, position=position)
        if len(builder) >= 50_000:
            yield builder.flush()  # type: ignore[misc]
    batch = builder.flush()
    if batch is not None:
        yield batch
