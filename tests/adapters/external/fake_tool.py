"""A misbehaving external command for the tests: ``fake_tool.py MODE`` (run by apex-bench, never imported).

It answers tilepack through the numpy example, then breaks the contract the way MODE says.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "external"))
from numpy_bench import WORKLOADS  # noqa: E402

RESULT = {"status": "ok", "latency_ms": {"mean": 1.0, "p50": 1.0, "p95": 1.5, "min": 0.5, "max": 2.0},
          "throughput_tokens_per_sec": None, "peak_memory_bytes": 1024}


def main(mode: str) -> int:
    request = json.loads(Path(os.environ["APEX_BENCH_REQUEST"]).read_text())
    if mode == "junk":
        print("loading model... done\nresult: fast")
        return 0
    if mode == "exit3":
        print("fatal: device lost", file=sys.stderr)
        return 3
    if mode == "hang":
        print("fake tool: waiting forever", file=sys.stderr, flush=True)
        time.sleep(3600)
    if mode == "schema":
        print(json.dumps({**RESULT, "latency_ms": {**RESULT["latency_ms"], "mean": "fast"}}))
        return 0
    if mode == "skipped":
        print(json.dumps({"status": "skipped", "reason": "no kernel for this shape"}))
        return 0
    if mode == "error-status":
        print(json.dumps({"status": "error", "reason": "out of device memory"}))
        return 0
    with np.load(request["inputs"]) as archive:
        inputs = {name: archive[name] for name in archive.files}
    outputs = WORKLOADS[request["workload"]](inputs, request["params"])
    if mode == "wrong-values":
        outputs = {k: v + np.asarray(1, dtype=v.dtype) for k, v in outputs.items()}
    elif mode == "wrong-shape":
        outputs = {k: v[..., :1] for k, v in outputs.items()}
    elif mode == "wrong-dtype":
        outputs = {k: v.astype(np.float64) for k, v in outputs.items()}
    elif mode == "missing-output":
        outputs = {"unrelated": np.zeros(3, dtype=np.float32)}
    if mode != "no-outputs":
        np.savez(request["outputs"], **outputs)
    print("progress lines on stdout before the result are allowed")
    print(json.dumps(RESULT if mode == "summary-only" else {**RESULT, "samples_ms": [0.5, 1.0, 1.0, 2.0]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
