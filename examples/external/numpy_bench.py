#!/usr/bin/env python3
"""An external apex-bench command: tilepack and fusiongate in plain numpy.

apex-bench runs it once per call it needs (see README.md beside this file). It reads the
request named by $APEX_BENCH_REQUEST, loads the inputs, runs the workload warm-up +
iterations times, writes the outputs and prints one JSON result on stdout. Anything
meant for a person goes to stderr.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np


def tilepack(inputs: dict[str, np.ndarray], params: dict) -> dict[str, np.ndarray]:
    """packed[b, k, c, dy, dx] = features[b, c, y0 + dy, x0 + dx] for tile idx[b, k] (row-major grid)."""
    features, idx, t = inputs["features"], inputs["idx"].astype(np.int64), params["tile_size"]
    batch, channels, _height, width = features.shape
    y0 = idx // (width // t) * t  # [B, K]
    x0 = idx % (width // t) * t
    offsets = np.arange(t)
    rows = (y0[..., None] + offsets)[:, :, None, :, None]  # [B, K, 1, t, 1]
    cols = (x0[..., None] + offsets)[:, :, None, None, :]  # [B, K, 1, 1, t]
    b = np.arange(batch)[:, None, None, None, None]
    c = np.arange(channels)[None, None, :, None, None]
    return {"packed": features[b, c, rows, cols]}  # [B, K, C, t, t], the dtype of features


def _sanitize(proxy: np.ndarray) -> np.ndarray:
    return np.nan_to_num(proxy.astype(np.float32), nan=0.0, posinf=1.0, neginf=0.0)


def fusiongate(inputs: dict[str, np.ndarray], params: dict) -> dict[str, np.ndarray]:
    """The gate and the blend, as apex_core/workloads/fusiongate.py defines them.

    alpha = sigmoid(softplus(wb)*boundary + softplus(wu)*uncertainty + bias) on proxies with
    NaN -> 0, +inf -> 1, -inf -> 0; fused = base + alpha*(detail - base).
    """
    base, detail = inputs["base"], inputs["detail"]
    softplus_wb = np.logaddexp(np.float32(0), inputs["wb"].astype(np.float32))
    softplus_wu = np.logaddexp(np.float32(0), inputs["wu"].astype(np.float32))
    logits = softplus_wb * _sanitize(inputs["boundary"]) + softplus_wu * _sanitize(inputs["uncertainty"])
    alpha = (1.0 / (1.0 + np.exp(-(logits + inputs["bias"].astype(np.float32))))).astype(base.dtype)
    wide = base.astype(np.float32)
    fused = wide + alpha.astype(np.float32) * (detail.astype(np.float32) - wide)
    return {"alpha": alpha, "fused": fused.astype(base.dtype)}


WORKLOADS = {"tilepack": tilepack, "fusiongate": fusiongate}


def peak_memory_bytes() -> int | None:
    """This process's peak resident memory (Linux VmHWM; ru_maxrss would include the parent's before exec)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # reported in kB
    except OSError:
        pass
    return None


def percentile(ordered: list[float], q: float) -> float:
    return float(np.percentile(ordered, q))  # linear interpolation, as apex-bench uses


def main() -> int:
    with open(os.environ["APEX_BENCH_REQUEST"], encoding="utf-8") as handle:
        request = json.load(handle)
    compute = WORKLOADS.get(request["workload"])
    if compute is None:
        reason = f"numpy example implements {', '.join(WORKLOADS)}, not {request['workload']}"
        print(json.dumps({"status": "skipped", "reason": reason}))
        return 0
    with np.load(request["inputs"]) as archive:
        inputs = {name: archive[name] for name in archive.files}
    params = request["params"]
    for _ in range(request["warmup"]):
        compute(inputs, params)
    samples_ms = []
    for _ in range(request["iterations"]):
        start = time.perf_counter_ns()
        outputs = compute(inputs, params)
        samples_ms.append((time.perf_counter_ns() - start) / 1e6)
    np.savez(request["outputs"], **outputs)
    ordered = sorted(samples_ms)
    result = {
        "status": "ok",
        "latency_ms": {
            "mean": sum(ordered) / len(ordered),
            "p50": percentile(ordered, 50),
            "p95": percentile(ordered, 95),
            "min": ordered[0],
            "max": ordered[-1],
        },
        "throughput_tokens_per_sec": None,  # these workloads count tiles and elements, not tokens
        "peak_memory_bytes": peak_memory_bytes(),  # peak resident memory of this process; null where unknown
        "samples_ms": samples_ms,
        "iterations": len(samples_ms),
        "info": {"implementation": "numpy", "numpy": np.__version__},
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
