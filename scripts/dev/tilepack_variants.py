"""tilepack's kernel in several shapes, by apex-bench's kernel timer (exploration, not the perf notes).

Each variant is checked against the workload's reference on a NaN-poisoned output, then timed
with ``KernelTimer`` (the profiler's device time per call, the L2 flushed before each call, as
``--timer kernel`` does) at the profile's sizes, fp16:
- ``shipped-BLOCK_C-warps``: ``_tilepack_kernel`` with each of its configs pinned;
- ``flat-XBLOCK-warps``: one program per XBLOCK consecutive output elements, the shape
  Inductor gives the reference's gather (its index math per element, the id load per element).
Prints one JSON line per variant, fastest last.
Usage (on a GPU machine, after ``source scripts/gpu_env.sh``):
    python scripts/dev/tilepack_variants.py [--profile fixed] [--set kmax=64]
"""

import argparse
import json

import torch
import triton
import triton.language as tl

from apex_core.correctness import compare_outputs
from apex_core.measure.kernel_timer import KernelTimer
from apex_core.measure.l2_flush import L2Flush
from apex_core.timing import TimingOptions
from apex_core.workloads.tilepack import TilePack
from apex_kernels import tilepack as shipped


@triton.jit
def _flat_kernel(features, idx, packed, C, H, W, K, N, T: tl.constexpr, XBLOCK: tl.constexpr):
    i = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    mask = i < N
    dx = i % T
    dy = (i // T) % T
    c = (i // (T * T)) % C
    bk = i // (T * T * C)
    tile = tl.load(idx + bk, mask=mask, other=0)
    per_row = W // T
    src = ((bk // K) * C + c) * H * W + ((tile // per_row) * T + dy) * W + (tile % per_row) * T + dx
    tl.store(packed + i, tl.load(features + src, mask=mask), mask=mask)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", default="fixed")
    parser.add_argument("--set", action="append", default=[], help="KEY=INT parameter override")
    args = parser.parse_args()
    workload = TilePack()
    params = workload.make_params(args.profile, {k: int(v) for k, v in (s.split("=") for s in args.set)})
    case = workload.cases(params)[0]
    inputs = workload.make_inputs(case, "cuda", torch.float16, 0)
    reference = workload.reference(case, inputs)
    features, idx = inputs["features"], inputs["idx"]
    b, c, h, w = features.shape
    k, t = idx.shape[1], params.tile_size
    out = torch.empty((b, k, c, t, t), dtype=features.dtype, device="cuda")
    tp, rb = shipped.tile_rows_per_program(t)
    chunks = triton.cdiv(t, rb)
    variants = {}
    for config in shipped._CONFIGS:
        block_c, warps = config.kwargs["BLOCK_C"], config.num_warps
        grid = (b * k * chunks, triton.cdiv(c, block_c))
        variants[f"shipped-{block_c}-{warps}"] = (
            lambda grid=grid, block_c=block_c, warps=warps: shipped._tilepack_kernel.fn[grid](
                features, idx, out, c, h, w, k, T=t, TP=tp, RB=rb, BLOCK_C=block_c, num_warps=warps))
    n = out.numel()
    for xblock in (256, 512, 1024, 2048):
        for warps in (1, 2, 4, 8):
            if xblock // (32 * warps) < 1:
                continue
            variants[f"flat-{xblock}-{warps}"] = (
                lambda xblock=xblock, warps=warps: _flat_kernel[(triton.cdiv(n, xblock),)](
                    features, idx, out, c, h, w, k, n, T=t, XBLOCK=xblock, num_warps=warps))
    timer = KernelTimer(TimingOptions(timer="kernel", min_iters=200, min_time_s=0.3, max_time_s=2.0),
                        flush=L2Flush.on_device())
    rows = []
    for name, launch in variants.items():
        out.fill_(float("nan"))
        launch()
        ok = compare_outputs({"packed": out}, reference, workload.tolerance("fp16"), name).passed
        timing = timer.measure(lambda launch=launch: launch())
        rows.append({"variant": name, "ok": ok, "p50_us": round(timing.stats.p50 * 1e3, 3),
                     "min_us": round(timing.stats.min * 1e3, 3), "samples": len(timing.samples_ms)})
        print(json.dumps(rows[-1]), flush=True)
    print("fastest last:")
    for row in sorted(rows, key=lambda r: -r["p50_us"]):
        print(f"  {row['variant']:16s} {row['p50_us']:7.3f} us  ok={row['ok']}")


if __name__ == "__main__":
    main()
