"""Reading trace files of every supported format into the span table, with full accounting.

The names below are imported when first used: a caller of `analyzer.ingest.files` alone (the
command line, before it starts its workers) does not import polars and Arrow.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from analyzer.ingest.accounting import FileLog, IngestLog, QuarantineEntry
    from analyzer.ingest.dataset import read_dataset
    from analyzer.ingest.reader import Ingested, read_traces

__all__ = [
    "FileLog",
    "IngestLog",
    "Ingested",
    "QuarantineEntry",
    "read_dataset",
    "read_traces",
]

_MODULES = {
    "FileLog": "accounting",
    "IngestLog": "accounting",
    "QuarantineEntry": "accounting",
    "read_dataset": "dataset",
    "Ingested": "reader",
    "read_traces": "reader",
}


def __getattr__(name: str) -> Any:
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_MODULES[name]}"), name)
