"""The timing contract (DESIGN.md section 5): warm-up, adaptive sampling, CPU and CUDA timers.

CUDA samples are bracketed by events on a dedicated stream; by default the L2
cache is flushed before each sample with a buffer twice the device's L2 size
(the L2 of Hopper parts is split in two halves, and a buffer exactly the size
of the cache leaves some lines resident). ``graph=True`` captures the callable
in a CUDA graph once and times its replays.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import attrs

from apex_core.results import Timing
from apex_core.stats import summarize

# How many noise readings must agree before the sampler calls the noise converged,
# and how close they must be (relative spread), in the spirit of nvbench's stdrel criterion.
_CONVERGENCE_WINDOW = 5
_CONVERGENCE_SPREAD = 0.05
_BATCH = 10


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

    def __attrs_post_init__(self) -> None:
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


class _StopRule:
    """Decides when enough samples were taken: min iters and min time, then noise or cap.

    After both minimums, sampling stops when the relative noise (std / mean) is under
    the target, or when the estimate has converged: the median of the samples moved
    less than the noise target over the last few checks, or the noise itself stopped
    changing (kernels whose noise never reaches the target, as in nvbench).
    """

    def __init__(self, options: TimingOptions) -> None:
        self.options = options
        self.noise_history: list[float] = []
        self.median_history: list[float] = []
        self.next_check = 0

    def reason(self, samples: list[float], elapsed_s: float) -> str | None:
        opts = self.options
        if len(samples) >= opts.max_samples:
            return "sample_cap"
        if elapsed_s >= opts.max_time_s:
            return "time_cap"
        if len(samples) < max(opts.min_iters, 2) or elapsed_s < opts.min_time_s:
            return None
        # Statistics over thousands of samples are not free: look on a geometric
        # schedule so the check never dominates a fast callable.
        if len(samples) < self.next_check:
            return None
        self.next_check = max(len(samples) + _BATCH, int(len(samples) * 1.1))
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


def _settled(history: list[float], spread: float) -> bool:
    """True when the last readings agree within ``spread`` of their latest value."""
    recent = history[-_CONVERGENCE_WINDOW:]
    if len(recent) < _CONVERGENCE_WINDOW or not all(math.isfinite(v) for v in recent):
        return False
    return (max(recent) - min(recent)) <= spread * max(abs(recent[-1]), 1e-12)


def _timing(method: str, cache: str, samples: list[float], stop: str, note: str = "") -> Timing:
    return Timing(method, cache, tuple(samples), summarize(samples), stop, note)


def measure_cpu(fn: Callable[[], Any], options: TimingOptions, method: str = "cpu_perf_counter") -> Timing:
    """Sample ``fn`` with ``time.perf_counter_ns`` around each call."""
    for _ in range(options.warmup):
        fn()
    rule = _StopRule(options)
    samples: list[float] = []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - t0) / 1e6)
        stop = rule.reason(samples, time.perf_counter() - start)
        if stop:
            return _timing(method, "n/a", samples, stop)


def l2_flush_bytes(device_index: int = 0) -> int:
    """Bytes of the buffer written before each cold sample: twice the device's L2 size."""
    import torch

    props = torch.cuda.get_device_properties(device_index)
    l2 = int(getattr(props, "L2_cache_size", 0) or 0)
    # 64 MiB is larger than the L2 of every current part; used only if the attribute is absent.
    return 2 * l2 if l2 > 0 else 64 * 1024 * 1024


class CudaTimer:
    """Times a callable with CUDA events on a dedicated stream, optionally replaying a graph."""

    def __init__(self, options: TimingOptions) -> None:
        import torch

        self.torch = torch
        self.options = options
        self.stream = torch.cuda.Stream()
        self.flush_buffer = (
            torch.empty(l2_flush_bytes(), dtype=torch.uint8, device="cuda")
            if options.cache == "cold"
            else None
        )

    def _capture(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        torch = self.torch
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(self.stream):
            fn()  # one eager call on the capture stream so lazy allocations happen first
        self.stream.synchronize()
        with torch.cuda.graph(graph, stream=self.stream):
            fn()
        return graph.replay

    def measure(self, fn: Callable[[], Any]) -> Timing:
        torch = self.torch
        opts = self.options
        note = ""
        method = "cuda_event"
        call = fn
        if opts.graph:
            try:
                call = self._capture(fn)
                method = "cuda_graph"
            except Exception as exc:  # capture is best effort; the method column says what ran
                torch.cuda.synchronize()
                note = f"graph capture failed ({type(exc).__name__}: {exc}); timed eagerly"
        torch.cuda.synchronize()
        with torch.cuda.stream(self.stream):
            for _ in range(opts.warmup):
                call()
            samples = self._sample(call)
        return attrs.evolve(samples, method=method, note=note)

    def _sample(self, call: Callable[[], Any]) -> Timing:
        torch = self.torch
        rule = _StopRule(self.options)
        samples: list[float] = []
        start = time.perf_counter()
        while True:
            events = [
                (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                for _ in range(_BATCH)
            ]
            for begin, end in events:
                if self.flush_buffer is not None:
                    self.flush_buffer.zero_()
                begin.record(self.stream)
                call()
                end.record(self.stream)
            events[-1][1].synchronize()
            for begin, end in events:
                samples.append(begin.elapsed_time(end))
                stop = rule.reason(samples, time.perf_counter() - start)
                if stop:
                    return _timing("cuda_event", self.options.cache, samples, stop)
