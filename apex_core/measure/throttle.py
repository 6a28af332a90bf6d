"""Per batch of samples, whether the card ran throttled; a throttled batch's samples are set aside.

After each batch's host synchronization (outside the timed events: the event timer's batches of
``cuda_timer.BATCH`` samples, the kernel timer's profiler sessions), one cheap NVML reading
(``telemetry.take_reading``, a few us): the SM and memory clocks first, then the power draw, the
temperature and the clock-event reasons. The batch ran throttled
when the reasons mask holds a throttle bit (``telemetry.THROTTLE_REASONS``) or its SM clock read
below ``CLOCK_FLOOR`` of the card's max SM clock (nvbench's rule).

Its samples are set aside, as nvbench discards a throttled trial: not in ``samples_ms`` nor the
stats, counted in ``telemetry.batches`` (results.ThrottledBatches). Under ``--fixed-iters``, which
promises exactly N samples, nothing is set aside: throttled batches are counted and kept. When every
batch ran throttled, sampling still ends at ``--max-time`` and the set-aside samples are kept, with a
note, rather than none. Without NVML nothing is set aside and ``unavailable`` says why.

NVML's violation counters (the ns a power or thermal limit has held the clocks, cumulative) catch
a limit that came and went within a batch, which the reasons read after it miss; but they are
dear (two reads ~1 ms after a sync on an H100, 2026-11-28, against ~3 us for a clock) and any rise
counts, however small (a power blip that moved the clock by 15 MHz set a 200-call session aside).
So they are read once around the whole sampling window, and the share of its time spent under a
limit is reported (``violation_share``) and flags the cell past ``THROTTLED_BATCHES_LIMIT``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial
from typing import Any

from apex_core.measure.telemetry import Reading, spread, take_reading, throttle_names, try_read
from apex_core.results import ThrottledBatches
from apex_core.timing import TimingOptions

# nvbench's throttle threshold (measure_cold, --throttle-threshold, default 75 % of the device's
# default clock rate): a batch whose SM clock reads below this share of the max SM clock ran throttled
CLOCK_FLOOR = 0.75
CLOCK_REASON = "sm_clock_below_floor"
# NVML's performance policies whose violation time (ns, nvmlViolationTime_t) is read around the window
VIOLATION_POLICIES = (("NVML_PERF_POLICY_POWER", "power_violation"),
                      ("NVML_PERF_POLICY_THERMAL", "thermal_violation"))


def violation_ns(nvml: Any, handle: Any) -> tuple[int, tuple[int | None, ...]]:
    """The host's clock (ns) and each of VIOLATION_POLICIES' counters (None where the device keeps none)."""
    def counter(policy: str) -> int:
        return int(nvml.nvmlDeviceGetViolationStatus(handle, getattr(nvml, policy)).violationTime)

    counters = tuple(try_read(partial(counter, policy)) for policy, _ in VIOLATION_POLICIES)
    return time.perf_counter_ns(), counters


def violation_share(before: tuple[int, tuple[int | None, ...]], after: tuple[int, tuple[int | None, ...]]
                    ) -> tuple[float | None, list[str]]:
    """The largest share of the time between two ``violation_ns`` reads that a limit held the clocks,
    and the limits that held them at all; (None, []) where the device keeps no counter."""
    wall = after[0] - before[0]
    rises = [(reason, new - old)
             for (_, reason), old, new in zip(VIOLATION_POLICIES, before[1], after[1], strict=True)
             if old is not None and new is not None]
    if not rises or wall <= 0:
        return None, []
    return min(1.0, max(0, *(rise for _, rise in rises)) / wall), [reason for reason, rise in rises if rise > 0]


def batch_reasons(after: Reading, clock_floor_mhz: float | None) -> list[str]:
    """Why the batch just read ran throttled; empty when it did not."""
    reasons = throttle_names(after.throttle_mask or 0)
    if clock_floor_mhz is not None and after.sm_mhz is not None and after.sm_mhz < clock_floor_mhz:
        reasons.append(CLOCK_REASON)
    return reasons


class BatchWatch:
    """Reads NVML after each batch of samples and sets a throttled batch's samples aside.

    ``begin()`` before the first batch (again when sampling restarts); ``after_batch(samples)`` right
    after each batch's sync; ``finish()`` when sampling ends; ``summary()`` for the report. ``nvml``
    None: ``unavailable`` says why.
    """

    def __init__(self, nvml: Any, handle: Any, unavailable: str = "", set_aside: bool = True) -> None:
        self.nvml, self.handle, self.unavailable, self.may_set_aside = nvml, handle, unavailable, set_aside
        max_mhz = try_read(lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)) if nvml else None
        self.clock_floor_mhz = CLOCK_FLOOR * max_mhz if max_mhz else None
        self.begin()

    def begin(self) -> None:
        """The violation counters before the first batch; the tallies start again."""
        # the counters' reads at the window's start and end (violation_ns)
        self.window: list[tuple[int, tuple[int | None, ...]]] = (
            [violation_ns(self.nvml, self.handle)] if self.nvml is not None else [])
        self.pending: Reading | None = None
        self.readings: list[Reading] = []
        self.throttled = self.kept_throttled = 0
        self.reasons: set[str] = set()
        self.aside: list[float] = []
        self.note = ""

    def finish(self) -> None:
        """The violation counters when sampling ends (before the energy window or any later work)."""
        if self.nvml is not None and len(self.window) == 1:
            self.window.append(violation_ns(self.nvml, self.handle))

    def mark(self) -> None:
        """Take the reading now, right after the sync, for the ``after_batch`` that follows later."""
        if self.nvml is not None:
            self.pending = take_reading(self.nvml, self.handle)

    def after_batch(self, samples: Sequence[float]) -> bool:
        """Judge the batch just synchronized (from ``mark``'s reading, else one taken now); True when
        its samples were set aside, False when the caller keeps them."""
        if self.nvml is None:
            return False
        reading, self.pending = self.pending or take_reading(self.nvml, self.handle), None
        reasons = batch_reasons(reading, self.clock_floor_mhz)
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
        self.finish()  # a timer that ended without saying so: the window ends now
        share, limits = violation_share(*self.window) if len(self.window) == 2 else (None, [])
        masks = any(r.throttle_mask is not None for r in read)
        if share is None and not masks and self.clock_floor_mhz is None:
            return ThrottledBatches(unavailable="NVML reports no violation counters, clock-event reasons "
                                                "or max SM clock for this device", batches=len(read))
        return ThrottledBatches(
            method="reasons_mask" if masks else "", batches=len(read), throttled=self.throttled,
            set_aside=len(self.aside), kept_throttled=self.kept_throttled,
            reasons=tuple(sorted(self.reasons | set(limits))), clock_floor_mhz=self.clock_floor_mhz,
            violation_share=share,
            sm_clock_mhz=spread([r.sm_mhz for r in read]), mem_clock_mhz=spread([r.mem_mhz for r in read]),
            power_w=spread([r.power_w for r in read]))
