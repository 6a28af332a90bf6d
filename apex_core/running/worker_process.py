"""The worker process's side: load plugins once, then run the probes and cells it is sent.

The worker runs in a session of its own, so the run can kill it together with any
helper process a backend started (``os.killpg``), and the terminal's Ctrl-C reaches
only the run, which then ends the worker itself. When the run disappears without
ending it (SIGKILL), the worker notices and kills its own process group: a thread
polls the parent pid, and on Linux ``PR_SET_PDEATHSIG`` wakes it at once.

Its standard error goes to a file the run reads back after a crash or a timeout;
faulthandler writes the Python traceback there on a fatal signal, and on SIGUSR1
(sent by the run before it kills a worker that timed out) for every thread.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import pickle
import signal
import sys
import threading
import time
from typing import Any

import attrs

from apex_core.results import CellResult, Status

# How often the worker checks that the run that started it is still there.
PARENT_POLL_S = 0.2
# Signal on which faulthandler dumps every thread's stack (sent before a timeout's kill).
DUMP_SIGNAL = signal.SIGUSR1
# Signal the kernel sends the worker when the run dies (Linux), to wake it at once.
_PARENT_DEATH_SIGNAL = signal.SIGUSR2
_PR_SET_PDEATHSIG = 1
# The kind of an answer after which the worker exits: the run replaces it before the next request.
LAST = "last"


def _watch_parent(parent_pid: int) -> None:
    """End the worker's group once the run is gone (its pid is no longer our parent)."""

    def on_parent_death_signal(_signum: int, _frame: Any) -> None:
        # PR_SET_PDEATHSIG also fires when the parent *thread* that started us ends;
        # only a new parent pid means the run itself is gone.
        if os.getppid() != parent_pid:
            os.killpg(os.getpgrp(), signal.SIGKILL)  # this worker and the helpers in its group

    signal.signal(_PARENT_DEATH_SIGNAL, on_parent_death_signal)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(_PARENT_DEATH_SIGNAL), 0, 0, 0)

    def poll() -> None:
        # also covers a run that died before prctl took effect, and other platforms
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=poll, name="apex-bench-parent-watch", daemon=True).start()


def _capture_stderr(output_path: str) -> None:
    """Send fd 2 to ``output_path`` (append mode, so the run may truncate it between cells)."""
    fd = os.open(output_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 2)
    os.close(fd)
    faulthandler.enable(file=sys.stderr, all_threads=True)
    faulthandler.register(DUMP_SIGNAL, file=sys.stderr, all_threads=True, chain=False)


# The kind of the first message of a worker whose GPU failed its self-test (it then exits).
UNFIT = "unfit"


def take_back_sigint() -> None:
    """Unblock SIGINT, dropping one that arrived while the worker was starting.

    That one was the run's Ctrl-C, sent to the terminal's whole group before this process
    left it; the run handles it. Setting SIG_IGN discards a pending signal (POSIX), then the
    handler the process had is put back.
    """
    handler = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, handler if handler is not None else signal.default_int_handler)


def worker_main(conn: Any, output_path: str, parent_pid: int, plugins: bytes = b"",
                env: dict[str, str] | None = None, self_test: bool = False, niceness: int = 0) -> None:
    """Entry point of the worker process: load plugins once, then serve requests until told to stop.

    ``env`` (the GPU it is pinned to, the compile caches) is set before anything can
    initialise CUDA or read a cache variable; with ``self_test`` the worker first checks
    its GPU and, when that fails, answers ``UNFIT`` with the reason instead of ``ready``.
    ``niceness`` lowers its CPU priority (and its children's): a builder process yields
    the CPU to the worker that is timing a cell.
    """
    os.environ.update(env or {})
    os.setsid()  # its own process group: the run can kill it with every helper it started
    take_back_sigint()  # started with it blocked (workers.start_shielded)
    if niceness:
        with contextlib.suppress(OSError):
            os.nice(niceness)
    _capture_stderr(output_path)
    _watch_parent(parent_pid)
    from apex_core.measure.cell import CellSpec
    from apex_core.registry import Registry
    from apex_core.running.probing import ProbeRequest
    from apex_core.running.warming import WarmRequest, warm_here

    if self_test:
        from apex_core.measure.device_health import self_test as check_gpu

        why = check_gpu()
        if why:
            conn.send((UNFIT, why))
            return
    registry = Registry.discover()
    registry.add_in_memory(plugins)  # a library caller's in-memory objects (Registry.from_objects)
    conn.send(("ready", None))
    probes: dict[Any, Any] = {}  # a builder's probes, once per backend and device
    # device memory the last cell left (measured after it): the next cell's starting point,
    # unless something else ran in between
    left_mb: float | None = None
    while (request := conn.recv()) is not None:
        if isinstance(request, WarmRequest):  # a builder: fill one cell's compile caches
            result = warm_here(registry, request.spec, probes)
            sys.stderr.flush()
            conn.send(("warm", result))
            left_mb = None
        elif isinstance(request, ProbeRequest):
            left_mb = None
            if not _serve_probe(conn, registry, request):
                return
        elif isinstance(request, CellSpec):
            served, left_mb = _serve_cell(conn, registry, request, left_mb)
            if not served:
                return


def _serve_probe(conn: Any, registry: Any, request: Any) -> bool:
    """Probe one backend, with the process state put back after; False when the worker must go."""
    from apex_core.measure import process_state
    from apex_core.running.probing import ERROR, ProbeResult, probe_here

    backend = registry.backends.get(request.backend)
    if backend is None:
        conn.send(("probe", ProbeResult(ERROR, f"backend {request.backend!r} is not registered in "
                                               "the worker (its plugin failed to load there)")))
        return True
    before = process_state.capture()
    result = probe_here(backend, request.device, request.options)
    _changed, lost = process_state.restore(before)
    sys.stderr.flush()
    conn.send((LAST if lost else "probe", result))  # state it could not put back: a fresh worker next
    return not lost


def _serve_cell(conn: Any, registry: Any, spec: Any, before_mb: float | None = None
                ) -> tuple[bool, float | None]:
    """Run one cell and send its result; False when the worker must be replaced, and the device
    memory the cell left (``before_mb``: what the cell before left, so it is not collected twice)."""
    from apex_core.measure.cell import execute_cell
    from apex_core.measure.device_health import allocated_mb, check_after_cell

    if before_mb is None:
        before_mb = allocated_mb(spec.device)
    result = execute_cell(registry.workloads[spec.workload], registry.backends[spec.backend], spec)
    crashed = result.status == Status.CRASHED
    unfit, after_mb = ("", None) if crashed else check_after_cell(spec.device, before_mb)
    if unfit:  # the cell's own result stands; the next cell gets a clean worker
        result = attrs.evolve(result, metadata={**result.metadata, "worker_replaced": unfit})
    sys.stderr.flush()
    # A poisoned CUDA context, leaked device memory, or process state that could not be put
    # back: let the pool start a clean worker.
    leaving = crashed or bool(unfit) or bool(result.metadata.get("process_state_unrestorable"))
    kind = LAST if leaving else "result"
    try:
        conn.send((kind, result))  # pickled before anything is written: a failure sends nothing
    except (pickle.PicklingError, TypeError, AttributeError):
        conn.send((kind, sendable(result)))
    return not leaving, after_mb


def sendable(result: CellResult) -> CellResult:
    """The result as it can cross to the parent: metadata that does not pickle makes the cell an error."""
    with contextlib.suppress(Exception):
        pickle.dumps(result)
        return result
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
