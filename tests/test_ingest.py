"""Reading a batch of files: format sniffing, decompression, de-duplication, accounting."""

from __future__ import annotations

import gzip
import json
import threading
import tracemalloc
import zlib
from pathlib import Path

import pytest
import zstandard

from analyzer.engine import ingest_partitioned
from analyzer.errors import InputError
from analyzer.ingest import read_dataset, read_traces
from analyzer.ingest.detect import sniff

pytest.importorskip("analyzer.ingest.otlp_json")

TRACE = "5b8efff798038103d269b633813fc60c"


def span(span_id: str, parent: str = "", name: str = "s", start: int = 1, trace: str = TRACE):
    return {
        "traceId": trace,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + start),
        "endTimeUnixNano": str(1_700_000_000_000_000_000 + start + 10),
        "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}],
        "status": {},
    }


def line(*spans) -> str:
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {
                        "attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]
                    },
                    "scopeSpans": [{"scope": {"name": "test"}, "spans": list(spans)}],
                }
            ]
        }
    )


ROOT = span("eee19b7ec3c1b173", name="invoke_agent")
CHILD = span("eee19b7ec3c1b174", "eee19b7ec3c1b173", "chat", 2)
ORPHAN = span("eee19b7ec3c1b175", "00000000000000aa", "execute_tool", 3)


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    folder = tmp_path / "dump"
    folder.mkdir()
    (folder / "a.jsonl").write_text(line(ROOT, CHILD) + "\n" + line(ORPHAN) + "\n")
    # The same batch exported twice, compressed: two duplicates.
    (folder / "b.jsonl.gz").write_bytes(gzip.compress((line(ROOT, CHILD) + "\n").encode(), mtime=0))
    (folder / "README.md").write_text("# not a trace\n")
    (folder / "notes.csv").write_text("a,b\n1,2\n")
    return folder


def test_folder_read_with_duplicates_orphans_and_a_foreign_file(dump: Path):
    ingested = read_traces([dump])
    log = ingested.log
    assert ingested.spans.num_rows == 3
    assert (log.spans_read, log.spans_kept, log.duplicates, log.spans_quarantined) == (5, 3, 2, 0)
    assert log.orphans == 1
    assert log.balanced()
    assert ingested.skipped == [str(dump / "README.md")]
    formats = {Path(f.path).name: f.format for f in log.files}
    assert formats == {"a.jsonl": "jsonl", "b.jsonl.gz": "jsonl+gzip", "notes.csv": "unknown"}
    [entry] = log.quarantine
    assert entry.file == str(dump / "notes.csv") and entry.position == "file"
    assert "not a trace" in entry.reason and entry.excerpt.startswith("a,b")
    # Copies are kept from the first file in path order.
    assert set(ingested.spans.column("source_file").to_pylist()) == {str(dump / "a.jsonl")}


def test_result_does_not_depend_on_file_order(dump: Path):
    one = read_traces([dump / "a.jsonl", dump / "b.jsonl.gz"]).spans
    two = read_traces([dump / "b.jsonl.gz", dump / "a.jsonl"]).spans
    assert one.equals(two)
    ids = one.column("span_id").to_pylist()
    assert ids == ["eee19b7ec3c1b173", "eee19b7ec3c1b174", "eee19b7ec3c1b175"]


def test_zstd_and_damaged_lines_are_counted_not_fatal(tmp_path: Path):
    body = line(ROOT) + "\n" + '{"resourceSpans": [ truncated\n' + "not json at all\n" + line(CHILD)
    path = tmp_path / "x.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(body.encode()))
    ingested = read_traces([path])
    log = ingested.log
    assert ingested.spans.num_rows == 2
    assert log.files[0].format == "jsonl+zstd"
    assert log.records_quarantined == 2
    assert [q.position for q in log.quarantine] == ["line 2", "line 3"]
    assert log.balanced()


LINES = [line(span(f"{i:016x}", start=i)) + "\n" for i in range(1, 2001)]


def _flushed(kind: str, data: bytes) -> bytes:
    """`data` compressed and flushed, the stream left open: a file cut at a block boundary."""
    if kind == "gzip":
        comp = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS | 16)
        return comp.compress(data) + comp.flush(zlib.Z_SYNC_FLUSH)
    zcomp = zstandard.ZstdCompressor().compressobj()
    return zcomp.compress(data) + zcomp.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)


@pytest.mark.parametrize("kind", ["gzip", "zstd"])
def test_truncated_stream_keeps_every_complete_line_before_the_cut(tmp_path: Path, kind: str):
    # 1,000 whole lines and 37 bytes of line 1001, then the file ends (no end-of-stream marker)
    before = "".join(LINES[:1000]).encode() + LINES[1000].encode()[:37]
    path = tmp_path / f"cut.jsonl.{'gz' if kind == 'gzip' else 'zst'}"
    path.write_bytes(_flushed(kind, before))
    ingested = read_traces([path])
    log = ingested.log
    assert log.files[0].format == f"jsonl+{kind}"
    ids = ingested.spans.column("span_id").to_pylist()
    assert ids == [f"{i:016x}" for i in range(1, 1001)]
    assert (log.records, log.spans_read, log.spans_kept, log.spans_quarantined) == (
        1001,
        1000,
        1000,
        0,
    )
    assert log.records_quarantined == 2
    partial, cut = log.quarantine
    assert (partial.position, partial.excerpt) == ("line 1001", LINES[1000][:37])
    assert partial.reason.startswith("invalid JSON")
    assert (cut.file, cut.position) == (str(path), f"byte {len(before)}")
    assert cut.reason == (
        f"truncated {kind} stream: the compressed data ends after {path.stat().st_size:,} "
        "bytes, before the end-of-stream marker; what was decompressed before is kept"
    )
    assert log.balanced()


@pytest.mark.parametrize("kind", ["gzip", "zstd"])
def test_stream_cut_anywhere_keeps_the_lines_its_prefix_holds(tmp_path: Path, kind: str):
    body = "".join(LINES).encode()
    if kind == "gzip":
        data = gzip.compress(body, mtime=0)
        cut = data[: len(data) // 2]
        prefix = zlib.decompressobj(zlib.MAX_WBITS | 16).decompress(cut)
    else:
        data = zstandard.ZstdCompressor().compress(body)
        cut = data[: len(data) // 2]
        prefix = zstandard.ZstdDecompressor().decompressobj().decompress(cut)
    whole = prefix.count(b"\n")  # what the library itself decodes from the cut file
    assert 0 < whole < 2000
    path = tmp_path / "cut.jsonl.x"
    path.write_bytes(cut)
    log = read_traces([path]).log
    assert (log.spans_read, log.spans_kept) == (whole, whole)
    positions = [q.position for q in log.quarantine]
    tail = [f"line {whole + 1}"] if not prefix.endswith(b"\n") else []
    assert positions == [*tail, f"byte {len(prefix)}"]
    assert log.quarantine[-1].reason.startswith(f"truncated {kind} stream")
    assert log.balanced()


def test_corrupt_gzip_keeps_the_lines_before_the_damage(tmp_path: Path):
    good = _flushed("gzip", "".join(LINES[:1000]).encode())
    path = tmp_path / "bad.jsonl.gz"
    path.write_bytes(good + b"\xff" * 64 + gzip.compress(LINES[1000].encode()))
    ingested = read_traces([path])
    log = ingested.log
    assert ingested.spans.num_rows == 1000
    [entry] = log.quarantine
    assert entry.position == f"byte {len(''.join(LINES[:1000]))}"
    assert entry.reason.startswith(f"corrupt gzip stream at compressed byte {len(good):,}: ")
    assert "invalid block type" in entry.reason
    assert log.balanced()


def _bomb(path: Path, kind: str, head: bytes, mib: int, tail: bytes = b"]}") -> Path:
    """`head`, `mib` MiB of spaces and `tail`, compressed as it is written (never held whole)."""
    chunk = b" " * (1 << 20)
    with path.open("wb") as fh:
        if kind == "zstd":
            with zstandard.ZstdCompressor(level=1).stream_writer(fh) as writer:
                writer.write(head)
                for _ in range(mib):
                    writer.write(chunk)
                writer.write(tail)
        else:  # gzip inside gzip: one layer cannot pass 1032x, two can
            comp = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
            parts = [comp.compress(head), *(comp.compress(chunk) for _ in range(mib))]
            inner = b"".join([*parts, comp.compress(tail), comp.flush()])
            fh.write(gzip.compress(inner, mtime=0))
    return path


def _traced_peak(fn):
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(("kind", "mib"), [("zstd", 1024), ("gzip", 80)])
def test_decompression_bomb_is_refused_without_expanding_it(tmp_path: Path, kind: str, mib: int):
    # a valid OTLP document in all but its size: 1 GiB (or 80 MiB) of JSON whitespace
    path = _bomb(tmp_path / "bomb.json.x", kind, b'{"resourceSpans": [', mib)
    size = path.stat().st_size
    assert size * 1000 < (mib << 20)  # past the ratio...
    ingested, peak = _traced_peak(lambda: read_traces([path]))
    assert peak < 128 << 20  # ...and refused once past the 64 MiB floor, not expanded
    log = ingested.log
    assert ingested.spans.num_rows == 0
    [entry] = log.quarantine
    assert (entry.file, entry.position) == (str(path), "file")
    assert entry.reason == (
        f"decompresses to more than 67,108,864 bytes (the limit: 1000x its {size:,} "
        "compressed bytes, at least 64 MiB); refused as a decompression bomb"
    )
    assert log.files[0].format.startswith("jsonl+")


def test_highly_compressible_file_under_the_floor_is_read(tmp_path: Path):
    # near miss: the same shape, 48 MiB (over 1000x, but under the 64 MiB floor)
    head = line(ROOT).encode()[:-2] + b" "
    path = _bomb(tmp_path / "big.json.zst", "zstd", head, 48, b"]}\n")
    assert path.stat().st_size * 1000 < (48 << 20)
    ingested = read_traces([path])
    assert ingested.log.quarantine == []
    assert ingested.spans.column("span_id").to_pylist() == ["eee19b7ec3c1b173"]


def test_compressed_zeros_are_not_a_trace_and_are_not_expanded(tmp_path: Path):
    path = tmp_path / "zeros.zst"
    with path.open("wb") as fh, zstandard.ZstdCompressor(level=1).stream_writer(fh) as writer:
        for _ in range(1024):
            writer.write(bytes(1 << 20))
    ingested, peak = _traced_peak(lambda: read_traces([path]))
    assert peak < 16 << 20  # the sniffer's look at the head, no more
    [entry] = ingested.log.quarantine
    assert (entry.position, entry.reason) == (
        "file",
        "not a trace file (no known format recognised)",
    )


@pytest.mark.parametrize("packed", [False, True], ids=["mapped", "gzip-stream"])
def test_empty_lines_are_counted_and_lines_are_read_in_small_groups(
    tmp_path: Path, monkeypatch, packed: bool
):
    from analyzer.ingest import otlp_json

    monkeypatch.setattr(otlp_json, "GROUP_LINES", 2)  # 3 groups of lines, then the tail
    text = (
        line(ROOT)
        + "\n" * 100_000  # ends line 1, then lines 2..100,000 are empty
        + "garbage\n"  # line 100,001
        + " \t\n"  # line 100,002: blank, not a record
        + line(CHILD)  # line 100,003
        + "\n\n\n"
        + line(ORPHAN)  # line 100,006, no newline at the end
    ).encode()
    path = tmp_path / ("dump.jsonl.gz" if packed else "dump.jsonl")
    path.write_bytes(gzip.compress(text, mtime=0) if packed else text)
    ingested = read_traces([path])
    log = ingested.log
    assert (log.records, log.spans_read, log.spans_kept) == (4, 3, 3)
    assert [q.position for q in log.quarantine] == ["line 100001"]
    rows = ingested.spans.select(["span_id", "source_pos"]).to_pylist()
    assert rows == [
        {"span_id": "eee19b7ec3c1b173", "source_pos": 1},
        {"span_id": "eee19b7ec3c1b174", "source_pos": 100_003},
        {"span_id": "eee19b7ec3c1b175", "source_pos": 100_006},
    ]


def test_a_bomb_of_newlines_is_refused_without_a_line_object_per_newline(tmp_path: Path):
    # 1 GiB of newlines after one good line: 64 MiB are read (the floor), as counted lines only
    path = tmp_path / "newlines.jsonl.zst"
    with path.open("wb") as fh, zstandard.ZstdCompressor(level=1).stream_writer(fh) as writer:
        writer.write(line(ROOT).encode())
        for _ in range(1024):
            writer.write(b"\n" * (1 << 20))
    ingested, peak = _traced_peak(lambda: read_traces([path]))
    assert peak < 128 << 20  # a view per newline would be 6 GB for each 32 MiB read
    assert ingested.spans.column("span_id").to_pylist() == ["eee19b7ec3c1b173"]
    [entry] = ingested.log.quarantine
    assert entry.position == "end of readable data"
    assert entry.reason.endswith("refused as a decompression bomb")


def test_non_ascii_keys_and_values_are_read_exactly(tmp_path: Path):
    # the fast path cuts attribute lists with byte offsets: keys and values before a cut
    # that are not ASCII must not shift it (a character count would)
    attrs = [
        {"key": "ключ", "value": {"stringValue": "значение"}},
        {"key": "emoji 🙂", "value": {"intValue": "7"}},
        {"key": "k", "value": {"stringValue": 'naïve \u00e9 "quoted"'}},
    ]
    # compact and raw UTF-8, as collectors write it: the form the fast path reads
    request = json.loads(line({**ROOT, "attributes": attrs}))
    path = tmp_path / "u.jsonl"
    text = json.dumps(request, separators=(",", ":"), ensure_ascii=False)
    path.write_text(text + "\n", encoding="utf-8")
    [row] = read_traces([path]).spans.column("attributes").to_pylist()
    assert [(a["key"], a["str"], a["int"]) for a in row] == [
        ("ключ", "значение", None),
        ("emoji 🙂", None, 7),
        ("k", 'naïve é "quoted"', None),
    ]


def _damaged_dump(path: Path) -> Path:
    lines = [line(span(f"{i:016x}", start=i)) for i in range(1, 41)]
    lines[2] = '{"resourceSpans": [ truncated'  # line 3: not JSON
    lines[24] = "not json at all"  # line 25
    lines[37] = line(span(f"{38:016x}", start=38), span(True, start=39))  # one bad span
    lines[39] = lines[0]  # line 40: line 1 exported twice
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("compressed", [False, True])
def test_file_read_on_two_threads_equals_one(tmp_path: Path, monkeypatch, compressed):
    from analyzer.ingest import otlp_json

    path = _damaged_dump(tmp_path / "dump.jsonl")
    if compressed:
        packed = tmp_path / "dump.jsonl.gz"
        packed.write_bytes(gzip.compress(path.read_bytes(), mtime=0))
        path = packed
    monkeypatch.setattr(otlp_json, "CHUNK_BYTES", 2000)  # the file has 18,320 bytes
    threads: set[str] = set()
    real = otlp_json._process_lines
    both = threading.Event()  # set: the second thread reads too (else one fast thread may do all)

    def process_lines(*args):
        threads.add(threading.current_thread().name)
        if len(threads) < 2:
            both.wait(timeout=30)
        both.set()
        yield from real(*args)

    monkeypatch.setattr(otlp_json, "_process_lines", process_lines)
    both.set()
    one = read_traces([path], jobs=1)
    assert threads == {threading.current_thread().name}
    threads.clear()
    both.clear()
    two = read_traces([path], jobs=2)
    assert len(threads) == 2 and all(t.startswith("agenttrace-lines") for t in threads)
    assert two.spans.equals(one.spans)
    assert two.log.as_dict() == one.log.as_dict()
    assert two.log.files == one.log.files
    counts = {k: v for k, v in one.log.as_dict().items() if k not in ("quarantine", "warnings")}
    assert counts == {
        "files": 1,
        "records_read": 40,
        "spans_read": 39,  # 38 lines of one span, line 38 has two, lines 3 and 25 none
        "spans_kept": 37,
        "duplicate_spans": 1,
        "spans_quarantined": 1,
        "records_quarantined": 2,
        "orphan_spans": 0,
        "spans_outside_runs": 0,  # reading builds no run: neither counted
        "runs": 0,
    }
    assert [q.position for q in two.log.quarantine] == ["line 3", "line 25", "line 38 span 2"]
    assert [q.spans for q in two.log.quarantine] == [0, 0, 1]


def test_missing_path_and_empty_folder_are_user_errors(tmp_path: Path):
    with pytest.raises(InputError, match="no such file"):
        read_traces([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no input"):
        read_traces([tmp_path / "empty"])


def test_sniffing_by_content_not_name(tmp_path: Path):
    import io

    assert sniff(io.BufferedReader(io.BytesIO(line(ROOT).encode()))) == "jsonl"
    pretty = json.dumps(json.loads(line(ROOT)), indent=2).encode()
    assert sniff(io.BufferedReader(io.BytesIO(pretty))) == "otlp-json"
    assert sniff(io.BufferedReader(io.BytesIO(b'{"spans": []}'))) == "json"
    assert sniff(io.BufferedReader(io.BytesIO(b"PAR1...."))) == "parquet"
    assert sniff(io.BufferedReader(io.BytesIO(b"   \n"))) == "empty"
    assert sniff(io.BufferedReader(io.BytesIO(b"a,b,c\n1,2,3\n"))) == "unknown"


def test_a_document_that_opens_on_its_resource_spans_line_is_no_json_lines(tmp_path: Path):
    # `{"resourceSpans": [` on the first line, one resource per line after: one document,
    # whose lines alone are not JSON (read as lines, every line would be quarantined)
    resources = [json.loads(line(ROOT, CHILD))["resourceSpans"][0] for _ in range(2)]
    resources[1]["scopeSpans"][0]["spans"] = [ORPHAN]
    doc = tmp_path / "doc.json"
    body = ",\n".join(json.dumps(r) for r in resources)
    doc.write_text('{"resourceSpans": [\n' + body + "\n]}\n")
    assert sniff(doc.open("rb")) == "otlp-json"
    ingested = read_traces([doc])
    assert (ingested.log.spans_read, ingested.log.spans_kept) == (3, 3)
    assert ingested.log.quarantine == []
    # near misses, still JSON lines: a first line cut short (quarantined, the next kept) and
    # a file whose one line is cut at its end
    cut = tmp_path / "cut.jsonl"
    cut.write_text(line(ROOT)[:40] + "\n" + line(CHILD) + "\n")
    assert sniff(cut.open("rb")) == "jsonl"
    log = read_traces([cut]).log
    assert (log.spans_kept, [q.position for q in log.quarantine]) == (1, ["line 1"])
    end = tmp_path / "end.jsonl"
    end.write_text(line(ROOT, CHILD)[:-5])
    assert sniff(end.open("rb")) == "jsonl"


def test_dataset_round_trip_reads_the_same_spans_and_accounting(dump: Path, tmp_path: Path):
    ingested = read_traces([dump])
    out = tmp_path / "ds"
    ingest_partitioned([dump], out, tool_version="test", jobs=1)
    spans, log = read_dataset(out)
    assert spans.equals(ingested.spans)
    assert (log.spans_read, log.spans_kept, log.duplicates) == (5, 3, 2)
    again = read_traces([out])
    assert again.spans.equals(ingested.spans)
    assert again.log.balanced()
    other = tmp_path / "other"  # a folder that holds something else is never written into
    other.mkdir()
    (other / "notes.txt").write_text("x", encoding="utf-8")
    with pytest.raises(InputError, match="neither an agenttrace dataset nor an empty folder"):
        ingest_partitioned([dump], other, tool_version="test", jobs=1)


def test_warnings_of_partitions_are_ordered_and_their_counts_added_up():
    from analyzer.ingest.accounting import QuarantineEntry, merge_warnings

    def entry(position: str, reason: str, spans: int) -> QuarantineEntry:
        return QuarantineEntry("f.json", position, reason, "", spans)

    merged = merge_warnings(
        [
            entry("file", "2 spans record a call another span already records", 2),
            entry("line 10", "ends 5 ns before it starts (clock skew); kept as read", 1),
            entry("line 7", "ends 5 ns before it starts (clock skew); kept as read", 1),
            entry("file", "1,200 more spans end before they start", 1200),
            entry("file", "the file changed while it was read", 0),  # counts nothing: kept
            entry("file", "1 spans record a call another span already records", 1),
            entry("file", "3 more spans end before they start", 3),
            entry("file", "9 spans of another count", 4),  # near miss: its text is not its count
        ]
    )
    assert [(e.position, e.reason, e.spans) for e in merged] == [
        ("file", "the file changed while it was read", 0),
        ("file", "9 spans of another count", 4),
        ("line 7", "ends 5 ns before it starts (clock skew); kept as read", 1),
        ("line 10", "ends 5 ns before it starts (clock skew); kept as read", 1),
        ("file", "1,203 more spans end before they start", 1203),
        ("file", "3 spans record a call another span already records", 3),
    ]
