"""Time tileunpack's aligned band kernels at pinned configs, exploration only.

Binds the launcher of each aligned case (override, blend) at the profile, runs it once
(the prepass writes the runs, the tree's autotuner the output), then launches the band
kernel itself at each pinned (BLOCK_C, CB, warps, stages): the output must match the tuned
launch's (max abs difference printed), and each is timed with ``triton.testing.do_bench``
(L2 flushed between calls, median; the prepass is not re-run, its buffers stay valid).

    python scripts/dev/band_configs.py [--profile large] [--cases blend,override]
"""

import argparse
import json

import torch
import triton
import triton.testing

from adapters import triton_ops
from apex_core.workloads.tileunpack import TileUnpack

parser = argparse.ArgumentParser()
parser.add_argument("--profile", default="large")
parser.add_argument("--cases", default="blend")
args = parser.parse_args()
CONFIGS = [(2, 2, 4, 3), (2, 2, 4, 1), (2, 2, 8, 3), (2, 4, 4, 3), (2, 1, 4, 3), (1, 2, 2, 3),
           (1, 4, 2, 3), (1, 2, 4, 3), (4, 1, 8, 3), (4, 2, 8, 3), (1, 1, 2, 3), (1, 1, 1, 3),
           (2, 8, 4, 3)]
workload = TileUnpack()
for case in (c for c in workload.cases(workload.make_params(args.profile, {}))
             if c.name in args.cases.split(",")):
    inputs = workload.make_inputs(case, "cuda", torch.float16, 0)
    launcher = triton_ops.TILEUNPACK.bind(workload, case, inputs)
    launcher.run()
    main = launcher.launches[-1]
    out = launcher.outputs["out"]
    expected = out.clone()
    minimal = workload.work(case, "fp16").bytes_moved
    us = triton.testing.do_bench(launcher.run, warmup=20, rep=200, return_mode="median") * 1e3
    print(json.dumps({"case": case.name, "launcher": "tuned", "config": str(main.kernel.best_config),
                      "us": round(us, 2), "gbps": round(minimal / us / 1e3, 1)}), flush=True)
    grid_of = main.grid
    for block_c, cb, warps, stages in CONFIGS:
        meta = {**main.meta, "BLOCK_C": block_c, "CB": cb}
        grid = grid_of(meta)

        def band(main=main, meta=meta, grid=grid, warps=warps, stages=stages):
            main.kernel.fn[grid](*main.args, **meta, num_warps=warps, num_stages=stages)

        out.fill_(float("nan"))
        band()
        diff = float((out.float() - expected.float()).abs().max())
        us = triton.testing.do_bench(band, warmup=20, rep=200, return_mode="median") * 1e3
        print(json.dumps({"case": case.name, "BLOCK_C": block_c, "CB": cb, "warps": warps,
                          "stages": stages, "max_diff": diff, "kernel_us": round(us, 2)}), flush=True)
