"""What the kernel timer's profiler session sees of a JAX cell (scripts/dev, a GPU machine):
the call ranges, the host's CUDA calls and the device activity, with correlation ids, so a
cell the timer reads as 0 ms can be told apart from one with no device work.
    python scripts/dev/jax_trace.py WORKLOAD PROFILE [CASE]"""

import json
import os
import sys
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from adapters.jax_backend import JaxBackend
from apex_core.measure.kernel_timer import CALL_PREFIX, DEVICE_CATEGORIES, HOST_CATEGORIES, call_activities
from apex_core.registry import Registry

name, profile_name = sys.argv[1], sys.argv[2]
workload = Registry.discover().workloads[name]
case = next(c for c in workload.cases(workload.make_params(profile_name))
            if len(sys.argv) < 4 or c.name == sys.argv[3])
inputs = workload.make_inputs(case, "cuda", torch.float16, 0)
call = JaxBackend().prepare(workload, case, inputs).fn
for _ in range(3):
    call()
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for i in range(3):
        with record_function(f"{CALL_PREFIX}{i}"):
            call()
    torch.cuda.synchronize()
handle, path = tempfile.mkstemp(suffix=".json")
os.close(handle)
prof.export_chrome_trace(path)
with open(path, encoding="utf-8") as trace:
    events = json.load(trace)["traceEvents"]
print(f"{name} {profile_name} {case.name}: {len(events)} events;",
      "activities", [(a.index, round(a.busy_ms, 4), a.kernels) for a in call_activities(events)])
t0 = min(float(e["ts"]) for e in events if "ts" in e)
cats: dict[str, int] = {}
for e in events:
    cats[str(e.get("cat"))] = cats.get(str(e.get("cat")), 0) + 1
print("categories", cats)
for e in sorted((e for e in events if "ts" in e), key=lambda e: float(e["ts"])):
    cat = e.get("cat")
    if cat in DEVICE_CATEGORIES or cat in HOST_CATEGORIES or (cat == "user_annotation"):
        args = e.get("args", {})
        print(f"{cat:16} {float(e['ts']) - t0:12.1f} dur {float(e.get('dur', 0)):9.1f} "
              f"tid {str(e.get('tid'))[:8]:8} corr {args.get('correlation')!s:8} "
              f"stream {args.get('stream')!s:5} {str(e.get('name'))[:70]}")
