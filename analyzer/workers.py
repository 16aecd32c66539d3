"""The worker processes of a command: each with its share of the CPUs, started early when the
command will need them (`start_pool`), dying with the command, and no process with threads of a
BLAS library it never calls.

This module imports neither polars nor pyarrow: polars reads ``POLARS_MAX_THREADS`` once, when
it is imported, so a worker sets it before its first import of polars.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor


def default_jobs() -> int:
    """The CPUs this process may run on (its affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def process_pool(jobs: int) -> ProcessPoolExecutor:
    """A pool of `jobs` worker processes, each computing with its share of the CPUs
    (`share_cpus`). Spawned: a fresh interpreter per worker (forking a process running polars
    threads can hang). (multiprocessing is imported here, by the commands that start one.)"""
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


def start_pool(jobs: int, preload: str) -> ProcessPoolExecutor:
    """`process_pool` with its workers started now, each importing module `preload` (the
    engine: polars, Arrow, the native reader) while the caller goes on with its own imports.

    A command that will read a big input calls it first thing, so that the workers' imports
    run beside the command's instead of after them. The caller hands the pool to the engine,
    and shuts it down when it went unused.
    """
    pool = process_pool(jobs)
    for _ in range(jobs):
        pool.submit(importlib.import_module, preload)
    return pool


def quiet_blas() -> None:
    """No OpenBLAS threads in this process and the workers it starts, unless the user set
    ``OPENBLAS_NUM_THREADS``: agenttrace calls no BLAS routine, but numpy's OpenBLAS (numpy comes
    with pyarrow and polars) starts a thread per CPU when it is imported, and they spin.

    Effective before numpy's first import only (the command line calls it first thing, a
    worker in `share_cpus`).
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


#: The settings of polars' and Arrow's jemalloc in a worker, set before it imports them: the
#: memory freed by one partition is kept for the next instead of handed back to the system and
#: faulted in again, as a worker analyzes partition after partition of about the same size
#: (Arrow allocating in its jemalloc: `share_cpus`).
WORKER_ALLOCATORS = {
    "_RJEM_MALLOC_CONF": "dirty_decay_ms:30000,muzzy_decay_ms:30000",
    "JE_ARROW_MALLOC_CONF": "dirty_decay_ms:-1,muzzy_decay_ms:-1",
}


def share_cpus(threads: int, parent: int | None = None) -> None:
    """Make polars and Arrow compute with `threads` threads in this process (the CPUs shared
    out among the pool's workers) instead of one thread per CPU each, in their allocators'
    `WORKER_ALLOCATORS` settings (Arrow in its jemalloc unless ``ARROW_DEFAULT_MEMORY_POOL``
    chooses), and start no OpenBLAS threads (`quiet_blas`).

    Called first in a new worker (a pool's ``initializer``), before its first import of polars
    (which reads ``POLARS_MAX_THREADS`` once). With `parent` (the pool's process id), the
    worker dies with it (`die_with_parent`).
    """
    if parent is not None:
        die_with_parent(parent)
    quiet_blas()
    os.environ["POLARS_MAX_THREADS"] = str(threads)
    for name, value in WORKER_ALLOCATORS.items():  # after polars' own defaults: these win
        os.environ[name] = ",".join(filter(None, (os.environ.get(name), value)))
    import pyarrow as pa

    pa.set_cpu_count(threads)
    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        with contextlib.suppress(NotImplementedError):  # a pyarrow built without jemalloc
            pa.set_memory_pool(pa.jemalloc_memory_pool())
