"""Fixed runs for the golden outputs: every status, the flags, a zero-time cell, a deprecation.

A live run's flags and numbers depend on its times, so the golden outputs are written from
these records, whose every number is fixed: what a format makes of a record must not change
unless the change is meant (tests/golden/test_golden_outputs.py says how to rewrite them).
"""

from __future__ import annotations

import attrs

from apex_core.measure.cell import derive
from apex_core.results import (
    Accuracy,
    CellResult,
    KernelActivity,
    OutputAccuracy,
    PluginDeprecation,
    PluginRow,
    ReplayArtifact,
    Report,
    SkipKind,
    Status,
    Telemetry,
    Timing,
    Work,
)
from apex_core.running.autotune import summarize_autotune
from apex_core.stats import summarize

# names no installed plugin has: the report must be written from the records alone
WORKLOADS = ("golden-gather", "golden-scan")
BACKENDS = ("torch-reference", "golden-fast", "golden-slow", "golden-broken")
PARAMS = {"rows": 1024, "cols": 256}
WORK = Work(bytes_moved=2 * 1024 * 256 * 2, flops=1024 * 256, units="rows", count=1024)
TELEMETRY = Telemetry(readings=40, sm_clock_mhz=(1965.0, 1980.0, 1980.0),
                      mem_clock_mhz=(2619.0, 2619.0, 2619.0), temperature_c=(33.0, 34.0, 35.0),
                      power_w=(110.5, 118.9, 122.1), throttled_share=0.0,
                      energy_j_per_call=0.0004, energy_window_s=0.5, average_w=118.9)
PASSED = Accuracy(True, 1e-3, 1e-2, 0.0, (OutputAccuracy("out", 4.9e-4, 2.1e-3, 0, 262144, 0, 1.2e-4),),
                  "before-timing")


def _samples(p50: float, spread: float, n: int = 21) -> tuple[float, ...]:
    return tuple(round(p50 * (1 + spread * ((i % 7) - 3) / 3), 9) for i in range(n))


def _timed(workload: str, backend: str, p50: float, spread: float = 0.002, **timing: object) -> CellResult:
    samples = _samples(p50, spread)
    fields = {"method": "cuda_event_held", "cache": "cold", "stop_reason": "noise", "host_ms": 0.012,
              "floor_ms": 0.0034, "placements": 4, **timing}
    measured = Timing(samples_ms=samples, stats=summarize(samples), **fields)
    checks = (PASSED, attrs.evolve(PASSED, stage="after-timing"))
    return CellResult(workload, "default", backend, "fp16", "cuda", Status.OK, params=dict(PARAMS),
                      timing=measured, derived=derive(WORK, measured), accuracy=checks,
                      build_time_s=0.25, peak_memory_mb=12.5, peak_memory_method="cuda_max_memory_allocated",
                      input_memory_mb=1.0, metadata={"mode": "eager"}, wall_time_s=2.5, telemetry=TELEMETRY,
                      wait_time_s=0.5)


def _failed(workload: str, backend: str, status: Status, reason: str, **fields: object) -> CellResult:
    return CellResult(workload, "default", backend, "fp16", "cuda", status, params=dict(PARAMS), reason=reason,
                      wall_time_s=1.0, **fields)


def cells(slower: float = 1.0) -> tuple[CellResult, ...]:
    """The cells of a run; ``slower`` scales the golden-fast cells' times (a second build)."""
    gather, scan = WORKLOADS
    wrong = Accuracy(False, 1e-3, 1e-2, 0.0, (OutputAccuracy("out", 0.5, 1.0, 4096, 262144, 0, 0.03),),
                     "before-timing",
                     "out: 4096/262144 elements off (max abs err 0.5, rmse 0.03, 0 non-finite)")
    return (
        _timed(gather, "torch-reference", 0.0504),
        _timed(gather, "golden-fast", 0.0061 * slower, spread=0.01),
        _timed(gather, "golden-slow", 0.2, spread=0.3, stop_reason="time_cap", host_ms=0.35),
        _failed(gather, "golden-broken", Status.ERROR, "RuntimeError during prepare: no kernel for this shape",
                log="Traceback (most recent call last):\n  ...\nRuntimeError: no kernel for this shape"),
        _timed(scan, "torch-reference", 1.2144, method="cuda_event", host_ms=1.3, floor_ms=None, placements=1),
        _timed(scan, "golden-fast", 0.0, spread=0.0, method="kernel_profiler", floor_ms=None, placements=1,
               kernel=KernelActivity(kernels_per_call=0, span_p50_ms=0.0, streams=0, calls=21)),
        _failed(scan, "golden-slow", Status.INCORRECT, f"wrong result before-timing: {wrong.message}",
                accuracy=(wrong,)),
        _failed(scan, "golden-broken", Status.SUSPECT, "suspect: time.perf_counter was replaced by "
                "golden_plugin.cheats during prepare; the harness's own clock read 10.2 ms for 21 samples "
                "summing to 1.1 ms"),
        _failed(scan, "golden-cpu-only", Status.SKIPPED, "no CUDA build of this backend",
                skip_kind=SkipKind.UNAVAILABLE),
    )


def report(slower: float = 1.0, timestamp: str = "2026-11-27T10:00:00Z") -> Report:
    config = {"backends": [*BACKENDS, "golden-cpu-only"], "workloads": list(WORKLOADS), "profile": "fixed",
              "dtypes": ["fp16"], "device": "cuda", "seed": 0,
              "timing": {"warmup": 10, "min_iters": 10, "min_time_s": 0.5, "max_time_s": 3.0,
                         "noise_target": 0.005, "cache": "cold", "graph": False, "fixed_iters": None}}
    environment = {"device": "cuda", "gpu": "NVIDIA H100 80GB HBM3", "cpu": "AMD EPYC 9454", "cpu_count": 16,
                   "torch": "2.11.0+cu130", "triton": "3.6.0", "python": "3.12.3", "driver": "580.159.04",
                   "sm_count": 132, "gpu_memory_gb": 79.2, "git": {"commit": "0123456789ab", "dirty": False},
                   "device_facts": {"copy_gbps": 2866.3, "dram_peak_gbps": 3352.32, "launch_us": 8.76,
                                    "timer_floor_us": {"cuda_event_held": 3.39, "kernel_profiler": 0.9},
                                    "perf_counter_resolution_ns": 74}}
    run_cells = cells(slower)
    return Report(suite="apex-bench", timestamp_utc=timestamp, environment=environment, config=config,
                  status="complete", cells=run_cells,
                  plugins=(PluginRow("backend", "golden-broken", "golden_plugin:Broken", "error",
                                     "prepare(self, workload, case) takes 3 arguments; the harness calls "
                                     "prepare(self, workload, case, inputs)"),),
                  triton_autotune=summarize_autotune(run_cells),
                  deprecations=(PluginDeprecation("workload", "golden-scan", "work(self, case)",
                                                  "work(self, case, dtype_name)", "1.2", "2.0"),))


# a sweep of one ONNX file over three shape cases: its cells carry the replay artifacts a worker
# computed (an engine file has no reference: inputs only)
SWEEP_INPUTS = {"x": {"shape": [1, 3, 32, 32], "dtype": "fp32", "dynamic": True},
                "scale": {"shape": [1], "dtype": "fp32", "dynamic": False}}


def _sweep_cell(case: str, batch: int, p50: float | None) -> CellResult:
    params = {"engine": "model.onnx", "shape_case": case, "inputs": [["x", "fp32", [batch, 3, 32, 32]]]}
    pinned = ReplayArtifact(f"{batch:02d}" * 32, None, inputs_only=True,
                            platform={"torch": "2.13.0", "cpu_capability": "AVX2", "threads": 1})
    if p50 is None:
        return CellResult("tiny-model", case, "onnxruntime", "fp32", "cpu", Status.TIMEOUT, params=params,
                          reason="timed out after 600 s", wall_time_s=600.0)
    samples = _samples(p50, 0.01)
    measured = Timing(samples_ms=samples, stats=summarize(samples), method="cpu_perf_counter", cache="warm",
                      stop_reason="noise")
    work = Work(bytes_moved=batch * 3 * 32 * 32 * 4 * 2, flops=0, units="images", count=batch)
    outputs = {"y": {"shape": [batch, 10], "dtype": "fp32", "dynamic": True}}
    inputs = {**SWEEP_INPUTS, "x": {**SWEEP_INPUTS["x"], "shape": [batch, 3, 32, 32]}}
    return CellResult("tiny-model", case, "onnxruntime", "fp32", "cpu", Status.OK, params=params,
                      timing=measured, derived=derive(work, measured), build_time_s=0.4, wall_time_s=3.0,
                      metadata={"inputs": inputs, "outputs": outputs},
                      unchecked="the engine file has no reference (give --reference-model to check it)",
                      replay=pinned)


def sweep_report() -> Report:
    config = {"backends": ["onnxruntime"], "workloads": ["tiny-model"], "profile": "fixed", "dtypes": ["fp32"],
              "device": "cpu", "seed": 0, "engine": {"path": "model.onnx", "sha256": "5e" * 32,
                                                      "runtime": "onnxruntime"},
              "timing": {"warmup": 10, "min_iters": 10, "min_time_s": 0.5, "max_time_s": 3.0,
                         "noise_target": 0.005, "cache": "warm", "graph": False, "fixed_iters": None}}
    environment = {"device": "cpu", "cpu": "AMD EPYC 9454", "cpu_count": 16, "torch": "2.13.0",
                   "onnxruntime": "1.20.1", "python": "3.12.3",
                   "git": {"commit": "0123456789ab", "dirty": False}}
    run_cells = (_sweep_cell("b1", 1, 0.21), _sweep_cell("b8", 8, 1.37), _sweep_cell("b64", 64, None))
    return Report(suite="apex-bench-sweep", timestamp_utc="2026-11-27T11:00:00Z", environment=environment,
                  config=config, status="complete", cells=run_cells,
                  triton_autotune=summarize_autotune(run_cells))
