"""Why a one-launch Triton cell reads higher under --graph than with held events.

Times, raw (floor kept in), with the shipped CudaTimer in four modes (held events, held
graph, profiler kernel time eager and graph): torch's empty kernel (`_sleep(0)`, the
shipped floor), an empty Triton kernel on 1 and on 1,024 programs, and a Triton kernel
that stores one element per program on 1,024 programs. If the graph-mode excess of a
Triton launch over `_sleep(0)` is larger than the events-mode one, the graph floor must
be taken with a launch of the same kind. Prints a table; JSON to $OUT/graph-floor.json.
Dev tool; its numbers go to docs/perf.md with the card.
"""

from __future__ import annotations

import json
import os
import sys

import torch
import triton
import triton.language as tl

from apex_core.measure.cuda_timer import CudaTimer
from apex_core.timing import TimingOptions


@triton.jit
def _empty(x_ptr):
    pass


@triton.jit
def _store(x_ptr):
    tl.store(x_ptr + tl.program_id(0), 1.0)


def main() -> int:
    buf = torch.zeros(4096, device="cuda")
    sleep = torch.cuda._sleep
    calls = {
        "torch _sleep(0)": lambda: sleep(0),
        "triton empty, 1 program": lambda: _empty[(1,)](buf),
        "triton empty, 1024 programs": lambda: _empty[(1024,)](buf),
        "triton store, 1024 programs": lambda: _store[(1024,)](buf),
    }
    modes = {
        "held events": TimingOptions(subtract_floor=False, energy=False, min_time_s=0.2, max_time_s=1.0),
        "held graph": TimingOptions(subtract_floor=False, energy=False, graph=True, min_time_s=0.2,
                                    max_time_s=1.0),
        "kernel timer": TimingOptions(subtract_floor=False, energy=False, timer="kernel", min_time_s=0.2,
                                      max_time_s=1.0),
        "kernel timer, graph": TimingOptions(subtract_floor=False, energy=False, timer="kernel", graph=True,
                                             min_time_s=0.2, max_time_s=1.0),
    }
    for call in calls.values():  # compile and load every kernel first
        call()
    torch.cuda.synchronize()
    rows = {}
    for _round in range(2):  # twice, so the order of modes cannot explain a difference
        for mode, options in modes.items():
            for name, call in calls.items():
                timer = CudaTimer(options)
                try:
                    timing = timer.measure(call)
                finally:
                    timer.close()
                rows.setdefault(mode, {}).setdefault(name, []).append(
                    {"p50_us": timing.stats.p50 * 1e3, "min_us": timing.stats.min * 1e3,
                     "n": len(timing.samples_ms), "method": timing.method, "note": timing.note})
    print(f"{torch.cuda.get_device_name()} | raw p50 us (two rounds)")
    print("| mode | " + " | ".join(calls) + " |")
    print("|---" * (len(calls) + 1) + "|")
    for mode, by_call in rows.items():
        cells = [" / ".join(f"{r['p50_us']:.2f}" for r in by_call[name]) for name in calls]
        print(f"| {mode} | " + " | ".join(cells) + " |")
    out = os.environ.get("OUT", "/tmp")
    with open(os.path.join(out, "graph-floor.json"), "w") as fh:
        json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
