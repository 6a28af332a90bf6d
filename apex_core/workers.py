"""Run cells in a worker process that may crash or hang without taking the run down.

One worker at a time (timings need the device to themselves). A cell that kills
the worker is recorded as ``crashed``, one that outlives the timeout as
``timeout``; either way the worker is replaced and the next cell goes on.
"""

from __future__ import annotations

import logging
import multiprocessing
import pickle
import signal
import time
from typing import Any

import attrs

from apex_core.cell import CellSpec, execute_cell
from apex_core.results import CellResult, Status

log = logging.getLogger(__name__)

# Starting a worker imports torch and loads every plugin; that is not the cell's time.
WORKER_START_TIMEOUT_S = 120.0


def _worker_main(conn: Any) -> None:
    """Entry point of the worker process: load plugins once, then run cells until told to stop."""
    from apex_core.registry import Registry

    registry = Registry.discover()
    conn.send(("ready", None))
    while True:
        spec = conn.recv()
        if spec is None:
            return
        workload = registry.workloads[spec.workload]
        backend = registry.backends[spec.backend]
        result = execute_cell(workload, backend, spec)
        try:
            conn.send(("result", result))  # pickled before anything is written: a failure sends nothing
        except (pickle.PicklingError, TypeError, AttributeError):
            result = sendable(result)
            conn.send(("result", result))
        if result.status == Status.CRASHED or result.metadata.get("process_state_unrestorable"):
            # A poisoned CUDA context, or process state that could not be put back:
            # let the pool start a clean worker.
            return


def sendable(result: CellResult) -> CellResult:
    """The result as it can cross to the parent: metadata that does not pickle makes the cell an error."""
    try:
        pickle.dumps(result)
        return result
    except Exception:
        pass
    for key, value in result.metadata.items():
        try:
            pickle.dumps(value)
        except Exception as exc:
            reason = (f"backend metadata {key!r} cannot be sent to the run ({type(exc).__name__}: {exc}); "
                      "metadata must be plain data")
            return attrs.evolve(result, status=Status.ERROR, reason=reason, timing=None, derived=None,
                                telemetry=None, metadata={k: v for k, v in result.metadata.items() if k != key})
    return attrs.evolve(result, status=Status.ERROR, reason="the cell's result cannot be sent to the run",
                        timing=None, derived=None, telemetry=None, metadata={})


def _exit_description(exitcode: int | None) -> str:
    if exitcode is None:
        return "worker exited"
    if exitcode < 0:
        try:
            return f"worker killed by signal {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"worker killed by signal {-exitcode}"
    return f"worker exited with code {exitcode}"


def failed_result(spec: CellSpec, status: Status, reason: str, wall_s: float) -> CellResult:
    return CellResult(spec.workload, spec.case, spec.backend, spec.dtype, spec.device, status,
                      params=dict(spec.params), reason=reason, wall_time_s=wall_s)


class WorkerPool:
    """A single replaceable worker process, started with ``spawn`` (safe with CUDA)."""

    def __init__(self) -> None:
        self._ctx = multiprocessing.get_context("spawn")
        self._process: Any = None
        self._conn: Any = None

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(target=_worker_main, args=(child,), daemon=True,
                                    name="apex-bench-worker")
        process.start()
        child.close()
        if not parent.poll(WORKER_START_TIMEOUT_S):
            process.kill()
            raise RuntimeError("the worker process did not start within "
                               f"{WORKER_START_TIMEOUT_S:.0f} s")
        try:
            parent.recv()
        except EOFError:
            process.join(5)
            raise RuntimeError(f"the worker process failed to start: "
                               f"{_exit_description(process.exitcode)}") from None
        self._process, self._conn = process, parent

    def _discard(self) -> None:
        if self._process is not None:
            if self._process.is_alive():
                self._process.kill()
            self._process.join(10)
        if self._conn is not None:
            self._conn.close()
        self._process = self._conn = None

    def run(self, spec: CellSpec, timeout_s: float) -> CellResult:
        """Run one cell in the worker; crashes and timeouts become results."""
        if self._process is None or not self._process.is_alive():
            self._discard()
            try:
                self._start()
            except RuntimeError as exc:
                return failed_result(spec, Status.ERROR, str(exc), 0.0)
        started = time.perf_counter()
        self._conn.send(spec)
        if not self._conn.poll(timeout_s):
            self._discard()
            return failed_result(spec, Status.TIMEOUT, f"cell ran past the {timeout_s:g} s timeout",
                                 time.perf_counter() - started)
        try:
            _kind, result = self._conn.recv()
        except (EOFError, ConnectionResetError):
            self._process.join(10)
            reason = _exit_description(self._process.exitcode)
            self._discard()
            return failed_result(spec, Status.CRASHED, reason, time.perf_counter() - started)
        if result.status == Status.CRASHED:
            self._discard()
        return result

    def close(self) -> None:
        """Ask the worker to finish, then make sure it is gone."""
        if self._process is not None and self._process.is_alive():
            try:
                self._conn.send(None)
                self._process.join(10)
            except (BrokenPipeError, OSError):
                pass
        self._discard()
