"""How agenttrace's processes compute: each worker of a pool with its share of the CPUs and
allocators that reuse the memory they free, polars' operations computed in the calling thread
where they are many and small (`polars_inline`), pools started before the command's own imports
(`start_pool`), and no process with threads of a BLAS library it never calls.

This module imports neither polars nor pyarrow: polars reads ``POLARS_MAX_THREADS`` once, when
it is imported, and the jemallocs of polars and Arrow read ``_RJEM_MALLOC_CONF`` and
``JE_ARROW_MALLOC_CONF`` at their first allocation, so these variables must be set before the
worker's first import of polars.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

_T = TypeVar("_T")

#: The allocator settings of polars (jemalloc) in a worker.
#:
#: - Freed pages are kept for reuse for 30 s instead of polars' default half a second. A worker
#:   analyzes one partition after another and each needs about the memory the last one freed;
#:   handing the pages back and faulting them in again cost half of the worker's page faults and
#:   a quarter of its system time (10 partitions of 1M spans: 0.93M -> 0.47M faults, 4.0-4.9 ->
#:   2.9-3.5 s system), for some 60 MB more resident per worker.
#: - Not in huge pages (jemalloc's ``thp:always``, tried and dropped). A worker's first
#:   partition faults in some 250 MB for polars; in 4 kB pages the kernel hands back pages the
#:   reading of the pieces just freed, while each huge page needs 2 MB of contiguous memory,
#:   which on this virtual machine was memory never touched before, zeroed at the cost of the
#:   host's faults too. With huge pages, ``report`` of 1M spans: first partitions 1.49-1.55 s
#:   with 0.5-0.6 s of system time (the others 0.90-0.98 s), ``clear_page_erms`` 29% of the
#:   samples meanwhile; without, 1.07 s with 0.1 s; five pairs, 7.82-8.23 -> 7.43-7.63 s,
#:   system time 2.0-2.2 -> 1.2-1.3 s. (An earlier measurement had found them faster: 37-40k
#:   faults and 0.28-0.57 s of system time against 94k and 0.56-0.87 s; perhaps the memory
#:   was warmer then.)
#:
#: Settings the user gave in ``_RJEM_MALLOC_CONF`` come after these (the last setting of an
#: option wins): ``thp:always`` brings huge pages back.
WORKER_MALLOC_CONF = "dirty_decay_ms:30000,muzzy_decay_ms:30000"
#: The settings of Arrow's jemalloc in a worker (``JE_ARROW_MALLOC_CONF``, the user's after
#: them): freed pages are never handed back. `finalize_spans` gathers each partition's columns
#: in it, about 75 MB; with Arrow's own settings the pages went back to the system as soon as
#: freed, and each partition faulted them in again (18.6k faults; none once they are kept).
#: A worker makes it pyarrow's default pool (`share_cpus`): in Arrow's own default (mimalloc)
#: the pieces' takes and the partitions' Arrow calls faulted in fresh pages again and again
#: (``report`` of 1M spans, four pairs: 7.71-7.85 -> 7.46-7.76 s, system time 2.4-2.5 ->
#: 2.0-2.2 s).
ARROW_WORKER_MALLOC_CONF = "dirty_decay_ms:-1,muzzy_decay_ms:-1"
#: glibc's malloc in a worker (the native JSON reader's column buffers, which grow by doubling;
#: Python's large objects): blocks under 32 MiB come from the heap, whose free top is handed
#: back to the system only beyond 1 GiB. With glibc's defaults each piece of 92 MB of JSON
#: lines faulted in 22-37k pages (buffers moved to fresh memory as they grew, then handed
#: back); with these 1.3-9.8k, and the piece is read in 0.33-0.35 s instead of 0.36-0.39.
C_HEAP_OPTIONS = {"M_MMAP_THRESHOLD": 32 << 20, "M_TRIM_THRESHOLD": 1 << 30}
_MALLOPT_PARAMETERS = {"M_TRIM_THRESHOLD": -1, "M_MMAP_THRESHOLD": -3}  # glibc's malloc.h
#: What ``import polars`` puts first in ``_RJEM_MALLOC_CONF`` (before the user's settings), in
#: the parent process too, whose environment a worker inherits.
_POLARS_MALLOC_CONF = "dirty_decay_ms:500,muzzy_decay_ms:1000"


def default_jobs() -> int:
    """The CPUs this process may run on (its affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def process_pool(jobs: int) -> ProcessPoolExecutor:
    """A pool of `jobs` worker processes, each computing with its share of the CPUs
    (`share_cpus`). Spawned: a fresh interpreter per worker (forking a process running polars
    threads can hang). (multiprocessing is imported here: 10 ms of a command that starts no
    process, such as a report of a dataset.)"""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(
        jobs,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=share_cpus,
        initargs=(max(1, default_jobs() // jobs), os.getpid()),
    )


def stop_workers(pool: ProcessPoolExecutor) -> None:
    """End the worker processes of `pool` now (SIGTERM), without waiting for their tasks: the
    command was stopped (SIGTERM, Ctrl-C) and what they compute will not be used."""
    processes = list((getattr(pool, "_processes", None) or {}).values())  # public in 3.14
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(Exception):
            process.terminate()


def die_with_parent(parent: int) -> None:
    """Have the kernel kill this process when its parent dies (Linux), and exit now if the
    parent is already gone: a worker never outlives a killed command."""
    import ctypes
    import signal

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)


def start_pool(jobs: int) -> ProcessPoolExecutor:
    """`process_pool` with its workers started now, each importing the partitioned path
    (polars, Arrow, the native reader) while the caller goes on with its own imports.

    A command that will read a big input calls it first thing: the workers' imports then run
    beside the command's instead of after them (``report`` of 1M spans, twelve pairs: medians
    8.90 -> 8.56 s). The caller hands the pool to `analyzer.partitioned.analyze_partitioned`,
    and shuts it down when it went unused.
    """
    pool = process_pool(jobs)
    for _ in range(jobs):
        pool.submit(_preload)
    return pool


def _preload() -> None:
    import analyzer.partitioned  # noqa: F401


def quiet_blas() -> None:
    """No OpenBLAS threads in this process and the workers it starts, unless the user set
    ``OPENBLAS_NUM_THREADS``: agenttrace calls no BLAS routine, but numpy's OpenBLAS (numpy comes
    with pyarrow and polars) starts a thread per CPU when it is imported, and they spin.

    Measured on two cores: ``import numpy`` takes 0.16 s of CPU with them, 0.07 s without; a
    ``report`` of 1M spans with ``-j 2`` (three processes), ten pairs of runs: 0.3 s less user
    CPU and 0.17 s less wall at the median, faster in eight pairs. Effective before numpy's
    first import only (the command line calls it first thing, a worker in `share_cpus`).
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def share_cpus(threads: int, parent: int | None = None) -> None:
    """Make polars and Arrow compute with `threads` threads in this process (the CPUs shared
    out among the pool's workers) instead of one thread per CPU each, keep the memory freed by
    polars, Arrow and C code for reuse (`WORKER_MALLOC_CONF`, `ARROW_WORKER_MALLOC_CONF` with
    Arrow's jemalloc as pyarrow's default pool where it is built in, `C_HEAP_OPTIONS`), and
    start no OpenBLAS threads (`quiet_blas`).

    Called first in a new worker (a pool's ``initializer``); a worker whose main module has
    already imported polars keeps polars' defaults. With `parent` (the pool's process id), the
    worker dies with it (`die_with_parent`).
    """
    if parent is not None:
        die_with_parent(parent)
    quiet_blas()
    os.environ["POLARS_MAX_THREADS"] = str(threads)
    user = os.environ.get("_RJEM_MALLOC_CONF", "").removeprefix(_POLARS_MALLOC_CONF).strip(",")
    os.environ["_RJEM_MALLOC_CONF"] = ",".join(filter(None, (WORKER_MALLOC_CONF, user)))
    user = os.environ.get("JE_ARROW_MALLOC_CONF", "")
    os.environ["JE_ARROW_MALLOC_CONF"] = ",".join(filter(None, (ARROW_WORKER_MALLOC_CONF, user)))
    keep_c_heap()
    import pyarrow as pa

    pa.set_cpu_count(threads)
    arrow_jemalloc()


def arrow_jemalloc() -> None:
    """Make Arrow's jemalloc pyarrow's default memory pool in this process, where it is built
    in (`share_cpus` in a worker, the command line for what it computes itself).

    pyarrow's own default, mimalloc, hands the pages of a large block back to the system as soon
    as it is freed and faults in fresh ones for the next: the command line merging the runs of
    the partitions of 1M spans in order (``report --out``) took 0.98 s, and 0.32 s in jemalloc.
    """
    import pyarrow as pa

    with contextlib.suppress(NotImplementedError):  # a pyarrow built without jemalloc
        pa.set_memory_pool(pa.jemalloc_memory_pool())


def polars_inline(function: Callable[[], _T]) -> _T:
    """``function()`` (its value, or the exception it raised), called from inside a polars
    streaming query, as the Python function of its plan: polars then computes each of its
    operations in the calling thread alone.

    Called from an ordinary thread, polars hands every operation (an eager filter, a join, a
    query) to its thread pool and waits for it, however small the data: a thread woken and the
    caller put to sleep each time. Inside the Python function of a streaming query, polars runs
    its operations on a pool of the calling thread alone (so that the function never blocks
    polars' pool). Worth it where the operations are many and small, or polars has one thread
    anyway; a query big enough to share out loses its other threads.

    Measured here: 6,000 eager filters of a 100-row frame, 0.70 s and 14k context switches
    against 0.14 s and 36; a partition of 100k spans (one thread), 0.86-1.03 s against
    0.74-0.79 s; one of 2k spans, 0.17-0.22 s against 0.075 s. (polars 2.1, which also leaves
    the thread computing alone after some queries nested in the function: a thread that
    computes more afterwards calls this from a thread of its own, `in_own_thread`. A polars
    that hands the operations over anyway gives the same results, as slowly as before.)
    """
    import polars as pl

    outcome: dict[str, Any] = {}

    def call(frame: pl.DataFrame) -> pl.DataFrame:
        try:
            outcome["value"] = function()
        except BaseException as error:  # raised again below, out of polars' hands
            outcome["error"] = error
        return frame

    pl.LazyFrame({"_": [0]}).map_batches(call).collect(engine="streaming")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def in_own_thread(function: Callable[[], _T]) -> _T:
    """`polars_inline` of ``function``, from a thread of its own (what polars leaves of the way
    it computed dies with that thread)."""
    with ThreadPoolExecutor(1, thread_name_prefix="agenttrace-inline") as thread:
        return thread.submit(polars_inline, function).result()


def computes_inline(function: Callable[..., _T]) -> Callable[..., _T]:
    """`function`, called through `polars_inline` where polars computes with one thread (a
    pool worker's share of two CPUs: `share_cpus`): for the functions a pool's workers run."""

    @functools.wraps(function)
    def inline(*args: Any, **kwargs: Any) -> _T:
        import polars as pl

        if pl.thread_pool_size() > 1:
            return function(*args, **kwargs)
        return polars_inline(lambda: function(*args, **kwargs))

    return inline


def keep_c_heap() -> bool:
    """Apply `C_HEAP_OPTIONS` to this process's glibc malloc; False where the C library has no
    ``mallopt`` or refuses them (not glibc)."""
    import ctypes

    mallopt = _libc_function("mallopt", ctypes.c_int, ctypes.c_int)
    if mallopt is None:
        return False
    return all(
        mallopt(_MALLOPT_PARAMETERS[name], value) == 1 for name, value in C_HEAP_OPTIONS.items()
    )


def release_c_heap() -> None:
    """Hand the free memory of glibc's heap back to the system (``malloc_trim``), which
    `keep_c_heap` keeps. A worker calls it before its first partition: the partitions allocate
    mostly in polars' and Arrow's allocators, and the heap the reading of the pieces grew,
    kept, added some 70 MB to a worker's peak at 1M spans. (Called before every partition, it
    also handed back what the next partition would reuse: 11-16k page faults a partition
    instead of 3-8k.) Nothing where the C library is not glibc."""
    import ctypes

    trim = _libc_function("malloc_trim", ctypes.c_size_t)
    if trim is not None:
        trim(0)


def _libc_function(name: str, *argtypes: type):
    """The function `name` of this process's C library, taking `argtypes` and returning a C int;
    None where there is none."""
    import ctypes

    try:
        function = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None
    function.argtypes = list(argtypes)
    function.restype = ctypes.c_int
    return function
