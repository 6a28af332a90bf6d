"""Sanity flags: each rule on made-up cells, and --strict on a cell faster than physics."""

import attrs
import pytest

from apex_core.report.flags import cell_flags, strict_failures
from apex_core.report.markdown import render_markdown
from apex_core.results import CellResult, Derived, Report, Status, Telemetry, Timing
from apex_core.stats import summarize

ENV = {"device": "cuda", "device_facts": {"copy_gbps": 3000.0}}
CONFIG = {"timing": {"noise_target": 0.005}}


def cell(samples, bytes_moved=0, host_ms=None, telemetry=None, device="cuda"):
    timing = Timing("cuda_event_held", "cold", tuple(samples), summarize(samples), "noise", host_ms=host_ms)
    p50 = timing.stats.p50
    derived = Derived("elements", 1.0, bytes_moved / (p50 / 1e3) / 1e9, 0.0, bytes_moved, 0)
    return CellResult("w", "default", "b", "fp16", device, Status.OK, timing=timing, derived=derived,
                      telemetry=telemetry)


def test_a_clean_cell_has_no_flags():
    # 3 MB at 3000 GB/s is 1 us; this cell takes 2 us with 0.1 % noise
    assert cell_flags(cell([0.002, 0.002, 0.002002], bytes_moved=3_000_000), ENV, CONFIG) == []


def test_each_rule():
    assert "noisy" in cell_flags(cell([0.001, 0.002, 0.0015]), ENV, CONFIG)
    assert "p50_over_min" in cell_flags(cell([0.001, 0.002, 0.002]), ENV, CONFIG)
    assert "launch_bound" in cell_flags(cell([0.002] * 3, host_ms=0.005), ENV, CONFIG)
    throttled = Telemetry(throttled_share=0.5, throttle_reasons=("sw_power_cap",))
    assert "throttled" in cell_flags(cell([0.002] * 3, telemetry=throttled), ENV, CONFIG)
    # 30 MB cannot move in 2 us at 3000 GB/s (it needs 10 us)
    assert "faster_than_physics" in cell_flags(cell([0.002] * 3, bytes_moved=30_000_000), ENV, CONFIG)


def test_no_physics_flag_without_a_measured_bandwidth_or_off_the_gpu():
    fast = cell([0.002] * 3, bytes_moved=30_000_000)
    assert "faster_than_physics" not in cell_flags(fast, {"device": "cuda"}, CONFIG)
    assert "faster_than_physics" not in cell_flags(attrs.evolve(fast, device="cpu"), ENV, CONFIG)


def test_strict_names_the_cells_faster_than_physics_and_markdown_says_why():
    fast = cell([0.002] * 3, bytes_moved=30_000_000)
    fine = attrs.evolve(cell([0.02] * 3, bytes_moved=30_000_000), backend="c")
    assert strict_failures([fast, fine], ENV, CONFIG) == [f"{fast.key}: faster_than_physics"]
    report = Report(suite="s", timestamp_utc="2026-11-26T00:00:00Z", environment=ENV, config=CONFIG,
                    status="complete", cells=(fast, fine))
    assert "faster than physics" in render_markdown(report)


@pytest.mark.parametrize("device", ["cpu"])
def test_doctor_on_the_cpu_says_what_it_cannot_measure(device):
    from apex_core.doctor import advice, device_facts

    facts = device_facts(device)
    assert facts["perf_counter_resolution_ns"] > 0 and "no CUDA device" in facts["cuda_unavailable"]
    lines = advice(facts)
    assert lines[0].startswith("CPU timer: perf_counter steps of") and "GPU timers" in lines[1]


def test_device_facts_measured_in_the_background_land_in_the_environment_and_say_when():
    import threading

    from apex_core import doctor

    env = {"device": "cpu"}
    facts = doctor.BackgroundFacts("cpu", env).start()
    facts.wait()
    assert facts.done.is_set()
    assert env["device_facts"]["perf_counter_resolution_ns"] > 0 and "cuda_unavailable" in env["device_facts"]

    stopping = threading.Event()
    stopping.set()
    never = doctor.BackgroundFacts("cpu", {})  # not started: a stopping run does not wait for it
    never.wait(stopping, poll_s=0.01)
    assert not never.done.is_set()


def test_a_failing_measurement_leaves_a_reason_not_a_hung_run(monkeypatch):
    from apex_core import doctor

    def broken(device, full=True):
        raise RuntimeError("CUDA error: no device")

    monkeypatch.setattr(doctor, "device_facts", broken)
    env = {}
    doctor.BackgroundFacts("cuda", env).start().wait()
    assert env["device_facts"] == {"unavailable": "RuntimeError: CUDA error: no device"}
