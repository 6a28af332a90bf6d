"""Does a short kernel's held-event time depend on how long the GPU idles before it? (needs a GPU)

    python3 scripts/dev/flush_order.py

The same triton cell read 1.22 us in one run and 2.45 us in the next on one H100, with the
same configuration, clocks and floor (docs/perf.md, 2026-11-27): the first ran with the
builders idle, the second while they compiled. The shipped sample order is flush, hold,
events around the call, release: when the host queues the call fast, the hold is released
while the flush still runs and the call follows it at once; when the host is slow (busy
builders), the GPU finishes the flush and idles on the hold first. This times, raw, an
empty kernel and three triton cells with the host busy 0-150 us after queueing each call
(the hold lasts that much longer), in three sample orders:

- ``flush-hold`` (shipped): flush, hold, start, call, end;
- ``hold-flush``: hold, flush, start, call, end: the flush runs after the release, so the
  call always follows it, whatever the host does;
- ``flush-sync-hold``: flush, wait for it on the host, hold, start, call, end (nvbench's
  order): the call always follows an idle GPU.

Prints the mean raw p50 (us) per cell, order and delay over the rounds, and the spread of
each row. Dev tool; its numbers go to docs/perf.md with the card.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from typing import Any

from dev_cells import delayed, triton_cell  # scripts/dev, this script's folder

from apex_core.measure.cuda_timer import BATCH, CudaTimer, empty_kernel
from apex_core.timing import TimingOptions

ORDERS = ("flush-hold", "hold-flush", "flush-sync-hold")
DELAYS_US = (0, 10, 40, 150)
ROUNDS = 3


class OrderedTimer(CudaTimer):
    """The shipped timer with the flush queued at another place of each sample."""

    def __init__(self, options: TimingOptions, order: str) -> None:
        super().__init__(options)
        self.order = order

    def _flush(self) -> None:
        if self.flush is not None:
            self.flush()

    def _queue_batch(self, call: Callable[[], Any], watchdog: Any, timeout_s: float, host_ms: list[float],
                     count: int = BATCH, spot: Any = None) -> list[tuple[Any, Any]]:
        torch = self.torch
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(count)]
        for begin, end in events:
            if self.order != "hold-flush":
                self._flush()
                if self.order == "flush-sync-hold":
                    self.stream.synchronize()
            number = None
            if watchdog is not None:
                number = self.hold.hold(self.stream)
                watchdog.arm(number, timeout_s)
            if self.order == "hold-flush":
                self._flush()
            begin.record(self.stream)
            call()
            end.record(self.stream)
            if watchdog is not None and number is not None:
                watchdog.disarm()
                self.hold.release(number)
        return events


def main() -> int:
    cells = {"empty": empty_kernel(), "tilepack": triton_cell("tilepack"),
             "tile-stage1": triton_cell("tile-stage1"), "tileunpack": triton_cell("tileunpack")}
    sampling = TimingOptions(energy=False, subtract_floor=False, warmup=10, min_iters=100, min_time_s=0.05,
                             max_time_s=0.3)
    timers = {order: OrderedTimer(sampling, order) for order in ORDERS}
    p50s: dict[tuple[str, str, int], list[float]] = {}
    try:
        for _ in range(ROUNDS):
            for name, cell in cells.items():
                for order, timer in timers.items():
                    for delay in DELAYS_US:
                        samples = timer._measure_raw(delayed(cell, delay), sampling, "")[0].samples_ms
                        p50s.setdefault((name, order, delay), []).append(statistics.median(samples) * 1e3)
    finally:
        for timer in timers.values():
            timer.close()
    print("| cell | order | " + " | ".join(f"host +{d} us" for d in DELAYS_US) + " | row spread |")
    print("|---|---|" + "---:|" * (len(DELAYS_US) + 1))
    for name in cells:
        for order in ORDERS:
            means = [statistics.mean(p50s[(name, order, delay)]) for delay in DELAYS_US]
            rounds = [f"{statistics.mean(p50s[(name, order, d)]):.3f} ({min(p50s[(name, order, d)]):.2f}-"
                      f"{max(p50s[(name, order, d)]):.2f})" for d in DELAYS_US]
            print(f"| {name} | {order} | " + " | ".join(rounds)
                  + f" | {(max(means) - min(means)) / min(means):.1%} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
