"""Hypothesis strategies for the records a run can produce: CellResult, Report and their JSON.

The values lean on the edges that broke readers before: times of 0 ms, 1e-9 and 1e9 ms, one
sample, every ``Status`` (drawn from the enum, so a new status is covered the day it lands),
and the optional parts missing (timing, derived, telemetry, accuracy) or odd (metadata).
"""

from __future__ import annotations

import contextlib
import io
import math

import attrs
from hypothesis import strategies as st

from apex_core.cli.main import main as cli_main
from apex_core.measure.cell import derive
from apex_core.report.records import report_record
from apex_core.results import (
    Accuracy,
    CellResult,
    DeviceInfo,
    KernelActivity,
    OutputAccuracy,
    PluginRow,
    Report,
    SkipKind,
    Status,
    Telemetry,
    Timing,
    Work,
)
from apex_core.running.autotune import summarize_autotune
from apex_core.stats import summarize
from apex_core.timing import FIXED_MODE, TimingOptions

REFERENCE = "torch-reference"
EDGE_MS = (0.0, 1e-9, 1e-6, 1e-3, 1.0, 1e3, 1e9)
METHODS = ("cpu_perf_counter", "cuda_event_held", "cuda_graph_held", "kernel_profiler", "triton_interpreter")
STOP_REASONS = ("noise", "converged", "time_cap", "sample_cap", FIXED_MODE)



def floats(low: float | None = None, high: float | None = None, **more: bool) -> st.SearchStrategy[float]:
    """Floats without subnormals, which no run records (baseline files refuse them as no time)."""
    return st.floats(low, high, allow_subnormal=False, **more)


times_ms = st.one_of(st.sampled_from(EDGE_MS), floats(0.0, 1e9, allow_nan=False))
optional_ms = st.none() | times_ms
counts = st.integers(min_value=0, max_value=10**12)
names = st.text(min_size=1, max_size=12)
# free text a plugin writes: pipes, newlines, markup and quotes must not break a table or a page
reasons = (st.sampled_from(["a | b\nc", "<script>x</script>", "'\"&", "–", "\x00\ud800"])
           | st.text(min_size=1, max_size=30))

json_leaves = st.none() | st.booleans() | st.integers(-(2**63), 2**63) | floats() | st.text(max_size=8)
odd_metadata = st.dictionaries(
    st.text(max_size=8),
    st.recursive(json_leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.text(max_size=5), inner, max_size=3), max_leaves=6),
    max_size=4,
)


sample_lists = st.lists(times_ms, min_size=1, max_size=12)
kernel_activities = st.none() | st.builds(
    KernelActivity, kernels_per_call=floats(0, 1e4), span_p50_ms=times_ms,
    streams=st.integers(0, 8), calls=st.integers(1, 5000))
notes = st.just("") | reasons
timings = st.builds(
    lambda samples, **fields: Timing(samples_ms=tuple(samples), stats=summarize(samples), **fields),
    sample_lists,
    method=st.sampled_from(METHODS),
    cache=st.sampled_from(("cold", "warm", "n/a")),
    stop_reason=st.sampled_from(STOP_REASONS),
    note=notes,
    host_ms=optional_ms,
    kernel=kernel_activities,
    floor_ms=optional_ms,
    placements=st.integers(1, 16),
)


spreads = st.none() | st.lists(floats(0, 1e4), min_size=3, max_size=3).map(sorted).map(tuple)
telemetries = st.none() | st.builds(
    Telemetry,
    unavailable=st.just("") | reasons,
    readings=st.integers(0, 10**6),
    sm_clock_mhz=spreads, mem_clock_mhz=spreads, temperature_c=spreads, power_w=spreads,
    throttled_share=st.none() | floats(0, 1),
    throttle_reasons=st.lists(st.sampled_from(("sw_power_cap", "hw_slowdown")), max_size=2).map(tuple),
    energy_j_per_call=st.none() | floats(0, 1e6),
    average_w=st.none() | floats(0, 1e4),
    energy_method=st.sampled_from(("", "nvml_total_energy", "nvml_power_x_time")),
    energy_calls=st.integers(0, 10**6),
    energy_window_s=st.none() | floats(0, 1e4),
)
errors = floats(0.0) | st.just(math.inf) | st.just(math.nan)
accuracies = st.lists(st.builds(
    Accuracy,
    passed=st.booleans(), atol=floats(0, 1), rtol=floats(0, 1),
    max_mismatch_ratio=floats(0, 1),
    outputs=st.lists(st.builds(OutputAccuracy, name=names, max_abs_error=errors, max_rel_error=errors,
                               mismatches=st.integers(0, 10**9), elements=st.integers(0, 10**9),
                               nonfinite_mismatches=st.integers(0, 10**9), rmse=errors),
                     max_size=2).map(tuple),
    stage=st.sampled_from(("before-timing", "after-timing")),
    message=st.just("") | reasons,
), max_size=2).map(tuple)


# every status of the enum (a new one is covered the day it lands); ok as often as all others together
statuses = st.sampled_from(list(Status)) | st.just(Status.OK)
skip_kinds = st.sampled_from(list(SkipKind))
devices = st.sampled_from(("cpu", "cuda"))
works = st.builds(Work, counts, counts, st.sampled_from(("tiles", "elements", "images")), counts)
seconds = st.none() | floats(0, 1e5)
device_infos = st.none() | st.builds(DeviceInfo, index=st.integers(0, 7), name=names, uuid=names)
params = st.dictionaries(st.sampled_from(("n", "height")), st.integers(0, 2**40), max_size=2)
WORKLOADS = ("tilepack", "w|x")
BACKENDS = (REFERENCE, "triton", "plugin<b>")
keys = st.tuples(st.sampled_from(WORKLOADS), st.sampled_from(("default", "big")), st.sampled_from(BACKENDS),
                 st.sampled_from(("fp32", "fp16", "bf16")))


@st.composite
def cells(draw: st.DrawFn) -> CellResult:
    status = draw(statuses)
    device = draw(devices)
    ok = status == Status.OK
    timing = draw(timings) if ok or draw(st.booleans()) else None
    derived = derive(draw(works), timing) if timing is not None and (ok or draw(st.booleans())) else None
    workload, case, backend, dtype = draw(keys)
    return CellResult(
        workload=workload, case=case, backend=backend, dtype=dtype, device=device, status=status,
        params=draw(params),
        reason="" if ok else draw(reasons),
        skip_kind=draw(skip_kinds) if status == Status.SKIPPED else None,
        timing=timing,
        derived=derived,
        accuracy=draw(accuracies),
        build_time_s=draw(seconds),
        peak_memory_mb=draw(seconds),
        metadata=draw(odd_metadata),
        wall_time_s=draw(seconds),
        telemetry=draw(telemetries) if device == "cuda" else None,
        worker_output=draw(notes),
        unchecked=draw(notes) if ok else "",
        device_info=draw(device_infos),
        wait_time_s=draw(seconds),
        warm_time_s=draw(seconds),
    )


timing_configs = st.builds(
    lambda **fields: attrs.asdict(TimingOptions(min_time_s=0.0, **fields)),
    min_iters=st.integers(1, 50), max_time_s=st.sampled_from((0.5, 3.0)),
    fixed_iters=st.none() | st.integers(1, 50), cache=st.sampled_from(("cold", "warm")), graph=st.booleans())
device_facts = st.none() | st.builds(dict, copy_gbps=floats(1e-3, 1e4)) | st.builds(
    dict, copy_gbps=floats(1e-3, 1e4), dram_peak_gbps=floats(1e-3, 1e4))
plugin_rows = st.lists(st.builds(PluginRow, group=st.sampled_from(("backend", "workload")), name=names,
                                 source=names, status=st.just("error"), reason=reasons), max_size=1)
suites = st.sampled_from(("apex-bench", "s|<u>"))
run_states = st.sampled_from(("running", "complete", "interrupted"))
profiles = st.sampled_from(("fixed", "smoke"))


def environment(device: str, facts: dict | None) -> dict:
    return {"device": device, "cpu": "AMD EPYC", "cpu_count": 2, "torch": "2.13.0+cpu", "python": "3.11.7",
            "git": {"commit": "abc123", "dirty": False},
            "gpu": "NVIDIA H100 80GB HBM3" if device == "cuda" else None,
            **({"device_facts": facts} if facts is not None else {})}


@st.composite
def reports(draw: st.DrawFn, min_cells: int = 0, max_cells: int = 6) -> Report:
    device = draw(devices)
    config = {"backends": list(BACKENDS), "workloads": list(WORKLOADS), "profile": draw(profiles),
              "dtypes": ["fp32"], "device": device, "seed": 0, "timing": draw(timing_configs)}
    unique = {}  # one cell per key, as a run records them
    for cell in draw(st.lists(cells(), min_size=min_cells, max_size=max_cells)):
        cell = attrs.evolve(cell, device=device)
        unique.setdefault(cell.key, cell)
    return Report(suite=draw(suites), timestamp_utc="2026-11-27T10:00:00Z",
                  environment=environment(device, draw(device_facts)), config=config, status=draw(run_states),
                  cells=tuple(unique.values()), plugins=tuple(draw(plugin_rows)),
                  triton_autotune=summarize_autotune(unique.values()))


def records(min_cells: int = 0, max_cells: int = 6) -> st.SearchStrategy[dict]:
    """The JSON record of a generated report, as ``--output-json`` writes it."""
    return reports(min_cells, max_cells).map(report_record)


def _retimed(cell: CellResult, timing: Timing) -> CellResult:
    """The cell with other samples, its rates derived from them as the run would."""
    assert cell.timing is not None
    timing = attrs.evolve(timing, method=cell.timing.method)  # one build times each cell one way
    if cell.derived is None:
        return attrs.evolve(cell, timing=timing)
    d = cell.derived
    return attrs.evolve(cell, timing=timing, derived=derive(Work(d.bytes_moved, d.flops, d.units, 1), timing))


@st.composite
def runs_of_one_build(draw: st.DrawFn, runs: int = 3) -> list[dict]:
    """The JSON records of ``runs`` runs of one build: the same cells and statuses, other samples."""
    first = attrs.evolve(draw(reports(min_cells=1)), status=draw(st.sampled_from(("complete", "interrupted"))))
    others = [attrs.evolve(first, cells=tuple(
        _retimed(cell, draw(timings)) if cell.timing is not None else cell for cell in first.cells))
        for _ in range(runs - 1)]
    return [report_record(report) for report in (first, *others)]


def run_cli(*args: object) -> tuple[int, str]:
    """``apex-bench ARGS`` in this process; its exit code and what it wrote (stdout and stderr)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = cli_main([str(a) for a in args])
    return code, out.getvalue()
