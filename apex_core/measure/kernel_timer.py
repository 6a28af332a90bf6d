"""The kernel-only timer: per call, the device activity the profiler (CUPTI via kineto) recorded.

Each profiled call runs inside a ``record_function`` range named ``apex_call_<i>``; the
L2 flush before it lies outside. Every CUDA runtime or driver call the host made inside
that range (on any thread) is tied by its correlation id to the kernels, copies and sets
it started on the device, on whatever stream. A sample is the sum of their durations;
the span from the first start to the last end and the kernel count are kept too. Work
on other streams is seen, so backends that do not run on the timing stream (ONNX
Runtime, JAX, libraries with their own streams) are timed as well. Device activity whose
launch the profiler did not record (a CUDA graph that XLA launches from a thread of its own)
is tied to the call whose range it starts in: such a call must wait for its work, as JAX's
``block_until_ready`` does, or its work lands in a later call's range.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import torch
from torch.profiler import ProfilerActivity, profile, record_function, supported_activities

from apex_core.clocks import perf_counter
from apex_core.results import KernelActivity, Timing
from apex_core.stats import summarize
from apex_core.timing import StopRule, TimingOptions, remaining_samples, warm_up

CALL_PREFIX = "apex_call_"
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
HOST_CATEGORIES = ("cuda_runtime", "cuda_driver")
# kineto events per profiler session: enough calls to amortise a session, few enough to parse quickly
_EVENTS_PER_SESSION = 4000
_MAX_CALLS_PER_SESSION = 200


@attrs.frozen
class CallActivity:
    """The device activity of one profiled call."""

    index: int
    busy_ms: float  # sum of kernel, copy and set durations
    span_ms: float  # first start to last end
    kernels: int
    streams: frozenset[int]


def profiler_unavailable_reason() -> str:
    """Why ``--timer kernel`` cannot run here, or "" when the profiler can record CUDA activity."""
    if not torch.cuda.is_available():
        return "no CUDA device: the kernel timer records device activity"
    if ProfilerActivity.CUDA not in supported_activities():
        return "this torch's profiler cannot record CUDA activity (built without CUPTI)"
    return ""


def call_activities(trace_events: Iterable[Mapping[str, Any]], prefix: str = CALL_PREFIX
                    ) -> list[CallActivity]:
    """Per ``prefix<i>`` range of a Chrome trace, the device activity its host calls started."""
    events = list(trace_events)
    ranges = sorted(
        (int(e["name"][len(prefix):]), float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
        for e in events
        if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(prefix)
    )
    launches: list[tuple[float, int]] = sorted(
        (float(e["ts"]), corr) for e in events
        if e.get("cat") in HOST_CATEGORIES and (corr := _correlation(e)) is not None)
    device: dict[int, list[Mapping[str, Any]]] = {}
    for e in events:
        correlation = _correlation(e)
        if e.get("cat") in DEVICE_CATEGORIES and correlation is not None:
            device.setdefault(correlation, []).append(e)
    launched = {corr for _, corr in launches}
    # device work whose launch the profiler did not record: a CUDA graph launched from another
    # thread (XLA's command buffers at the large profile, on an H100: every kernel of the call
    # under one correlation id with no host event) belongs to the call whose range it starts in
    unlaunched = [d for corr, work in device.items() if corr not in launched for d in work]
    activities = []
    for index, begin, end in ranges:
        work = [d for ts, corr in launches if begin <= ts <= end for d in device.get(corr, ())]
        work += [d for d in unlaunched if begin <= float(d["ts"]) <= end]
        if not work:
            activities.append(CallActivity(index, 0.0, 0.0, 0, frozenset()))
            continue
        starts = [float(d["ts"]) for d in work]
        ends = [float(d["ts"]) + float(d.get("dur", 0)) for d in work]
        activities.append(CallActivity(
            index=index,
            busy_ms=sum(float(d.get("dur", 0)) for d in work) / 1e3,
            span_ms=(max(ends) - min(starts)) / 1e3,
            kernels=sum(1 for d in work if d.get("cat") == "kernel"),
            streams=frozenset(int(d.get("args", {}).get("stream", -1)) for d in work),
        ))
    return activities


def _correlation(event: Mapping[str, Any]) -> int | None:
    value = event.get("args", {}).get("correlation")
    return int(value) if value is not None else None


def summarize_activity(activities: list[CallActivity]) -> KernelActivity:
    return KernelActivity(
        kernels_per_call=statistics.median(a.kernels for a in activities),
        span_p50_ms=statistics.median(a.span_ms for a in activities),
        streams=len(frozenset().union(*(a.streams for a in activities))),
        calls=len(activities),
    )


def check_idle_calls(activities: list[CallActivity]) -> None:
    """Raise when some calls started device work and others none: the call's work depends on when it runs.

    Calls that all started none keep their samples of 0 ms (the report flags the cell
    ``no_device_work``); a mix means work skipped in some calls or left to others, whose
    times would pass for a faster kernel.
    """
    idle = [a.index for a in activities if a.kernels == 0 and a.busy_ms == 0]
    if idle and len(idle) < len(activities):
        raise RuntimeError(
            f"the profiler saw device activity in {len(activities) - len(idle)} of {len(activities)} timed "
            f"calls and none in call {idle[0]}: the call's work depends on when it runs (skipped in some "
            "calls, or left to others), so no time per call can be given")


class KernelTimer:
    """Samples a callable's device activity per call through ``torch.profiler``.

    The profiler's first session in a process starts CUPTI, which can take seconds; a
    primer session of one call, whose activity is dropped, pays for it before the cell's
    time budget (``--max-time``) starts, so the cap cuts no cell short for the profiler's sake.
    Calls with no device activity at all keep samples of 0 ms (``check_idle_calls``).

    Each profiler session is a batch: ``watch`` (apex_core.measure.throttle.BatchWatch) reads NVML
    right after the session's sync and sets the whole session's samples aside when it ran throttled;
    its calls still count for the idle-call rule, the kernel counts and the spot checks.
    """

    def __init__(self, options: TimingOptions, flush: Callable[[], Any] | None = None,
                 clock: Callable[[], float] = perf_counter, watch: Any = None) -> None:
        self.options = options
        self.flush = flush
        self.clock = clock
        self.watch = watch
        # apex_core.measure.spot_checks.SpotChecks of the measurement in progress, the input placement the
        # next call runs on, and the spot-checked calls' outputs by call number, kept for the check
        self.spot: Any = None
        self.slot: Callable[[], int] = lambda: 0
        self.kept: dict[int, Any] = {}

    def _synchronize(self) -> None:
        torch.cuda.synchronize()

    def _session(self, call: Callable[[], Any], calls: int, first: int) -> list[CallActivity]:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for i in range(first, first + calls):
                # a spot check writes fresh inputs before the call and copies its outputs after it,
                # outside the call's range: the profiler does not count that work as the call's
                checked = self.spot is not None and self.spot.before(i, self.slot())
                if self.flush is not None:
                    self.flush()
                with record_function(f"{CALL_PREFIX}{i}"):
                    outputs = call()
                if checked:
                    self.kept[i] = self.spot.keep(outputs)
                    self.spot.release(i)  # the rest of the session on the cell's own inputs
            torch.cuda.synchronize()
            if self.watch is not None:
                self.watch.mark()  # the clocks now, not after the trace is exported and read
        handle, path = tempfile.mkstemp(suffix=".json", prefix="apex-trace-")
        os.close(handle)
        try:
            prof.export_chrome_trace(path)
            with open(path, encoding="utf-8") as trace:
                events = json.load(trace).get("traceEvents", [])
        finally:
            os.unlink(path)
        return call_activities(events)

    def measure(self, call: Callable[[], Any], spot: Any = None, slot: Callable[[], int] = lambda: 0) -> Timing:
        """Sample ``call``; ``spot`` checks the outputs of a few of its profiled calls on fresh inputs
        (``slot`` says which input placement the next call runs on)."""
        warm_up(call, self.options)
        self._synchronize()
        self._session(call, 1, 0)  # the primer: the profiler's start-up, outside the time budget
        self.spot, self.slot, self.kept = spot, slot, {}
        rule = StopRule(self.options, spot)
        activities: list[CallActivity] = []
        samples: list[float] = []
        if self.watch is not None:
            self.watch.begin()
        calls, start = 2, self.clock()
        while True:
            # under --fixed-iters the last session profiles only the calls still owed
            calls = remaining_samples(self.options, len(samples), calls)
            found = self._session(call, calls, len(activities))
            aside = self.watch is not None and self.watch.after_batch([a.busy_ms for a in found])
            stop = None
            for activity in found:
                activities.append(activity)
                if activity.index in self.kept:
                    spot.after(activity.index, self.kept.pop(activity.index), activity.busy_ms)
                if not aside:
                    samples.append(activity.busy_ms)
                    if stop := rule.reason(samples, self.clock() - start):
                        break
            spent_s = spot.spent_s if spot is not None else 0.0
            if aside and self.watch.ends_sampling(samples, self.clock() - start - spent_s, self.options):
                stop = "time_cap"
            if stop:
                if self.watch is not None:
                    self.watch.finish()
                check_idle_calls(activities)
                return Timing("kernel_profiler", self.options.cache, tuple(samples), summarize(samples),
                              stop, kernel=summarize_activity(activities))
            per_call = max(1, max(a.kernels for a in found))
            calls = max(1, min(_MAX_CALLS_PER_SESSION, _EVENTS_PER_SESSION // per_call))
