"""Profile one call of a cell's triton launcher under ncu, after the calls that autotune it (exploration).

The cell is prepared as a run prepares it (fp16, seed 0, the workload's first case); two calls
outside the profiled range tune and warm it, then one call runs between ``cudaProfilerStart`` and
``cudaProfilerStop``. Usage (on a GPU machine, after ``source scripts/gpu_env.sh``):
    ncu --profile-from-start off -k regex:modulate_dw --section SpeedOfLight \\
        python scripts/dev/ncu_cell.py ff-infer [--profile large]
"""

from __future__ import annotations

import argparse

import torch
from dev_cells import backend_cell  # scripts/dev, this script's folder

parser = argparse.ArgumentParser()
parser.add_argument("workload")
parser.add_argument("--profile", default="fixed")
args = parser.parse_args()
call = backend_cell("triton", args.workload, args.profile)
for _ in range(2):  # the first call autotunes
    call()
torch.cuda.synchronize()
torch.cuda.profiler.start()
call()
torch.cuda.synchronize()
torch.cuda.profiler.stop()
print(args.workload, args.profile, "profiled one call", flush=True)
