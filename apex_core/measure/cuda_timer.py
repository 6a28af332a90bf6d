"""CUDA-event timing of one callable: the stream held until each sample is queued (docs/timing.md).

Each sample is: L2 flush (cold cache), hold, start event, the call, end event, release.
The flush and the hold lie outside the events; the hold keeps the GPU from starting
the sample until the host has queued all of it, so the events bracket device work and
never the host's launch cost, which is measured apart (``host_ms``: perf_counter
around the call, no sync). ``graph=True`` does the same around CUDA-graph replays.
Without a hold (no driver support, or a call that synchronizes the host) the samples
are plain events around each call and the method says so.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import torch

from apex_core.clocks import CudaEvent, elapsed_ms, perf_counter, perf_counter_ns
from apex_core.measure.kernel_timer import KernelTimer
from apex_core.measure.l2_flush import L2Flush
from apex_core.measure.stream_hold import Watchdog, probe_stream_hold
from apex_core.measure.telemetry import Monitor, measure_telemetry
from apex_core.measure.throttle import BatchWatch
from apex_core.measure.timing_stream import choose
from apex_core.results import Telemetry, Timing
from apex_core.stats import summarize
from apex_core.timing import StopRule, TimingOptions, remaining_samples, warm_up

# samples queued between two host synchronizations
BATCH = 10
# how long a held sample may take to queue before the watchdog releases it: this many
# times the slowest warm-up call's host time, and never less than the floor
HOLD_TIMEOUT_FACTOR = 20.0
HOLD_TIMEOUT_MIN_S = 0.25
HOLD_TIMEOUT_MAX_S = 5.0
# How the floor (one empty kernel, timed the cell's way) is sampled. Within one measurement
# its p50 settles in a few dozen samples, but its level moves between measurements by ~10 %
# on an H100 while a cell's raw p50 holds within 0.5 % (docs/perf.md, 2026-11-27), so the
# floor is the mean of the p50s of several short rounds, not one long one
# (TimingOptions.floor_sampling "rounds"; "interleaved" samples it between the cell's batches;
# "pooled" averages every round the process has taken the same way).
FLOOR_ROUNDS = 8
# TimingOptions.floor_sampling "pooled": the floor rounds this process has taken, by _floor_key
_pooled_rounds: dict[tuple[Any, ...], list[float]] = {}
FLOOR_WARMUP, FLOOR_MIN_SAMPLES, FLOOR_MIN_TIME_S, FLOOR_MAX_TIME_S = 5, 30, 0.005, 0.04
# one empty kernel sampled as a floor round, raw and cold: the doctor's floors and the stream choice
FLOOR_SAMPLING = TimingOptions(warmup=FLOOR_WARMUP, min_iters=FLOOR_MIN_SAMPLES, min_time_s=FLOOR_MIN_TIME_S,
                               max_time_s=FLOOR_MAX_TIME_S, subtract_floor=False, energy=False, cache="cold")
# the timing stream's choice (timing_stream.py): each candidate's floor, the lower of two rounds
# (the levels it tells apart lie 0.6-1.7 us apart)
STREAM_PROBE_ROUNDS = 2


def empty_kernel() -> Callable[[], Any]:
    """A launch that does no work: one thread that spins for 0 cycles (``torch.cuda._sleep(0)``)."""
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is not None:
        return lambda: sleep(0)
    one = torch.empty(1, device="cuda")
    return lambda: one.fill_(0)


def subtract_floor(timing: Timing, floor_ms: float, rounds_ms: Sequence[float] = ()) -> Timing:
    """The samples net of the timer's floor (never below 0); the floor (and the rounds it was
    taken from) kept beside them."""
    net = tuple(max(sample - floor_ms, 0.0) for sample in timing.samples_ms)
    return attrs.evolve(timing, samples_ms=net, stats=summarize(net), floor_ms=floor_ms,
                        floor_rounds_ms=tuple(rounds_ms))


def hold_timeout_s(warmup_host_s: list[float]) -> float:
    """The watchdog's timeout for one held sample, from the warm-up calls' host times."""
    slowest = max(warmup_host_s, default=0.0)
    return min(max(HOLD_TIMEOUT_MIN_S, HOLD_TIMEOUT_FACTOR * slowest), HOLD_TIMEOUT_MAX_S)


class InTurn:
    """One call of each callable in turn, round after round: every batch of samples and every
    warm-up spreads over all of a cell's input placements (``next``: the placement called next)."""

    def __init__(self, calls: Sequence[Callable[[], Any]]) -> None:
        self.calls = tuple(calls)
        self.next = 0

    def __call__(self) -> Any:
        call = self.calls[self.next]
        self.next = (self.next + 1) % len(self.calls)
        return call()


def _slot(call: Callable[[], Any]) -> int:
    """The input placement ``call`` runs next (0 when there is one)."""
    return call.next if isinstance(call, InTurn) else 0


class CudaTimer:
    """Times a callable with CUDA events on the process's timing stream (timing_stream.py), held
    while each sample is queued.

    ``throttle`` (set by ``measure_cuda``) reads NVML after each batch of the cell's own samples and
    sets a throttled batch aside (apex_core/measure/throttle.py); the floor's samples are not read.
    """

    throttle: BatchWatch | None = None
    watching: BatchWatch | None = None  # ``throttle`` while the cell's own samples are taken

    def __init__(self, options: TimingOptions, hold: Any = "probe", stream: Any = None) -> None:
        self.torch = torch
        self.options = options
        # one stream for every timer of the process, chosen by its cold floor (timing_stream.py)
        self.stream = stream if stream is not None else choose(
            torch.cuda.current_device(), torch.cuda.Stream,
            lambda candidate: _candidate_floor_ms(candidate, options.hold)).stream
        self.flush = L2Flush.on_device(torch.cuda.current_device()) if options.cache == "cold" else None
        if not options.hold:
            hold = None
        if hold == "probe":
            hold, why = probe_stream_hold()
            self.unheld_reason = f"stream hold unavailable: {why}" if hold is None else ""
        else:
            self.unheld_reason = "" if hold is not None else "not held (--no-hold)"
        self.hold = hold
        self.timed_call: Callable[[], Any] | None = None
        # the event class and its reading as they were when apex_core was imported (apex_core/clocks.py)
        self.event, self.elapsed = CudaEvent, elapsed_ms
        self.spot: Any = None  # the spot checks of the measurement in progress
        self.kept: Any = None  # the spot-checked call's outputs, copied

    def close(self) -> None:
        if self.hold is not None:
            self.torch.cuda.synchronize()
            self.hold.close()
            self.hold = None

    def _capture(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        """A replay of ``fn``'s graph that returns what the capture returned: the tensors the
        replay writes, which the spot checks read (a stale buffer shows there)."""
        torch = self.torch
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(self.stream):
            fn()  # one eager call on the capture stream so lazy allocations happen first
        self.stream.synchronize()
        with torch.cuda.graph(graph, stream=self.stream):
            outputs = fn()

        def replay() -> Any:
            graph.replay()
            return outputs

        return replay

    def measure(self, fn: Callable[[], Any], more: Sequence[Callable[[], Any]] = (),
                spot: Any = None) -> Timing:
        """Time ``fn``; with ``subtract_floor`` each sample is net of the same method's empty launch.

        ``more``: the same cell's callables on other input placements (apex_core/measure/placements.py);
        the samples are then taken from ``fn`` and each of them in turn, and pooled. ``spot``
        (apex_core.measure.spot_checks.SpotChecks) checks a few timed calls' outputs.
        """
        torch = self.torch
        notes = []
        graph = False
        calls: Sequence[Callable[[], Any]] = (fn, *more)
        if self.options.graph:
            try:
                calls = [self._capture(each) for each in calls]
                graph = True
            except Exception as exc:  # capture is best effort; the method column says what ran
                torch.cuda.synchronize()
                notes.append(f"graph capture failed ({type(exc).__name__}: {exc}); timed eagerly")
        call = calls[0] if len(calls) == 1 else InTurn(calls)
        torch.cuda.synchronize()
        self.timed_call = call  # what was timed (the graph's replay under --graph), for the energy window
        interleave = (self.options.subtract_floor and self.options.floor_sampling == "interleaved"
                      and self.options.timer != "kernel")
        floor_call = self._floor_call(graph) if interleave else None
        self.spot, self.watching = spot, self.throttle
        try:
            timing, why_unheld, floor_samples = self._measure_raw(call, self.options, self.unheld_reason,
                                                                  floor_call)
        except RuntimeError:
            # the kernel timer refuses a call that did no device work: if it handed back stale
            # outputs, that is the finding to report
            if spot is not None and self.options.timer == "kernel":
                self._final_check(calls, spot)
            raise
        if spot is not None:
            self._final_check(calls, spot)
        self.spot = self.watching = None
        if why_unheld:
            notes.append(why_unheld)
        if self.throttle is not None and self.throttle.note:
            notes.append(self.throttle.note)
        if self.options.timer == "kernel":
            method = "kernel_profiler"
            notes += ["graph replays"] if graph else []
        else:
            base = "cuda_graph" if graph else "cuda_event"
            method = base if why_unheld else f"{base}_held"
        if self.options.subtract_floor:
            if floor_samples:
                timing = subtract_floor(timing, statistics.median(floor_samples))
            else:
                timing = subtract_floor(timing, *self._floor(graph, why_unheld))
        if self.flush is not None and (failed := self.flush.failure_note()):
            notes.append(failed)
        # fewer samples than placements (--fixed-iters 2, say) sampled only that many of them
        placements = min(len(calls), len(timing.samples_ms))
        return attrs.evolve(timing, method=method, note="; ".join(notes), placements=placements)

    def _final_check(self, calls: Sequence[Callable[[], Any]], spot: Any) -> None:
        """One more call on the placement last refreshed (its fresh set written back there), its
        outputs and inputs checked."""
        spot.rewrite()
        with self.torch.cuda.stream(self.stream):
            outputs = calls[spot.last_slot]()
        self.torch.cuda.synchronize()
        spot.finish(outputs)

    def _measure_raw(self, call: Callable[[], Any], options: TimingOptions, why_unheld: str,
                     floor_call: Callable[[], Any] | None = None) -> tuple[Timing, str, list[float]]:
        """Samples of ``call`` as the timer sees them; why they were not held ("" if held); and
        the samples of ``floor_call`` queued between the call's batches (none without one)."""
        torch = self.torch
        with torch.cuda.stream(self.stream):
            if options.timer == "kernel":
                timer = KernelTimer(options, self.flush, watch=self.watching)
                return timer.measure(call, self.spot, lambda: _slot(call)), "", []
            warm_host_s = warm_up(call, options)
            if floor_call is not None:
                for _ in range(FLOOR_WARMUP):
                    floor_call()
            return self._sample(call, options, hold_timeout_s(warm_host_s), why_unheld, floor_call)

    def _floor_call(self, graph: bool) -> Callable[[], Any]:
        """One empty kernel, launched as the cell is (a graph replay under ``--graph``)."""
        empty = empty_kernel()
        return self._capture(empty) if graph else empty

    def _floor(self, graph: bool, why_unheld: str) -> tuple[float, list[float]]:
        """The same method (graph, hold) around one empty kernel: the timer's own cost, as the mean
        of ``FLOOR_ROUNDS`` short measurements' p50s; and those p50s."""
        call = self._floor_call(graph)
        # the floor samples an empty kernel, not the cell: --fixed-iters does not apply to it
        options = attrs.evolve(self.options, warmup=FLOOR_WARMUP, min_iters=FLOOR_MIN_SAMPLES,
                               min_time_s=FLOOR_MIN_TIME_S, max_time_s=FLOOR_MAX_TIME_S, fixed_iters=None)
        rounds = [self._measure_raw(call, options, why_unheld)[0].stats.p50 for _ in range(FLOOR_ROUNDS)]
        averaged = rounds
        if self.options.floor_sampling == "pooled":
            # every round this process has taken the same way, this cell's included
            averaged = _pooled_rounds.setdefault(self._floor_key(graph, why_unheld), [])
            averaged += rounds
        return sum(averaged) / len(averaged), rounds

    def _floor_key(self, graph: bool, why_unheld: str) -> tuple[Any, ...]:
        """What a floor round depends on: the card, the method (timer, graph, hold) and the L2 state."""
        return (self.torch.cuda.current_device(), self.options.timer, graph, not why_unheld, self.options.cache)

    def _sample(self, call: Callable[[], Any], options: TimingOptions, timeout_s: float, why_unheld: str,
                floor_call: Callable[[], Any] | None = None) -> tuple[Timing, str, list[float]]:
        """Samples until the stop rule says enough; returns them, why they were not held, and the
        floor's samples: with ``floor_call``, a batch of it the same way after each batch of the call.

        The floor's batches count in the elapsed time the stop rule sees, so interleaving changes
        how many samples the cell gets within its time bounds, never how long it is sampled.
        """
        torch = self.torch
        rule = StopRule(options, self.spot)
        samples: list[float] = []
        floor_samples: list[float] = []
        host_ms: list[float] = []
        watchdog = Watchdog(self.hold.release) if self.hold is not None else None
        spot, watch = self.spot, self.watching or BatchWatch(None, None)  # without one: nothing set aside
        watch.begin()
        start = perf_counter()
        try:
            while True:
                held = watchdog is not None and not why_unheld
                # under --fixed-iters the last batch queues only the calls still owed
                count = remaining_samples(options, len(samples), BATCH)
                checked = spot is not None and spot.before(len(samples), _slot(call))
                batch = self._queue_batch(call, watchdog if held else None, timeout_s, host_ms, count,
                                          spot if checked else None)
                batch[-1][1].synchronize()
                if held and watchdog is not None and watchdog.tripped:
                    torch.cuda.synchronize()
                    if checked:  # its spot call ran all the same: checked, its placement given back
                        spot.after(len(samples), self.kept, self.elapsed(*batch[0]))
                    why_unheld = (f"not held: a call did not finish queueing within {timeout_s * 1e3:.0f} ms "
                                  "behind the hold (it synchronizes with the host, or queues more launches "
                                  "than the stream takes); timed without the hold, so host launch gaps count")
                    samples.clear()
                    floor_samples.clear()  # taken held; the cell's samples from now on are not
                    host_ms.clear()
                    watch.begin()
                    continue
                times = [self.elapsed(begin, end) for begin, end in batch]
                # read right after the sync, before the floor's batch or a spot check runs
                aside = watch.after_batch(times)
                if floor_call is not None:
                    floor_batch = self._queue_batch(floor_call, watchdog if held else None, timeout_s, [],
                                                    count)
                    floor_batch[-1][1].synchronize()
                    if not aside:  # set aside with the cell's batch: it ran on the same held-down card
                        floor_samples += [self.elapsed(begin, end) for begin, end in floor_batch]
                if checked:
                    spot.after(len(samples), self.kept, times[0])
                spent_s = spot.spent_s if spot is not None else 0.0
                stop = "time_cap" if aside and watch.ends_sampling(samples, perf_counter() - start - spent_s,
                                                                   options) else None
                for sample in [] if aside else times:
                    samples.append(sample)
                    if stop := rule.reason(samples, perf_counter() - start):
                        break
                if stop:
                    watch.finish()
                    timing = Timing("cuda_event", options.cache, tuple(samples), summarize(samples), stop,
                                    host_ms=statistics.median(host_ms) if host_ms else None)
                    return timing, why_unheld, floor_samples
        finally:
            if watchdog is not None:
                watchdog.close()

    def _queue_batch(self, call: Callable[[], Any], watchdog: Watchdog | None, timeout_s: float,
                     host_ms: list[float], count: int = BATCH, spot: Any = None) -> list[tuple[Any, Any]]:
        """Queue ``count`` samples; each held until its call is queued when a watchdog is given.
        With ``spot``, the first call's outputs are copied after its end event into ``kept``."""
        events = [(self.event(enable_timing=True), self.event(enable_timing=True)) for _ in range(count)]
        for index, (begin, end) in enumerate(events):
            if self.flush is not None:
                self.flush()
            number = None
            if watchdog is not None:
                number = self.hold.hold(self.stream)
                watchdog.arm(number, timeout_s)
            begin.record(self.stream)
            t0 = perf_counter_ns()
            try:
                outputs = call()
                host_ms.append((perf_counter_ns() - t0) / 1e6)
                end.record(self.stream)
            finally:  # released even when the call raises, or the shared stream waits for ever
                if watchdog is not None and number is not None:
                    watchdog.disarm()
                    self.hold.release(number)
            if spot is not None and index == 0:
                self.kept = spot.keep(outputs)  # queued after the end event: outside the sample
            if watchdog is not None and watchdog.tripped:
                return events[: index + 1]
        return events


def _candidate_floor_ms(stream: Any, held: bool) -> float:
    """The cold floor on ``stream``, held as the process's first timer asks: the lowest p50 of
    ``STREAM_PROBE_ROUNDS`` short rounds of the empty kernel after the L2 flush (where streams differ)."""
    options = attrs.evolve(FLOOR_SAMPLING, hold=held)
    timer = CudaTimer(options, stream=stream)
    try:
        call = timer._floor_call(False)
        return min(timer._measure_raw(call, options, timer.unheld_reason)[0].stats.p50
                   for _ in range(STREAM_PROBE_ROUNDS))
    finally:
        timer.close()


def measure_cuda(fn: Callable[[], Any], options: TimingOptions, more: Sequence[Callable[[], Any]] = (),
                 placed_bytes: int = 0, spot: Any = None) -> tuple[Timing, float, Telemetry]:
    """Time ``fn`` (in turn with ``more``, the callables of the cell's other input placements) on
    the GPU under NVML; the timing, the peak device MB, telemetry.

    The peak leaves out the flush buffer and ``placed_bytes``, what the other placements hold
    (their inputs, padding and outputs), so it is one placement's, as without them.
    """
    timer = CudaTimer(options)
    try:
        flush_bytes = timer.flush.numel() if timer.flush is not None else 0
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        monitor = Monitor(torch.cuda.current_device())
        # --fixed-iters promises exactly N samples: throttled batches are counted, not set aside
        timer.throttle = BatchWatch(monitor.nvml, monitor.handle, monitor.unavailable,
                                    set_aside=options.fixed_iters is None)
        timing, telemetry = measure_telemetry(monitor, lambda: timer.measure(fn, more, spot),
                                              lambda: (timer.timed_call or fn)(), torch.cuda.synchronize,
                                              energy=options.energy)
        peak = torch.cuda.max_memory_allocated() - flush_bytes - placed_bytes
        return timing, peak / 2**20, attrs.evolve(telemetry, batches=timer.throttle.summary())
    finally:
        timer.close()

