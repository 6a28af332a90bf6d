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
from apex_core.running.workers import WorkerStartError, kill_and_join

# Failed worker starts in a row after which a GPU leaves the rotation.
MAX_START_FAILURES = 2
# How often the run's main thread wakes while slots work (Ctrl-C is handled there).
JOIN_POLL_S = 0.1

CellCallback = Callable[[int, int, PlannedCell, CellResult | None], None]


@attrs.frozen
class Slot:
    """Where a run's cells can run: a worker pinned to ``device`` (None: the plain one worker)."""

    device: DeviceInfo | None
    env: dict[str, str] = attrs.field(factory=dict)

    @property
    def label(self) -> str:
        return self.device.label if self.device is not None else "worker"


class SlotState:
    """A slot while the run lasts: its worker pool and probes, what it ran, whether it is retired."""

    def __init__(self, slot: Slot, pool: Any, probes: Any) -> None:
        self.slot = slot
        self.pool = pool  # a WorkerPool, or None when cells run inline
        self.probes = probes
        self.cells = 0
        self.start_failures = 0
        self.retired = ""

    def use(self) -> DeviceUse | None:
        if self.slot.device is None:
            return None
        return DeviceUse(self.slot.device, self.cells, self.retired)

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
        self._on_cell = on_cell
        self.started = time.perf_counter()
        self.stopping = threading.Event()
        # a free slot passes over a cell this says is not ready yet, while another one is
        self.defer: Callable[[int], bool] = lambda _index: False
        # what each slot does before it takes its first cell (start its worker, wait until
        # nothing else measures the device)
        self.before_first: Callable[[SlotState], None] = lambda _state: None

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
            if self._on_cell:
                self._on_cell(index, len(self.cells), self.cells[index], None)
            return index

    def put_back(self, index: int) -> None:
        """Return a cell its slot could not run; it goes first to the next free slot."""
        with self._lock:
            self._pending.appendleft(index)

    def waited(self) -> float:
        return time.perf_counter() - self.started

    def finish(self, index: int, result: CellResult) -> None:
        """Keep a cell's result and tell the callback (one at a time: report writers are not threadsafe)."""
        with self._lock:
            if self.stopping.is_set():
                return  # an interrupted run keeps only what finished before the interruption
            self._results[index] = result
            if self._on_cell:
                self._on_cell(index, len(self.cells), self.cells[index], result)

    def remaining(self) -> list[int]:
        with self._lock:
            return list(self._pending)

    def drain(self) -> list[int]:
        """Take every cell still queued (to record why it did not run)."""
        with self._lock:
            left = list(self._pending)
            self._pending.clear()
            return left

    def results(self) -> tuple[CellResult, ...]:
        with self._lock:
            return tuple(self._results[i] for i in sorted(self._results))


RunCell = Callable[[SlotState, PlannedCell], CellResult]


def serve(state: SlotState, book: CellBook, run_cell: RunCell) -> None:
    """Run cells from ``book`` on one slot until none is left, the run stops or the slot retires."""
    book.before_first(state)
    while not book.stopping.is_set():
        index = book.take()
        if index is None:
            return
        waited = book.waited()
        try:
            result = run_cell(state, book.cells[index])
        except WorkerStartError as exc:
            book.put_back(index)
            if state.start_failed(exc):
                return
            continue
        state.start_failures = 0
        state.cells += 1
        book.finish(index, attrs.evolve(result, device_info=state.slot.device, wait_time_s=waited))


def run_slots(states: Sequence[SlotState], book: CellBook, run_cell: RunCell) -> None:
    """Serve ``book`` with every slot: in this thread for one slot, one thread per slot otherwise.

    Ctrl-C (or SIGTERM) reaches this thread: the slots are stopped, their workers killed,
    and the interruption goes on up with the results finished so far kept in ``book``.
    """
    if len(states) == 1:
        serve(states[0], book, run_cell)
        return
    failures: list[BaseException] = []

    def guarded(state: SlotState) -> None:
        try:
            serve(state, book, run_cell)
        except BaseException as exc:  # reported by the main thread, unless the run is stopping
            if not book.stopping.is_set():
                failures.append(exc)
                book.stopping.set()

    threads = [threading.Thread(target=guarded, args=(state,), name=f"apex-bench-{state.slot.label}",
                                daemon=True) for state in states]
    for thread in threads:
        thread.start()
    try:
        while any(thread.is_alive() for thread in threads):
            for thread in threads:
                thread.join(JOIN_POLL_S)
    except BaseException:
        stop(states, book, threads)
        raise
    if failures:
        stop(states, book, threads)
        raise failures[0]


def stop(states: Sequence[SlotState], book: CellBook, threads: Sequence[threading.Thread]) -> None:
    """Stop every slot: no new cells, and each running worker killed (with its helpers)."""
    book.stopping.set()
    kill_and_join([state.pool for state in states], threads)


def retired_reason(states: Sequence[SlotState]) -> str:
    """Why cells were left: every slot's retirement, one line."""
    return "not run: every GPU of the run was taken out of the rotation (" + "; ".join(
        f"{s.slot.label} {s.slot.device.name if s.slot.device else ''}: {s.retired}".replace("  ", " ")
        for s in states if s.retired) + ")"
