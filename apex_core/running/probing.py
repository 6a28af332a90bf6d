"""Ask each backend once per run whether it can run on a device, without trusting the probe.

A probe is plugin code: it may raise, segfault or hang. In a run with process
isolation the probe runs in the worker process (``WorkerPool.probe``), under its
own timeout, so a probe that kills or blocks its process costs only its own
backend: its cells become ``error`` (crash) or ``timeout`` rows and the worker is
replaced for the next backend. Inline runs (in-memory registries, ``--inline``)
probe here, on a daemon thread under the same timeout: a probe that hangs is a
``timeout`` row and is left behind (a thread cannot be killed), one that segfaults
takes the process (inline means no crash isolation).
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from apex_core.backend_options import configure
from apex_core.errors import describe_exception
from apex_core.interfaces import Backend
from apex_core.results import Availability
from apex_core.running.worker_output import where_in_stack

log = logging.getLogger(__name__)

# Seconds one probe may take before its backend counts as hanging. Probes import their
# stack (TensorRT, ONNX Runtime) and may load an engine or a plugin library: seconds,
# rarely more, on a healthy machine. ``--probe-timeout`` changes it.
DEFAULT_PROBE_TIMEOUT_S = 60.0

# ProbeResult.status values; "ok" and "unavailable" are the backend's own answer.
OK, UNAVAILABLE, ERROR, TIMEOUT = "ok", "unavailable", "error", "timeout"


@attrs.frozen
class ProbeRequest:
    """What a worker needs to probe one backend on one device (picklable)."""

    backend: str
    device: str
    options: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ProbeResult:
    """The outcome of one probe: the backend's answer, or why it gave none.

    ``status`` is ``ok``/``unavailable`` when the probe answered, ``error`` when it
    raised or killed its process, ``timeout`` when it outlived the probe timeout.
    ``log`` (traceback, the worker's last output) is for the log file.
    """

    status: str
    reason: str = ""
    log: str = ""

    @property
    def answered(self) -> bool:
        return self.status in (OK, UNAVAILABLE)


def probe_here(backend: Backend, device: str, options: Mapping[str, Any]) -> ProbeResult:
    """Configure and probe ``backend`` in this process; exceptions become ``error`` results."""
    try:
        failed, trace = configure(backend, options)
    except Exception as exc:  # a bad value, which the run's own process would have stopped at
        failed, trace = f"configure() raised {describe_exception(exc)}", traceback.format_exc()
    if failed:
        return ProbeResult(ERROR, failed, trace)
    try:
        availability = backend.probe(device)
    except Exception as exc:  # a probe that raises is a bug: an error row, not a skip
        return ProbeResult(ERROR, f"probe() raised {describe_exception(exc)}", traceback.format_exc())
    if not isinstance(availability, Availability):
        return ProbeResult(ERROR, f"probe() returned {type(availability).__name__}, not an Availability")
    return ProbeResult(OK if availability.ok else UNAVAILABLE, availability.reason)


Prober = Callable[[ProbeRequest], ProbeResult]


class Probes:
    """Each backend's probe result per device, asked once per run through ``prober``."""

    def __init__(self, backends: Mapping[str, Backend], prober: Prober,
                 options: Callable[[str], dict[str, Any]] = lambda _name: {}) -> None:
        self.backends = backends
        self.prober = prober
        self.options = options
        self.cache: dict[tuple[str, str], ProbeResult] = {}

    def result(self, backend_name: str, device: str) -> ProbeResult:
        key = (backend_name, device)
        if key not in self.cache:
            devices = self.backends[backend_name].devices
            if device not in devices:
                self.cache[key] = ProbeResult(
                    UNAVAILABLE, f"{backend_name} runs on {', '.join(sorted(devices))}, not {device}")
            else:
                result = self.prober(ProbeRequest(backend_name, device, self.options(backend_name)))
                if not result.answered:
                    log.error("probe of %s on %s: %s\n%s", backend_name, device, result.reason, result.log)
                self.cache[key] = result
        return self.cache[key]


def inline_prober(backends: Mapping[str, Backend], timeout_s: float = DEFAULT_PROBE_TIMEOUT_S) -> Prober:
    """A prober that calls the backends of this process (no crash isolation): ``probe_here`` on a
    daemon thread; past ``timeout_s``, a ``timeout`` result naming where it hangs.

    The hung thread stays behind, blocked, and ends with the process: a daemon thread does
    not hold up its exit.
    """

    def probe(request: ProbeRequest) -> ProbeResult:
        answer: list[ProbeResult] = []
        backend = backends[request.backend]
        thread = threading.Thread(
            target=lambda: answer.append(probe_here(backend, request.device, request.options)),
            name=f"probe of {request.backend}", daemon=True)
        thread.start()
        thread.join(timeout_s)
        if answer:
            return answer[0]
        frame = sys._current_frames().get(thread.ident or 0)
        stack = traceback.extract_stack(frame) if frame is not None else traceback.StackSummary()
        text = f"probe() ran past the {timeout_s:g} s probe timeout"
        where = where_in_stack(stack)
        return ProbeResult(TIMEOUT, f"{text} in {where}" if where else text, "".join(stack.format()))

    return probe
