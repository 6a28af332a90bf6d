"""Does where the inputs lie in device memory move a short cell's p50?

Cells of 2.5-3 us differ by up to 8 % between fresh processes of one build (docs/perf.md),
with the same clocks, floor and autotuned configuration. This times the triton cells of
tilepack and tilessm-scan forward at the fixed profile in ONE process over several input
placements (each a fresh make_inputs after a padding allocation of a different size, so
the tensors land at other addresses), each placement timed three times, with the shipped
held-event timer (TIMER=kernel: the kernel-only timer; CELLS=workload:case,... other cells).
Placement moves the p50 when the spread across placements is much larger than the spread
within one. Prints a table; JSON to $OUT/placement-TIMER.json.
Dev tool; its numbers go to docs/perf.md with the card.
"""

from __future__ import annotations

import json
import os
import statistics
import sys

import torch

from apex_core.measure.cuda_timer import measure_cuda
from apex_core.registry import Registry
from apex_core.timing import TimingOptions

# CELLS=workload:case,... picks others (fusiongate:default: the cell whose p50 moved most between
# fresh processes on 2026-11-27)
CELLS = tuple(tuple(item.split(":", 1)) for item in
              os.environ.get("CELLS", "tilepack:default,tilessm-scan:forward").split(","))
PLACEMENTS = int(os.environ.get("PLACEMENTS", 8))
REPEATS = int(os.environ.get("REPEATS", 3))
# TIMER=kernel times the same placements with the profiler's kernel time instead of held events
OPTIONS = TimingOptions(energy=False, timer=os.environ.get("TIMER", "event"))


def p50_us(fn) -> float:
    timing, _, _ = measure_cuda(fn, OPTIONS)
    return statistics.median(timing.samples_ms) * 1e3


def main() -> int:
    registry = Registry.discover()
    backend = registry.backends["triton"]
    backend.configure({})
    results = []
    keep = []  # padding and old inputs stay allocated, so every placement is new
    for workload_name, case_name in CELLS:
        workload = registry.workloads[workload_name]
        case = next(c for c in workload.cases(workload.make_params("fixed")) if c.name == case_name)
        for placement in range(PLACEMENTS):
            pad = (placement * 7 + 3) * 2**20 + placement * 4096
            keep.append(torch.empty(pad, dtype=torch.uint8, device="cuda"))
            # the same seed as every run's: the same values (tile ids) at another address
            inputs = workload.make_inputs(case, "cuda", torch.float16, seed=0)
            keep.append(inputs)
            fn = backend.prepare(workload, case, inputs).fn
            address = min(t.data_ptr() for t in inputs.values() if isinstance(t, torch.Tensor) and t.is_cuda)
            p50s = [p50_us(fn) for _ in range(REPEATS)]
            results.append({"cell": f"{workload_name}/{case_name}", "placement": placement,
                            "address_mod_2mib": address % 2**21, "p50_us": p50s})
            print(f"{workload_name}/{case_name} placement {placement} (addr % 2 MiB = {address % 2**21:>7}): "
                  + " ".join(f"{v:.3f}" for v in p50s), flush=True)
    for cell in {r["cell"] for r in results}:
        rows = [r["p50_us"] for r in results if r["cell"] == cell]
        within = max((max(r) - min(r)) / min(r) for r in rows)
        means = [statistics.mean(r) for r in rows]
        across = (max(means) - min(means)) / min(means)
        print(f"{cell}: largest spread within one placement {within:.1%}, across placements {across:.1%}")
    out = os.environ.get("OUT", ".")
    with open(os.path.join(out, f"placement-{OPTIONS.timer}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "timer": OPTIONS.timer, "results": results},
                  f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
