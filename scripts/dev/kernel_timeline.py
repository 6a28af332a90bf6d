"""Where a multi-kernel cell's device time goes: each kernel's duration and the gap before it (exploration).

Before dependent launch the default method read ff-infer about 20-30 us above the sum of its kernels
(docs/perf.md), the device's gaps between 14 dependent launches. This profiles CALLS calls of the
triton launcher of each named cell (fp16, cold L2 by ``L2Flush`` before each call, the host queued
ahead behind the timer's stream hold, no sync between calls) with ``torch.profiler`` and prints, per
kernel position in the call, the median over the calls of its duration and of the gap from the end
of the kernel before it to its start (negative where they overlap, as a dependent launch may), then
per call the median time the device was busy (the union of the kernels' intervals: a dependent
kernel's duration includes its wait inside the kernel before, so a sum would count that twice), the
span from the first start to the last end, and the idle time between (span - busy).
The autotuners are set up as apex-bench's triton backend sets them: the held timer for what they
tune, seeded from the configurations shipped for the card (``--retune``: none seeded); each cell
first prints the configuration every kernel ran with and where it came from, so two processes can
be checked for running the same ones (a kernel without a shipped pick is tuned in each).
One JSON line per kernel and per cell.
Usage (on a GPU machine, after ``source scripts/gpu_env.sh``):
    python scripts/dev/kernel_timeline.py ff-infer tilessm-scan:bidirectional [--profile fixed] [--calls 50]
        [--option mix=cublas] [--retune]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from functools import partial
from pathlib import Path

import torch
from dev_cells import queued_held  # scripts/dev, this script's folder
from torch.profiler import ProfilerActivity, profile, record_function

from adapters.triton_autotune import autotune_entries, cached_keys
from adapters.triton_backend import tune_with_held_timer
from adapters.triton_picks import RETUNE, shipped_picks
from apex_core.measure.l2_flush import L2Flush
from apex_core.plugin_api import implementation
from apex_core.registry import Registry
from apex_kernels.tuned import autotuners

PREFIX = "timeline_call_"


def per_call_kernels(trace: dict, calls: int) -> list[list[dict]]:
    """The kernels each ``PREFIX<i>`` range launched, in start order (matched by correlation id)."""
    events = trace["traceEvents"]
    ranges = {int(e["name"][len(PREFIX):]): (e["ts"], e["ts"] + e["dur"]) for e in events
              if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(PREFIX)}
    launch_ts = {e["args"]["correlation"]: e["ts"] for e in events
                 if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    kernels = [e for e in events if e.get("cat") == "kernel"]
    out: list[list[dict]] = [[] for _ in range(calls)]
    for k in kernels:
        ts = launch_ts.get(k["args"].get("correlation"))
        for i, (begin, end) in ranges.items():
            if ts is not None and begin <= ts <= end:
                out[i].append(k)
    return [sorted(call, key=lambda k: k["ts"]) for call in out]


def profiled_calls(launcher, flush, calls: int) -> None:
    """``calls`` calls, each after an L2 flush and in its own profiler range."""
    for i in range(calls):
        flush()
        with record_function(f"{PREFIX}{i}"):
            launcher.run()


def union_us(kernels: list[dict]) -> float:
    """Time covered by at least one of the kernels."""
    total, reach = 0.0, float("-inf")
    for k in sorted(kernels, key=lambda k: k["ts"]):
        end = k["ts"] + k["dur"]
        if end > reach:
            total += end - max(k["ts"], reach)
            reach = end
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("cells", nargs="+", help="WORKLOAD or WORKLOAD:CASE")
    parser.add_argument("--profile", default="fixed")
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a keyword for the triton launcher (a string), e.g. mix=cublas for ff-infer")
    parser.add_argument("--retune", action="store_true",
                        help="tune every kernel here, without the shipped picks")
    args = parser.parse_args()
    options = dict(o.split("=", 1) for o in args.option)
    registry = Registry.discover()
    flush = L2Flush.on_device()
    for spec in args.cells:
        name, _, case_name = spec.partition(":")
        workload = registry.workloads[name]
        case = next(c for c in workload.cases(workload.make_params(args.profile))
                    if not case_name or c.name == case_name)
        inputs = workload.make_inputs(case, "cuda", torch.float16, 0)
        launcher = implementation(workload, "triton").bind(workload, case, inputs, **options)
        # as the triton backend's prepare(): after binding, before any launch; seeded keys count as cached
        tuners = autotuners()
        tune_with_held_timer(tuners)
        seeding, _, picks = (None, None, dict(RETUNE)) if args.retune else \
            shipped_picks(torch.cuda.get_device_name()).seed(tuners)
        print(json.dumps({"cell": spec, "picks": picks}), flush=True)
        before = cached_keys(launcher.launches)
        for _ in range(3):  # autotuning and compiles before the profiled calls
            launcher.run()
        torch.cuda.synchronize()
        for entry in autotune_entries(launcher.launches, before, seeding):
            print(json.dumps({"cell": spec, "kernel": entry["kernel_name"], "config": entry["selected_config"],
                              "source": entry["selection_source"]}), flush=True)
        # the stream held until every call is queued: unheld, the profiled host fell behind and the
        # gaps were its own (30-75 us, H200, 2026-11-28)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            held = queued_held(partial(profiled_calls, launcher, flush, args.calls))
        path = Path(tempfile.mkdtemp()) / "trace.json"
        prof.export_chrome_trace(str(path))
        calls = [c for c in per_call_kernels(json.loads(path.read_text()), args.calls) if c]
        length = statistics.mode(len(c) for c in calls)
        calls = [c for c in calls if len(c) == length]
        for position in range(length):
            gaps = [c[position]["ts"] - (c[position - 1]["ts"] + c[position - 1]["dur"])
                    for c in calls] if position else [0.0]
            print(json.dumps({"cell": spec, "position": position, "kernel": calls[0][position]["name"][:60],
                              "dur_us": round(statistics.median(c[position]["dur"] for c in calls), 3),
                              "gap_before_us": round(statistics.median(gaps), 3)}), flush=True)
        busy = [union_us(c) for c in calls]
        summed = [sum(k["dur"] for k in c) for c in calls]
        span = [c[-1]["ts"] + c[-1]["dur"] - c[0]["ts"] for c in calls]
        gaps = [s - b for s, b in zip(span, busy, strict=True)]
        print(json.dumps({"cell": spec, "calls": len(calls), "kernels": length,
                          "held": held, "busy_us": round(statistics.median(busy), 3),
                          "span_us": round(statistics.median(span), 3),
                          "idle_us": round(statistics.median(gaps), 3),
                          "sum_of_durations_us": round(statistics.median(summed), 3)}),
              flush=True)


if __name__ == "__main__":
    main()
