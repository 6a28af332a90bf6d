"""Run probes and cells in a worker process that may crash or hang without taking the run down.

One worker at a time (timings need the device to themselves). A cell that kills
the worker is recorded as ``crashed``, one that outlives the timeout as
``timeout``; either way the worker is replaced and the next cell goes on. Probes
go to the same worker, under their own timeout: it is already started and has
every plugin loaded, so probing costs no process of its own, and a probe that
crashes or hangs costs a restart like a cell that does.

The worker lives in its own process group (``apex_core.running.worker_process``):
discarding it kills the group, so helper processes a backend started go with it,
and it kills its group itself when the run dies without ending it.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterable
from multiprocessing import resource_tracker
from typing import Any

import attrs

from apex_core.measure.cell import CellSpec
from apex_core.results import CellResult, Status
from apex_core.running import warming
from apex_core.running.probing import ERROR, TIMEOUT, Prober, ProbeRequest, ProbeResult
from apex_core.running.threads import DrivingThread
from apex_core.running.warming import WarmRequest, WarmResult
from apex_core.running.worker_output import REPORT_TAIL_BYTES, REPORT_TAIL_LINES, WorkerOutput, where
from apex_core.running.worker_process import DUMP_SIGNAL, LAST, UNFIT, sendable, worker_main

__all__ = ["WorkerPool", "WorkerStartError", "failed_result", "pool_prober", "sendable"]

log = logging.getLogger(__name__)

# Starting a worker imports torch and loads every plugin; that is not the cell's time.
WORKER_START_TIMEOUT_S = 120.0
# How long a worker that timed out gets to write its stacks (faulthandler) before it is killed.
STACK_DUMP_WAIT_S = 1.0
# How long a worker whose pipe closed gets to finish dying, for its exit status.
EXIT_WAIT_S = 10.0


class WorkerStartError(RuntimeError):
    """No worker could be started: the process failed, or its GPU failed the self-test."""


@attrs.frozen
class _Lost:
    """A request that got no answer: the worker died (``crashed``), outlived its time (``timeout``),
    or none started (``error``)."""

    status: Status
    reason: str  # the exit status for a crash, why no worker started for an error
    where: str  # the plugin frame faulthandler named, "" when none
    output: str  # the worker's last output, for the log
    excerpt: str  # its shorter tail, for the report
    wall_s: float

    def describe(self, timed_out: str, crashed: str = "") -> str:
        """``timed_out`` for a timeout, ``crashed`` and the exit status for a crash, else the reason;
        then where it was."""
        text = {Status.TIMEOUT: timed_out, Status.CRASHED: crashed + self.reason}.get(self.status, self.reason)
        return f"{text} in {self.where}" if self.where else text


def _exit_reason(pid: int) -> str:
    """How a dead worker ended (its exit code, or the signal that killed it), read without reaping it.

    Its pipe closes before it is fully gone (faulthandler, a core dump), so this waits up to
    ``EXIT_WAIT_S`` for it to become a zombie; it stays one, so its pid (its group's id) cannot
    be reused before the group is killed.
    """
    deadline = time.monotonic() + EXIT_WAIT_S
    try:
        while (info := os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)) is None:
            if time.monotonic() >= deadline:
                return "worker exited"
            time.sleep(0.01)
    except ChildProcessError:
        return "worker exited"
    if info.si_code == os.CLD_EXITED:
        return f"worker exited with code {info.si_status}"
    try:
        return f"worker killed by signal {signal.Signals(info.si_status).name}"
    except ValueError:
        return f"worker killed by signal {info.si_status}"


def failed_result(spec: CellSpec, status: Status, reason: str, wall_s: float, *, log_text: str = "",
                  worker_output: str = "") -> CellResult:
    return CellResult(spec.workload, spec.case, spec.backend, spec.dtype, spec.device, status,
                      params=dict(spec.params), reason=reason, wall_time_s=wall_s, log=log_text,
                      worker_output=worker_output)


class WorkerPool:
    """A single replaceable worker process, started with ``spawn`` (safe with CUDA).

    ``env`` is set in each worker before it imports anything that could initialise CUDA
    (the GPU it is pinned to, the compile caches); ``self_test`` makes each new worker
    check its GPU before it takes work.
    """

    def __init__(self, plugins: bytes = b"", env: dict[str, str] | None = None,
                 self_test: bool = False, niceness: int = 0, name: str = "apex-bench-worker") -> None:
        # in-memory plugin objects, pickled (Registry.in_memory_blob): each worker adds them
        self._plugins = plugins
        self._env = dict(env or {})
        self._self_test = self_test
        self._niceness = niceness  # a builder's: it yields the CPU to the measuring worker
        self._name = name
        self._ctx = multiprocessing.get_context("spawn")
        self._process: Any = None
        self._conn: Any = None
        self._output: WorkerOutput | None = None
        self._stopped = False  # set by kill(for_good=True)
        # held while one thread takes the worker to discard it (see _discard)
        self._taking = threading.Lock()

    def _start(self) -> None:
        started = time.perf_counter()
        output = WorkerOutput()
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(target=worker_main, args=(child, output.path, os.getpid(), self._plugins,
                                                              self._env, self._self_test, self._niceness),
                                    daemon=True, name=self._name)
        start_shielded(process)
        child.close()
        self._process, self._conn, self._output = process, parent, output
        if not parent.poll(WORKER_START_TIMEOUT_S):
            self._discard()
            raise WorkerStartError(f"the worker process did not start within {WORKER_START_TIMEOUT_S:.0f} s")
        try:
            kind, payload = parent.recv()
        except (EOFError, ConnectionResetError):
            reason = _exit_reason(process.pid or 0)
            last = output.tail(max_lines=1)
            self._discard()
            raise WorkerStartError(f"the worker process failed to start: {reason}"
                                   + (f" (last output: {last})" if last else "")) from None
        if kind == UNFIT:
            self._discard()
            raise WorkerStartError(f"the GPU failed the worker's self-test: {payload}")
        output.unlink()  # the worker holds it open; nothing is left on disk whatever happens
        log.debug("%s started in %.1f s", self._name, time.perf_counter() - started)

    @staticmethod
    def _kill_group(process: Any) -> None:
        """SIGKILL a worker and every process still in its group (helpers a backend started)."""
        try:
            os.killpg(process.pid, signal.SIGKILL)  # the worker called setsid(): its group id is its pid
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError):
                process.kill()  # it died before setsid(), or the group is empty

    def _discard(self) -> None:
        # One thread takes the worker, whichever comes first: the slot's thread whose worker
        # died under it, or the main thread tearing the pools down. Both closing its pipe
        # would close a descriptor number that may be another file's by then.
        with self._taking:
            process, conn, output = self._process, self._conn, self._output
            self._process = self._conn = self._output = None
        # The group is killed before the worker is reaped, so its pid (the group id)
        # cannot have been reused by then.
        if process is not None:
            self._kill_group(process)
            process.join(EXIT_WAIT_S)
        if conn is not None:
            conn.close()
        if output is not None:
            output.close()

    def _dump_stacks(self) -> None:
        """Ask a stuck worker for every thread's Python stack (faulthandler), then give it a moment."""
        assert self._output is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._process.pid, DUMP_SIGNAL)
        deadline = time.monotonic() + STACK_DUMP_WAIT_S
        size = -1
        while time.monotonic() < deadline:
            time.sleep(0.05)
            now = self._output.size()
            if now == size and "most recent call first" in self._output.tail():
                return
            size = now

    def _lost(self, status: Status, reason: str, started: float) -> _Lost:
        assert self._output is not None
        output = self._output.tail()
        excerpt = self._output.tail(REPORT_TAIL_LINES, REPORT_TAIL_BYTES)
        lost = _Lost(status, reason, where(output), output, excerpt, time.perf_counter() - started)
        self._discard()
        return lost

    def ensure_started(self) -> None:
        """Start a worker unless one is alive; raises ``WorkerStartError`` when none starts."""
        if self._stopped:
            raise WorkerStartError("the run is stopping: no new worker")
        if self._process is None or not self._process.is_alive():
            self._discard()
            self._start()
            if self._stopped:  # killed for good while it started (another thread): it goes too
                self._discard()
                raise WorkerStartError("the run is stopping: no new worker")

    def _exchange(self, message: Any, timeout_s: float, label: str) -> tuple[Any, _Lost | None]:
        """Send one request and wait for its answer, or say why none came."""
        try:
            self.ensure_started()
            assert self._output is not None
            self._output.clear()
            started = time.perf_counter()
            try:
                self._conn.send(message)
                if not self._conn.poll(timeout_s):
                    self._dump_stacks()
                    return None, self._lost(Status.TIMEOUT, "", started)
                kind, payload = self._conn.recv()
            except (EOFError, ConnectionResetError, BrokenPipeError):
                return None, self._lost(Status.CRASHED, _exit_reason(self._process.pid), started)
            output = self._output.tail()
            if output:
                log.debug("worker output during %s:\n%s", label, output)
            if kind == LAST:
                self._discard()  # it leaves by itself; make sure its helpers go too
            return payload, None
        except RuntimeError as exc:  # no worker started (WorkerStartError)
            return None, _Lost(Status.ERROR, str(exc), "", "", "", 0.0)

    def run(self, spec: CellSpec, timeout_s: float) -> CellResult:
        """Run one cell in the worker; crashes and timeouts become results."""
        label = f"{spec.workload}/{spec.case} {spec.backend} {spec.dtype}"
        result, lost = self._exchange(spec, timeout_s, label)
        if lost is None:
            return result
        return failed_result(spec, lost.status, lost.describe(f"cell ran past the {timeout_s:g} s timeout"),
                             lost.wall_s, log_text=lost.output, worker_output=lost.excerpt)

    def probe(self, request: ProbeRequest, timeout_s: float) -> ProbeResult:
        """Probe one backend in the worker; a probe that crashes or hangs becomes an error or a timeout."""
        result, lost = self._exchange(request, timeout_s, f"the probe of {request.backend}")
        if lost is None:
            return result
        reason = lost.describe(f"probe() ran past the {timeout_s:g} s probe timeout",
                               "probe() crashed the worker: ")
        return ProbeResult(TIMEOUT if lost.status == Status.TIMEOUT else ERROR, reason, lost.output)

    def warm(self, request: WarmRequest, timeout_s: float) -> WarmResult:
        """Warm one cell's compile caches in this (builder) process; a crash or a hang is a result."""
        spec = request.spec
        result, lost = self._exchange(request, timeout_s, f"warming {spec.workload}/{spec.case} {spec.backend}")
        if lost is None:
            return result
        states = {Status.TIMEOUT: warming.TIMEOUT, Status.CRASHED: warming.CRASHED}  # else no worker started
        return WarmResult(states.get(lost.status, warming.FAILED), lost.wall_s,
                          lost.describe(f"ran past the {timeout_s:g} s timeout"))

    def kill(self, for_good: bool = False) -> None:
        """Kill the current worker's group from another thread; the thread waiting on it sees it die.

        ``for_good``: no worker starts after it (a thread about to start one gets
        ``WorkerStartError``), so the run can stop a pool that another thread drives.
        """
        if for_good:
            self._stopped = True
        process = self._process  # read once: the pool's own thread may replace it meanwhile
        if process is not None and process.pid:
            self._kill_group(process)

    def close(self, graceful: bool = True) -> None:
        """End the worker and its helpers; ``graceful`` first asks it to finish (not while it is busy)."""
        process, conn = self._process, self._conn  # read once: a slot's thread may discard them meanwhile
        if graceful and process is not None and conn is not None and process.is_alive():
            with contextlib.suppress(OSError):  # BrokenPipeError among them: it is gone already
                conn.send(None)
                process.join(EXIT_WAIT_S)
        self._discard()


def start_shielded(process: Any) -> None:
    """Start a worker process with SIGINT blocked; it unblocks it once in its own process group.

    A Ctrl-C reaches the terminal's whole foreground group, so a worker still starting up
    (before its ``setsid()``) would die of it with a KeyboardInterrupt traceback on the run's
    stderr. The run handles the Ctrl-C itself and kills its workers. The mask is per thread
    and the child inherits it through fork and exec, so this works from any thread.
    """
    # the spawn start method starts this helper on first use, and unblocks SIGINT after it
    resource_tracker.ensure_running()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


# How long the threads driving killed pools get, in all, to notice it and end.
STOP_WAIT_S = 10.0


def kill_and_join(pools: Iterable[WorkerPool | None], threads: Iterable[DrivingThread],
                  for_good: bool = False) -> None:
    """Kill each pool's worker with its helpers (``WorkerPool.kill``), then join the threads that
    drive them, ``STOP_WAIT_S`` for all of them together (a thread never started is skipped)."""
    for pool in pools:
        if pool is not None:
            with contextlib.suppress(Exception):
                pool.kill(for_good=for_good)
    deadline = time.monotonic() + STOP_WAIT_S
    for thread in threads:
        if thread.is_alive():
            thread.join(max(0.0, deadline - time.monotonic()))


def pool_prober(pool: WorkerPool, timeout_s: float) -> Prober:
    """A prober (``apex_core.running.probing.Probes``) that probes in ``pool``'s worker under ``timeout_s``."""
    return lambda request: pool.probe(request, timeout_s)
