"""No agenttrace process runs OpenBLAS threads (`analyzer.workers.quiet_blas`): the command
line and each pool worker, with the user's own setting kept. Workers start before the command's
own imports when it will read a big input (`analyzer.workers.start_pool`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_traces" / "kyc" / "traces-0001.jsonl"


def openblas_threads() -> int | None:
    """The threads of the OpenBLAS that numpy loaded in this process (None: numpy has another
    BLAS)."""
    import ctypes

    import numpy  # noqa: F401  (loads its BLAS)

    for line in Path("/proc/self/maps").read_text(encoding="utf-8").splitlines():
        fields = line.split()
        if len(fields) == 6 and "openblas" in Path(fields[5]).name:
            lib = ctypes.CDLL(fields[5])
            for name in (
                "scipy_openblas_get_num_threads64_",
                "openblas_get_num_threads64_",
                "openblas_get_num_threads",
            ):
                if hasattr(lib, name):
                    return int(getattr(lib, name)())
    return None


_COMMAND_LINE = f"""
from click.testing import CliRunner
from analyzer.cli import main
from test_workers import openblas_threads
result = CliRunner().invoke(main, ["report", {str(SAMPLE)!r}, "--format", "json", "-j", "1"])
assert result.exit_code == 0, result.output
print(openblas_threads())
"""


def _fresh_python(
    code: str, blas_setting: str | None = None, polars_threads: int | None = None
) -> int | None:
    """The number `code` prints last (None: None), run in a fresh process with the user's
    OpenBLAS setting `blas_setting` (None: none) and `polars_threads` polars threads (None:
    polars' default)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if blas_setting is not None:
        env["OPENBLAS_NUM_THREADS"] = blas_setting
    if polars_threads is not None:
        env["POLARS_MAX_THREADS"] = str(polars_threads)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "tests"), env.get("PYTHONPATH")]))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()[-1]
    return None if out == "None" else int(out)


@pytest.fixture(scope="module")
def blas_default() -> int:
    """What numpy alone starts in a fresh process: a thread per CPU (what the tests below
    would see if `quiet_blas` did nothing)."""
    threads = _fresh_python("from test_workers import openblas_threads; print(openblas_threads())")
    if threads is None:
        pytest.skip("numpy uses a BLAS other than OpenBLAS here")
    if threads < 2:
        pytest.skip("one CPU: OpenBLAS starts no thread of its own anyway")
    return threads


def test_the_command_line_starts_no_blas_threads(blas_default: int) -> None:
    assert _fresh_python(_COMMAND_LINE) == 1


def test_the_users_blas_setting_is_kept(blas_default: int) -> None:
    assert _fresh_python(_COMMAND_LINE, blas_setting="2") == 2


def test_pool_workers_start_no_blas_threads(blas_default: int) -> None:
    from analyzer.engine import _pool  # not at the top: `_fresh_python` imports this module

    with _pool(2) as pool:
        assert set(pool.map(_worker_blas_threads, range(4))) == {1}


def _worker_blas_threads(_: int) -> int | None:
    return openblas_threads()


def _worker_arrow_pool(_: int) -> str:
    import pyarrow as pa

    return pa.default_memory_pool().backend_name


@pytest.mark.parametrize("chosen", [None, "system"])
def test_pool_workers_allocate_in_arrows_jemalloc_unless_the_user_chose(monkeypatch, chosen):
    import pyarrow as pa

    from analyzer.engine import _pool

    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:
        pytest.skip("this pyarrow is built without jemalloc")
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    if chosen is not None:
        monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", chosen)
    with _pool(2) as pool:
        assert set(pool.map(_worker_arrow_pool, range(2))) == {chosen or "jemalloc"}


# --- workers started before the command's imports -------------------------------------------


def test_the_size_of_the_input_is_estimated_without_polars_or_arrow() -> None:
    # what lets `report` start its workers before it imports them itself
    code = (
        "import sys\n"
        "from analyzer.ingest.files import estimate_bytes\n"
        "from analyzer.workers import default_jobs, start_pool\n"
        f"assert estimate_bytes([{str(SAMPLE)!r}]) > 0 and default_jobs() >= 1\n"
        "print(sorted({'polars', 'pyarrow', 'numpy'} & set(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_no_json_schema_library_is_imported_until_a_users_file_or_a_schema_is_read() -> None:
    # jsonschema and referencing took 30-40 ms of each process's start: a pool's workers and a
    # `report` with the bundled pack and prices never import them (the tests check the bundled
    # files against their schemas: test_the_bundled_pack_and_prices_follow_their_schemas)
    code = (
        "import sys\n"
        "import analyzer.cli, analyzer.engine, analyzer.render\n"
        "from analyzer.pack import load_default_pack, load_packs\n"
        "from analyzer.pricing import load_prices\n"
        "load_default_pack(), load_prices()\n"
        "before = sorted({'jsonschema', 'referencing'} & set(sys.modules))\n"
        f"load_packs([{str(ROOT / 'rules' / 'default.yaml')!r}])\n"
        "print(before, sorted({'jsonschema', 'referencing'} & set(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[] ['jsonschema', 'referencing']"


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list:
    """The pools `analyzer.workers.start_pool` started, with every input counted as big."""
    from analyzer import workers
    from analyzer.ingest import files

    pools: list = []
    start = workers.start_pool

    def recording(jobs: int, preload: str):
        pools.append(start(jobs, preload))
        return pools[-1]

    monkeypatch.setattr(workers, "start_pool", recording)
    monkeypatch.setattr(files, "AUTO_MIN_BYTES", 1)
    return pools


def _report(*args: str) -> tuple[int, str]:
    from click.testing import CliRunner

    from analyzer.cli import main

    result = CliRunner().invoke(main, ["report", *args, "--format", "json"])
    return result.exit_code, result.output


def _gone(pool) -> bool:
    """Whether the pool was shut down (its workers exit as it lets them go)."""
    return pool._shutdown_thread


def test_report_of_a_big_input_starts_its_workers_first_and_gets_the_same_summary(started):
    sample = str(SAMPLE.parent)
    code, output = _report(sample, "-j", "2")
    assert code == 0
    (pool,) = started
    assert _gone(pool)
    assert _report(sample, "-j", "1") == (0, output)  # no pool: one process
    assert len(started) == 1
    assert _report(sample, "--partitions", "0", "-j", "2") == (0, output)  # in memory: no pool
    assert len(started) == 1


def test_a_pool_started_for_nothing_is_shut_down(started, tmp_path: Path) -> None:
    code, _ = _report(str(SAMPLE), "-j", "2", "--rules", str(tmp_path / "missing.yaml"))
    assert code == 2  # the bad pack, reported as always
    (pool,) = started
    assert _gone(pool)


def test_no_workers_are_started_early_for_a_dataset_or_a_missing_path(started, tmp_path) -> None:
    from analyzer.ingest.files import DATASET_MANIFEST

    dataset = tmp_path / "ds"
    dataset.mkdir()
    (dataset / DATASET_MANIFEST).write_text("{}", encoding="utf-8")
    _report(str(dataset), "-j", "2")
    code, _ = _report(str(tmp_path / "missing.jsonl"), "-j", "2")
    assert code == 2 and started == []
