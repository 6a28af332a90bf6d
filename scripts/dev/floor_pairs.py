"""Does the held-event floor move with the cell? Rounds of (floor, cell) in one process.

The net p50 of a 2.5 us cell moves by up to 13 % between measurements of one process
(docs/perf.md). Each round here times, with one CudaTimer (held events, cold L2, no floor
subtracted), the empty kernel the floor uses and then the triton tilepack cell at the
fixed profile, both raw. The floor is taken two ways (the shipped short sampling and a
longer one) and read two ways (p50, and the mean of the middle half of its samples, which
is not bound to the events' 32 ns steps). Prints each round, and the spread of the cell's
raw p50 and of cell - floor for each floor estimate, the shipped ``CudaTimer._floor`` among
them.
Dev tool; its numbers go to docs/perf.md with the card.
"""

from __future__ import annotations

import statistics
import sys

import attrs
from dev_cells import triton_cell  # scripts/dev, this script's folder

from apex_core.measure.cuda_timer import CudaTimer, empty_kernel
from apex_core.timing import TimingOptions

ROUNDS = 16


def spread(values: list[float]) -> str:
    return f"{min(values):.3f}-{max(values):.3f} us ({(max(values) - min(values)) / min(values):.1%})"


def interquartile_mean(samples: tuple[float, ...]) -> float:
    ordered = sorted(samples)
    quarter = len(ordered) // 4
    return statistics.mean(ordered[quarter:len(ordered) - quarter])


def main() -> int:
    cell = triton_cell("tilepack")
    options = TimingOptions(energy=False, subtract_floor=False)
    # the floor's sampling as shipped until 2026-11-27 (>= 100 samples, <= 0.3 s), and a longer one
    short = attrs.evolve(options, warmup=10, min_iters=100, min_time_s=0.05, max_time_s=0.3)
    long = attrs.evolve(options, warmup=10, min_iters=1000, min_time_s=0.3, max_time_s=1.0)
    timer = CudaTimer(options)
    empty = empty_kernel()
    floors: dict[str, list[float]] = {}
    cells = []
    try:
        for index in range(ROUNDS):
            for label, sampling in (("short", short), ("long", long)):
                samples = timer._measure_raw(empty, sampling, "")[0].samples_ms
                floors.setdefault(f"{label} p50", []).append(statistics.median(samples) * 1e3)
                floors.setdefault(f"{label} iqm", []).append(interquartile_mean(samples) * 1e3)
            # the floor as measure() takes it (the mean of FLOOR_ROUNDS short rounds)
            floors.setdefault("shipped", []).append(timer._floor(False, "")[0] * 1e3)
            cells.append(statistics.median(timer._measure_raw(cell, options, "")[0].samples_ms) * 1e3)
            print(f"round {index:2d}: cell {cells[-1]:.3f} " + " ".join(
                f"{name} {values[-1]:.3f}" for name, values in floors.items()), flush=True)
    finally:
        timer.close()
    print(f"cell raw p50 {spread(cells)}")
    for name, values in floors.items():
        print(f"floor {name}: {spread(values)}; cell - same round's floor "
              f"{spread([c - f for c, f in zip(cells, values, strict=True)])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
