"""GPU report records on named cards, for the tests of the comparisons across cards (no GPU needed)."""

from __future__ import annotations

from typing import Any

from tests.apex_core.baseline.conftest import cell, report, samples

H100 = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"
# a cell that moves its bytes at 80 % of the reference card's copy bandwidth at 1 ms, and one at 10 %
STREAMING_BYTES = 0.8 * 3000e9 * 1e-3
ARITHMETIC_BYTES = 0.1 * 3000e9 * 1e-3


def fingerprint(uuid: str | None = "GPU-a", copy_gbps: float | None = 3000.0, clock_mhz: float | None = 1800.0,
                gpu: str | None = H100) -> dict[str, Any]:
    """A fingerprint as device_fingerprint.fingerprint stores it (the static facts trimmed)."""
    return {"gpu": gpu, "uuid": uuid, "driver": "580.82.07", "power_limit_w": 700.0, "ecc": True,
            "copy_gbps": copy_gbps, "sm_clock_under_load_mhz": clock_mhz}


def gpu_cell(workload: str, p50_ms: float, bytes_moved: float | None, *, seed: int = 0,
             launch_bound: bool = False, floor_ms: float | None = 0.0034,
             method: str = "cuda_event_held") -> dict[str, Any]:
    """An ok CUDA cell whose samples sit within ±2 % of ``p50_ms``."""
    record = cell(workload, backend="triton", dtype="fp16", values=samples(p50_ms, seed=seed))
    record.update(name=f"{workload}/default/triton/fp16/cuda", device="cuda", timing_method=method,
                  bytes_moved=bytes_moved, launch_bound=launch_bound, timer_floor_ms=floor_ms,
                  gbps=None if bytes_moved is None else bytes_moved / (p50_ms * 1e-3) / 1e9)
    return record


def gpu_report(cells: list[dict[str, Any]], card: dict[str, Any] | None, *,
               timestamp: str = "2026-01-02T03:04:05Z") -> dict[str, Any]:
    """A CUDA report on ``card`` (a fingerprint; None: a report from before fingerprints)."""
    record = report(cells, gpu=H100, device="cuda", cpu_count=16, profile="fixed", dtypes=("fp16",),
                    torch="2.11.0+cu130")
    record["timestamp_utc"] = timestamp
    facts: dict[str, Any] = {"copy_gbps": None if card is None else card["copy_gbps"], "dram_peak_gbps": 3352.3}
    if card is not None:
        facts["fingerprint"] = card
    record["environment"]["device_facts"] = facts
    return record


def two_cells(slower: float = 1.0, seed: int = 0) -> list[dict[str, Any]]:
    """A streaming (bandwidth-bound) cell and an arithmetic (compute-bound) one, ``slower`` times their 1 ms."""
    return [gpu_cell("tilepack", 1.0 * slower, STREAMING_BYTES, seed=seed),
            gpu_cell("fusiongate", 1.0 * slower, ARITHMETIC_BYTES, seed=seed + 1)]
