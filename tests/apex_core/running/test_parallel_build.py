"""Builder processes (--build-workers) warm the caches of upcoming cells and never change a result.

The backends here stand in for a compiler: their ``warm_caches`` writes a mark where
``prepare`` looks for it (the real hooks fill Triton's and Inductor's caches, which
cannot exist without a GPU here), or fails in each way a builder can.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from apex_core.api import run
from apex_core.plan import build_plan
from apex_core.registry import Registry
from apex_core.report.markdown import render_markdown
from apex_core.report.records import report_record
from apex_core.report.schema import validate_report
from apex_core.results import Status
from apex_core.timing import TimingOptions
from tests.apex_core.fakes import Axpy, Eager
from tests.apex_core.isolation_helpers import (
    commands_with,
    kill_leftovers,
    signal_run,
    start_cli,
    wait_for,
    wait_until_gone,
)

QUICK = TimingOptions(warmup=1, min_iters=3, min_time_s=0.0, max_time_s=0.1)


def _mark(folder: str, case, inputs) -> Path:
    return Path(folder) / f"{case.name}-{inputs['x'].dtype}"


class Marking(Eager):
    """Its builds are marks in ``folder``: ``warm_caches`` writes one, ``prepare`` reads it."""

    name = "marking"

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def warm_caches(self, workload, case, inputs):
        _mark(self.folder, case, inputs).write_text(str(os.getpid()))
        return None

    def prepare(self, workload, case, inputs):
        prepared = super().prepare(workload, case, inputs)
        mark = _mark(self.folder, case, inputs)
        prepared.metadata["warmed_by"] = int(mark.read_text()) if mark.exists() else None
        prepared.metadata["worker"] = os.getpid()
        return prepared


class Faulty(Eager):
    """Runs like ``eager``; its ``warm_caches`` raises, kills its process or never returns."""

    def __init__(self, fault: str) -> None:
        self.fault = fault
        self.name = f"faulty-{fault}"

    def warm_caches(self, workload, case, inputs):
        if self.fault == "raise":
            raise RuntimeError("the compiler exploded")
        if self.fault == "crash":
            os._exit(3)
        while True:
            time.sleep(1)


@pytest.mark.slow
def test_builders_warm_a_cell_before_its_worker_prepares_it(tmp_path):
    registry = Registry.from_objects([Marking(str(tmp_path)), Eager()], [Axpy()])
    report = run(["axpy"], ["marking", "eager"], device="cpu", dtypes=["fp32", "bf16"], timing=QUICK,
                 registry=registry, build_workers=1)
    plan = build_plan(registry, workloads=["axpy"], backends=["marking", "eager"], device="cpu",
                      dtypes=("fp32", "bf16"), timing=QUICK)
    assert [c.key for c in report.cells] == [f"{p.case.id}/{p.backend}/{p.dtype}/cpu"
                                             for p in plan.cells]  # plan order
    assert {c.status for c in report.cells} == {Status.OK}, [c.reason for c in report.cells]
    assert report.config["build_workers"] == 1
    marking = [c for c in report.cells if c.backend == "marking"]
    states = [c.metadata["prebuild"]["state"] for c in marking]
    assert set(states) <= {"warmed", "not_started"} and "warmed" in states, states
    for cell in marking:
        if cell.metadata["prebuild"]["state"] == "warmed":
            # built in another process, before this cell's prepare ran
            assert cell.metadata["warmed_by"] not in (None, cell.metadata["worker"])
            assert cell.warm_time_s is not None and cell.warm_time_s >= 0
    eager = [c for c in report.cells if c.backend == "eager"]
    assert all("prebuild" not in c.metadata and c.warm_time_s is None for c in eager)  # no hook
    record = report_record(report)
    validate_report(record)
    assert record["config"]["build_workers"] == 1
    assert sum("warm_time_s" in row for row in record["benchmarks"]) == len(marking)
    warmed = states.count("warmed")
    assert f"1 builder warmed {warmed} of {len(marking)} cells ahead" in render_markdown(report)


def _comparable(cell):
    metadata = {k: v for k, v in cell.metadata.items() if k not in ("prebuild", "host_load")}
    return (cell.key, cell.status, cell.reason, [a.passed for a in cell.accuracy], metadata)


class SlowBuild(Marking):
    """A Marking backend whose builds take a few seconds (a long torch.compile stands in)."""

    name = "slow-build"

    def warm_caches(self, workload, case, inputs):
        time.sleep(4.0)  # far longer than the worker takes to start beside the builder
        return super().warm_caches(workload, case, inputs)


@pytest.mark.slow
def test_a_worker_times_ready_cells_while_a_builder_compiles_the_first_one(tmp_path):
    registry = Registry.from_objects([SlowBuild(str(tmp_path)), Eager()], [Axpy()])
    report = run(["axpy:small"], ["slow-build", "eager"], device="cpu", dtypes=["fp32", "bf16"],
                 timing=QUICK, registry=registry, build_workers=1)
    assert {c.status for c in report.cells} == {Status.OK}, [c.reason for c in report.cells]
    assert [c.backend for c in report.cells] == ["slow-build", "slow-build", "eager", "eager"]  # plan order
    slow = [c for c in report.cells if c.backend == "slow-build"]
    eager = [c for c in report.cells if c.backend == "eager"]
    # the eager cells need no build: the worker took them while the builder slept on the first
    # slow-build cell, though they come after it in the plan
    assert max(c.wait_time_s for c in eager) < min(c.wait_time_s for c in slow)
    first = min(slow, key=lambda c: c.wait_time_s)
    assert first.metadata["prebuild"]["state"] == "warmed"
    assert first.metadata["warmed_by"] not in (None, first.metadata["worker"])


@pytest.mark.slow
def test_a_builder_that_raises_crashes_or_hangs_leaves_every_result_as_without_builders():
    faulty = [Faulty("raise"), Faulty("crash"), Faulty("hang")]
    names = [f.name for f in faulty]
    registry = Registry.from_objects(faulty, [Axpy()])
    options = {"device": "cpu", "dtypes": ["fp32"], "timing": QUICK, "registry": registry, "timeout_s": 3.0}
    alone = run(["axpy:small"], names, **options)
    # three builders: each takes one cell at once, so each fault happens in its own builder
    ahead = run(["axpy:small"], names, build_workers=3, **options)
    assert [_comparable(c) for c in ahead.cells] == [_comparable(c) for c in alone.cells]
    assert {c.status for c in ahead.cells} == {Status.OK}, [c.reason for c in ahead.cells]
    prebuild = {c.backend: c.metadata["prebuild"] for c in ahead.cells}
    assert prebuild["faulty-raise"]["state"] == "failed"
    assert "the compiler exploded" in prebuild["faulty-raise"]["reason"]
    assert prebuild["faulty-crash"]["state"] == "crashed"
    assert "code 3" in prebuild["faulty-crash"]["reason"]
    assert prebuild["faulty-hang"]["state"] == "timeout"  # killed at the cell's timeout
    assert "3 s timeout" in prebuild["faulty-hang"]["reason"]


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143),
                                           (signal.SIGKILL, -signal.SIGKILL)])
def test_an_interrupted_run_leaves_no_builder_nor_its_helpers(tmp_path, plugin_on_path, sig, code):
    marker = f"APEX_TEST_BUILDERS_{os.getpid()}_{int(sig)}"
    out = tmp_path / "r.json"
    process = start_cli(["--device", "cpu", "--workloads", "test-scale", "--backends", "test-warm-helper",
                         "--dtype", "fp32", "--build-workers", "1", "--timeout", "120",
                         "--min-time", "0.02", "--max-time", "0.2", "--warmup", "2",
                         "--output-json", str(out), "--output-md", str(tmp_path / "r.md")],
                        tmp_path, {marker: "1"})
    try:
        # a builder's hook has started its helper and hangs; the worker waits for that builder
        wait_for(lambda: "sleep 1000" in commands_with(marker), 60, "the builder's helper")
        signal_run(process, sig)
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == code, stderr  # SIGKILL: the builders see their run gone
        assert "Traceback" not in stderr
        assert wait_until_gone(marker) == []
    finally:
        kill_leftovers(process, marker)


def test_the_triton_hook_compiles_nothing_under_the_interpreter(monkeypatch):
    pytest.importorskip("triton")
    import torch

    from adapters.triton_backend import TritonBackend
    from apex_core.workloads.tilepack import TilePack

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    workload = TilePack()
    case = workload.cases(workload.make_params("smoke"))[0]
    inputs = workload.make_inputs(case, "cpu", torch.float32, 0)
    before = {k: v.clone() for k, v in inputs.items()}
    assert TritonBackend().warm_caches(workload, case, inputs) == "the Triton interpreter compiles nothing"
    assert all(torch.equal(before[k], v) for k, v in inputs.items())
