"""The timing cheats of the test plugin (tests/plugins/apex_testplugin/cheats.py) are caught on the CPU.

Each runs one cell of the plugin's test-scale workload through apex_core.run, in a worker
process as a user's run would (the patches a cheat makes stay in that worker), and the cell
must be ``incorrect`` or ``suspect`` with a reason that names what was caught.
"""

from __future__ import annotations

import json
import time
import types

import pytest
import torch

import apex_core
from apex_core.measure import integrity, l2_flush, timing_stream
from apex_core.measure.spot_checks import SpotChecks, plain_outputs, plan_spots
from apex_core.registry import Registry
from apex_core.report.schema import validate_report
from apex_core.results import FAILING_STATUSES, Status, Timing
from apex_core.stats import summarize
from apex_core.timing import TimingOptions
from tests.conftest import run_cli

# short timing: enough samples for the spot checks, a few seconds per cell
TIMING = TimingOptions(warmup=10, min_iters=20, min_time_s=0.1, max_time_s=0.5)


def run_cheat(name: str, isolation: str = "process"):
    from apex_testplugin import cheats
    from apex_testplugin.workloads import ScaleWorkload

    backends = [cls() for cls in vars(cheats).values()
                if isinstance(cls, type) and getattr(cls, "name", "") == name]
    report = apex_core.run(["test-scale"], [name], device="cpu", timing=TIMING, isolation=isolation,
                           registry=Registry.from_objects(backends, [ScaleWorkload()]))
    (cell,) = report.cells
    return cell


CAUGHT = [
    ("cheat-content-cache", Status.SUSPECT, "freshly written inputs"),
    ("cheat-warmup-replay", Status.INCORRECT, "wrong result in the timed call on fresh input set 1 of 3"),
    ("cheat-lazy-output", Status.SUSPECT, "LazyTensor"),
    ("cheat-lazy-mapping", Status.SUSPECT, "outputs are computed when they are read"),
    ("cheat-perf-counter", Status.SUSPECT, "time.perf_counter was replaced (by module apex_testplugin.cheats)"),
    ("cheat-event-timer", Status.SUSPECT, "torch.cuda.streams.Event.elapsed_time was replaced"),
    ("cheat-profiler", Status.SUSPECT, "export_chrome_trace was replaced"),
    ("cheat-call-rate", Status.INCORRECT, "spot check inside the timing loop"),
    ("cheat-call-stack", Status.INCORRECT, "spot check inside the timing loop"),
    ("cheat-call-count", Status.SUSPECT, "answered without the work"),
    ("cheat-mutate-input", Status.INCORRECT, "while it was timed"),
]


@pytest.mark.parametrize(("backend", "status", "fragment"), CAUGHT, ids=[c[0] for c in CAUGHT])
def test_cheat_is_caught(plugin_on_path, backend, status, fragment):
    cell = run_cheat(backend)
    assert (cell.status, fragment in cell.reason) == (status, True), cell.reason
    assert cell.status in FAILING_STATUSES
    assert cell.timing is None and cell.derived is None  # no speed is reported for it


def test_suspect_keeps_the_evidence(plugin_on_path):
    cell = run_cheat("cheat-perf-counter")
    assert cell.reason.startswith("suspect: ") and "during prepare" in cell.reason
    assert "the harness timed it with its own clocks: p50" in cell.reason
    # its real cost is a 1 ms sleep per call: the harness's own clock saw it
    assert cell.metadata["integrity_p50_ms"] >= 1.0
    assert cell.metadata["integrity_findings"]


def test_honest_control_stays_ok(plugin_on_path):
    cell = run_cheat("cheat-none")
    assert cell.status == Status.OK, cell.reason


def test_a_patched_clock_is_put_back_for_the_next_cell(plugin_on_path):
    """Inline (one process), the cheat's patch must not reach the cell after it."""
    real = time.perf_counter
    cell = run_cheat("cheat-perf-counter", isolation="inline")
    assert cell.status == Status.SUSPECT
    assert time.perf_counter is real
    assert run_cheat("cheat-none", isolation="inline").status == Status.OK


def test_cuda_only_cheats_are_unavailable_on_the_cpu(plugin_on_path):
    for name in ("cheat-private-stream", "cheat-graph-stale"):
        assert run_cheat(name).status == Status.SKIPPED


def test_guard_names_a_replaced_function_and_restores_it():
    guard = integrity.Guard([("time", time, None)])
    real = time.monotonic
    time.monotonic = lambda: 0.0
    try:
        (change,) = guard.changes()
        assert change.describe() == f"time.monotonic was replaced (by module {__name__})"
    finally:
        assert [c.name for c in guard.restore()] == ["monotonic"]
    assert time.monotonic is real and guard.changes() == []


def test_guard_watches_the_harness_timer_classes_and_the_stream_choice():
    # a flush that does nothing would leave every sample warm; another stream choice, another level
    guard = integrity.Guard(integrity._watched_owners())
    real_flush, real_choose = l2_flush.L2Flush.__call__, timing_stream.choose
    l2_flush.L2Flush.__call__ = lambda self: None
    timing_stream.choose = lambda *args: None
    try:
        assert {change.where + "." + change.name for change in guard.changes()} == {
            "apex_core.measure.l2_flush.L2Flush.__call__", "apex_core.measure.timing_stream.choose"}
    finally:
        assert len(guard.restore()) == 2
    assert l2_flush.L2Flush.__call__ is real_flush and timing_stream.choose is real_choose
    assert guard.changes() == []


def test_window_check_catches_samples_longer_than_their_window():
    samples = (5.0, 5.0, 5.0)
    timing = Timing("cpu_perf_counter", "n/a", samples, summarize(samples), "noise")
    assert integrity.window_problem(timing, int(20e6)) == ""
    assert "sum to 15 ms" in integrity.window_problem(timing, int(2e6))


def test_spot_plan_always_checks_the_first_sample_and_respects_batches():
    for _ in range(50):
        spots = plan_spots(10, granularity=10)
        assert 0 in spots and all(s % 10 == 0 for s in spots)


def test_plain_outputs_rejects_tensor_subclasses_and_overrides():
    plain_outputs({"y": torch.zeros(2)})
    with pytest.raises(integrity.Suspect, match="torch.Tensor subclass"):
        plain_outputs({"y": torch.zeros(2).as_subclass(type("Lazy", (torch.Tensor,), {}))})
    shadow = torch.zeros(2)
    shadow.clone = lambda: shadow
    with pytest.raises(integrity.Suspect, match="overrides tensor methods"):
        plain_outputs({"y": shadow})


def test_caching_evidence_needs_every_fresh_call_slow_and_a_confirmation():
    inputs = {"x": torch.zeros(2)}
    seen = {}

    def cached():  # slow on values it has not seen, instant on a repeat
        key = tuple(inputs["x"].tolist())
        if key not in seen:
            time.sleep(0.002)
            seen[key] = True

    spot = SpotChecks([], [inputs], lambda o, r: None, frozenset())
    spot.fresh = [0, 5]
    spot.more_inputs = lambda number: {"x": torch.full((2,), 100.0 + number)}
    samples = (2.0, 0.01, 0.01, 0.01, 0.01, 2.0, 0.01)
    assert "answered without the work" in spot.caching_problem(samples, cached)
    assert spot.caching_problem(samples, lambda: time.sleep(0.002)) == ""  # honest: slow start only
    assert spot.caching_problem((2.0, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01), cached) == ""


def test_checks_can_be_switched_off_for_the_cost_measurement(monkeypatch):
    monkeypatch.setenv(integrity.OFF_VARIABLE, "off")
    assert not integrity.checks_on()


def test_a_function_added_after_the_guard_is_left_alone():
    # torch adds functions to torch.cuda while it initializes CUDA: the guard must not take them away
    module = types.ModuleType("lazily_filled")
    guard = integrity.Guard([("lazily_filled", module, None)])
    module.added_later = lambda: 1
    assert guard.changes() == [] and guard.restore() == []
    assert module.added_later() == 1


def test_honest_builtins_are_never_suspect(tmp_path):
    """Every built-in backend at the smoke profile on the CPU: ok (or skipped), no suspect cell."""
    out = tmp_path / "run.json"
    done = run_cli(["--device", "cpu", "--profile", "smoke", "--backends",
                    "torch-reference,torch-compile,triton,jax,onnxruntime", "--min-time", "0.05",
                    "--max-time", "0.3", "--no-history", "--quiet", "--output-json", str(out),
                    "--output-md", str(tmp_path / "run.md")], cwd=tmp_path)
    cells = json.loads(out.read_text())["benchmarks"]
    bad = [(c["backend"], c["workload"], c["status"], c["reason"]) for c in cells
           if c["status"] not in ("ok", "skipped")]
    assert bad == [] and done.returncode == 0, (bad, done.stderr[-2000:])
    ran = {c["backend"] for c in cells if c["status"] == "ok"}
    assert ran >= {"torch-reference", "torch-compile", "triton"}


def test_a_run_with_cheats_fails_and_its_reports_name_them(plugin_on_path, tmp_path):
    out = tmp_path / "run.json"
    done = run_cli(["--device", "cpu", "--workloads", "test-scale",
                    "--backends", "cheat-none,cheat-perf-counter,cheat-warmup-replay",
                    "--min-time", "0.05", "--max-time", "0.3", "--no-history", "--quiet",
                    "--output-json", str(out), "--output-md", str(tmp_path / "run.md")], cwd=tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    record = json.loads(out.read_text())
    validate_report(record)  # the schema knows the suspect status
    statuses = {c["backend"]: c["status"] for c in record["benchmarks"]}
    assert statuses == {"cheat-none": "ok", "cheat-perf-counter": "suspect", "cheat-warmup-replay": "incorrect"}
    summary = (tmp_path / "run.md").read_text()
    assert "suspect" in summary and "time.perf_counter was replaced" in summary
