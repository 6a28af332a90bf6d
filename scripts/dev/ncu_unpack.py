"""Profile one tileunpack kernel at the large profile under ncu; autotuning runs outside the profiled range.

Usage (on a GPU machine, after ``source scripts/gpu_env.sh``):
    ncu --profile-from-start off --section SpeedOfLight --section Occupancy \\
        python scripts/dev/ncu_unpack.py {override,blend}-{walk,sort,runs} | overlap-{walk,map}
"""

import sys

import torch

from adapters import triton_ops
from apex_core.workloads.tileunpack import TileUnpack
from apex_kernels.tileunpack import aligned, winner_map

which = sys.argv[1]
workload = TileUnpack()
params = workload.make_params("large")
case = next(c for c in workload.cases(params) if c.name == which.split("-")[0])
inputs = workload.make_inputs(case, "cuda", torch.float16, 0)
# force the path asked for: the walk, the band kernel sorting its own tiles, or presorted
# runs; for overlap the walk or the winner map
path = which.split("-")[1]
if path == "walk":
    aligned.ALIGNED_MAX_K = 0
aligned.RUNS_MIN_K = 0 if path == "runs" else 2**30
winner_map.OVERLAP_RUNS_MIN_K = 2**30 if path == "walk" else 0
launcher = triton_ops.TILEUNPACK.bind(workload, case, inputs)
launch, meta = launcher.run, launcher.metadata
for _ in range(2):  # the first call autotunes
    launch()
torch.cuda.synchronize()
print(which, meta["kernel"], {k: v for k, v in meta.items() if k.isupper()}, flush=True)
torch.cuda.profiler.start()
launch()
torch.cuda.synchronize()
torch.cuda.profiler.stop()
