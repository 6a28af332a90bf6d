"""Sanity flags: each rule on made-up cells, and --strict on a cell faster than physics."""

import attrs
import pytest

from apex_core.api import run
from apex_core.interfaces import Prepared
from apex_core.measure.doctor import COPY_HEADROOM, advice, physics_gbps
from apex_core.registry import Registry
from apex_core.report.flags import cell_flags, strict_failures
from apex_core.report.markdown import render_markdown
from apex_core.report.writer import ReportWriter
from apex_core.results import CellResult, Derived, Report, Status, Telemetry, Timing
from apex_core.stats import summarize
from apex_core.timing import TimingOptions
from tests.apex_core.fakes import Axpy, Eager

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


def test_physics_is_the_memory_peak_not_the_copy():
    # 3.05 GB in 1 ms: faster than a 2866 GB/s copy, as honest read-heavy kernels are, under a 3352 GB/s peak
    honest = cell([1.0] * 3, bytes_moved=3_050_000_000)
    measured = {"device": "cuda", "device_facts": {"copy_gbps": 2866.0, "dram_peak_gbps": 3352.0}}
    assert "faster_than_physics" not in cell_flags(honest, measured, CONFIG)
    assert "faster_than_physics" in cell_flags(cell([0.8] * 3, bytes_moved=3_050_000_000), measured, CONFIG)
    # without NVML's peak the copy counts with a margin: 2866 x 1.25 = 3583 GB/s
    copy_only = {"device": "cuda", "device_facts": {"copy_gbps": 2866.0}}
    assert physics_gbps(copy_only["device_facts"]) == pytest.approx(2866.0 * COPY_HEADROOM)
    assert "faster_than_physics" not in cell_flags(honest, copy_only, CONFIG)
    assert "faster_than_physics" in cell_flags(cell([0.8] * 3, bytes_moved=3_050_000_000), copy_only, CONFIG)


def test_strict_names_the_cells_faster_than_physics_and_markdown_says_why():
    fast = cell([0.002] * 3, bytes_moved=30_000_000)
    fine = attrs.evolve(cell([0.02] * 3, bytes_moved=30_000_000), backend="c")
    assert strict_failures([fast, fine], ENV, CONFIG) == [f"{fast.key}: faster_than_physics"]
    report = Report(suite="s", timestamp_utc="2026-11-26T00:00:00Z", environment=ENV, config=CONFIG,
                    status="complete", cells=(fast, fine))
    assert "faster than physics" in render_markdown(report)


@pytest.mark.parametrize("device", ["cpu"])
def test_doctor_on_the_cpu_says_what_it_cannot_measure(device):
    from apex_core.measure.doctor import advice, device_facts

    facts = device_facts(device)
    assert facts["perf_counter_resolution_ns"] > 0 and "no CUDA device" in facts["cuda_unavailable"]
    lines = advice(facts)
    assert lines[0].startswith("CPU timer: perf_counter steps of") and "GPU timers" in lines[1]


def test_the_memory_peak_is_nvmls_clock_times_bus_width_and_advice_names_it(monkeypatch):
    import types

    from apex_core.measure import doctor, telemetry

    fake = types.SimpleNamespace(NVML_CLOCK_MEM=2, nvmlDeviceGetMemoryBusWidth=lambda h: 5120,
                                 nvmlDeviceGetMaxClockInfo=lambda h, kind: 2619 if kind == 2 else 0)
    monkeypatch.setattr(telemetry, "start_nvml", lambda: (fake, ""))
    monkeypatch.setattr(telemetry, "device_handle", lambda nvml, index: "handle")
    monkeypatch.setattr("torch.cuda.current_device", lambda: 0)
    assert doctor.dram_peak_gbps() == pytest.approx(3352.32)  # H100 80GB HBM3's datasheet: 3.35 TB/s
    lines = doctor.advice({"perf_counter_resolution_ns": 50, "copy_gbps": 2866.0, "dram_peak_gbps": 3352.32})
    assert any(line.startswith("Physics: 3352 GB/s, the memory's peak (NVML)") for line in lines)
    monkeypatch.setattr(telemetry, "start_nvml", lambda: (None, "nvidia-ml-py not installed"))
    with pytest.raises(RuntimeError, match="nvidia-ml-py not installed"):
        doctor.dram_peak_gbps()
    lines = doctor.advice({"perf_counter_resolution_ns": 50, "copy_gbps": 2866.0})
    assert any(line.startswith("Physics: 3582 GB/s, the copy's, with a 25 % margin") for line in lines)
    assert not any(line.startswith("Card:") for line in lines)  # no fingerprint, no card line


def test_doctor_names_the_card_it_fingerprinted():
    card = {"gpu": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1160ada8", "driver": "580.159.04",
            "power_limit_w": 700.0, "ecc": True, "pcie": "gen5 x16 (max gen5 x16)", "copy_gbps": 2977.0,
            "sm_clock_under_load_mhz": 1976.0}
    lines = advice({"perf_counter_resolution_ns": 50, "copy_gbps": 2880.0, "fingerprint": card})
    assert ("Card: NVIDIA H100 80GB HBM3 GPU-1160ada8, driver 580.159.04, power limit 700.0 W, ECC on, "
            "PCIe gen5 x16 (max gen5 x16)") in lines[-1]


def test_device_facts_measured_in_the_background_land_in_the_environment_and_say_when():
    import threading

    from apex_core.measure import doctor

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
    from apex_core.measure import doctor

    def broken(device):
        raise RuntimeError("CUDA error: no device")

    monkeypatch.setattr(doctor, "device_facts", broken)
    env = {}
    doctor.BackgroundFacts("cuda", env).start().wait()
    assert env["device_facts"] == {"unavailable": "RuntimeError: CUDA error: no device"}


SAMPLING = {"timing": {"noise_target": 0.005, "mode": "adaptive", "min_iters": 10, "max_time_s": 3.0,
                       "max_samples": 5000}}


def timed(backend, samples, stop="noise", floor_ms=None, device="cpu", method="cpu_perf_counter"):
    timing = Timing(method, "n/a", tuple(samples), summarize(samples), stop, floor_ms=floor_ms)
    return CellResult("w", "c", backend, "fp32", device, Status.OK, timing=timing)


def zero_time_report():
    return Report(suite="s", timestamp_utc="2026-11-27T00:00:00Z", environment={"device": "cpu"},
                  config=SAMPLING, status="complete",
                  cells=(timed("torch-reference", [1.0] * 10), timed("fast", [0.0] * 10)))


def test_a_zero_time_cell_is_flagged_and_its_markdown_has_no_speed_up_but_a_reason():
    report = zero_time_report()
    zero = report.cells[1]
    assert cell_flags(zero, report.environment, report.config) == ["no_device_work"]
    text = render_markdown(report)  # divided by the 0 ms p50 before: ZeroDivisionError
    row = next(line for line in text.splitlines() if line.startswith("| w |"))
    assert "0 / 0 (– [1]) [2]" in row and "x)" not in row.split("|")[5]
    assert "1. no speed-up: the cell's p50 is 0 ms" in text
    assert "2. no_device_work: the clock saw no time in the calls" in text


def test_a_zero_time_reference_leaves_every_speed_up_out_with_its_reason():
    report = attrs.evolve(zero_time_report(), cells=(timed("torch-reference", [0.0] * 10),
                                                     timed("b", [1.0] * 10)))
    text = render_markdown(report)
    assert "1 / 1 (– [2])" in text and "2. no speed-up: torch-reference's p50 is 0 ms" in text


def test_on_cuda_no_device_work_says_to_use_the_kernel_timer():
    cell_ = timed("b", [0.0] * 10, device="cuda")
    report = attrs.evolve(zero_time_report(), cells=(cell_,))
    assert "--timer kernel" in render_markdown(report)
    profiled = timed("b", [0.0] * 10, device="cuda", method="kernel_profiler")
    text = render_markdown(attrs.evolve(zero_time_report(), cells=(profiled,)))
    assert "no_device_work: the profiler saw no device activity in any timed call, on any stream" in text


def test_a_p50_at_or_below_the_timers_floor_is_flagged_with_what_to_do():
    at_floor = timed("b", [0.004] * 10, floor_ms=0.004, device="cuda")
    above = timed("b", [0.005] * 10, floor_ms=0.004, device="cuda")
    unknown = timed("b", [0.004] * 10)
    assert "below_timer_floor" in cell_flags(at_floor, {}, SAMPLING)
    assert "below_timer_floor" not in cell_flags(above, {}, SAMPLING)
    assert "below_timer_floor" not in cell_flags(unknown, {}, SAMPLING)
    text = render_markdown(attrs.evolve(zero_time_report(), cells=(at_floor,)))
    assert ("below_timer_floor: the p50 net of the timer's floor is at or below the floor itself (0.004 ms)"
            in text)
    assert "with --timer kernel or at a larger size" in text


def test_fewer_samples_than_asked_are_flagged_and_say_why():
    one_long_call = timed("b", [5000.0], stop="time_cap")
    assert cell_flags(one_long_call, {}, SAMPLING) == ["few_samples"]
    assert cell_flags(timed("b", [1.0] * 10, stop="time_cap"), {}, SAMPLING) == []
    text = render_markdown(attrs.evolve(zero_time_report(), cells=(one_long_call,)))
    assert ("few_samples: its statistics rest on 1 sample, fewer than the 10 asked: a single call took "
            "longer than --max-time (3.0 s)") in text
    host_bound = timed("b", [1.0] * 3, stop="time_cap")  # three 1 ms reads in --iters x --max-time
    text = render_markdown(attrs.evolve(zero_time_report(), cells=(host_bound,)))
    assert "its calls took far longer than the timer reads of them" in text
    fixed = {"timing": {**SAMPLING["timing"], "mode": "fixed_iters", "fixed_iters": 3}}
    assert cell_flags(timed("b", [1.0] * 3, stop="fixed_iters"), {}, fixed) == []


def test_the_html_report_shows_the_degenerate_flags_notes_and_the_missing_speed_up():
    from apex_core.report.html.inputs import ReportInputs, RunInput
    from apex_core.report.html.page import render_html
    from apex_core.report.records import report_record

    report = attrs.evolve(zero_time_report(), cells=(*zero_time_report().cells,
                                                     timed("slow", [5000.0], stop="time_cap")))
    page = render_html(ReportInputs(runs=(RunInput("run0", "r.json", report_record(report)),)))
    assert "fast: no speed-up: this cell&#x27;s p50 is 0 ms" in page
    assert "fast: no_device_work: the clock saw no time in the calls" in page
    assert "slow: few_samples: its statistics rest on 1 sample, fewer than the 10 asked" in page
    assert '<span class="none">–</span> [1]' in page


class Reference(Eager):
    name = "torch-reference"


class SelfTimedAtZero(Eager):
    """Times itself (as an external process does) and reads 0 ms: the work it reports never ran timed."""

    name = "zero-time"

    def prepare(self, workload, case, inputs):
        def measure(options: TimingOptions) -> Timing:
            samples = (0.0,) * options.min_iters
            return Timing("external_self_timed", "n/a", samples, summarize(samples), "noise")

        return Prepared(lambda: workload.reference(case, inputs), measure=measure)


def test_a_suite_with_a_zero_time_cell_completes_and_every_output_is_written(tmp_path):
    registry = Registry.from_objects([Reference(), SelfTimedAtZero()], [Axpy()])
    options = TimingOptions(warmup=1, min_iters=3, min_time_s=0.0, max_time_s=0.2)
    report = run(["axpy"], ["torch-reference", "zero-time"], device="cpu", timing=options,
                 isolation="inline", registry=registry)
    assert [c.status for c in report.cells] == [Status.OK] * 4  # two cases x two backends
    zero = [c for c in report.cells if c.backend == "zero-time"]
    assert all(c.timing.stats.p50 == 0 and c.timing.samples_ms == (0.0,) * 3 for c in zero)
    assert all("no_device_work" in cell_flags(c, report.environment, report.config) for c in zero)
    writer = ReportWriter({"json": tmp_path / "r.json", "markdown": tmp_path / "r.md",
                           "html": tmp_path / "r.html"})
    writer.write(attrs.evolve(report, status="complete"))
    assert writer.failure == ""
    assert "(– [" in (tmp_path / "r.md").read_text() and (tmp_path / "r.html").exists()


def test_a_cell_whose_cheat_signs_the_confirmation_cleared_says_so_in_the_markdown():
    seen = attrs.evolve(timed("b", [1.0] * 10), metadata={"integrity_unconfirmed": [
        "reading the outputs of a timed call took 0.6 ms, the call itself 0.006 ms (after timing, ms: 0.6 "
        "against 0.2, 0.55 against 0.2, 0.55 against 0.2): not confirmed"]})
    text = render_markdown(attrs.evolve(zero_time_report(), cells=(seen, timed("c", [1.0] * 10))))
    row = next(line for line in text.splitlines() if line.startswith("| w |"))
    assert "1 / 1 [1]" in row
    assert "1. a spot check saw during timing what a cheat would show" in text
    assert "metadata.integrity_unconfirmed of the JSON report" in text
    assert text.count("a spot check saw during timing") == 1  # the clean cell has no note
    from apex_core.report.html.inputs import ReportInputs, RunInput
    from apex_core.report.html.page import render_html
    from apex_core.report.records import report_record

    report = attrs.evolve(zero_time_report(), cells=(seen,))
    page = render_html(ReportInputs(runs=(RunInput("run0", "r.json", report_record(report)),)))
    assert "b: a spot check saw during timing what a cheat would show" in page
