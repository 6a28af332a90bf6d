"""Time tilessm-scan's two paths against each other (exploration, not the perf notes).

The one-program-per-channel-block walk (``segment_steps=0``) and the split path at
several segment lengths are each checked against the reference first, then timed with
``triton.testing.do_bench`` (L2 flushed between calls). The perf notes' numbers come
from ``apex-bench`` itself.

Usage (on a GPU machine, after ``source scripts/gpu_env.sh``):
    python scripts/dev/scan_paths.py --set batch=8 --set channels=2048 --set steps=4096
"""

import argparse
import json

import torch
import triton.testing

from adapters import triton_ops
from apex_core.correctness import compare_outputs, upcast_inputs
from apex_core.workloads.tilessm_scan import TileSSMScan

parser = argparse.ArgumentParser()
parser.add_argument("--profile", default="large")
parser.add_argument("--cases", default="forward,backward,bidirectional")
parser.add_argument("--set", action="append", default=[], help="KEY=INT parameter override")
parser.add_argument("--segments", default="0,32,64,128,256",
                    help="segment_steps values to compare; 0 is the walk")
parser.add_argument("--device", default="cuda", help="cpu: check only (TRITON_INTERPRET=1)")
parser.add_argument("--bandwidth", type=float, help="copy GB/s of this card, for the fraction")
args = parser.parse_args()
overrides = {k: int(v) for k, v in (s.split("=") for s in args.set)}
workload = TileSSMScan()
params = workload.make_params(args.profile, overrides)
for case in (c for c in workload.cases(params) if c.name in args.cases.split(",")):
    inputs = workload.make_inputs(case, args.device, torch.float16, 0)
    reference = workload.reference(case, upcast_inputs(inputs, torch.float32))
    minimal = workload.work(case, "fp16").bytes_moved
    for steps in (int(v) for v in args.segments.split(",")):
        launcher = triton_ops.TILESSM_SCAN.bind(workload, case, inputs, segment_steps=steps)
        launch, outputs, meta = launcher.run, launcher.outputs, launcher.metadata
        for out in outputs.values():
            out.fill_(float("nan"))
        got = launch()
        accuracy = compare_outputs(got, reference, workload.tolerance("fp16"), str(steps))
        row = {"case": case.name, "params": overrides, "segment_steps": steps,
               "ok": accuracy.passed}
        if args.device != "cpu":
            us = triton.testing.do_bench(launch, warmup=50, rep=300, return_mode="median") * 1e3
            row.update(us=round(us, 2), gbps=round(minimal / us / 1e3, 1))
            if args.bandwidth:
                row["fraction"] = round(minimal / us / 1e3 / args.bandwidth, 3)
        print(json.dumps(row), flush=True)
