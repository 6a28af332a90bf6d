"""Synthetic reports and baselines for the gate's unit tests (no benchmark runs)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from apex_core.stats import summarize


def samples(median_ms: float, n: int = 200, spread: float = 0.02, seed: int = 0) -> list[float]:
    """Timing-like samples: a narrow body around ``median_ms`` (uniform within ±spread)."""
    rng = random.Random(seed)
    return [median_ms * (1.0 + rng.uniform(-spread, spread)) for _ in range(n)]


def cell(workload: str = "tilepack", case: str = "default", backend: str = "torch-reference",
         dtype: str = "fp32", status: str = "ok", values: list[float] | None = None,
         reason: str = "") -> dict[str, Any]:
    """One report cell; an ok cell gets stats computed from its samples."""
    record: dict[str, Any] = {"name": f"{workload}/{case}/{backend}/{dtype}/cpu", "workload": workload,
                              "case": case, "backend": backend, "dtype": dtype, "device": "cpu",
                              "status": status, "reason": reason, "stats": None, "samples_ms": [],
                              "timing_method": None}
    if status == "ok":
        values = values if values is not None else samples(1.0)
        stats = summarize(values)
        record.update(timing_method="cpu_perf_counter", samples_ms=values,
                      stats={"n": stats.n, "min_ms": stats.min, "p50_ms": stats.p50, "p90_ms": stats.p90,
                             "p95_ms": stats.p95, "p99_ms": stats.p99, "mean_ms": stats.mean})
    return record


def report(cells: list[dict[str, Any]], *, suite: str = "apex-bench", cpu: str = "AMD EPYC",
           gpu: str | None = None, device: str = "cpu", cpu_count: int = 2, profile: str = "smoke",
           dtypes: tuple[str, ...] = ("fp32",), torch: str = "2.13.0+cpu") -> dict[str, Any]:
    """A report record with the fields the gate reads."""
    return {
        "schema_version": 1,
        "suite": suite,
        "timestamp_utc": "2026-01-02T03:04:05Z",
        "environment": {"device": device, "cpu": cpu, "cpu_count": cpu_count, "gpu": gpu,
                        "torch": torch, "triton": "3.9.0", "tensorrt": None,
                        "git": {"commit": "abc123", "dirty": False}},
        "config": {"profile": profile, "dtypes": list(dtypes),
                   "timing": {"cache": "cold", "graph": False}},
        "status": "complete",
        "benchmarks": cells,
    }


def write(path: Path, record: Any) -> Path:
    path.write_text(json.dumps(record) if not isinstance(record, str) else record)
    return path


@pytest.fixture()
def two_cells() -> list[dict[str, Any]]:
    return [cell("tilepack", values=samples(0.2, seed=1)),
            cell("ff-infer", values=samples(4.0, seed=2))]
