"""Per batch of samples, whether the card ran throttled; a throttled batch's samples are set aside.

After each batch's host synchronization (outside the timed events: the event timer's batches of
``cuda_timer.BATCH`` samples, the kernel timer's profiler sessions), one NVML reading: the SM and
memory clocks, the power draw, the clock-event reasons and the power and thermal violation
counters (the time a limit has held the clocks, cumulative). The batch ran throttled when

- the violation counters rose since the previous reading, where the device keeps them; else, where
  it does not, when the reasons mask holds a throttle bit (``telemetry.THROTTLE_REASONS``); or
- its SM clock read below ``CLOCK_FLOOR`` of the card's max SM clock: nvbench's rule.

Its samples are set aside, as nvbench discards a throttled trial: not in ``samples_ms`` nor the
stats, counted in ``telemetry.batches`` (results.ThrottledBatches). Under ``--fixed-iters``, which
promises exactly N samples, nothing is set aside: throttled batches are counted and kept. When every
batch ran throttled, sampling still ends at ``--max-time`` and the set-aside samples are kept, with a
note, rather than none. Without NVML nothing is set aside and ``unavailable`` says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from apex_core.measure.telemetry import reasons_reader, spread, throttle_names, try_read
from apex_core.results import ThrottledBatches
from apex_core.timing import TimingOptions

# nvbench's throttle threshold (measure_cold, --throttle-threshold, default 75 % of the device's
# default clock rate): a batch whose SM clock reads below this share of the max SM clock ran throttled
CLOCK_FLOOR = 0.75
CLOCK_REASON = "sm_clock_below_floor"
# NVML's violation counters (the time a power or thermal limit has held the clocks, cumulative) as a
# field value and as a performance policy, with the reason each gives. They are the dear part of a
# reading: on an H100 (2026-11-28) one field-values call for both took ~0.5 ms after a sync and two
# nvmlDeviceGetViolationStatus calls ~1 ms, against ~3 us for a clock, the reasons or the power; so
# the field values are read, and the policies only where the bindings or the driver lack them.
VIOLATION_COUNTERS = (("NVML_FI_DEV_PERF_POLICY_POWER", "NVML_PERF_POLICY_POWER", "power_violation"),
                      ("NVML_FI_DEV_PERF_POLICY_THERMAL", "NVML_PERF_POLICY_THERMAL", "thermal_violation"))


@attrs.frozen
class BatchReading:
    """One reading after a batch; None where the device does not report the quantity."""

    sm_mhz: float | None
    mem_mhz: float | None
    power_w: float | None
    throttle_mask: int | None
    violations: tuple[int | None, ...]  # per VIOLATION_COUNTERS


def take_batch_reading(nvml: Any, handle: Any) -> BatchReading:
    """The clocks first: they move within milliseconds once the card idles after the sync."""
    sm = try_read(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
    mem = try_read(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM))
    reasons = reasons_reader(nvml)
    power_mw = try_read(lambda: nvml.nvmlDeviceGetPowerUsage(handle))
    return BatchReading(
        sm_mhz=sm, mem_mhz=mem, power_w=power_mw / 1e3 if power_mw is not None else None,
        throttle_mask=try_read(lambda: reasons(handle)) if reasons else None,
        violations=violation_counters(nvml, handle))


def violation_counters(nvml: Any, handle: Any) -> tuple[int | None, ...]:
    """The counters of VIOLATION_COUNTERS (only their rise is read, never their unit); None where not kept."""
    fields = try_read(lambda: nvml.nvmlDeviceGetFieldValues(
        handle, [getattr(nvml, field) for field, _, _ in VIOLATION_COUNTERS]))
    values = tuple(int(f.value.ullVal) if f.nvmlReturn == 0 else None for f in fields or ())  # 0: NVML_SUCCESS
    if any(v is not None for v in values):
        return values
    return tuple(_policy_counter(nvml, handle, policy) for _, policy, _ in VIOLATION_COUNTERS)


def _policy_counter(nvml: Any, handle: Any, policy: str) -> int | None:
    return try_read(lambda: int(nvml.nvmlDeviceGetViolationStatus(handle, getattr(nvml, policy)).violationTime))


def batch_reasons(before: BatchReading, after: BatchReading, clock_floor_mhz: float | None) -> list[str]:
    """Why the batch between two readings ran throttled; empty when it did not."""
    counters = [(reason, old, new) for (_, _, reason), old, new
                in zip(VIOLATION_COUNTERS, before.violations, after.violations, strict=True)
                if old is not None and new is not None]
    if counters:
        reasons = [reason for reason, old, new in counters if new > old]
    else:
        reasons = throttle_names(after.throttle_mask or 0)
    if clock_floor_mhz is not None and after.sm_mhz is not None and after.sm_mhz < clock_floor_mhz:
        reasons.append(CLOCK_REASON)
    return reasons


class BatchWatch:
    """Reads NVML after each batch of samples and sets a throttled batch's samples aside.

    ``begin()`` before the first batch (again when sampling restarts); ``after_batch(samples)`` right
    after each batch's sync; ``summary()`` for the report. ``nvml`` None: ``unavailable`` says why.
    """

    def __init__(self, nvml: Any, handle: Any, unavailable: str = "", set_aside: bool = True) -> None:
        self.nvml, self.handle, self.unavailable, self.may_set_aside = nvml, handle, unavailable, set_aside
        max_mhz = try_read(lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)) if nvml else None
        self.clock_floor_mhz = CLOCK_FLOOR * max_mhz if max_mhz else None
        self.begin()

    def begin(self) -> None:
        """A reading before the first batch; the tallies start again."""
        self.last = take_batch_reading(self.nvml, self.handle) if self.nvml is not None else None
        self.pending: BatchReading | None = None
        self.readings: list[BatchReading] = []
        self.throttled = self.kept_throttled = 0
        self.reasons: set[str] = set()
        self.aside: list[float] = []
        self.note = ""

    def mark(self) -> None:
        """Take the reading now, right after the sync, for the ``after_batch`` that follows later."""
        if self.nvml is not None:
            self.pending = take_batch_reading(self.nvml, self.handle)

    def after_batch(self, samples: Sequence[float]) -> bool:
        """Judge the batch just synchronized (from ``mark``'s reading, else one taken now); True when
        its samples were set aside, False when the caller keeps them."""
        if self.nvml is None or self.last is None:
            return False
        reading, self.pending = self.pending or take_batch_reading(self.nvml, self.handle), None
        reasons = batch_reasons(self.last, reading, self.clock_floor_mhz)
        self.last = reading
        self.readings.append(reading)
        if not reasons:
            return False
        self.throttled += 1
        self.reasons.update(reasons)
        if not self.may_set_aside:
            self.kept_throttled += len(samples)
            return False
        self.aside += samples
        return True

    def ends_sampling(self, samples: list[float], elapsed_s: float, options: TimingOptions) -> bool:
        """After a batch set aside: whether ``--max-time`` ends sampling now, as it would have without the
        batch; a card throttled throughout would otherwise be sampled for ever. With no sample kept,
        the set-aside ones go back into ``samples`` (and ``note`` says so): a number from a slowed
        card, flagged, rather than none."""
        if elapsed_s < options.max_time_s:
            return False
        if not samples:
            samples += self.aside
            self.kept_throttled += len(self.aside)
            self.aside = []
            self.note = (f"every batch of samples ran throttled ({', '.join(sorted(self.reasons))}): "
                         "they were kept, not set aside, and the cell is flagged throttled")
        return True

    def summary(self) -> ThrottledBatches:
        if self.nvml is None:
            return ThrottledBatches(unavailable=self.unavailable or "NVML not started")
        read = self.readings
        counters = self.last is not None and any(v is not None for v in self.last.violations)
        masks = self.last is not None and self.last.throttle_mask is not None
        if not counters and not masks and self.clock_floor_mhz is None:
            return ThrottledBatches(unavailable="NVML reports no violation counters, clock-event reasons "
                                                "or max SM clock for this device", batches=len(read))
        return ThrottledBatches(
            method="violation_counters" if counters else "reasons_mask" if masks else "",
            batches=len(read), throttled=self.throttled, set_aside=len(self.aside),
            kept_throttled=self.kept_throttled, reasons=tuple(sorted(self.reasons)),
            clock_floor_mhz=self.clock_floor_mhz,
            sm_clock_mhz=spread([r.sm_mhz for r in read]), mem_clock_mhz=spread([r.mem_mhz for r in read]),
            power_w=spread([r.power_w for r in read]))
