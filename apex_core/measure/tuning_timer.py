"""The timer Triton's autotuner times each configuration with (adapters/triton_backend.py): a short
held, cold-L2 sample, so its choice follows the kernels and not the host's jitter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from apex_core.measure.cuda_timer import CudaTimer
from apex_core.stats import percentile, summarize
from apex_core.timing import TimingOptions

TUNING_OPTIONS = TimingOptions(warmup=3, min_iters=20, min_time_s=0.0, max_time_s=0.1, subtract_floor=False,
                               energy=False)
TUNING_METHOD = "cuda_event_held, cold L2, p50 of >= 20 samples"
# one timer per device: a timer's stream and flush buffer belong to the device it was made on
_timers: dict[int, CudaTimer] = {}


def tuning_bench(fn: Callable[[], Any], quantiles: Any = None, return_mode: str = "median",
                 **_ignored: Any) -> Any:
    """``triton.testing.do_bench``'s contract (ms; quantiles or one statistic) on the held timer."""
    device = torch.cuda.current_device()
    if device not in _timers:
        _timers[device] = CudaTimer(TUNING_OPTIONS)
    ordered = sorted(_timers[device].measure(fn).samples_ms)
    if quantiles:
        return [percentile(ordered, 100 * q) for q in quantiles]
    stats = summarize(ordered)
    return {"min": stats.min, "max": stats.max, "mean": stats.mean}.get(return_mode, stats.p50)
