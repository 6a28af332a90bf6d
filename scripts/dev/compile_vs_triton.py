"""One cell's torch.compile kernel beside the triton backend's, by the kernel timer (exploration).

For each named workload (first case, or the one given): the reference under ``torch.compile``
and the triton backend's launcher on the same fp16 inputs, each checked against the reference
and timed with ``KernelTimer`` (the profiler's device time per call, the L2 flushed before each
call as the timers flush it, ``L2Flush``; raw: the profiler's floor of about 0.9 us included),
with the number of kernels per call.
Inductor's generated code goes to OUT/<workload>-<case>.py (``TORCH_LOGS=output_code`` prints it;
here it is taken from Inductor's debug directory), to read what it does differently.
Usage (on a GPU machine, after ``source scripts/gpu_env.sh``):
    python scripts/dev/compile_vs_triton.py OUT tilepack tileunpack:override [--profile fixed]
"""

import argparse
import json
import os
import shutil
import tempfile
from functools import partial
from pathlib import Path

import torch

from apex_core.correctness import compare_outputs
from apex_core.measure.kernel_timer import KernelTimer
from apex_core.measure.l2_flush import L2Flush
from apex_core.plugin_api import implementation
from apex_core.registry import Registry
from apex_core.timing import TimingOptions


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("cells", nargs="+", help="WORKLOAD or WORKLOAD:CASE")
    parser.add_argument("--profile", default="fixed")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    debug = Path(tempfile.mkdtemp(prefix="inductor-debug-"))
    os.environ["TORCH_COMPILE_DEBUG_DIR"] = str(debug)
    torch._inductor.config.trace.enabled = True  # writes output_code.py per graph under debug/
    registry = Registry.discover()
    timer = KernelTimer(TimingOptions(timer="kernel", min_iters=200, min_time_s=0.3, max_time_s=2.0),
                        flush=L2Flush.on_device())
    for spec in args.cells:
        name, _, case_name = spec.partition(":")
        workload = registry.workloads[name]
        cases = workload.cases(workload.make_params(args.profile))
        case = next(c for c in cases if not case_name or c.name == case_name)
        inputs = workload.make_inputs(case, "cuda", torch.float16, 0)
        reference = workload.reference(case, inputs)
        torch._dynamo.reset()
        compiled = torch.compile(partial(workload.reference, case), dynamic=False)
        launcher = implementation(workload, "triton").bind(workload, case, inputs)
        for label, call in (("torch-compile", partial(compiled, inputs)), ("triton", launcher.run)):
            got = call()
            ok = compare_outputs(got, reference, workload.tolerance("fp16"), label).passed
            timing = timer.measure(call)
            print(json.dumps({"cell": f"{name}/{case.name}", "backend": label, "ok": ok,
                              "p50_us": round(timing.stats.p50 * 1e3, 3),
                              "kernels_per_call": timing.kernel.kernels_per_call if timing.kernel else None}),
                  flush=True)
        for code in debug.rglob("output_code.py"):
            shutil.copy(code, args.out / f"{name}-{case.name}.py")


if __name__ == "__main__":
    main()
