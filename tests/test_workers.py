"""No agenttrace process runs OpenBLAS threads (`analyzer.workers.quiet_blas`): the command
line and each pool worker, with the user's own setting kept. A pool worker reuses the memory
Arrow's jemalloc and glibc's malloc freed instead of faulting in fresh pages
(`analyzer.workers.share_cpus`), and computes polars' operations in its own thread
(`analyzer.workers.polars_inline`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from analyzer.workers import computes_inline

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
    from analyzer.partitioned import _pool  # not at the top: `_fresh_python` imports this module

    with _pool(2) as pool:
        assert set(pool.map(_worker_blas_threads, range(4))) == {1}


def _worker_blas_threads(_: int) -> int | None:
    return openblas_threads()


def arrow_refaults(_: int = 0, default_pool: bool = False) -> int:
    """Page faults of a second 64 MiB buffer of Arrow's jemalloc (or of pyarrow's default pool:
    `default_pool`), the first one freed (the gather of `finalize_spans`, partition after
    partition); -1 without jemalloc."""
    import numpy as np
    import pyarrow as pa

    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:
        return -1
    if default_pool:
        pool = pa.default_memory_pool()

    def once() -> None:
        buffer = pa.allocate_buffer(64 << 20, memory_pool=pool)
        np.frombuffer(buffer, dtype=np.uint8)[::4096] = 1  # every page written

    once()
    return _faults_of(once)


def c_heap_refaults(_: int = 0) -> int:
    """Page faults of a second C buffer grown by doubling to 16 MiB with glibc's ``realloc``,
    the first one freed (as the native JSON reader's columns, piece after piece)."""
    _grow_and_free_c_buffer()
    return _faults_of(_grow_and_free_c_buffer)


def _grow_and_free_c_buffer() -> None:
    import ctypes

    libc = ctypes.CDLL(None)
    libc.realloc.restype = ctypes.c_void_p
    libc.realloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    pointer, size = None, 4096
    while size <= 16 << 20:
        pointer = libc.realloc(pointer, size)
        ctypes.memset(pointer, 1, size)
        size *= 2
    libc.free(pointer)


def c_heap_released(_: int = 0) -> int:
    """Resident bytes handed back by `release_c_heap` after a C buffer grew and was freed."""
    from analyzer.workers import release_c_heap

    _grow_and_free_c_buffer()
    before = _resident_bytes()
    release_c_heap()
    return before - _resident_bytes()


def _resident_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _faults_of(work) -> int:
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    work()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@pytest.fixture(scope="module")
def default_refaults() -> tuple[int, int]:
    """What the two allocations above fault in a fresh process with the allocators' defaults
    (what the workers would see if `share_cpus` did nothing)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("page faults counted as on Linux only")
    arrow = _fresh_python("from test_workers import arrow_refaults; print(arrow_refaults())")
    heap = _fresh_python("from test_workers import c_heap_refaults; print(c_heap_refaults())")
    assert arrow is not None and heap is not None
    return arrow, heap


def test_pool_workers_reuse_the_memory_arrow_freed(default_refaults: tuple[int, int]) -> None:
    from analyzer.partitioned import _pool

    if default_refaults[0] < 0:
        pytest.skip("this pyarrow has no jemalloc")
    assert default_refaults[0] > 8000  # about every one of the 16,384 pages, by default
    with _pool(2) as pool:
        assert max(pool.map(arrow_refaults, range(2))) < 200


def default_pool_refaults(_: int = 0) -> tuple[str, int]:
    """The backend of pyarrow's default pool, and `arrow_refaults` in it (what every Arrow call
    without a pool allocates from: the pieces' takes, the partitions' compute)."""
    import pyarrow as pa

    return pa.default_memory_pool().backend_name, arrow_refaults(default_pool=True)


def test_pool_workers_compute_arrow_in_the_pool_that_keeps_its_pages(
    default_refaults: tuple[int, int],
) -> None:
    from analyzer.partitioned import _pool

    if arrow_refaults() < 0:
        pytest.skip("this pyarrow has no jemalloc")
    with _pool(2) as pool:
        found = list(pool.map(default_pool_refaults, range(2)))
    assert {b for b, _ in found} == {"jemalloc"}
    assert max(f for _, f in found) < 200


_COMMAND_LINE_POOL = f"""
import pyarrow as pa
from click.testing import CliRunner
from analyzer.cli import main
result = CliRunner().invoke(main, ["report", {str(SAMPLE)!r}, "--format", "json", "-j", "1"])
assert result.exit_code == 0, result.output
print(int(pa.default_memory_pool().backend_name == "jemalloc"))
"""


def test_the_command_line_computes_arrow_in_the_pool_that_keeps_its_pages() -> None:
    """`report` merges the partitions' tables itself (``--out``): in Arrow's jemalloc, as the
    workers compute (`analyzer.workers.arrow_jemalloc`), not in pyarrow's default mimalloc."""
    if arrow_refaults() < 0:
        pytest.skip("this pyarrow has no jemalloc")
    assert _fresh_python(_COMMAND_LINE_POOL) == 1


def polars_huge_pages(_: int = 0) -> int:
    """kB of this process's memory in transparent huge pages after polars wrote 128 MiB."""
    import polars as pl

    values = pl.int_range(0, 1 << 24, dtype=pl.Int64, eager=True) * 2
    assert values.len() == 1 << 24
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith("AnonHugePages:"):
            return int(line.split()[1])
    return 0


def test_pool_workers_take_no_huge_pages_for_polars() -> None:
    """Huge pages are given here only on request (``madvise``); polars' jemalloc in a worker
    does not ask (`WORKER_MALLOC_CONF`): on this machine each came from memory never touched
    before, and the first partitions spent half a second of system time zeroing them."""
    from analyzer.partitioned import _pool

    mode = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if not mode.is_file() or "[madvise]" not in mode.read_text():
        pytest.skip("transparent huge pages are not given on request only here")
    with _pool(2) as pool:
        assert set(pool.map(polars_huge_pages, range(2))) == {0}


def filter_switches(count: int = 200) -> int:
    """This thread's voluntary context switches while polars filters a small frame `count`
    times (each eager operation a query of its own)."""
    import resource

    import polars as pl

    frame = pl.DataFrame({"a": list(range(100))})
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
    for _ in range(count):
        assert frame.filter(pl.col("a") > 49).height == 50
    return resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - before


@computes_inline
def inline_filter_switches(count: int = 200) -> tuple[int, int]:
    """polars' threads in this process, and `filter_switches` through `computes_inline`."""
    import polars as pl

    return pl.thread_pool_size(), filter_switches(count)


def _inline(code: str, threads: int) -> int | None:
    """`_fresh_python` of `code` with polars' `threads`, the functions above imported."""
    imports = "from analyzer.workers import in_own_thread, polars_inline\n"
    imports += "from test_workers import filter_switches, inline_filter_switches\n"
    return _fresh_python(imports + code, polars_threads=threads)


@pytest.fixture(scope="module")
def linux() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("context switches counted per thread on Linux only")


_VALUE_OR_ERROR = """
class Boom(Exception):
    pass

def boom():
    raise Boom("from inside")

assert polars_inline(lambda: 42) == 42
assert polars_inline(lambda: polars_inline(lambda: "nested")) == "nested"
try:
    polars_inline(boom)
except Boom as err:
    print(len(str(err)))
"""


def test_polars_inline_gives_the_value_or_raises_the_error() -> None:
    for threads in (1, 2):
        assert _inline(_VALUE_OR_ERROR, threads) == len("from inside")


def test_polars_inline_computes_polars_operations_in_the_calling_thread(linux) -> None:
    for threads in (1, 2):
        # handed to the pool and waited for: a sleep (or more) per operation
        assert _inline("print(filter_switches())", threads) >= 200
        assert _inline("print(polars_inline(filter_switches))", threads) < 20


def test_in_own_thread_computes_inline_and_leaves_the_caller_as_it_was(linux) -> None:
    nested = "inner = in_own_thread(lambda: polars_inline(filter_switches))\n"
    nested += "assert inner < 20, inner\n"
    nested += "print(filter_switches())"
    assert _inline(nested, threads=1) >= 200


def test_computes_inline_leaves_polars_its_threads_where_it_has_several(linux) -> None:
    assert _inline("print(inline_filter_switches()[1])", threads=1) < 20
    assert _inline("print(inline_filter_switches()[1])", threads=2) >= 200


def test_pool_workers_compute_polars_operations_in_their_own_thread(linux) -> None:
    from analyzer.partitioned import _pool

    with _pool(2) as pool:
        for threads, switches in pool.map(inline_filter_switches, [200, 200]):
            assert switches < 20 if threads == 1 else switches >= 200


@pytest.fixture(scope="module")
def glibc() -> None:
    """Skip where `keep_c_heap` cannot apply its options (the C library is not glibc)."""
    if not _fresh_python("from analyzer.workers import keep_c_heap; print(int(keep_c_heap()))"):
        pytest.skip("the C library is not glibc")


def test_pool_workers_reuse_the_memory_glibc_freed(
    default_refaults: tuple[int, int], glibc: None
) -> None:
    from analyzer.partitioned import _pool

    assert default_refaults[1] > 1000  # the last doublings land in fresh pages, by default
    with _pool(2) as pool:
        assert max(pool.map(c_heap_refaults, range(2))) < 100


def test_a_worker_hands_back_the_heap_it_kept_when_told(default_refaults, glibc: None) -> None:
    """`release_c_heap` (before a worker's first partition) gives back what `keep_c_heap` kept:
    the 16 MiB of the freed buffer (16,773,120-16,777,216 bytes here)."""
    from analyzer.partitioned import _pool

    with _pool(2) as pool:
        assert min(pool.map(c_heap_released, range(2))) > 12 << 20


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
        "import analyzer.cli, analyzer.partitioned, analyzer.report\n"
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

    def recording(jobs: int):
        pools.append(start(jobs))
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
