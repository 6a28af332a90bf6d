"""What a measuring worker spends outside the cells (needs a GPU; docs/perf.md, 2026-11-27).

    python3 scripts/dev/worker_costs.py

1. The first torch-compile cell of a fresh process with warm compile caches (the one a
   builder already compiled): its ``prepare`` time with Inductor's default compile threads
   and with ``TORCHINDUCTOR_COMPILE_THREADS=1``, two fresh processes each, after one that
   fills the cache.
2. ``gc.collect()`` in a process that has prepared triton and torch-compile cells (the
   worker collects before and after every cell to compare device memory).
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def first_prepare(workload: str) -> None:
    """One fresh process: how long the torch-compile backend takes to prepare ``workload``."""
    import torch
    from dev_cells import backend_cell  # scripts/dev, this script's folder

    started = time.perf_counter()
    fn = backend_cell("torch-compile", workload)
    fn()
    torch.cuda.synchronize()
    threads = os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", "default")
    print(json.dumps({"workload": workload, "threads": threads,
                      "prepare_s": round(time.perf_counter() - started, 2)}), flush=True)


def gc_cost() -> None:
    from dev_cells import backend_cell

    cells = (("triton", "ff-infer"), ("torch-compile", "tilepack"), ("torch-compile", "ff-infer"))
    for backend, workload in cells:
        backend_cell(backend, workload)()
    times = []
    for _ in range(5):
        started = time.perf_counter()
        gc.collect()
        times.append(time.perf_counter() - started)
    print(json.dumps({"gc_collect_ms": [round(t * 1e3, 1) for t in times], "objects": len(gc.get_objects())}),
          flush=True)


def main() -> None:
    if len(sys.argv) > 1:
        {"prepare": lambda: first_prepare(sys.argv[2]), "gc": gc_cost}[sys.argv[1]]()
        return
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": f"{cache}/inductor",
               "TRITON_CACHE_DIR": f"{cache}/triton"}
        for workload in ("tilepack", "ff-infer"):
            # the first fills the cache
            subprocess.run([sys.executable, __file__, "prepare", workload], env=env, check=False)
            for threads in ("", "1", "", "1"):
                run_env = {**env, "TORCHINDUCTOR_COMPILE_THREADS": threads} if threads else env
                subprocess.run([sys.executable, __file__, "prepare", workload], env=run_env, check=False)
        subprocess.run([sys.executable, __file__, "gc"], env=env, check=False)


if __name__ == "__main__":
    main()
