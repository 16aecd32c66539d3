"""Rule results kept at ingest (analyzer.materialized): a report that reads them equals the
report that runs the checks, also with a time window, superseded traces and another case
class; they are read only for the same packs and prices, and never kept for plugin rules."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from split_dumps import assert_same_analysis, generate

import analyzer.checks
import analyzer.materialized
from analyzer.checks.required_tools import RequiredTools
from analyzer.cli import main
from analyzer.engine import analyze_paths, ingest_partitioned
from analyzer.errors import InputError
from analyzer.ingest.files import DATASET_MANIFEST
from analyzer.materialized import results_key
from analyzer.metrics.summary import build_summary
from analyzer.pack import load_default_pack, load_packs, pack_from_mapping
from analyzer.prebuilt import prebuilt_dataset
from analyzer.pricing import load_prices

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
OUTPUTS = ("summary.json", "findings.jsonl", "runs.parquet", "steps.parquet", "quarantine.jsonl")
#: The runs of the generated dump start from 2026-01-01T00:00:00Z, over about 130 seconds.
T0 = 1_767_225_600 * 10**9


def _packs():
    return (load_default_pack(), *load_packs([ROOT / "rules" / "kyc.yaml"]))


@pytest.fixture(scope="module")
def halves(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A generated dump cut in two files (runs in flight straddle them), ingested whole into
    one dataset and file by file into another (whose second parts supersede traces), both
    with the results of `_packs()` kept."""
    folder = tmp_path_factory.mktemp("halves")
    whole = folder / "whole.jsonl"
    _, traces, _ = generate(whole, 4000, seed=23, concurrency=32, kyc_share=0.3)
    lines = whole.read_text(encoding="utf-8").splitlines()
    whole.unlink()
    files = [folder / "a.jsonl", folder / "b.jsonl"]
    half = len(lines) // 2
    for path, chunk in zip(files, (lines[:half], lines[half:]), strict=True):
        path.write_text("\n".join(chunk) + "\n", encoding="utf-8")
    packs = _packs()
    datasets = {"whole": folder / "whole-ds", "by-file": folder / "by-file-ds"}
    ingest_partitioned(
        files, datasets["whole"], tool_version="t", jobs=1, partitions=2, packs=packs
    )
    for path in files:
        ingest_partitioned(
            [path], datasets["by-file"], tool_version="t", jobs=1, partitions=2, packs=packs
        )
    return {"files": files, "traces": traces, "datasets": datasets}


@pytest.fixture
def no_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the calls of `checks.evaluate` on some run (the checks) in this process (the
    merge also evaluates no run, for the schemas of empty tables)."""
    calls: list[int] = []
    original = analyzer.checks.evaluate

    def counted(packs, runset, **kwargs):
        if runset.runs.height:
            calls.append(runset.runs.height)
        return original(packs, runset, **kwargs)

    monkeypatch.setattr(analyzer.checks, "evaluate", counted)
    return calls


def _manifest(dataset: Path) -> dict:
    return json.loads((dataset / DATASET_MANIFEST).read_text(encoding="utf-8"))


@pytest.mark.parametrize("kind", ["whole", "by-file"])
@pytest.mark.parametrize(
    ("since", "until"),
    [(None, None), (T0 + 60 * 10**9, None), (None, T0 + 90 * 10**9), (T0 + 30 * 10**9,) * 2],
)
def test_a_report_from_kept_results_equals_running_the_checks(
    halves: dict, no_checks: list[int], kind: str, since: int | None, until: int | None
) -> None:
    dataset = halves["datasets"][kind]
    parts = _manifest(dataset)["parts"]
    assert all("results" in p["runs"] for p in parts)
    if kind == "by-file":
        assert sum(p["runs"]["supersedes"] for p in parts) > 0
        # only the first ingest's parts hold superseded traces: the last ones are taken whole
        prebuilt = prebuilt_dataset([dataset])
        assert prebuilt is not None
        assert [bool(p.superseded) for p in prebuilt] == [True, True, False, False]
    packs = _packs()
    reference = analyze_paths(halves["files"], packs=packs, since_ns=since, until_ns=until)
    checked = len(no_checks)
    result = analyze_paths([dataset], jobs=1, packs=packs, since_ns=since, until_ns=until)
    assert len(no_checks) == checked  # no check ran: every part's results were read
    assert_same_analysis(reference, result)
    runs = reference.runs.runs.height
    expected = {(None, None): halves["traces"], (T0 + 30 * 10**9,) * 2: 0}
    assert runs == expected.get((since, until), runs)
    assert runs > 0 or since == until


def test_a_window_reads_only_the_parts_with_runs_started_in_it(
    halves: dict, tmp_path: Path, no_checks: list[int]
) -> None:
    dataset = tmp_path / "ds"
    shutil.copytree(halves["datasets"]["by-file"], dataset)
    parts = _manifest(dataset)["parts"]
    first, later = parts[:2], parts[2:]  # the two ingests, two parts each
    since = max(p["runs"]["started_ns"][1] for p in first) + 1
    assert max(p["runs"]["started_ns"][1] for p in later) >= since
    for part in first:  # runs none of which is in the window: must not be read
        shutil.rmtree(dataset / part["runs"]["path"])
    packs = _packs()
    for window in (since, max(p["runs"]["started_ns"][1] for p in later) + 1):
        reference = analyze_paths(halves["files"], packs=packs, since_ns=window)
        checked = len(no_checks)
        result = analyze_paths([dataset], jobs=1, packs=packs, since_ns=window)
        assert len(no_checks) == checked
        assert_same_analysis(reference, result)
    assert reference.runs.runs.height == 0  # the last window is after every run
    with pytest.raises(InputError, match="unreadable"):
        analyze_paths([dataset], jobs=1, packs=packs)  # without a window, all are read


def test_parts_whose_runs_all_start_in_the_window_are_taken_as_kept(
    halves: dict, no_checks: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = halves["datasets"]["whole"]
    starts = [p["runs"]["started_ns"] for p in _manifest(dataset)["parts"]]
    restricted: list[str] = []
    original = analyzer.materialized._restricted

    def counted(folder, *args):
        restricted.append(str(folder))
        return original(folder, *args)

    monkeypatch.setattr(analyzer.materialized, "_restricted", counted)
    packs = _packs()
    first, last = min(s[0] for s in starts), max(s[1] for s in starts)
    for since, until, cut in ((first, last + 1, 0), (first + 1, last + 1, 1), (first, last, 1)):
        reference = analyze_paths(halves["files"], packs=packs, since_ns=since, until_ns=until)
        checked = len(no_checks)
        restricted.clear()
        result = analyze_paths([dataset], jobs=1, packs=packs, since_ns=since, until_ns=until)
        assert len(no_checks) == checked
        assert len(restricted) == cut  # only the part holding the first (or last) run is cut
        assert_same_analysis(reference, result)


def test_another_case_class_is_summarized_from_the_kept_tables(
    halves: dict, no_checks: list[int]
) -> None:
    dataset = halves["datasets"]["whole"]
    packs = _packs()
    reference = analyze_paths(halves["files"], packs=packs)
    checked = len(no_checks)
    result = analyze_paths([dataset], jobs=1, packs=packs, case_class="app.case_id")
    assert len(no_checks) == checked
    assert result.facts is not None and result.facts.case_class == "app.case_id"
    expected = build_summary(reference, case_class="app.case_id")
    assert build_summary(result, case_class="app.case_id") == expected
    assert len(expected["metrics"]["breakdowns"]["case_class"]) > 1  # one group per case id


def test_other_packs_or_prices_run_the_checks(halves: dict, no_checks: list[int]) -> None:
    dataset = halves["datasets"]["whole"]
    parts = len(_manifest(dataset)["parts"])
    default = (load_default_pack(),)
    reference = analyze_paths(halves["files"], packs=default)
    before = len(no_checks)
    assert_same_analysis(reference, analyze_paths([dataset], jobs=1, packs=default))
    assert len(no_checks) - before == parts
    table = load_prices()
    cheaper = type(table)(
        currency=table.currency,
        as_of=table.as_of,
        models=table.models.with_columns(pl.col("input").truediv(2)),
        source="half price",
    )
    packs = _packs()
    reference = analyze_paths(halves["files"], packs=packs, prices=cheaper)
    before = len(no_checks)
    result = analyze_paths([dataset], jobs=1, packs=packs, prices=cheaper)
    assert len(no_checks) - before == parts
    assert_same_analysis(reference, result)


def test_check_errors_are_kept_with_the_results(
    halves: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packs = _packs()
    files = halves["files"][:1]
    coverage = analyze_paths(files, packs=packs).evaluation.coverage
    victim = coverage.filter(pl.col("rule_id") == "kyc-required-checks")["run_id"].sort()[3]
    original = RequiredTools.check

    def crashing(self, ctx):
        if ctx.runs.filter(pl.col("run_id") == victim).height:
            raise RuntimeError("crashed on purpose")
        return original(self, ctx)

    monkeypatch.setattr(RequiredTools, "check", crashing)
    reference = analyze_paths(files, packs=packs)
    dataset = tmp_path / "ds"
    ingest_partitioned(files, dataset, tool_version="t", jobs=1, partitions=2, packs=packs)
    monkeypatch.setattr(RequiredTools, "check", original)
    # the checks no longer crash: the errors a report shows are those kept at ingest
    result = analyze_paths([dataset], jobs=1, packs=packs)
    assert {e.run_id for e in result.evaluation.errors} == {victim}
    assert "crashed on purpose" in result.evaluation.errors[0].error
    assert_same_analysis(reference, result)
    windowed = analyze_paths([dataset], jobs=1, packs=packs, since_ns=T0)
    assert windowed.evaluation.errors == result.evaluation.errors


def test_cli_ingest_then_report_gives_the_outputs_of_the_spans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    kyc = str(ROOT / "rules" / "kyc.yaml")
    monkeypatch.chdir(tmp_path)  # the dataset named by a relative path
    for rules in ([], ["--rules", kyc]):
        dataset = Path(f"ds{len(rules)}")
        result = runner.invoke(main, ["ingest", str(SAMPLES), "--out", str(dataset), *rules])
        assert result.exit_code == 0, result.output
        names = "kyc-review" if rules else "default"
        assert f"rule results kept for the packs {names}, with the prices of <built-in" in (
            result.output
        )
        assert all("results" in p["runs"] for p in _manifest(dataset)["parts"])
        outputs = {}
        for name, extra in (("checked", ["--partitions", "0"]), ("kept", ["-j", "2"])):
            out = tmp_path / f"{name}{len(rules)}"
            args = ["report", str(dataset), "--out", str(out), *rules, *extra]
            result = runner.invoke(main, args)
            assert result.exit_code == 0, result.output
            outputs[name] = {f: (out / f).read_bytes() for f in OUTPUTS}
        assert outputs["kept"] == outputs["checked"]


def test_plugin_rules_are_not_kept(tmp_path: Path) -> None:
    pack = tmp_path / "plugin.yaml"
    pack.write_text(
        "pack: p\nrules:\n  - {id: short, type: 'plugin_example:MaxLength', max_chars: 4}\n",
        encoding="utf-8",
    )
    dataset = tmp_path / "ds"
    args = ["ingest", str(SAMPLES), "--out", str(dataset), "--rules", str(pack)]
    result = CliRunner().invoke(main, [*args, "--allow-plugins"])
    assert result.exit_code == 0, result.output
    assert "rule results not kept (a plugin rule's code is not known): p" in result.output
    assert not any("results" in p["runs"] for p in _manifest(dataset)["parts"])
    assert results_key(load_packs([pack], allow_plugins=True), load_prices()) is None


def test_a_damaged_kept_file_is_an_input_error_naming_it(halves: dict, tmp_path: Path) -> None:
    dataset = tmp_path / "ds"
    ingest_partitioned(halves["files"][:1], dataset, tool_version="t", jobs=1, packs=_packs())
    facts = dataset / "runs" / "part-00000" / "results" / "facts-runs.parquet"
    facts.write_bytes(facts.read_bytes()[:50])
    with pytest.raises(InputError, match=r"part-00000/results/facts-runs\.parquet: unreadable"):
        analyze_paths([dataset], jobs=1, packs=_packs())
    result = dataset / "runs" / "part-00000" / "results" / "result.json"
    result.write_text('{"errors": []}', encoding="utf-8")
    with pytest.raises(InputError, match=r"part-00000/results/result\.json: unreadable"):
        analyze_paths([dataset], jobs=1, packs=_packs())


def _key(pack: dict, prices=None) -> str | None:
    return results_key((pack_from_mapping(pack),), prices or load_prices())


RULE = {"id": "r", "type": "required_tools", "tools": ["screen"], "severity": "high"}


def test_the_key_changes_with_what_the_results_depend_on(tmp_path: Path) -> None:
    base = _key({"pack": "p", "rules": [RULE]})
    assert base == _key({"pack": "p", "rules": [dict(RULE)]})
    changed = [
        {"pack": "q", "rules": [RULE]},
        {"pack": "p", "rules": [{**RULE, "tools": ["screen", "lookup"]}]},
        {"pack": "p", "rules": [{**RULE, "severity": "low"}]},
        {"pack": "p", "rules": [{**RULE, "when": {"agent": "kyc"}}]},
        {"pack": "p", "rules": [RULE, {**RULE, "id": "r2"}]},
    ]
    keys = {_key(pack) for pack in changed}
    assert base not in keys and len(keys) == len(changed)
    table = load_prices()
    dearer = type(table)(
        currency=table.currency,
        as_of=table.as_of,
        models=table.models.with_columns(pl.col("output").mul(2)),
        source=table.source,
    )
    assert _key({"pack": "p", "rules": [RULE]}, dearer) != base
    # an output schema's documents, also those it refers to, are part of its rule's identity
    (tmp_path / "verdict.json").write_text(
        json.dumps({"type": "object", "properties": {"v": {"$ref": "part.json"}}}),
        encoding="utf-8",
    )
    (tmp_path / "part.json").write_text('{"type": "string"}', encoding="utf-8")
    schema_pack = {
        "pack": "p",
        "rules": [{"id": "s", "type": "output_schema", "schema": "verdict.json"}],
    }
    source = tmp_path / "pack.yaml"
    first = results_key((pack_from_mapping(schema_pack, source),), load_prices())
    assert first == results_key((pack_from_mapping(schema_pack, source),), load_prices())
    (tmp_path / "part.json").write_text('{"type": "integer"}', encoding="utf-8")
    assert results_key((pack_from_mapping(schema_pack, source),), load_prices()) != first


def test_the_key_is_the_same_in_another_process() -> None:
    code = (
        "from analyzer.materialized import results_key\n"
        "from analyzer.pack import load_default_pack, load_packs\n"
        "from analyzer.pricing import load_prices\n"
        f"packs = (load_default_pack(), *load_packs([{str(ROOT / 'rules' / 'kyc.yaml')!r}]))\n"
        "print(results_key(packs, load_prices()))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # another order of sets and dicts of str
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    out = run.stdout.strip()
    assert out == results_key(_packs(), load_prices())


@pytest.mark.parametrize("since", [None, T0 + 60 * 10**9])
def test_kept_facts_are_read_from_the_parts_files(halves: dict, since: int | None) -> None:
    """A report from kept results reads each part's facts file when the summary needs it:
    the summary is the one of the spans."""
    dataset = halves["datasets"]["by-file"]
    packs = _packs()
    reference = build_summary(analyze_paths(halves["files"], packs=packs, since_ns=since))
    result = analyze_paths([dataset], jobs=1, packs=packs, since_ns=since)
    assert result.facts is not None and len(result.facts.parts) == 4
    assert all(p.frame is None for p in result.facts.parts)  # files, read when used
    kept = [p for p in result.facts.parts if str(p.path).startswith(str(dataset))]
    # the last ingest's parts are read from the dataset; the others were restricted (their
    # traces superseded, or cut by the window) and written to the spill
    assert len(kept) == (2 if since is None else 0)
    assert build_summary(result) == reference


def test_a_report_from_kept_results_does_not_import_pandas(tmp_path: Path) -> None:
    # pyarrow's Schema.empty_table imports pandas where it is installed (the spark extra
    # brings it): a third of a second added to the one second a report of a dataset takes.
    pytest.importorskip("pandas")
    dataset = tmp_path / "ds"
    result = CliRunner().invoke(main, ["ingest", str(SAMPLES), "--out", str(dataset)])
    assert result.exit_code == 0, result.output
    code = (
        "import sys\n"
        "from analyzer.cli import main\n"
        f"main(['report', {str(dataset)!r}, '-j', '2'], standalone_mode=False)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pandas'))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == "[]"
