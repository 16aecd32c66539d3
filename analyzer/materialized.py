"""Rule results computed at ingest and kept in the dataset, so that a report need not check again.

`agenttrace ingest` applies rule packs and a price table (by default those a report applies by
default) to each new part's prebuilt runs (`analyzer.prebuilt`) and keeps what the checks
gave next to them::

    runs/part-NNNNN/results/{runs,steps,findings,coverage}.arrow   per-run tables, in order
    runs/part-NNNNN/results/*.arrow.runs                           their rows per run
    runs/part-NNNNN/results/{facts-runs,unpriced,rates-*}.parquet  what a summary reads
    runs/part-NNNNN/results/result.json                            check errors, case class

The part's manifest entry records the results' *key*: a digest of all they depend on (each
rule's identity, the packs' names and tool definitions, the price table, the agenttrace build:
`analyzer.resources.code_digest`). A report whose packs and prices have the same key reads the
results instead of running the checks: as they are when it takes every run of the part (none
superseded, all started in its window) with the case class they were kept for; else (a window
cutting through the part, traces a later ingest superseded, another case class) the per-run
tables restricted to the runs it takes, and the summary facts computed again from them. Checks
judge each run on its own, so that is what the checks give on those runs. Any other report, and
any pack with a plugin rule (whose code is not known), runs the checks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
import pyarrow as pa

from analyzer.checks import CheckError, Evaluation
from analyzer.errors import InputError
from analyzer.ingest.accounting import IngestLog
from analyzer.ingest.reader import Ingested
from analyzer.resources import code_digest
from analyzer.runs import RunSet
from analyzer.spans import SPAN_SCHEMA, empty_table

if TYPE_CHECKING:
    from analyzer.checks.retries import RetryScan
    from analyzer.pack import Pack
    from analyzer.partition import PartialResult, PartitionOptions
    from analyzer.prebuilt import PrebuiltPart
    from analyzer.pricing import PriceTable

__all__ = ["keep_results", "kept_results", "read_as_kept", "results_key"]

_FOLDER = "results"
_TABLES = ("runs", "steps", "findings", "coverage")


def results_key(packs: Sequence[Pack], prices: PriceTable) -> str | None:
    """The digest of all that rule results depend on; None when some rule's is not known."""
    digest = hashlib.sha256(f"agenttrace {code_digest()}\n".encode())
    for pack in packs:
        digest.update(f"pack {pack.name!r}\n".encode())
        tools = json.dumps(pack.tools, sort_keys=True, default=str)
        digest.update(f"tools {tools}\n".encode())
        for rule in pack.rules:
            identity = rule.identity()
            if identity is None:
                return None
            digest.update(f"rule {identity}\n".encode())
    rows = json.dumps(prices.models.rows(), default=str)
    digest.update(f"prices {prices.currency} {prices.as_of} {rows}\n".encode())
    return digest.hexdigest()


def keep_results(
    runset: RunSet, retries: RetryScan, part_folder: Path, options: PartitionOptions
) -> dict[str, object] | None:
    """Check a part's prebuilt runs with `options`' packs and prices and keep the results in
    `part_folder`/results; their manifest entry (None: not kept, some rule is a plugin)."""
    from analyzer.partition import prebuilt_partial, spill_tables

    key = results_key(options.packs, options.prices) if options.packs else None
    if key is None or options.case_class is None:
        return None
    whole = dataclasses.replace(options, since_ns=None, until_ns=None)
    folder = part_folder / _FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    partial = prebuilt_partial(runset, retries, whole)
    partial = spill_tables(partial, str(folder / "part"), compression="zstd")
    facts, unpriced = partial.facts, partial.unpriced
    assert facts is not None and unpriced is not None
    facts.runs().write_parquet(folder / "facts-runs.parquet", statistics=False)
    for name, frame in (facts.rates or {}).items():
        frame.write_parquet(folder / f"rates-{name}.parquet", statistics=False)
    unpriced.write_parquet(folder / "unpriced.parquet", statistics=False)
    document = {
        "case_class": facts.case_class,
        "rates": sorted(facts.rates or {}),
        "errors": [dataclasses.asdict(e) for e in partial.errors],
    }
    (folder / "result.json").write_text(json.dumps(document, sort_keys=True), encoding="utf-8")
    return {"key": key, "path": _FOLDER, "case_class": facts.case_class}


def kept_results(part: PrebuiltPart, out: str, options: PartitionOptions) -> PartialResult | None:
    """The partial result of `part` analyzed with `options`, from the results kept at ingest,
    with its per-run tables at `out`.<table>.arrow as `partition.spill_tables` leaves them;
    None when the part has none for these packs and prices."""
    entry = part.results
    if not entry or not options.packs:
        return None
    if entry.get("key") != results_key(options.packs, options.prices):
        return None
    folder = Path(part.folder).absolute() / str(entry["path"])  # linked to from the spill
    document = _read_json(folder / "result.json")
    if not _as_kept(part, options):
        return _restricted(folder, document, part, out, options)
    from analyzer.metrics.facts import RunsPart, SummaryFacts
    from analyzer.partition import PartialResult

    tables = {}
    for name in _TABLES:
        for suffix in ("", ".runs"):
            os.symlink(folder / f"part.{name}.arrow{suffix}", f"{out}.{name}.arrow{suffix}")
        tables[name] = _schema_only(folder / f"part.{name}.arrow")
    rates = {name: _parquet(folder / f"rates-{name}.parquet") for name in document["rates"]}
    return PartialResult(
        **tables,
        errors=[CheckError(**e) for e in document["errors"]],
        unpriced=_parquet(folder / "unpriced.parquet"),
        facts=SummaryFacts(
            case_class=document["case_class"],
            parts=[RunsPart.file(str(folder / "facts-runs.parquet"))],
            rates=rates or None,
        ),
    )


def read_as_kept(parts: Sequence[PrebuiltPart], options: PartitionOptions) -> bool:
    """Whether every part has results for `options` that a report takes as they are (then
    there is little to compute: no reason to start other processes)."""
    if not options.packs:
        return False
    key = results_key(options.packs, options.prices)
    return all(p.results and p.results.get("key") == key and _as_kept(p, options) for p in parts)


def _as_kept(part: PrebuiltPart, options: PartitionOptions) -> bool:
    """Whether `part`'s kept results are taken as they are: all its runs (none superseded,
    all in the window), the same facts."""
    entry = part.results or {}
    return (
        part.all_start_in(options.since_ns, options.until_ns)
        and not part.superseded
        and entry.get("case_class") == options.case_class
    )


def _restricted(
    folder: Path, document: dict, part: PrebuiltPart, out: str, options: PartitionOptions
) -> PartialResult:
    """The kept results of the runs `options` and `part` take, their facts computed again."""
    from analyzer.partition import (
        empty_sources,
        empty_span_runs,
        partial_result,
        read_ipc_file,
        spill_facts,
        spill_tables,
    )
    from analyzer.pipeline import Analysis, started_in
    from analyzer.prebuilt import of_runs

    frames = {name: _arrow(folder / f"part.{name}.arrow", read_ipc_file) for name in _TABLES}
    runs = part.current(frames["runs"].filter(started_in(options.since_ns, options.until_ns)))
    ids = runs.select("run_id")
    taken = set(ids.get_column("run_id").to_list())
    errors = [CheckError(**e) for e in document["errors"] if e["run_id"] in taken]
    analysis = Analysis(
        ingested=Ingested(spans=empty_table(SPAN_SCHEMA), log=IngestLog(runs=runs.height)),
        runs=RunSet(
            runs=runs,
            steps=of_runs(frames["steps"], ids),
            sources=empty_sources(),
            span_runs=empty_span_runs(),
        ),
        packs=tuple(options.packs),
        evaluation=Evaluation(
            findings=of_runs(frames["findings"], ids),
            errors=errors,
            coverage=of_runs(frames["coverage"], ids),
        ),
        prices=options.prices,
    )
    partial = partial_result(analysis, options.case_class)
    return spill_facts(spill_tables(partial, out, tables=options.tables), out)


def _read_json(path: Path) -> dict:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise InputError(f"{path}: unreadable rule results: {err}") from err
    keys = {"case_class", "rates", "errors"}
    if not isinstance(document, dict) or not keys <= set(document):
        missing = ", ".join(sorted(keys - set(document) if isinstance(document, dict) else keys))
        raise InputError(f"{path}: unreadable rule results: {missing} missing")
    return document


def _parquet(path: Path) -> pl.DataFrame:
    return _arrow(path, pl.read_parquet)


def _arrow(path: Path, read) -> pl.DataFrame:
    try:
        return read(str(path))
    except (OSError, pa.ArrowException, pl.exceptions.PolarsError) as err:
        raise InputError(f"{path}: unreadable rule results: {err}") from err


def _schema_only(path: Path) -> pl.DataFrame:
    """An empty frame with the schema of the IPC file `path` (a spilled table's place)."""
    try:
        with pa.OSFile(str(path), "rb") as source:
            schema = pa.ipc.open_file(source).schema
    except (OSError, pa.ArrowException) as err:
        raise InputError(f"{path}: unreadable rule results: {err}") from err
    frame = pl.from_arrow(empty_table(schema))
    assert isinstance(frame, pl.DataFrame)
    return frame
