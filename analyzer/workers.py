"""How agenttrace's processes compute: each worker of a pool with its share of the CPUs, and
no process with threads of a BLAS library it never calls.

This module imports neither polars nor pyarrow: polars reads ``POLARS_MAX_THREADS`` once, when
it is imported, and its allocator reads ``_RJEM_MALLOC_CONF`` at its first allocation, so both
variables must be set before the worker's first import of polars.
"""

from __future__ import annotations

import os

#: The allocator settings of polars (jemalloc) in a worker: freed pages are kept for reuse for
#: 30 s instead of polars' default half a second. A worker analyzes one partition after another
#: and each needs about the memory the last one freed; handing the pages back and faulting them
#: in again cost half of the worker's page faults and a quarter of its system time (10 partitions
#: of 1M spans: 0.93M -> 0.47M faults, 4.0-4.9 -> 2.9-3.5 s system), for some 60 MB more
#: resident per worker. Settings the user gave in ``_RJEM_MALLOC_CONF`` come after these (the
#: last setting of an option wins).
WORKER_MALLOC_CONF = "dirty_decay_ms:30000,muzzy_decay_ms:30000"
#: What ``import polars`` puts first in ``_RJEM_MALLOC_CONF`` (before the user's settings), in
#: the parent process too, whose environment a worker inherits.
_POLARS_MALLOC_CONF = "dirty_decay_ms:500,muzzy_decay_ms:1000"


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


def share_cpus(threads: int) -> None:
    """Make polars and Arrow compute with `threads` threads in this process (the CPUs shared
    out among the pool's workers) instead of one thread per CPU each, keep polars' freed memory
    for reuse (`WORKER_MALLOC_CONF`), and start no OpenBLAS threads (`quiet_blas`).

    Called first in a new worker (a pool's ``initializer``); a worker whose main module has
    already imported polars keeps polars' defaults.
    """
    quiet_blas()
    os.environ["POLARS_MAX_THREADS"] = str(threads)
    user = os.environ.get("_RJEM_MALLOC_CONF", "").removeprefix(_POLARS_MALLOC_CONF).strip(",")
    os.environ["_RJEM_MALLOC_CONF"] = ",".join(filter(None, (WORKER_MALLOC_CONF, user)))
    import pyarrow as pa

    pa.set_cpu_count(threads)
