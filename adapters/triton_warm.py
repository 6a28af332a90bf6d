"""Compile a cell's Triton kernels into the cache without launching them (builder processes).

For each bound launch of one call, every configuration its autotuner will try (after the
autotuner's own pruning; only the shipped pick where its key has one) is compiled
through Triton's warm-up path (``run(..., warmup=True)``, what ``JITFunction.warmup``
calls): the same arguments, grid and meta-parameters the launch uses, so the
specialisation (dtypes, 16-byte alignment, integer values) and hence the cache key are
those of the measuring worker's compile.
Nothing is launched and nothing is timed: the autotuner's benchmarks stay in the cell's
``prepare``, where they find every configuration already compiled.

A configuration that fails to compile is left out (the autotuner will count it as
failed, as it would have anyway); compiles of one cell run on a few threads, since
Triton hands the slow part to ptxas, a process of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from adapters.triton_autotune import tuning_key

log = logging.getLogger(__name__)

# Compiles of one cell at once (each builder process; ptxas runs as a process of its own).
COMPILE_THREADS = 4


def _compile_jobs(launch: Any) -> list[Callable[[], Any]]:
    """One zero-argument compile per configuration the launch may run."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import KernelInterface

    kernel, args, grid, meta = launch.kernel, launch.args, launch.grid, dict(launch.meta)
    if isinstance(kernel, Autotuner):
        if isinstance(kernel.fn, Autotuner):
            return []  # nested autotuners: not a shape apex_kernels uses; prepare builds it
        configs = kernel.configs
        chosen = kernel.cache.get(tuning_key(kernel, args, meta)) if len(configs) > 1 else None
        if chosen is not None:  # chosen already (a shipped pick): the launch compiles only that one
            configs = [chosen]
        elif len(configs) > 1:  # Autotuner.run prunes only then, with these keyword arguments
            kernel.nargs = dict(zip(kernel.arg_names, args, strict=False))
            try:
                configs = kernel.prune_configs({"grid": grid, "warmup": False, **meta})
            finally:
                kernel.nargs = None
        return [partial(kernel.fn.run, *args, grid=grid, warmup=True, **{**meta, **config.all_kwargs()})
                for config in configs]
    if isinstance(kernel, KernelInterface):
        return [partial(kernel.run, *args, grid=grid, warmup=True, **meta)]
    return []


def compile_launches(launches: Iterable[Any]) -> tuple[int, int]:
    """Compile every configuration of ``launches`` into Triton's cache; (compiled, failed)."""
    jobs = [job for launch in launches for job in _compile_jobs(launch)]
    if not jobs:
        return 0, 0
    failed = 0
    with ThreadPoolExecutor(max_workers=min(COMPILE_THREADS, len(jobs)),
                            thread_name_prefix="apex-bench-triton-warm") as pool:
        for future in [pool.submit(job) for job in jobs]:
            try:
                future.result()
            except Exception as exc:  # e.g. a config ptxas rejects: the autotuner skips it too
                failed += 1
                log.debug("a Triton configuration did not compile ahead: %s", exc)
    return len(jobs) - failed, failed
