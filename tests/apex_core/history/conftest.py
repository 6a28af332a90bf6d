"""Synthetic reports that validate against the shipped report schema, and histories built from them."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from apex_core.report.schema import validate_report
from apex_core.stats import summarize

ZERO_SHA = "0" * 64


def ok_cell(workload: str, backend: str, p50_ms: float, *, case: str = "default", dtype: str = "fp32",
            seed: int = 0, energy_j: float | None = None, spread: float = 0.01) -> dict[str, Any]:
    """An ok cell whose samples sit within ±spread of ``p50_ms``."""
    rng = random.Random(seed)
    samples = [p50_ms * (1.0 + rng.uniform(-spread, spread)) for _ in range(21)]
    stats = summarize(samples)
    cell: dict[str, Any] = {
        "name": f"{workload}/{case}/{backend}/{dtype}/cpu", "workload": workload, "case": case,
        "params": {"height": 16}, "backend": backend, "dtype": dtype, "device": "cpu", "status": "ok",
        "skip_kind": None, "reason": "", "timing_method": "cpu_perf_counter",
        "stats": {"n": stats.n, "mean_ms": stats.mean, "std_ms": stats.std, "min_ms": stats.min,
                  "max_ms": stats.max, "p50_ms": stats.p50, "p90_ms": stats.p90, "p95_ms": stats.p95,
                  "p99_ms": stats.p99, "cv": stats.cv},
        "samples_ms": samples, "build_time_s": 0.01, "peak_memory_mb": 1.5, "accuracy": [],
        "units": "tiles", "tiles_per_s": 1000.0 / stats.p50, "gbps": 2.0 / stats.p50, "tflops": 0.001,
    }
    if energy_j is not None:
        cell["telemetry"] = {"unavailable": "", "energy_j_per_call": energy_j}
    return cell


def skipped_cell(workload: str, backend: str) -> dict[str, Any]:
    return {"name": f"{workload}/default/{backend}/fp32/cpu", "workload": workload, "case": "default",
            "params": {}, "backend": backend, "dtype": "fp32", "device": "cpu", "status": "skipped",
            "skip_kind": "unavailable", "reason": "no CUDA device", "timing_method": None, "stats": None,
            "samples_ms": [], "build_time_s": None, "peak_memory_mb": None, "accuracy": []}


def make_report(cells: list[dict[str, Any]], *, commit: str | None = "a" * 40, cpu: str = "Test CPU",
                profile: str = "smoke", timestamp: str = "2026-01-02T03:04:05Z") -> dict[str, Any]:
    """A complete report record; validated against report.schema.json so the tests use real shapes."""
    report = {
        "schema_version": 1, "suite": "apex-bench", "timestamp_utc": timestamp,
        "environment": {"device": "cpu", "cpu": cpu, "cpu_count": 2, "python": "3.11.0",
                        "torch": "2.13.0+cpu", "triton": None, "tensorrt": None, "gpu": None,
                        "git": {"commit": commit, "dirty": False}},
        "config": {"backends": sorted({c["backend"] for c in cells}),
                   "workloads": sorted({c["workload"] for c in cells}), "device": "cpu", "dtypes": ["fp32"],
                   "profile": profile, "seed": 0, "timing": {"cache": "cold", "graph": False}},
        "status": "complete",
        "summary": {"cells": len(cells)},
        "benchmarks": cells,
        "plugins": [],
        "triton_autotune": {"summary": {"cache_entries": 0, "launches": 0, "cache_hits": 0, "cache_misses": 0,
                                        "cache_hit_rate": 0.0}, "entries": []},
        "replay": {"seed": 0, "config_sha256": ZERO_SHA, "artifact_hashes": {}, "artifact_sha256": ZERO_SHA,
                   "manifest_sha256": ZERO_SHA},
    }
    validate_report(report)
    return report


def commit_of(index: int) -> str:
    """A distinct 40-digit commit per run index."""
    return f"{index + 1:02x}" * 20


def ten_run_reports() -> list[dict[str, Any]]:
    """Ten runs of two workloads x three backends; tilepack on torch-compile gets 30 % slower at run 6."""
    reports = []
    for i in range(10):
        slow = 1.3 if i >= 6 else 1.0
        cells = [ok_cell("tilepack", "torch-reference", 0.20, seed=i),
                 ok_cell("tilepack", "torch-compile", 0.10 * slow, seed=100 + i),
                 ok_cell("tilepack", "triton", 0.15, seed=200 + i),
                 ok_cell("fusiongate", "torch-reference", 1.00, seed=300 + i),
                 ok_cell("fusiongate", "torch-compile", 0.50, seed=400 + i),
                 skipped_cell("fusiongate", "triton")]
        reports.append(make_report(cells, commit=commit_of(i), timestamp=f"2026-01-{i + 1:02d}T00:00:00Z"))
    return reports


@pytest.fixture()
def history_path(tmp_path: Path) -> Path:
    return tmp_path / "history.sqlite"


@pytest.fixture()
def ten_runs(history_path: Path) -> Path:
    """A history of ten runs, run i tagged ``nightly`` when even and ``v1.0`` at run 3."""
    from apex_core.history import HistoryStore

    with HistoryStore.open(history_path) as store:
        for i, report in enumerate(ten_run_reports()):
            tags = ["nightly"] if i % 2 == 0 else []
            if i == 3:
                tags.append("v1.0")
            store.record(report, tags=tags, branch="main")
    return history_path
