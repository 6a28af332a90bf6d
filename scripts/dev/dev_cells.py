"""The cells the dev timing scripts measure, prepared as a run prepares them (needs a GPU)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from apex_core.measure.stream_hold import Watchdog, probe_stream_hold
from apex_core.registry import Registry


def triton_cell(workload_name: str = "tilepack", profile: str = "fixed") -> Callable[[], Any]:
    """The triton backend's callable for the first case of ``workload_name``, fp16, seed 0."""
    return backend_cell("triton", workload_name, profile)


def backend_cell(backend_name: str, workload_name: str, profile: str = "fixed") -> Callable[[], Any]:
    """``backend_name``'s callable for the first case of ``workload_name``, fp16, seed 0."""
    registry = Registry.discover()
    backend, workload = registry.backends[backend_name], registry.workloads[workload_name]
    backend.configure({})
    case = workload.cases(workload.make_params(profile))[0]
    inputs = workload.make_inputs(case, "cuda", torch.float16, seed=0)
    return backend.prepare(workload, case, inputs).fn


def delayed(call: Callable[[], Any], microseconds: int) -> Callable[[], Any]:
    """``call``, then the host busy for ``microseconds``: the hold is released that much later."""
    if microseconds == 0:
        return call

    def slow() -> None:
        call()
        until = time.perf_counter_ns() + microseconds * 1000
        while time.perf_counter_ns() < until:
            pass

    return slow


def queued_held(queue: Callable[[], Any], timeout_s: float = 30.0) -> bool:
    """Run ``queue`` with the current stream held (apex_core/measure/stream_hold.py, the timer's own
    hold) until every launch it issues is queued, then release them at once, so that the device runs
    them back to back whatever the host's launch rate. False when the watchdog had to release the
    hold: ``queue`` issued more launches than the stream's queue takes, and the host waited."""
    hold, why = probe_stream_hold()
    if hold is None:
        raise RuntimeError(f"stream hold unavailable: {why}")
    watchdog = Watchdog(hold.release)
    number = hold.hold(torch.cuda.current_stream())
    watchdog.arm(number, timeout_s)
    try:
        queue()
    finally:
        watchdog.disarm()
        hold.release(number)
        torch.cuda.synchronize()
        watchdog.close()
        hold.close()
    return not watchdog.tripped
