"""What the cold-L2 flush leaves in the L2 (exploration; docs/perf.md, 2026-11-28).

tilepack's triton launcher read 3.0 us by the kernel timer in the suite and about 2.0 us in
``compile_vs_triton.py``, where it ran after torch.compile's kernel on the same inputs. This
times, by ``KernelTimer`` (raw), one placement of a workload's inputs:
  sequence   the triton launcher alone; after one torch.compile call on the same inputs; the
             compiled reference itself; the launcher again; the launcher on inputs compile never saw;
  flushes    a gather that loads with ``evict_last`` (as Inductor's does) on fresh inputs, then
             it, torch.compile and the triton launcher after it under each flush:
             ``write``: zero 2x L2 (the timers' flush before 2026-11-28);
             ``reset``: ``cuCtxResetPersistingL2Cache``, then the write (``L2Flush``);
             ``last-sweep``: 2x L2 read and written with ``evict_last``;
             ``last-first``: that, then again with ``evict_first``;
             and each flush's device time (CUDA events over 20);
  reset-host the reset's host time with the GPU idle and with 2 ms of work queued ahead of it
             (a reset that waits for queued work takes about that long).
One JSON line per measurement.
Usage (on a GPU machine, after ``source scripts/gpu_env.sh``):
    python scripts/dev/flush_probe.py [--profile fixed]
"""

import argparse
import json
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
import triton
import triton.language as tl

from apex_core.measure.kernel_timer import KernelTimer
from apex_core.measure.l2_flush import L2Flush, l2_flush_bytes
from apex_core.measure.placements import padding_bytes
from apex_core.plugin_api import implementation
from apex_core.registry import Registry
from apex_core.timing import TimingOptions

OPTIONS = TimingOptions(timer="kernel", min_iters=200, min_time_s=0.2, max_time_s=1.0)
BLOCK = 4096


@triton.jit
def _sweep(buf, n, BLOCK: tl.constexpr, POLICY: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(buf + offs, mask=offs < n, eviction_policy=POLICY)
    tl.store(buf + offs, x + 1, mask=offs < n, eviction_policy=POLICY)


@triton.jit
def _gather_last(features, idx, packed, C, H, W, K, T: tl.constexpr, BLOCK_C: tl.constexpr):
    """tilepack with ``evict_last`` loads, as Inductor emits them: one tile, BLOCK_C channels."""
    bk = tl.program_id(0)
    tile = tl.load(idx + bk, eviction_policy="evict_last")
    y0 = (tile // (W // T)) * T
    x0 = (tile % (W // T)) * T
    c3 = (tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C))[:, None, None]
    dy3 = tl.arange(0, T)[None, :, None]
    dx3 = tl.arange(0, T)[None, None, :]
    vals = tl.load(features + ((bk // K) * C + c3) * H * W + (y0 + dy3) * W + (x0 + dx3),
                   eviction_policy="evict_last")
    tl.store(packed + ((bk * C + c3) * T + dy3) * T + dx3, vals)


def flushes() -> dict[str, Callable[[], Any]]:
    buffer = torch.empty(l2_flush_bytes() // 4, dtype=torch.int32, device="cuda")
    grid = (triton.cdiv(buffer.numel(), BLOCK),)

    def sweep(*policies: str) -> Callable[[], None]:
        def run() -> None:
            for policy in policies:
                _sweep[grid](buffer, buffer.numel(), BLOCK=BLOCK, POLICY=policy)
        return run
    return {"write": buffer.zero_, "reset": L2Flush.on_device(), "last-sweep": sweep("evict_last"),
            "last-first": sweep("evict_last", "evict_first")}


def show(step: str, call: Callable[[], Any], flush: Callable[[], Any], **labels: str) -> None:
    timing = KernelTimer(OPTIONS, flush=flush).measure(call)
    kernels = timing.kernel.kernels_per_call if timing.kernel else None
    print(json.dumps({"step": step, **labels, "p50_us": round(timing.stats.p50 * 1e3, 3),
                      "kernels_per_call": kernels}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", default="fixed")
    args = parser.parse_args()
    workload = Registry.discover().workloads["tilepack"]
    case = workload.cases(workload.make_params(args.profile))[0]
    first = workload.make_inputs(case, "cuda", torch.float16, 0)
    padding = torch.empty(padding_bytes(1), dtype=torch.uint8, device="cuda")  # noqa: F841 (held)
    other = workload.make_inputs(case, "cuda", torch.float16, 0)
    launcher_type = implementation(workload, "triton")
    triton_first = launcher_type.bind(workload, case, first).run
    compiled = partial(torch.compile(partial(workload.reference, case), dynamic=False), first)
    ways = flushes()

    show("sequence", triton_first, ways["write"], what="triton, first")
    compiled()
    torch.cuda.synchronize()
    show("sequence", triton_first, ways["write"], what="triton, after one compiled call")
    show("sequence", compiled, ways["write"], what="torch-compile")
    show("sequence", triton_first, ways["write"], what="triton, after the compiled timing")
    show("sequence", launcher_type.bind(workload, case, other).run, ways["write"],
         what="triton, inputs compile never read")

    features, ids = other["features"], other["idx"]
    batch, channels, height, width = features.shape
    out = torch.empty((batch, ids.shape[1], channels, 8, 8), dtype=features.dtype, device="cuda")

    def gather_last() -> None:
        _gather_last[(ids.numel(), channels // 16)](features, ids, out, channels, height, width,
                                                    ids.shape[1], T=8, BLOCK_C=16)
    for name, flush in ways.items():
        show("flushes", gather_last, flush, what="evict_last gather", way=name)
        show("flushes", compiled, flush, what="torch-compile", way=name)
        show("flushes", triton_first, flush, what="triton, after torch-compile", way=name)
    for name, flush in ways.items():
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flush()
        start.record()
        for _ in range(20):
            flush()
        end.record()
        torch.cuda.synchronize()
        print(json.dumps({"flush_cost": name, "us": round(start.elapsed_time(end) * 1e3 / 20, 1)}))
    # whether the reset waits for queued work: its host time with the GPU idle, and with about
    # 2 ms of spinning queued ahead of it (a reset that waits takes about that long)
    reset = ways["reset"].reset
    if reset is not None:
        for busy in (False, True):
            torch.cuda.synchronize()
            if busy:
                torch.cuda._sleep(4_000_000)  # cycles: about 2 ms at 1.98 GHz
            start_s = time.perf_counter()
            code = reset()
            host_us = (time.perf_counter() - start_s) * 1e6
            print(json.dumps({"reset_host_us": round(host_us, 1), "gpu_busy": busy, "code": code}))
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
