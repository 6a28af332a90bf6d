"""Time tileunpack's kernel paths against each other on one case (exploration, not the perf notes).

Each path (aligned cases: walk, band with its own sort, band over presorted runs;
overlap: walk, winner map) is checked against
the reference first, then timed with ``triton.testing.do_bench`` (L2 flushed between
calls). The perf notes' numbers come from ``apex-bench`` itself.

Usage (on a GPU machine, after ``source scripts/gpu_env.sh``):
    python scripts/dev/unpack_paths.py --profile large --cases override,blend,overlap [--set kmax=256]
"""

import argparse
import json

import torch
import triton.testing

from adapters import triton_ops
from apex_core.correctness import compare_outputs, upcast_inputs
from apex_core.workloads.tileunpack import TileUnpack
from apex_kernels.tileunpack import aligned, walk, winner_map

PATHS = {  # module constants that force each path of the aligned cases
    "walk": {"ALIGNED_MAX_K": 0},
    "band-sort": {"RUNS_MIN_K": 2**30},
    "band-runs": {"RUNS_MIN_K": 0},
}
OVERLAP_PATHS = {  # and of overlapping origins: the walk, the winner map and its knobs
    "walk": {"OVERLAP_RUNS_MIN_K": 2**30},
    "map": {},
    "map-chunk8": {"OVERLAP_RUN_CHUNK": 8},
    "map-cols64": {"OVERLAP_MAP_COLUMNS": 64},
}
OVERLAP_DEFAULTS = {"OVERLAP_RUNS_MIN_K": 0}
parser = argparse.ArgumentParser()
parser.add_argument("--profile", default="large")
parser.add_argument("--cases", default="override,blend")
parser.add_argument("--set", action="append", default=[], help="KEY=INT parameter override")
parser.add_argument("--device", default="cuda", help="cpu: check only (TRITON_INTERPRET=1)")
parser.add_argument("--graph", action="store_true",
                    help="time CUDA-graph replays (no host launch cost, warm L2)")
parser.add_argument("--bandwidth", type=float, help="copy GB/s of this card, for the fraction")
args = parser.parse_args()
overrides = {k: int(v) for k, v in (s.split("=") for s in args.set)}
workload = TileUnpack()
params = workload.make_params(args.profile, overrides)
HOME = {"ALIGNED_MAX_K": aligned, "RUNS_MIN_K": aligned, "OVERLAP_RUNS_MIN_K": winner_map,
        "OVERLAP_RUN_CHUNK": winner_map, "OVERLAP_MAP_COLUMNS": winner_map}  # each path's module
KERNEL_HOMES = (aligned, walk, winner_map)
defaults = {name: getattr(module, name) for name, module in HOME.items()}
for case in (c for c in workload.cases(params) if c.name in args.cases.split(",")):
    inputs = workload.make_inputs(case, args.device, torch.float16, 0)
    reference = workload.reference(case, upcast_inputs(inputs, torch.float32))
    minimal = workload.work(case, "fp16").bytes_moved
    overlap = case.name == "overlap"
    for path, constants in (OVERLAP_PATHS if overlap else PATHS).items():
        for name, value in {**defaults, **(OVERLAP_DEFAULTS if overlap else {}), **constants}.items():
            setattr(HOME[name], name, value)
        launcher = triton_ops.TILEUNPACK.bind(workload, case, inputs)
        launch, outputs, meta = launcher.run, launcher.outputs, launcher.metadata
        for out in outputs.values():
            out.fill_(float("nan"))
        got = launch()
        accuracy = compare_outputs(got, reference, workload.tolerance("fp16"), path)
        if args.device == "cpu":
            print(json.dumps({"case": case.name, "path": path, "ok": accuracy.passed}))
            continue
        if args.graph:
            us = triton.testing.do_bench_cudagraph(launch, rep=300, return_mode="median") * 1e3
        else:
            us = triton.testing.do_bench(launch, warmup=50, rep=300, return_mode="median") * 1e3
        row = {"case": case.name, "params": overrides, "path": path, "graph": args.graph,
               "kernel": meta["kernel"],
               "config": str(next(getattr(getattr(m, meta["kernel"]), "best_config", "")
                                  for m in KERNEL_HOMES if hasattr(m, meta["kernel"]))),
               "ok": accuracy.passed, "us": round(us, 2), "gbps": round(minimal / us / 1e3, 1)}
        if args.bandwidth:
            row["fraction"] = round(minimal / us / 1e3 / args.bandwidth, 3)
        print(json.dumps(row), flush=True)
