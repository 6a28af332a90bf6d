"""The timing contract (docs/timing.md): options, the adaptive stop rule and the CPU timer.

The CUDA timers live beside it: ``cuda_timer`` (events on a held stream, the default)
and ``kernel_timer`` (device activity from the profiler).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs

from apex_core.clocks import perf_counter, perf_counter_ns
from apex_core.results import Timing
from apex_core.stats import summarize

# How many noise readings must agree before the sampler calls the noise converged,
# and how close they must be (relative spread), in the spirit of nvbench's stdrel criterion.
_CONVERGENCE_WINDOW = 5
_CONVERGENCE_SPREAD = 0.05
_CHECK_STEP = 10


TIMERS = ("event", "kernel")
# how a CUDA floor is sampled (cuda_timer.py, docs/timing.md): "rounds", eight short
# measurements of an empty kernel after the cell; "interleaved", a batch of empty kernels
# after each of the cell's own batches, so the floor spans the cell's sampling time;
# "pooled", the cell's eight rounds averaged with every earlier cell's in the same process
FLOOR_SAMPLING = ("rounds", "interleaved", "pooled")
FIXED_MODE = "fixed_iters"  # TimingOptions.mode and the stop reason of a --fixed-iters sample
# input placements per CUDA cell (TimingOptions.placements): on an H100 and an H200 one kernel's
# time moved by up to 4 % between placements of the same inputs, which one process samples once
DEFAULT_PLACEMENTS = 4
MAX_PLACEMENTS = 16


@attrs.frozen
class TimingOptions:
    """How to sample one cell: warm-up calls, sample bounds, noise target and cache state."""

    warmup: int = 10
    min_iters: int = 10
    min_time_s: float = 0.5
    max_time_s: float = 3.0
    noise_target: float = 0.005
    max_samples: int = 5000
    cache: str = attrs.field(default="cold", validator=attrs.validators.in_(("cold", "warm")))
    graph: bool = False
    # "event": CUDA events on a held stream; "kernel": the profiler's device activity per call
    timer: str = attrs.field(default="event", validator=attrs.validators.in_(TIMERS))
    # hold the timing stream until each sample is queued (cuda_timer.py); off only to compare
    hold: bool = True
    # CUDA samples net of the same method's time for one empty kernel (docs/timing.md)
    subtract_floor: bool = True
    floor_sampling: str = attrs.field(default="rounds", validator=attrs.validators.in_(FLOOR_SAMPLING))
    # CUDA cells: a window of back-to-back calls after the timing for NVML's energy counter
    energy: bool = True
    # --fixed-iters N: exactly N warm-up calls and N timed samples, no stop rule (docs/timing.md)
    fixed_iters: int | None = None
    # CUDA cells of backends that can prepare again (Backend.reprepares): the cell's inputs are
    # made this many times at other device addresses and the samples taken in turn from each,
    # because a kernel's time depends on where its data lies (docs/timing.md, "Input placements")
    placements: int = DEFAULT_PLACEMENTS
    # which sampling ran, "adaptive" (the stop rule) or "fixed_iters"; derived, so the report's
    # config (attrs.asdict of these options) says it without anyone having to compute it
    mode: str = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "mode", "adaptive" if self.fixed_iters is None else FIXED_MODE)
        if self.fixed_iters is not None and (isinstance(self.fixed_iters, bool) or self.fixed_iters < 1):
            raise ValueError(f"fixed iters must be >= 1, got {self.fixed_iters}")
        if isinstance(self.placements, bool) or not 1 <= self.placements <= MAX_PLACEMENTS:
            raise ValueError(f"placements must be 1 to {MAX_PLACEMENTS}, got {self.placements}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {self.warmup}")
        if self.min_iters < 1:
            raise ValueError(f"iters must be >= 1, got {self.min_iters}")
        if self.min_time_s < 0 or self.max_time_s <= 0 or self.max_time_s < self.min_time_s:
            raise ValueError(
                f"need 0 <= min-time <= max-time and max-time > 0, got {self.min_time_s}"
                f" and {self.max_time_s}"
            )
        if not 0 < self.noise_target < 1:
            raise ValueError(f"noise target must be in (0, 1), got {self.noise_target}")


class StopRule:
    """Decides when enough samples were taken: min iters and min time, then noise or cap.

    The time cap cuts a cell below ``min_iters`` samples only when a single sample is itself
    longer than the cap, or when the cell has sampled for ``min_iters`` times the cap (calls
    whose wall time far exceeds what the timer reads of them): a cell of 1 s calls under a
    3 s cap takes its ``min_iters`` samples; one of 10 s calls stops after the first and is
    flagged ``few_samples`` (apex_core/report/flags.py), never running ``min_iters`` x 10 s.

    After both minimums, sampling stops when the relative noise (std / mean) is under
    the target, or when the estimate has converged: the median of the samples moved
    less than the noise target over the last few checks, or the noise itself stopped
    changing (kernels whose noise never reaches the target, as in nvbench).

    ``checks`` (apex_core.measure.spot_checks.SpotChecks, or None): checks run inside the sampling
    loop; the seconds they took (``spent_s``) are not the cell's sampling time, or at a large
    size (a GB of inputs written and compared) they would use up its budget.
    """

    def __init__(self, options: TimingOptions, checks: Any = None) -> None:
        self.options = options
        self.checks = checks
        self.noise_history: list[float] = []
        self.median_history: list[float] = []
        self.next_check = 0

    def reason(self, samples: list[float], elapsed_s: float) -> str | None:
        opts = self.options
        if self.checks is not None:
            elapsed_s -= self.checks.spent_s
        if opts.fixed_iters is not None:  # equal counts for every cell: no time limit, no noise rule
            return FIXED_MODE if len(samples) >= opts.fixed_iters else None
        if len(samples) >= opts.max_samples:
            return "sample_cap"
        if elapsed_s >= opts.max_time_s and self._may_cap(samples, elapsed_s):
            return "time_cap"
        if len(samples) < max(opts.min_iters, 2) or elapsed_s < opts.min_time_s:
            return None
        # Statistics over thousands of samples are not free: look on a geometric
        # schedule so the check never dominates a fast callable.
        if len(samples) < self.next_check:
            return None
        self.next_check = max(len(samples) + _CHECK_STEP, int(len(samples) * 1.1))
        stats = summarize(samples)
        if stats.cv <= opts.noise_target:
            return "noise"
        self.noise_history.append(stats.cv)
        self.median_history.append(stats.p50)
        if _settled(self.median_history, opts.noise_target) or _settled(
            self.noise_history, _CONVERGENCE_SPREAD
        ):
            return "converged"
        return None

    def _may_cap(self, samples: list[float], elapsed_s: float) -> bool:
        """Whether the time cap, reached, may stop sampling now (see the class docstring)."""
        opts = self.options
        return (len(samples) >= opts.min_iters or max(samples, default=0.0) >= opts.max_time_s * 1e3
                or elapsed_s >= opts.min_iters * opts.max_time_s)


def _settled(history: list[float], spread: float) -> bool:
    """True when the last readings agree within ``spread`` of their latest value."""
    recent = history[-_CONVERGENCE_WINDOW:]
    if len(recent) < _CONVERGENCE_WINDOW or not all(math.isfinite(v) for v in recent):
        return False
    return (max(recent) - min(recent)) <= spread * max(abs(recent[-1]), 1e-12)


def _timing(method: str, cache: str, samples: list[float], stop: str, note: str = "") -> Timing:
    return Timing(method, cache, tuple(samples), summarize(samples), stop, note)


def remaining_samples(options: TimingOptions, taken: int, wanted: int) -> int:
    """How many of ``wanted`` calls a timer may queue next: all, unless --fixed-iters leaves fewer."""
    if options.fixed_iters is None:
        return wanted
    return max(0, min(wanted, options.fixed_iters - taken))


def warm_up(fn: Callable[[], Any], options: TimingOptions) -> list[float]:
    """``options.warmup`` calls, cut short once they take ``max_time_s``; each call's host seconds.

    Under ``fixed_iters`` exactly that many calls, never cut short.
    """
    host_s: list[float] = []
    start = perf_counter()
    fixed = options.fixed_iters is not None
    for _ in range(options.fixed_iters if options.fixed_iters is not None else options.warmup):
        t0 = perf_counter()
        fn()
        host_s.append(perf_counter() - t0)
        if not fixed and perf_counter() - start >= options.max_time_s:
            break
    return host_s


def measure_cpu(fn: Callable[[], Any], options: TimingOptions, method: str = "cpu_perf_counter",
                spot: Any = None) -> Timing:
    """Sample ``fn`` with ``time.perf_counter_ns`` (as it was when apex_core was imported) around
    each call; ``spot`` (apex_core.measure.spot_checks.SpotChecks) checks a few calls' outputs."""
    warm_up(fn, options)
    rule = StopRule(options, spot)
    samples: list[float] = []
    start = perf_counter()
    while True:
        if spot is not None:
            spot.before(len(samples))
        t0 = perf_counter_ns()
        outputs = fn()
        samples.append((perf_counter_ns() - t0) / 1e6)
        if spot is not None:
            spot.after(len(samples) - 1, outputs, samples[-1])
        stop = rule.reason(samples, perf_counter() - start)
        if stop:
            if spot is not None:
                if spot.rewrite():  # the last call ran on the cell's own inputs: one more on the set
                    outputs = fn()
                spot.finish(outputs)
            return _timing(method, "n/a", samples, stop)
