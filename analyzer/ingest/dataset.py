"""The Parquet dataset written by `agenttrace ingest`, and reading it back without re-parsing."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from analyzer.errors import InputError
from analyzer.ingest.accounting import FileLog, IngestLog, QuarantineEntry
from analyzer.ingest.files import DATASET_MANIFEST
from analyzer.spans import SPAN_SCHEMA

__all__ = ["DATASET_FORMAT", "read_dataset", "write_dataset"]

DATASET_FORMAT = "agenttrace-dataset"
DATASET_VERSION = 1
_ROW_GROUP = 128 * 1024


def write_dataset(spans: pa.Table, log: IngestLog, out: Path, *, tool_version: str) -> Path:
    """Write `spans` and the accounting to a new dataset folder `out`; return the manifest path.

    The folder must not exist or be empty: a dataset is never overwritten.
    """
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"{out}: exists and is not an empty folder; give a new --out folder")
    (out / "spans").mkdir(parents=True, exist_ok=True)
    part = Path("spans") / "part-00000.parquet"
    pq.write_table(
        spans.cast(SPAN_SCHEMA),
        out / part,
        compression="zstd",
        row_group_size=_ROW_GROUP,
    )
    manifest = {
        "format": DATASET_FORMAT,
        "version": DATASET_VERSION,
        "agenttrace_version": tool_version,
        "parts": [{"path": part.as_posix(), "spans": spans.num_rows}],
        "orphan_spans": log.orphans,
        "files": [_file_dict(f) for f in log.files],
    }
    path = out / DATASET_MANIFEST
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    with (out / "quarantine.jsonl").open("w", encoding="utf-8") as fh:
        for entry in log.quarantine:
            fh.write(json.dumps(entry.as_dict(), sort_keys=True, ensure_ascii=False) + "\n")
    return path


def _file_dict(f: FileLog) -> dict[str, object]:
    data = dataclasses.asdict(f)
    data["quarantine"] = [q.as_dict() for q in f.quarantine]
    return data


def read_dataset(folder: Path) -> tuple[pa.Table, IngestLog]:
    """The span table of a dataset folder and the accounting recorded when it was ingested."""
    try:
        manifest = json.loads((folder / DATASET_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise InputError(f"{folder}: unreadable dataset manifest: {err}") from err
    if manifest.get("format") != DATASET_FORMAT:
        raise InputError(f"{folder / DATASET_MANIFEST}: not an agenttrace dataset manifest")
    tables = []
    for part in manifest.get("parts", []):
        try:
            table = pq.read_table(folder / part["path"], schema=SPAN_SCHEMA)
        except (OSError, pa.ArrowException) as err:
            raise InputError(f"{folder / part['path']}: unreadable dataset part: {err}") from err
        tables.append(table)
    log = IngestLog()
    for data in manifest.get("files", []):
        entries = [QuarantineEntry(**q) for q in data.pop("quarantine", [])]
        file_log = FileLog(**data, quarantine=entries)
        if not file_log.format.startswith("dataset:"):
            file_log.format = f"dataset:{file_log.format}"
        log.files.append(file_log)
    spans = pa.concat_tables(tables) if tables else SPAN_SCHEMA.empty_table()
    return spans, log
