"""Build in parallel, measure alone: builder processes fill the compile caches of upcoming cells.

While a measuring worker times one cell, ``count`` builder processes walk the plan in
order and call ``Backend.warm_caches`` for the cells after it (only for backends with
that hook), so that when the worker reaches a cell its ``prepare`` finds the Triton
kernels and Inductor graphs in the caches (the same ``TRITON_CACHE_DIR`` and
``TORCHINDUCTOR_CACHE_DIR``). The hook runs none of the cell's kernels and autotunes
nothing: autotuning is measurement and stays with the worker, which still runs every
cell's whole pipeline alone on its GPU. Nothing in the timed path changes.

A builder is a worker process of its own (``WorkerPool``: own process group, killed
with its helpers, gone when the run dies), started at a lower CPU priority. Whatever a
builder does (raise, crash, hang past the cell's timeout, fail to start) the cell is
built by its worker as if no builder existed; its ``metadata.prebuild`` says what
happened and ``warm_time_s`` how long the builder spent. A worker that reaches a cell a
builder is still warming waits for that builder (at most until the builder's timeout
kills it): the builder started first, so waiting is never much slower than starting
over, and two processes compiling the same kernels would only slow each other down.
A free worker first takes a cell that is ready, though (no build, or its build done),
and comes back to the one being built only when none is: one torch.compile build of
ff-infer held a GPU idle for 29 s before this (docs/perf.md, 2026-11-27).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from apex_core.errors import describe_exception
from apex_core.measure.cell import CellSpec
from apex_core.results import CellResult
from apex_core.running.threads import DrivingThread
from apex_core.running.warming import FAILED, NOT_STARTED, WarmRequest, WarmResult
from apex_core.running.workers import WorkerPool, kill_and_join

log = logging.getLogger(__name__)

# Builders run at this niceness: compiling must not take the CPU from the cell being timed.
BUILDER_NICENESS = 10
# At most this many builders per measuring GPU by default, and at most half the host's cores
# (the other half is left to the measuring workers and to the compilers' own helper
# processes). Two GPUs empty the queue twice as fast: with four builders for both, a fresh
# two-GPU run's longest build (64 s) started only 27 s in, behind the builds of earlier cells
# (docs/perf.md, 2026-11-27).
DEFAULT_MAX_BUILDERS = 4

_PENDING, _RUNNING, _CLAIMED = "pending", "running", "claimed"


def default_build_workers(device: str, cpu_count: int | None = None, gpus: int = 1) -> int:
    """Builders of a run by default: none on the CPU (they would share the CPU being timed)."""
    if device != "cuda":
        return 0
    cores = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
    return max(0, min(DEFAULT_MAX_BUILDERS * max(1, gpus), cores // 2))


@attrs.frozen
class Prebuild:
    """What the builders did for one cell, as its worker found it."""

    result: WarmResult
    waited_s: float = 0.0  # how long the worker waited for a builder still warming it

    def stamp(self, cell: CellResult) -> CellResult:
        """The cell's result with ``warm_time_s`` and ``metadata.prebuild`` added."""
        record = {"state": self.result.state, "waited_s": round(self.waited_s, 3)}
        if self.result.reason:
            record["reason"] = self.result.reason
        warm = self.result.seconds if self.result.state != NOT_STARTED else None
        return attrs.evolve(cell, warm_time_s=warm, metadata={**cell.metadata, "prebuild": record})


class BuildAhead:
    """The builders of one run and the state of every cell they may warm.

    ``cells`` are the run's cells in plan order (the objects its slots are handed);
    ``warmable[i]`` says whether cell ``i`` has a backend with the hook; ``spec(i)``
    builds its request; ``envs`` are the environments builders start with (one per GPU,
    taken in turn: builders are shared by all the run's cards, like the caches). ``run_stopping``
    is the run's stop (``CellBook.stopping``): once set, a slot waiting for a build stops waiting.
    """

    def __init__(self, cells: Sequence[Any], warmable: Sequence[bool], spec: Callable[[int], CellSpec],
                 count: int, envs: Sequence[dict[str, str]], timeout_s: float, plugins: bytes = b"",
                 make_pool: Callable[..., Any] = WorkerPool,
                 run_stopping: threading.Event | None = None) -> None:
        self._index = {id(cell): i for i, cell in enumerate(cells)}  # slots hand over the cell object
        # no builders: no cell is anyone's to warm, and no cell's record changes
        self._state: dict[int, Any] = {i: _PENDING for i, ok in enumerate(warmable) if ok and count > 0}
        self._order = sorted(self._state)
        self._spec = spec
        self._timeout_s = timeout_s
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._run_stopping = run_stopping or threading.Event()
        self.pools = [make_pool(plugins, env=dict(envs[n % len(envs)]), niceness=BUILDER_NICENESS,
                                name=f"apex-bench-builder-{n}") for n in range(count if self._order else 0)]
        self._threads = [DrivingThread(self._serve, pool, name=f"apex-bench-builder-{n}")
                         for n, pool in enumerate(self.pools)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def _next(self) -> int | None:
        """The first cell in plan order no builder and no worker has taken; marked as running."""
        with self._changed:
            index = next((i for i in self._order if self._state[i] == _PENDING), None)
            if index is not None:
                self._state[index] = _RUNNING
            return index

    def _serve(self, pool: Any) -> None:
        """One builder's loop: warm the next cell until none is left or the run stops."""
        try:
            while not self._stopping.is_set():
                index = self._next()
                if index is None:
                    return
                try:
                    pool.ensure_started()
                except Exception as exc:  # WorkerStartError, or the process could not even be spawned
                    self._finish(index, _PENDING)  # back to the other builders, or to its worker
                    if not self._stopping.is_set():
                        log.warning("a builder process did not start (%s); its cells are built by their "
                                    "workers", describe_exception(exc))
                    return
                try:
                    result = pool.warm(WarmRequest(self._spec(index)), self._timeout_s)
                except Exception as exc:  # a bug here must not leave the cell's worker waiting
                    result = WarmResult(FAILED, reason=describe_exception(exc))
                log.debug("builder: cell %d %s in %.1f s %s", index, result.state, result.seconds,
                          result.reason)
                self._finish(index, result)
        finally:
            with contextlib.suppress(Exception):
                pool.close(graceful=not self._stopping.is_set())  # its GPU memory goes back now

    def _finish(self, index: int, outcome: Any) -> None:
        with self._changed:
            if self._state[index] != _CLAIMED:  # a cell its worker gave up on waiting for stays taken
                self._state[index] = outcome
            self._changed.notify_all()

    def building(self, index: int) -> bool:
        """True while a builder has still to finish cell ``index`` (queued for one, or warming it).

        A slot passes such a cell over while another is ready (``CellBook.defer``), so a GPU
        times cells that need no build, or whose build is done, instead of idling behind a
        long compile.
        """
        with self._changed:
            return self._state.get(index) in (_PENDING, _RUNNING) and not self._stopping.is_set() \
                and any(thread.is_alive() for thread in self._threads)

    def claim(self, cell: Any, wait: bool = True) -> Prebuild | None:
        """Take ``cell`` from the builders before its worker runs it; None when it is not warmable.

        A cell no builder has started is kept from them (``not_started``). With ``wait``,
        a cell a builder is warming is waited for (the builder's own timeout bounds it).
        """
        index = self._index.get(id(cell))
        started = time.perf_counter()
        with self._changed:
            if index is None or index not in self._state:
                return None
            # a Ctrl-C stops the run before close() stops the builders: the slot must not wait out
            # a build then, or the run's teardown would meet it still running
            while wait and self._state[index] == _RUNNING and not self._stopping.is_set() \
                    and not self._run_stopping.is_set() and any(thread.is_alive() for thread in self._threads):
                self._changed.wait(0.1)
            outcome = self._state[index]
            self._state[index] = _CLAIMED
        if not isinstance(outcome, WarmResult):  # pending, or still running (not waited for)
            outcome = WarmResult(NOT_STARTED, reason="the measuring worker reached the cell first")
        return Prebuild(outcome, time.perf_counter() - started)

    def close(self) -> None:
        """Stop the builders: no new cells, every builder process killed with its helpers.

        Called when the run ends or is interrupted: what a builder is still warming is of no
        use any more (the caches write each file whole, so a killed builder leaves none half
        written).
        """
        self._stopping.set()
        with self._changed:
            self._changed.notify_all()
        kill_and_join(self.pools, self._threads, for_good=True)
        for pool in self.pools:
            with contextlib.suppress(Exception):
                pool.close(graceful=False)
