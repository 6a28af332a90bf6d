"""Throttled batches set aside (apex_core/measure/throttle.py), against a fake NVML and the fake timers
of test_cuda_timer and test_kernel_timer (no GPU here).

The fake NVML reports what the test's calls leave in its state: a call that runs while a limit
holds the card sets a reasons bit or lowers the SM clock (judged per batch), or raises a violation
counter (judged over the sampling window), and reads slower, so a sample that should have been set
aside shows in the stats.
"""

import json
import sys
import types
from pathlib import Path

import attrs
import pytest

from apex_core.baseline.io import load_report
from apex_core.measure import telemetry, throttle
from apex_core.measure.throttle import BatchWatch, batch_reasons
from apex_core.report.flags import cell_flags
from apex_core.report.markdown import render_markdown
from apex_core.report.records import report_record
from apex_core.report.schema import validate_report
from apex_core.results import (
    THROTTLED_BATCHES_LIMIT,
    CellResult,
    Report,
    Status,
    Telemetry,
    ThrottledBatches,
    Timing,
)
from apex_core.stats import summarize
from apex_core.timing import TimingOptions
from tests.apex_core.measure.test_cuda_timer import FakeClock, make_timer
from tests.apex_core.measure.test_kernel_timer import FakeClock as KernelClock
from tests.apex_core.measure.test_kernel_timer import FakeProfiledTimer
from tests.golden import records as golden_records

GOLDEN_RUN = Path(__file__).parents[2] / "golden" / "expected" / "run-a.json"
MAX_SM_MHZ = 1980
OPTIONS = TimingOptions(warmup=2, min_iters=20, min_time_s=0.0, max_time_s=5.0, subtract_floor=False)
FAST_MS, SLOW_MS = 0.010, 0.020


class FakeNvml(types.SimpleNamespace):
    """A card whose state the test's calls change; ``counters`` False: it keeps no violation counters."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2
    NVML_PERF_POLICY_POWER, NVML_PERF_POLICY_THERMAL = 0, 1

    def __init__(self, counters=True, mask=0x0, sm_mhz=MAX_SM_MHZ):
        super().__init__()
        self.counters, self.mask, self.sm_mhz = counters, mask, sm_mhz
        self.violation_ns = {0: 0, 1: 0}

    def nvmlDeviceGetClockInfo(self, handle, which):
        return self.sm_mhz if which == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetMaxClockInfo(self, handle, which):
        return MAX_SM_MHZ

    def nvmlDeviceGetPowerUsage(self, handle):
        return 300_000  # mW

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self.mask

    def nvmlDeviceGetViolationStatus(self, handle, policy):
        if not self.counters:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return types.SimpleNamespace(referenceTime=0, violationTime=self.violation_ns[policy])


# how a limit shows while a throttled call runs, per detection rule
def power_counter(nvml):
    nvml.violation_ns[0] += 1_000_000_000  # a second under the limit: most of any test's window


def thermal_counter(nvml):
    nvml.violation_ns[1] += 1_000_000_000


def reasons_mask(nvml):
    nvml.mask = 0x4  # sw_power_cap, read after the batch


def low_clock(nvml):
    nvml.sm_mhz = 1200  # below 0.75 x 1980 = 1485 MHz


def calm(nvml):
    nvml.mask, nvml.sm_mhz = 0x1, MAX_SM_MHZ  # idle after the sync: no limit


def cell_call(clock, nvml, throttled, limit):
    """A call reading 10 us, or 20 us while ``throttled(call number)``, when ``limit`` shows on the card."""
    calls = []

    def call():
        calls.append(1)
        if throttled(len(calls)):
            limit(nvml)
            clock.now_ms += SLOW_MS
        else:
            if limit is not power_counter and limit is not thermal_counter:
                calm(nvml)
            clock.now_ms += FAST_MS

    return call


def timed(options, nvml, throttled, limit=power_counter, set_aside=True):
    clock = FakeClock()
    timer = make_timer(clock, None, options)
    timer.throttle = BatchWatch(nvml, "handle", set_aside=set_aside)
    timing = timer.measure(cell_call(clock, nvml, throttled, limit))
    return timing, timer.throttle.summary()


def second_batch(number):
    """Calls 3 to 12 after the two warm-up calls: the second batch of ten samples."""
    return OPTIONS.warmup + 10 < number <= OPTIONS.warmup + 20


@pytest.mark.parametrize(("limit", "reason"),
                         [(reasons_mask, "sw_power_cap"), (low_clock, "sm_clock_below_floor")])
def test_a_throttled_batch_is_set_aside_and_counted(limit, reason):
    timing, batches = timed(OPTIONS, FakeNvml(), second_batch, limit)
    assert timing.samples_ms == pytest.approx((FAST_MS,) * 20)
    assert batches == ThrottledBatches(method="reasons_mask", batches=3, throttled=1, set_aside=10,
                                       reasons=(reason,), clock_floor_mhz=0.75 * MAX_SM_MHZ,
                                       sm_clock_mhz=batches.sm_clock_mhz, mem_clock_mhz=(2619, 2619, 2619),
                                       power_w=(300, 300, 300), violation_share=0.0)
    assert "throttled" not in timing.note and timing.stop_reason == "noise"


@pytest.mark.parametrize(("limit", "reason"), [(power_counter, "power_violation"),
                                               (thermal_counter, "thermal_violation")])
def test_violation_counters_judge_the_window_and_flag_without_setting_a_batch_aside(limit, reason):
    timing, batches = timed(OPTIONS, FakeNvml(), second_batch, limit)
    assert batches.throttled == 0 and batches.set_aside == 0 and reason in batches.reasons
    assert batches.violation_share == 1.0 and batches.over_limit  # 10 s under a limit in a shorter window


def test_the_share_of_a_window_under_a_limit():
    before = (1_000_000_000, (5, 7))
    assert throttle.violation_share(before, (2_000_000_000, (5, 7))) == (0.0, [])
    share, limits = throttle.violation_share(before, (2_000_000_000, (5, 50_000_007)))
    assert share == pytest.approx(0.05) and limits == ["thermal_violation"]
    assert throttle.violation_share((0, (None, None)), (10, (None, None))) == (None, [])


def test_the_rules_of_one_batch():
    calm_reading = telemetry.Reading(sm_mhz=1980, mem_mhz=2619, temperature_c=None, power_w=300,
                                     throttle_mask=0x1)
    assert batch_reasons(calm_reading, 1485) == []
    capped = attrs.evolve(calm_reading, throttle_mask=0x4 | 0x1, sm_mhz=1400)
    assert batch_reasons(capped, 1485) == ["sw_power_cap", "sm_clock_below_floor"]
    # idle, an applications-clock setting: no limit; without a known max clock the clock rule does not apply
    idle = attrs.evolve(calm_reading, throttle_mask=0x1 | 0x2, sm_mhz=1400)
    assert batch_reasons(idle, None) == []


def test_every_batch_throttled_ends_by_time_and_keeps_its_samples_with_a_note():
    options = attrs.evolve(OPTIONS, max_time_s=0.05)
    timing, batches = timed(options, FakeNvml(counters=False), lambda number: True, reasons_mask)
    assert timing.stop_reason == "time_cap" and timing.stats.n >= 10
    assert timing.samples_ms == pytest.approx((SLOW_MS,) * timing.stats.n)
    assert "every batch of samples ran throttled (sw_power_cap)" in timing.note and "kept" in timing.note
    assert batches.throttled == batches.batches == timing.stats.n // 10
    assert batches.kept_throttled == timing.stats.n and batches.set_aside == 0 and batches.over_limit


def test_fixed_iters_sets_nothing_aside_and_counts_what_it_kept():
    options = attrs.evolve(OPTIONS, fixed_iters=30)
    timing, batches = timed(options, FakeNvml(), lambda number: 30 < number <= 40, reasons_mask,
                            set_aside=False)
    assert timing.stats.n == 30 and max(timing.samples_ms) == pytest.approx(SLOW_MS)
    assert batches.throttled == 1 and batches.kept_throttled == 10 and batches.set_aside == 0
    assert batches.over_limit


def test_without_nvml_nothing_is_set_aside_and_the_reason_is_kept(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py not installed
    monitor = telemetry.Monitor()
    clock = FakeClock()
    timer = make_timer(clock, None, OPTIONS)
    timer.throttle = BatchWatch(monitor.nvml, monitor.handle, monitor.unavailable)
    timing = timer.measure(cell_call(clock, FakeNvml(), second_batch, power_counter))
    assert max(timing.samples_ms) == pytest.approx(SLOW_MS)  # the slow batch stayed in
    found = timer.throttle.summary()
    assert found == ThrottledBatches(unavailable=monitor.unavailable) and "nvidia-ml-py" in found.unavailable


def test_a_device_that_reports_nothing_is_unavailable_not_calm():
    bare = types.SimpleNamespace(NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2)  # every call missing
    timing, batches = timed(OPTIONS, bare, lambda number: False, lambda nvml: None)
    assert "no violation counters" in batches.unavailable and batches.set_aside == 0
    assert timing.stats.n == 20 and "throttled" not in timing.note


class ThrottledSessions(FakeProfiledTimer):
    """Profiler sessions whose second one ran while the power limit held the card (and read slower)."""

    def __init__(self, options, nvml):
        super().__init__(options, KernelClock(), startup_s=0.0, session_s=0.01,
                         busy_ms=FAST_MS)
        self.nvml = nvml

    def _session(self, call, calls, first):
        if len(self.sessions) == 2:
            reasons_mask(self.nvml)
        elif len(self.sessions) == 3:
            calm(self.nvml)
        found = super()._session(call, calls, first)
        if len(self.sessions) == 3:
            found = [attrs.evolve(a, busy_ms=SLOW_MS) for a in found]
        return found


def test_the_kernel_timer_sets_a_throttled_session_aside():
    nvml = FakeNvml()
    timer = ThrottledSessions(OPTIONS, nvml)
    timer.watch = BatchWatch(nvml, "handle")
    timing = timer.measure(lambda: None)
    found = timer.watch.summary()
    assert timing.samples_ms == pytest.approx((FAST_MS,) * timing.stats.n)
    assert found.throttled == 1 and found.reasons == ("sw_power_cap",)
    assert found.set_aside == timer.sessions[2]  # the whole second session
    assert timing.kernel.calls == timing.stats.n + found.set_aside  # its calls still count as profiled


def test_the_kernel_timer_throttled_throughout_ends_by_time_with_its_samples():
    nvml = FakeNvml()
    options = attrs.evolve(OPTIONS, max_time_s=1.0)
    timer = FakeProfiledTimer(options, KernelClock(), startup_s=0.0, session_s=0.3)
    timer.watch = BatchWatch(nvml, "handle")
    original = timer._session
    timer._session = lambda call, calls, first: (reasons_mask(nvml), original(call, calls, first))[1]
    timing = timer.measure(lambda: None)
    assert timing.stop_reason == "time_cap" and timing.stats.n > 0 and timer.watch.note


def cell(batches=None, share=0.0):
    samples = (FAST_MS,) * 20
    timing = Timing("cuda_event_held", "cold", samples, summarize(samples), "noise")
    read = Telemetry(readings=10, throttled_share=share, throttle_reasons=("sw_power_cap",) if share else (),
                     batches=batches)
    return CellResult("w", "default", "b", "fp16", "cuda", Status.OK, timing=timing, telemetry=read)


def batches_of(throttled, total=20):
    return ThrottledBatches(method="reasons_mask", batches=total, throttled=throttled,
                            set_aside=10 * throttled, reasons=("sw_power_cap",) if throttled else (),
                            clock_floor_mhz=1485.0, sm_clock_mhz=(1400, 1980, 1980))


def test_the_flag_appears_past_the_limit_of_batches_set_aside():
    env, config = {"device": "cuda"}, {"timing": {"noise_target": 0.005}}
    at_limit = int(THROTTLED_BATCHES_LIMIT * 20)
    # the NVML thread saw the limit too; the batches, read, decide
    assert "throttled" not in cell_flags(cell(batches_of(at_limit), share=0.1), env, config)
    over = cell(batches_of(at_limit + 1), share=0.15)
    assert "throttled" in cell_flags(over, env, config)
    report = Report("s", "2026-11-26T00:00:00Z", env, config, "complete", (over,))
    text = render_markdown(report)
    assert "3 of its 20 batches of samples ran while a limit" in text and "30 samples set aside" in text
    # a limit held for most of the window, no batch set aside: the note says what flagged it
    held = cell(attrs.evolve(batches_of(0), violation_share=0.4, reasons=("power_violation",)))
    assert "throttled" in cell_flags(held, env, config)
    text = render_markdown(Report("s", "2026-11-26T00:00:00Z", env, config, "complete", (held,)))
    assert "a limit held the clocks for 40% of its sampling window" in text
    # a report where no batch was read keeps the old rule: any throttled reading flags the cell
    assert "throttled" in cell_flags(cell(None, share=0.05), env, config)
    assert "throttled" not in cell_flags(cell(ThrottledBatches(unavailable="no NVML")), env, config)


def test_the_new_fields_are_in_the_report_and_an_old_report_still_loads(tmp_path):
    report = golden_records.report()
    timed_cells = [i for i, c in enumerate(report.cells) if c.telemetry is not None]
    cells = list(report.cells)
    unread = ThrottledBatches(unavailable="no NVML")
    for index, batches in zip(timed_cells, (batches_of(3), unread), strict=False):
        read = attrs.evolve(cells[index].telemetry, batches=batches)
        cells[index] = attrs.evolve(cells[index], telemetry=read)
    record = report_record(attrs.evolve(report, cells=tuple(cells)))
    validate_report(record)
    first, not_read, old = (record["benchmarks"][i]["telemetry"] for i in timed_cells[:3])
    assert first["batches"]["set_aside"] == 30 and first["batches"]["sm_clock_mhz"] == [1400, 1980, 1980]
    assert not_read["batches"]["unavailable"] == "no NVML"
    assert "batches" not in old  # as in a report from before the batches were read
    # the golden run, written before them, still validates and loads (its times are masked: any will do)
    golden = json.loads(GOLDEN_RUN.read_text(encoding="utf-8").replace("<time>", "2026-11-26T00:00:00Z"))
    assert all("batches" not in (c.get("telemetry") or {}) for c in golden["benchmarks"])
    validate_report(golden)
    written = tmp_path / "old.json"
    written.write_text(json.dumps(golden), encoding="utf-8")
    assert load_report(written).cells
