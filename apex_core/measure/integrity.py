"""What a cell's backend may not touch, and the checks that say it did (docs/anti-cheat.md).

- ``Guard``: the functions the harness measures with (the ``time`` module, CUDA events and
  streams, the profiler, json, and the harness's own timing and checking modules) as they
  were before any plugin code ran; a cell checks them after ``prepare`` and after timing,
  names what was replaced and by which module, and puts the originals back.
- ``window_problem``: the samples cannot sum to more than the wall time of the window
  they were taken in, read from a second clock.
- ``unseen_work_problem`` (CUDA): a few calls timed until the device is idle (every stream)
  against the event timer's p50 and the host's launch time; only when they take longer, a
  short profiler session sums the device work per call on every stream: work on a stream
  the timing stream does not wait for is seen by the profiler and not by the events.

A suspect finding raises ``Suspect``; the cell becomes ``suspect`` with the reason.
``APEX_BENCH_INTEGRITY=off`` turns the checks off: it exists only to measure what they
cost (scripts/dev/integrity_cost.sh), never for a run whose numbers are used.
"""

from __future__ import annotations

import inspect
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

import attrs
import torch
import torch.profiler

from apex_core import clocks, stats, timing
from apex_core import correctness as correctness_module
from apex_core.measure import cuda_timer, kernel_timer, l2_flush, stream_hold, timing_stream
from apex_core.results import Timing

OFF_VARIABLE = "APEX_BENCH_INTEGRITY"
# the profiler's device time per call must exceed the events' by this factor and margin to be
# unseen work: a warm-L2 call (the spot check does not flush) is never slower than a cold one
UNSEEN_WORK_FACTOR = 1.5
UNSEEN_WORK_MARGIN_MS = 0.02
UNSEEN_WORK_CALLS = 3
# the trigger: calls to device idle slower per call than the events and the host account for
UNSEEN_WALL_MARGIN_MS = 0.05
# samples may sum past their window's wall time only by clock granularity
WINDOW_SLACK_MS = 1.0
# watched as well where imported (they import this module, so it cannot import them)
_HARNESS_MODULES = ("apex_core.measure.integrity", "apex_core.measure.spot_checks", "apex_core.measure.cell")


def checks_on() -> bool:
    return os.environ.get(OFF_VARIABLE, "").lower() not in ("off", "0", "false")


class Suspect(Exception):
    """The backend tampered with the measurement; ``reason`` says what was caught and the evidence."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# What the timers and checks call outside the harness's own modules, by name. Whole modules of
# torch are not watched: torch adds and rebinds functions of its own while it initializes CUDA.
_TIME_NAMES = ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns", "sleep")
_JSON_NAMES = ("load", "loads", "dump", "dumps")
_TORCH_CUDA_NAMES = ("synchronize", "Event", "Stream", "stream", "current_stream", "CUDAGraph", "graph",
                     "_sleep", "max_memory_allocated", "reset_peak_memory_stats", "memory_allocated")
_TORCH_PROFILER_NAMES = ("profile", "record_function", "supported_activities")


def _watched_owners() -> list[tuple[str, Any, tuple[str, ...] | None]]:
    """The modules and classes whose functions the timers and checks call, by a printable name, with
    the names watched in each (None: every callable it holds now)."""
    harness = [clocks, timing, cuda_timer, kernel_timer, l2_flush, stats, stream_hold, timing_stream,
               correctness_module,
               *[sys.modules[m] for m in _HARNESS_MODULES if m in sys.modules]]
    owners: list[tuple[str, Any, tuple[str, ...] | None]] = [(m.__name__, m, None) for m in harness]
    owners += [("time", time, _TIME_NAMES), ("json", json, _JSON_NAMES),
               ("torch.cuda", torch.cuda, _TORCH_CUDA_NAMES),
               ("torch.profiler", torch.profiler, _TORCH_PROFILER_NAMES)]
    # the harness's own timer classes too: a method replaced there (a flush that does nothing,
    # a floor that reads high) would change every sample without touching a module function
    classes = [cuda_timer.CudaTimer, kernel_timer.KernelTimer, l2_flush.L2Flush, stream_hold.DriverStreamHold,
               stream_hold.Watchdog, torch.cuda.Event, torch.cuda.Stream, torch.cuda.CUDAGraph,
               torch.autograd.profiler.record_function,
               *[c for c in torch.profiler.profile.__mro__ if c.__module__.startswith("torch.")]]
    owners += [(f"{c.__module__}.{c.__qualname__}", c, None) for c in classes]
    return owners


def _functions(owner: Any, names: tuple[str, ...] | None) -> dict[str, Any]:
    """The callables an owner holds now under ``names`` (every one when None): what a patch replaces.
    A class's are read through its bases too, as a call finds them: a function set on the class
    shadows its base's."""
    if isinstance(owner, type):
        found = {name: inspect.getattr_static(owner, name, None) for name in dir(owner)}
        return {name: value for name, value in found.items() if callable(value) or hasattr(value, "__get__")}
    if names is None:
        return {name: value for name, value in list(vars(owner).items()) if callable(value)}
    return {name: vars(owner)[name] for name in names if callable(vars(owner).get(name))}


def _now(owner: Any, name: str) -> Any:
    return inspect.getattr_static(owner, name, None) if isinstance(owner, type) else vars(owner).get(name)


@attrs.frozen
class Change:
    where: str
    name: str
    now: Any = attrs.field(eq=False)

    def describe(self) -> str:
        what = "removed" if self.now is None else f"replaced (by {clocks.origin(self.now)})"
        return f"{self.where}.{self.name} was {what}"


class Guard:
    """The watched functions as first seen; ``changes`` and ``restore`` compare with and put back those.

    Only what was there is watched: a name added later is not what the harness calls.
    """

    def __init__(self, owners: Iterable[tuple[str, Any, tuple[str, ...] | None]]) -> None:
        self.saved = [(where, owner, _functions(owner, names), set(vars(owner)))
                      for where, owner, names in owners]

    def changes(self) -> list[Change]:
        return [Change(where, name, _now(owner, name)) for where, owner, saved, _own in self.saved
                for name, value in saved.items() if _now(owner, name) is not value]

    def restore(self) -> list[Change]:
        """Put every watched function back as first seen; what had changed."""
        found = self.changes()
        for change in found:
            owner, saved, own = next((o, s, n) for w, o, s, n in self.saved if w == change.where)
            if change.name in own:
                setattr(owner, change.name, saved[change.name])
            elif change.name in vars(owner):  # set on the class over its base's: take it off again
                delattr(owner, change.name)
        return found


_guard: Guard | None = None


def guard() -> Guard:
    """The process's guard, made on first use: ``apex_core.measure.cell`` asks for it when it is imported,
    before the registry loads any plugin."""
    global _guard
    if _guard is None:
        _guard = Guard(_watched_owners())
    return _guard


def window_problem(timing: Timing, window_ns: int) -> str:
    """Why the samples cannot be true ("" when they can): they sum past the wall time of the window."""
    window_ms = window_ns / 1e6
    total = sum(timing.samples_ms)
    if total <= window_ms + WINDOW_SLACK_MS:
        return ""
    return (f"its {len(timing.samples_ms)} samples sum to {total:.4g} ms, but they were taken in "
            f"{window_ms:.4g} ms of wall time (time.monotonic): the clock the timer read is not true time")


def _device_outlasts_events(call: Callable[[], Any], timing: Timing) -> bool:
    """True when a few calls back to back keep the device (every stream: ``torch.cuda.synchronize``)
    busy longer per call than the events, or the host's launch, account for: the cheap trigger
    of the profiler's look (an honest call never does; a jittery host only costs a look)."""
    torch.cuda.synchronize()
    start = clocks.perf_counter_ns()
    for _ in range(UNSEEN_WORK_CALLS):
        call()
    torch.cuda.synchronize()
    per_call_ms = (clocks.perf_counter_ns() - start) / 1e6 / UNSEEN_WORK_CALLS
    accounted = max(timing.host_ms or 0.0, timing.stats.p50 + (timing.floor_ms or 0.0))
    return per_call_ms > UNSEEN_WORK_FACTOR * accounted + UNSEEN_WALL_MARGIN_MS


def unseen_work_problem(call: Callable[[], Any], timing: Timing) -> str:
    """CUDA: why the events missed the call's device work ("" when they did not). A few calls
    timed to device idle trigger it; a short profiler session of ``UNSEEN_WORK_CALLS`` calls
    then sums each call's device work on every stream."""
    if timing.method.startswith("kernel_profiler"):
        return ""  # the kernel timer is the profiler: it saw every stream already
    if not _device_outlasts_events(call, timing) or kernel_timer.profiler_unavailable_reason():
        return ""
    activities = kernel_timer.KernelTimer(timing_options_for_spot())._session(call, UNSEEN_WORK_CALLS, 0)
    if not activities:
        return ""
    busy = statistics.median(a.busy_ms for a in activities)
    event_ms = timing.stats.p50 + (timing.floor_ms or 0.0)
    if busy <= UNSEEN_WORK_FACTOR * event_ms + UNSEEN_WORK_MARGIN_MS:
        return ""
    streams = len(frozenset().union(*(a.streams for a in activities)))
    return (f"the profiler saw {busy:.4g} ms of device work per call on {streams} stream(s), the events "
            f"around the call on the timing stream {event_ms:.4g} ms: the call queues work on a stream "
            "the timed stream does not wait for; join it back to the current stream before returning")


def timing_options_for_spot() -> timing.TimingOptions:
    """Options for the profiler spot check (nothing in them is read but the cache state)."""
    return timing.TimingOptions(warmup=0, min_iters=1, min_time_s=0.0, max_time_s=1.0, energy=False)


def suspect_reason(findings: list[str], timing: Timing | None) -> str:
    """The suspect cell's reason: every finding, then the time the harness measured with its own clocks."""
    measured = (f"; the harness timed it with its own clocks: p50 {timing.stats.p50:.4g} ms"
                if timing is not None else "")
    return f"suspect: {'; '.join(findings)}{measured}"


def stage_findings(stage: str) -> list[str]:
    """What the backend replaced of the watched functions during ``stage``, put back; a finding
    unless the checks are off (then only put back)."""
    changes = guard().restore()
    return [f"{'; '.join(c.describe() for c in changes)} during {stage}"] if changes and checks_on() else []


def timing_findings(call: Callable[[], Any], device: str, timing: Timing, window_ns: int,
                    spot: Any) -> tuple[list[str], str]:
    """What a cell's timing shows of work its timer did not see, and why the profiler's spot check
    could not run ("" when it ran or was not needed). ``spot``: the cell's SpotChecks, or None."""
    if not checks_on():
        return [], ""
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    found = [window_problem(timing, window_ns)]
    if spot is not None:
        found += [spot.caching_problem(timing.samples_ms, call, sync), spot.lazy_problem(call, sync)]
    profiler_error = ""
    if device.startswith("cuda"):
        try:
            found.append(unseen_work_problem(call, timing))
        except Exception as exc:  # best effort: a session that fails is no finding
            profiler_error = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return [f for f in found if f], profiler_error
