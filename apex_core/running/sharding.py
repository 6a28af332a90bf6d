"""Shard a run's cells over its workers: one worker per GPU, each free worker takes the next cell.

A *slot* is one place cells run: the one worker of a plain run, or, with ``--devices``,
a worker pinned to one card. Each slot takes cells from one shared queue in plan order,
passing over cells whose builds are not finished while a ready one waits (see
``apex_core.running.prebuild``), and runs them one at a time, so cells on one GPU never overlap;
several GPUs run in parallel, one thread per slot driving its worker process. The
results are kept in plan order whatever order they finish in, and each is stamped with
its card and with the time it waited for a worker.

A slot whose worker cannot start (the process fails, or its GPU fails the worker's
self-test) hands its cell back to the queue; after ``MAX_START_FAILURES`` such failures
in a row the GPU is taken out of the rotation and the report says why. Cells left when
every GPU is out become ``error`` rows naming the reason.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from apex_core.plan import PlannedCell
from apex_core.results import CellResult, DeviceInfo, DeviceUse
from apex_core.running.threads import DrivingThread
from apex_core.running.workers import WorkerStartError, kill_and_join

# Failed worker starts in a row after which a GPU leaves the rotation.
MAX_START_FAILURES = 2
# How often the run's main thread wakes while slots work (Ctrl-C is handled there).
JOIN_POLL_S = 0.1

CellCallback = Callable[[int, int, PlannedCell, CellResult | None], None]


@attrs.define(eq=False)
class Slot:
    """Where a run's cells run: a worker pinned to ``device`` (None: the plain one worker), and while
    the run lasts its worker pool (None when cells run inline) and probes, what it ran, whether it
    is retired."""

    device: DeviceInfo | None
    env: dict[str, str] = attrs.field(factory=dict)
    pool: Any = None
    probes: Any = None
    cells: int = 0
    start_failures: int = 0
    retired: str = ""

    @property
    def label(self) -> str:
        return self.device.label if self.device is not None else "worker"

    def use(self) -> DeviceUse | None:
        return DeviceUse(self.device, self.cells, self.retired) if self.device is not None else None

    def start_failed(self, exc: WorkerStartError) -> bool:
        """Count a failed worker start; True when the slot leaves the rotation because of it."""
        self.start_failures += 1
        if self.start_failures < MAX_START_FAILURES:
            return False
        self.retired = (f"taken out of the rotation after {self.start_failures} failed worker starts "
                        f"in a row; the last: {exc}")
        return True


class CellBook:
    """A run's cells: the queue free slots take from, and the results, kept in plan order."""

    def __init__(self, cells: Sequence[PlannedCell], on_cell: CellCallback | None = None) -> None:
        self.cells = tuple(cells)
        self._pending = collections.deque(range(len(self.cells)))
        self._results: dict[int, CellResult] = {}
        self._lock = threading.Lock()
        self._on_cell: CellCallback = on_cell or (lambda *_args: None)
        self.started = time.perf_counter()
        self.stopping = threading.Event()
        # a free slot passes over a cell this says is not ready yet, while another one is
        self.defer: Callable[[int], bool] = lambda _index: False
        # what each slot does before it takes its first cell (start its worker, wait until
        # nothing else measures the device)
        self.before_first: Callable[[Slot], None] = lambda _slot: None

    def take(self) -> int | None:
        """The index of the next cell to run, announced to the callback; None when none is left.

        The first queued cell that ``defer`` does not hold back (a cell whose compile caches
        a builder has still to fill), or the first queued cell when every one is held back.
        """
        with self._lock:
            if self.stopping.is_set() or not self._pending:
                return None
            index = next((i for i in self._pending if not self.defer(i)), self._pending[0])
            self._pending.remove(index)
            self._on_cell(index, len(self.cells), self.cells[index], None)
            return index

    def put_back(self, index: int) -> None:
        """Return a cell its slot could not run; it goes first to the next free slot."""
        with self._lock:
            self._pending.appendleft(index)

    def finish(self, index: int, result: CellResult) -> None:
        """Keep a cell's result and tell the callback (one at a time: report writers are not threadsafe)."""
        with self._lock:
            if self.stopping.is_set():
                return  # an interrupted run keeps only what finished before the interruption
            self._results[index] = result
            self._on_cell(index, len(self.cells), self.cells[index], result)

    def drain(self) -> list[int]:
        """Take every cell still queued (to record why it did not run)."""
        with self._lock:
            left = list(self._pending)
            self._pending.clear()
            return left

    def results(self) -> tuple[CellResult, ...]:
        with self._lock:
            return tuple(self._results[i] for i in sorted(self._results))


RunCell = Callable[[Slot, PlannedCell], CellResult]


def serve(slot: Slot, book: CellBook, run_cell: RunCell) -> None:
    """Run cells from ``book`` on one slot until none is left, the run stops or the slot retires."""
    book.before_first(slot)
    while not book.stopping.is_set():
        index = book.take()
        if index is None:
            return
        waited = time.perf_counter() - book.started
        try:
            result = run_cell(slot, book.cells[index])
        except WorkerStartError as exc:
            book.put_back(index)
            if slot.start_failed(exc):
                return
            continue
        slot.start_failures = 0
        slot.cells += 1
        book.finish(index, attrs.evolve(result, device_info=slot.device, wait_time_s=waited))


def run_slots(slots: Sequence[Slot], book: CellBook, run_cell: RunCell) -> None:
    """Serve ``book`` with every slot: in this thread for one slot, one thread per slot otherwise.

    Ctrl-C (or SIGTERM) reaches this thread: the slots are stopped, their workers killed,
    and the interruption goes on up with the results finished so far kept in ``book``.
    """
    if len(slots) == 1:
        serve(slots[0], book, run_cell)
        return
    failures: list[BaseException] = []

    def guarded(slot: Slot) -> None:
        try:
            serve(slot, book, run_cell)
        except BaseException as exc:  # reported by the main thread, unless the run is stopping
            if not book.stopping.is_set():
                failures.append(exc)
                book.stopping.set()

    # not threading.Thread: its join, interrupted by the Ctrl-C, can mark a running slot ended
    threads = [DrivingThread(guarded, slot, name=f"apex-bench-{slot.label}") for slot in slots]
    try:
        for thread in threads:  # a Ctrl-C among the starts stops those already started
            thread.start()
        while any(thread.is_alive() for thread in threads):
            for thread in threads:
                thread.join(JOIN_POLL_S)
    except BaseException:
        stop(slots, book, threads)
        raise
    if failures:
        stop(slots, book, threads)
        raise failures[0]


def stop(slots: Sequence[Slot], book: CellBook, threads: Sequence[DrivingThread]) -> None:
    """Stop every slot: no new cells, each running worker killed (with its helpers), and no new worker
    started (a slot between two cells would otherwise start one the run's teardown does not wait for)."""
    book.stopping.set()
    kill_and_join([slot.pool for slot in slots], threads, for_good=True)


def retired_reason(slots: Sequence[Slot]) -> str:
    """Why cells were left: every slot's retirement, one line."""
    return "not run: every GPU of the run was taken out of the rotation (" + "; ".join(
        f"{s.label} {s.device.name if s.device else ''}: {s.retired}".replace("  ", " ")
        for s in slots if s.retired) + ")"
