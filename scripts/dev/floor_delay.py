"""Does the held-event floor move with how long the hold lasts? Rounds in one process.

The floor (one empty kernel, held events, cold L2) changes its level from round to round
by 6-10 % on an H100 while a triton cell's raw p50 holds within 1 % (docs/perf.md,
2026-11-27). One difference between the two: the empty kernel is queued in about a
microsecond, so its hold is released almost at once, while a Triton launch keeps the hold
for ~20 us of host time. If the L2 flush (a 2 x L2 memset queued before the hold) is
still draining when the hold ends, a short hold puts the drain inside the floor's events.
Each round here times, raw, the empty kernel with the host busy for 0, 5, 20 and 50 us
after queueing it (the hold lasts that much longer), the same with a warm L2 (no flush),
and the triton tilepack cell. Prints each round, then the spread and mean of each.
Dev tool; its numbers go to docs/perf.md with the card.
"""

from __future__ import annotations

import statistics
import sys

import attrs
from dev_cells import delayed, triton_cell  # scripts/dev, this script's folder

from apex_core.measure.cuda_timer import CudaTimer, empty_kernel
from apex_core.timing import TimingOptions

ROUNDS = 12
DELAYS_US = (0, 5, 20, 50)


def spread(values: list[float]) -> str:
    return (f"{min(values):.3f}-{max(values):.3f} us ({(max(values) - min(values)) / min(values):.1%}), "
            f"mean {statistics.mean(values):.3f}")


def main() -> int:
    cell = triton_cell("tilepack")
    sampling = TimingOptions(energy=False, subtract_floor=False, warmup=10, min_iters=100, min_time_s=0.05,
                             max_time_s=0.3)
    cold, warm = CudaTimer(sampling), CudaTimer(attrs.evolve(sampling, cache="warm"))
    empty = empty_kernel()
    series: dict[str, list[float]] = {}
    try:
        for index in range(ROUNDS):
            for timer, cache in ((cold, "cold"), (warm, "warm")):
                for delay in DELAYS_US:
                    samples = timer._measure_raw(delayed(empty, delay), timer.options, "")[0].samples_ms
                    series.setdefault(f"floor {cache} +{delay}us", []).append(statistics.median(samples) * 1e3)
            samples = cold._measure_raw(cell, sampling, "")[0].samples_ms
            series.setdefault("tilepack cold", []).append(statistics.median(samples) * 1e3)
            latest = " ".join(f"{name} {values[-1]:.3f}" for name, values in series.items())
            print(f"round {index:2d}: {latest}", flush=True)
    finally:
        cold.close()
        warm.close()
    for name, values in series.items():
        print(f"{name}: {spread(values)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
