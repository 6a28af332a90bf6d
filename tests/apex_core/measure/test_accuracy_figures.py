"""RMSE beside the max errors, and peak memory on the CPU (the rise of the resident set)."""

from __future__ import annotations

import gc
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from apex_core.correctness import compare_outputs, compare_tensor
from apex_core.interfaces import Backend, Prepared
from apex_core.measure import cpu_memory
from apex_core.measure.cell import CellSpec, execute_cell
from apex_core.plan import build_plan
from apex_core.registry import Registry
from apex_core.report.formats import report_json
from apex_core.report.records import cell_record
from apex_core.report.schema import validate_report
from apex_core.results import Availability, Tolerance
from apex_core.running.runner import run_plan
from apex_core.timing import TimingOptions
from tests.apex_core.fakes import Axpy, Eager
from tests.conftest import ROOT

FIXED = TimingOptions(fixed_iters=3)
MIB = 2**20


def test_rmse_is_over_the_elements_finite_in_both():
    ref = torch.tensor([0.0, 0.0, 0.0, 0.0, math.nan, math.inf])
    out = torch.tensor([3.0, -4.0, 0.0, 0.0, math.nan, math.inf])
    result = compare_tensor("y", out, ref, Tolerance(1e-6, 1e-5))
    assert result.rmse == pytest.approx(2.5)  # sqrt((9 + 16) / 4): the NaN and Inf pairs are not counted
    assert result.max_abs_error == 4.0
    assert compare_tensor("y", ref, ref, Tolerance(0, 0)).rmse == 0.0
    empty = torch.empty(0)
    assert compare_tensor("y", empty, empty, Tolerance(0, 0)).rmse == 0.0


def test_rmse_is_in_the_failure_message_and_the_report():
    ref = {"y": torch.zeros(4)}
    accuracy = compare_outputs({"y": torch.ones(4)}, ref, Tolerance(1e-6, 1e-5), "before-timing")
    assert not accuracy.passed
    assert accuracy.message == "y: 4/4 elements off (max abs err 1, rmse 1, 0 non-finite)"
    result = execute_cell(Axpy(), Eager(), CellSpec("axpy", "small", "eager", "fp32", "cpu", {}, 0, FIXED))
    outputs = cell_record(result)["accuracy"][0]["outputs"]
    assert set(outputs[0]) >= {"max_abs_error", "max_rel_error", "rmse"}
    assert outputs[0]["rmse"] is not None and 0 <= outputs[0]["rmse"] <= outputs[0]["max_abs_error"]


class Allocating(Backend):
    """The reference, plus a freshly allocated and written buffer of ``mib`` MiB in every call."""

    name = "allocating"
    description = "allocates per call"

    def __init__(self, mib: int) -> None:
        self.mib = mib

    def probe(self, device):
        return Availability.yes()

    def prepare(self, workload, case, inputs):
        def run():
            scratch = torch.ones(self.mib * MIB, dtype=torch.uint8)  # ones: every page is touched
            out = workload.reference(case, inputs)
            out["y"] = out["y"] + scratch[0].float() - 1
            return out

        return Prepared(run)


def test_cpu_cells_report_peak_memory_and_how_it_was_read():
    result = execute_cell(Axpy(), Eager(), CellSpec("axpy", "small", "eager", "fp32", "cpu", {}, 0, FIXED))
    assert result.status == "ok"
    assert result.peak_memory_mb is not None and result.peak_memory_mb >= 0
    assert result.peak_memory_method in (cpu_memory.RSS_HWM_DELTA, cpu_memory.RU_MAXRSS_DELTA)
    record = cell_record(result)
    assert record["peak_memory_mb"] == result.peak_memory_mb
    assert record["peak_memory_method"] == result.peak_memory_method
    registry = Registry.from_objects([Eager()], [Axpy()])
    env = {"device": "cpu", "cpu": "test cpu", "python": "3", "torch": "x", "gpu": None,
           "git": {"commit": None, "dirty": None}}
    report = run_plan(build_plan(registry, backends=["eager"], timing=FIXED), registry, isolation="inline",
                      environment=env)
    assert all(c.peak_memory_mb is not None for c in report.cells)
    validate_report(json.loads(report_json(report)))  # rmse and peak_memory_method in the schema


# A process's resident set is the whole process's: in a long-lived test worker, earlier tests' garbage
# and threads they left behind free memory at any moment, and a region that saw 64 MiB taken and as
# much freed elsewhere read 0 (CI, 2026-11-29, twice). These run in a fresh interpreter each, as a
# run's cells do in their workers.
FRESH = """
import gc, json, torch
from apex_core.measure import cpu_memory
from apex_core.measure.cell import CellSpec, execute_cell
from apex_core.timing import TimingOptions
from tests.apex_core.fakes import Axpy
from tests.apex_core.measure.test_accuracy_figures import Allocating, _Cycle
MIB = 2**20
"""


def in_a_fresh_process(body: str) -> dict:
    done = subprocess.run([sys.executable, "-c", FRESH + body], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc/self/clear_refs")
def test_the_high_water_mark_sees_what_the_timed_calls_allocate():
    """Each call holds 64 MiB for a moment: the timed region's peak is at least that, whatever came before."""
    result = in_a_fresh_process("""
ballast = torch.ones(96 * MIB, dtype=torch.uint8)  # an earlier, higher peak that ru_maxrss would keep
del ballast
spec = CellSpec("axpy", "small", "allocating", "fp32", "cpu", {}, 0, TimingOptions(fixed_iters=3))
result = execute_cell(Axpy(), Allocating(64), spec)
print(json.dumps({"status": str(result.status.value), "reason": result.reason,
                  "method": result.peak_memory_method, "peak": result.peak_memory_mb}))
""")
    assert result["status"] == "ok", result["reason"]
    assert result["method"] == cpu_memory.RSS_HWM_DELTA
    # 48: a few MiB freed in the region (an allocator's trim) must not fail it; the faults it guards
    # against read 0
    assert result["peak"] is not None and 48 <= result["peak"] < 200, result


class _Cycle:
    """Two of these pointing at each other are freed only by the cycle collector."""

    payload: torch.Tensor | None = None
    other: _Cycle | None = None


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc/self/clear_refs")
def test_garbage_collected_inside_the_region_does_not_hide_what_the_calls_took():
    """A big cycle left unreachable before the region and collected inside it used to read 0 MB."""
    result = in_a_fresh_process("""
def region(kept):
    first, second = _Cycle(), _Cycle()
    first.other, second.other, first.payload = second, first, torch.ones(128 * MIB, dtype=torch.uint8)
    gc.collect()  # both survive into the oldest generation ...
    del first, second  # ... and are garbage there, freed at the next full collection
    with kept():
        peak = cpu_memory.RssPeak()
        gc.collect()  # an automatic collection during the timed calls
        held = torch.ones(64 * MIB, dtype=torch.uint8)
        read = peak.peak_mb()
        del held
    return peak.method, read, gc.get_freeze_count(), gc.collect()
import contextlib
method, without, _, _ = region(contextlib.nullcontext)
method, kept, frozen_after, freed_after = region(cpu_memory.earlier_garbage_kept)
print(json.dumps({"method": method, "without": without, "kept": kept, "frozen_after": frozen_after,
                  "freed_after": freed_after}))
""")
    if result["method"] != cpu_memory.RSS_HWM_DELTA:
        pytest.skip("this kernel refused the high-water mark's reset")
    assert result["without"] < 8, result  # the fault: the freed cycle hides the call's 64 MiB
    assert 60 <= result["kept"] < 200, result
    assert result["frozen_after"] == 0 and result["freed_after"] >= 2, result  # unfrozen, then freed


def test_objects_someone_else_froze_stay_frozen():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with cpu_memory.earlier_garbage_kept():
            pass
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_rss_peak_falls_back_to_getrusage_without_the_reset(monkeypatch):
    monkeypatch.setattr(cpu_memory, "_reset_high_water", lambda: False)
    peak = cpu_memory.RssPeak()
    assert peak.method == cpu_memory.RU_MAXRSS_DELTA
    assert peak.peak_mb() >= 0


def test_a_run_without_a_given_environment_measures_the_device_facts_while_it_starts():
    registry = Registry.from_objects([Eager()], [Axpy()])
    report = run_plan(build_plan(registry, backends=["eager"], timing=FIXED), registry, isolation="inline")
    facts = report.environment["device_facts"]
    assert facts["perf_counter_resolution_ns"] > 0 and "cuda_unavailable" in facts
    assert all(c.status == "ok" for c in report.cells)
