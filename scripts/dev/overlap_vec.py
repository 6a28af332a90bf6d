"""Time overlap's streaming pass at pinned configs and VEC (pixels a thread), exploration only.

Binds the winner-map launcher on the large profile's overlap case, runs it once (the
prepasses write the winner map, the tree's autotuner writes the output), then launches
``_unpack_winner_map_kernel`` itself at each pinned (BLOCK_P, BLOCK_C, CB, warps, VEC):
the output must equal the tuned launch's bit for bit (a copy, no arithmetic), and each is
timed with ``triton.testing.do_bench`` (L2 flushed between calls, median). The perf notes'
numbers come from ``apex-bench`` itself; this picks what to measure there.

    python scripts/dev/overlap_vec.py [--profile large] [--vec 1,2,4,8]
"""

import argparse
import itertools
import json

import torch
import triton
import triton.testing

from adapters import triton_ops
from apex_core.workloads.tileunpack import TileUnpack
from apex_kernels.tileunpack import winner_map

parser = argparse.ArgumentParser()
parser.add_argument("--profile", default="large")
parser.add_argument("--vec", default="1,2,4,8")
args = parser.parse_args()
workload = TileUnpack()
case = next(c for c in workload.cases(workload.make_params(args.profile, {})) if c.name == "overlap")
inputs = workload.make_inputs(case, "cuda", torch.float16, 0)
launcher = triton_ops.TILEUNPACK.bind(workload, case, inputs)
launcher.run()
main = launcher.launches[-1]
base, packed, winners, out, c, hw, k = main.args
expected = out.clone()
minimal = workload.work(case, "fp16").bytes_moved
tuned_us = triton.testing.do_bench(launcher.run, warmup=20, rep=200, return_mode="median") * 1e3
print(json.dumps({"launcher": "tuned", "config": str(winner_map._unpack_winner_map_kernel.best_config),
                  "us": round(tuned_us, 2), "gbps": round(minimal / tuned_us / 1e3, 1)}), flush=True)
shapes = [(256, 8, 4, 4), (512, 8, 8, 8), (256, 16, 4, 8), (128, 16, 8, 4), (256, 8, 16, 4),
          (512, 8, 16, 8), (1024, 4, 8, 8), (256, 8, 1, 4)]
for (bp, bc, cb, warps), vec in itertools.product(shapes, [int(v) for v in args.vec.split(",")]):
    grid = (base.shape[0] * triton.cdiv(hw, bp), triton.cdiv(c, bc * cb))

    def stream(bp=bp, bc=bc, cb=cb, warps=warps, vec=vec, grid=grid):
        winner_map._unpack_winner_map_kernel.fn[grid](
            base, packed, winners, out, c, hw, k, T=packed.shape[-1], BLOCK_P=bp, BLOCK_C=bc,
            CB=cb, VEC=vec, num_warps=warps)

    out.fill_(float("nan"))
    stream()
    same = bool(torch.equal(out, expected))
    us = triton.testing.do_bench(stream, warmup=20, rep=200, return_mode="median") * 1e3
    print(json.dumps({"BLOCK_P": bp, "BLOCK_C": bc, "CB": cb, "warps": warps, "VEC": vec,
                      "same": same, "stream_us": round(us, 2)}), flush=True)
