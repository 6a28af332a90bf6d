"""What pinning a cell's data for the report costs where the cell runs (docs/replay.md).

Times ``replay_artifacts.artifact`` (the inputs made on the CPU at the seed, hashed; the float64
CPU reference fingerprinted up to its element limit) for every built-in case at a profile, once
cold (the per-process cache empty), as the first cell of each (workload, case, dtype) pays it.
    python scripts/dev/replay_cost.py [PROFILE] [DTYPE]
"""

from __future__ import annotations

import sys
import time

import attrs

from apex_core.measure import replay_artifacts
from apex_core.plan import params_for
from apex_core.registry import Registry

profile = sys.argv[1] if len(sys.argv) > 1 else "fixed"
dtype = sys.argv[2] if len(sys.argv) > 2 else "fp16"
total = 0.0
for name, workload in sorted(Registry.discover().workloads.items()):
    if name == "engine":
        continue
    params = params_for(workload, profile, {})[0]
    for case in workload.cases(params):
        replay_artifacts.clear_cache()
        start = time.perf_counter()
        pinned = replay_artifacts.artifact(workload, case.name, attrs.asdict(params), dtype, 0)
        took = time.perf_counter() - start
        total += took
        print(f"{name:13} {case.name:13} {profile} {dtype}: {took:7.2f} s  inputs_only={pinned.inputs_only} "
              f"hashed={pinned.inputs_sha256 is not None}", flush=True)
print(f"total {total:.2f} s")
