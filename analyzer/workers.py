"""The start of each worker process of a pool: compute with its share of the CPUs.

This module imports neither polars nor pyarrow: polars reads ``POLARS_MAX_THREADS`` once, when
it is imported, so the variable must be set before the worker's first import of it.
"""

from __future__ import annotations

import os


def share_cpus(threads: int) -> None:
    """Make polars and Arrow compute with `threads` threads in this process (the CPUs shared
    out among the pool's workers) instead of one thread per CPU each.

    Called first in a new worker (a pool's ``initializer``); a worker whose main module has
    already imported polars keeps polars' default.
    """
    os.environ["POLARS_MAX_THREADS"] = str(threads)
    import pyarrow as pa

    pa.set_cpu_count(threads)
