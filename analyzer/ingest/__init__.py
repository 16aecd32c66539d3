"""Reading trace files of every supported format into the span table, with full accounting."""

from analyzer.ingest.accounting import FileLog, IngestLog, QuarantineEntry
from analyzer.ingest.dataset import read_dataset, write_dataset
from analyzer.ingest.reader import Ingested, read_traces

__all__ = [
    "FileLog",
    "IngestLog",
    "Ingested",
    "QuarantineEntry",
    "read_dataset",
    "read_traces",
    "write_dataset",
]
