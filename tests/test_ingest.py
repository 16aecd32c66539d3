"""Reading a batch of files: format sniffing, decompression, de-duplication, accounting."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import zstandard

from analyzer.errors import InputError
from analyzer.ingest import read_dataset, read_traces, write_dataset
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


@pytest.mark.xfail(
    reason="sniffing peeks past the break on small files: salvage not yet done", strict=True
)
def test_truncated_gzip_keeps_what_was_read_before_the_break(tmp_path: Path):
    body = "".join(line(span(f"{i:016x}", start=i)) + "\n" for i in range(1, 2001)).encode()
    data = gzip.compress(body, mtime=0)
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    log = read_traces([path]).log
    assert 0 < log.spans_kept < 2000
    assert log.quarantine[-1].position == "end of readable data"
    assert log.balanced()


@pytest.mark.xfail(
    reason="bomb guard floor (64 MiB) above this test's payload; issue 7", strict=True
)
def test_decompression_bomb_is_refused(tmp_path: Path):
    path = tmp_path / "bomb.zst"
    path.write_bytes(zstandard.ZstdCompressor(level=1).compress(b" " * (80 << 20)))
    ingested = read_traces([path])
    assert ingested.spans.num_rows == 0
    assert "decompression bomb" in ingested.log.quarantine[0].reason


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


def test_dataset_round_trip_reads_the_same_spans_and_accounting(dump: Path, tmp_path: Path):
    ingested = read_traces([dump])
    out = tmp_path / "ds"
    write_dataset(ingested.spans, ingested.log, out, tool_version="test")
    spans, log = read_dataset(out)
    assert spans.equals(ingested.spans)
    assert (log.spans_read, log.spans_kept, log.duplicates) == (5, 3, 2)
    again = read_traces([out])
    assert again.spans.equals(ingested.spans)
    assert again.log.balanced()
    with pytest.raises(InputError, match="not an empty folder"):
        write_dataset(ingested.spans, ingested.log, out, tool_version="test")
