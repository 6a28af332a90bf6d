"""GPU clocks, temperature, power, throttling and energy per call, read through NVML (nvidia-ml-py).

While a cell is timed, a thread reads the SM and memory clocks, the temperature, the
power draw and the clock-event (throttle) reasons every ``interval_s``; the cell records
their min / median / max and the share of readings taken while a power or thermal limit
held the clocks down. Beside it, the timers read NVML once per batch of samples, after
the batch's sync, and set a throttled batch's samples aside as nvbench does
(apex_core/measure/throttle.py); the cell is flagged ``throttled`` when more than
``results.THROTTLED_BATCHES_LIMIT`` of its batches were, or when throttled samples had to
be kept. Where no batch was read (older reports), any throttled reading flags it.

Energy per call comes from a separate window after the timing: the call runs back to
back for ``energy_window_s`` with no flush, and NVML's total-energy counter (mJ since
the driver loaded) gives J per call and the average W. Where the counter is missing,
the mean of the power readings times the window is used and the method says so. Where
NVML itself is missing (no nvidia-ml-py, no driver, a MIG slice), every field is
unavailable with the reason, never a made-up number.
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import attrs
import torch

from apex_core.results import Telemetry

# clock-event reasons that mean a limit slowed the clocks (not idle, not a clock setting)
THROTTLE_REASONS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
}
ENERGY_WINDOW_S = 0.5


def start_nvml() -> tuple[Any, str]:
    """The started NVML bindings, or None and why not."""
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py not installed (pip install 'apex-bench[nvml]')"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None, f"NVML did not start ({type(exc).__name__}: {exc})"
    return pynvml, ""


def device_handle(nvml: Any, device_index: int) -> Any:
    """The NVML handle of torch's CUDA device ``device_index``: by its UUID, else its PCI bus id.

    NVML numbers every card of the host and ignores ``CUDA_VISIBLE_DEVICES``, so torch's device 0
    under ``CUDA_VISIBLE_DEVICES=2`` is NVML's index 2: by index, four processes on four cards of an
    H100 host all read card 0's clocks and UUID (2026-11-28). The index is the last resort, and
    only right where no device is hidden.
    """
    props = torch.cuda.get_device_properties(device_index)
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        with contextlib.suppress(Exception):  # a binding without the call: try the bus id
            return nvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}")
    bus = getattr(props, "pci_bus_id", None)
    if bus is not None:
        pci = f"{getattr(props, 'pci_domain_id', 0):08x}:{bus:02x}:{getattr(props, 'pci_device_id', 0):02x}.0"
        for call in ("nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId"):
            with contextlib.suppress(Exception):
                return getattr(nvml, call)(pci)
    return nvml.nvmlDeviceGetHandleByIndex(device_index)


@attrs.frozen
class Reading:
    """One NVML reading; None where the device does not report the quantity."""

    sm_mhz: float | None
    mem_mhz: float | None
    temperature_c: float | None
    power_w: float | None
    throttle_mask: int | None


def try_read(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception:
        return None


def reasons_reader(nvml: Any) -> Callable[[Any], int] | None:
    """NVML's clock-event reasons call (named throttle reasons in older bindings), None if it has neither."""
    return getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None)


def take_reading(nvml: Any, handle: Any) -> Reading:
    """The clocks first: read right after a batch's sync (throttle.py), they move within milliseconds
    once the card idles."""
    sm_mhz = try_read(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
    mem_mhz = try_read(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM))
    power_mw = try_read(lambda: nvml.nvmlDeviceGetPowerUsage(handle))
    reasons = reasons_reader(nvml)
    return Reading(
        sm_mhz=sm_mhz, mem_mhz=mem_mhz,
        temperature_c=try_read(lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
        power_w=power_mw / 1e3 if power_mw is not None else None,
        throttle_mask=try_read(lambda: reasons(handle)) if reasons else None,
    )


def spread(values: list[float | None]) -> list[float] | None:
    """[min, median, max] of the values the device reported, None when it reported none."""
    known = [float(v) for v in values if v is not None]
    return [min(known), statistics.median(known), max(known)] if known else None


def throttle_names(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]


def summarize_readings(readings: list[Reading]) -> dict[str, Any]:
    """The clock, temperature and power spreads and the throttled share of the readings."""
    masks = [r.throttle_mask for r in readings if r.throttle_mask is not None]
    throttled = [m for m in masks if any(m & bit for bit in THROTTLE_REASONS)]
    reasons = sorted({name for m in throttled for name in throttle_names(m)})
    return {
        "readings": len(readings),
        "sm_clock_mhz": spread([r.sm_mhz for r in readings]),
        "mem_clock_mhz": spread([r.mem_mhz for r in readings]),
        "temperature_c": spread([r.temperature_c for r in readings]),
        "power_w": spread([r.power_w for r in readings]),
        "throttled_share": len(throttled) / len(masks) if masks else None,
        "throttle_reasons": reasons,
    }


class Monitor:
    """Reads NVML on a thread between ``start()`` and ``stop()``; ``unavailable`` says why not."""

    def __init__(self, device_index: int = 0, interval_s: float = 0.01) -> None:
        self.interval_s = interval_s
        self.readings: list[Reading] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.nvml, self.unavailable = start_nvml()
        self.handle = None
        if self.nvml is not None:
            try:
                self.handle = device_handle(self.nvml, device_index)
            except Exception as exc:  # a MIG slice or a device NVML does not list
                self.nvml, self.unavailable = None, f"NVML has no handle for this device ({exc})"

    def start(self) -> None:
        if self.nvml is None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="apex-nvml", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self.readings.append(take_reading(self.nvml, self.handle))
            if self._stop.wait(self.interval_s):
                return

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5)
            self._thread = None

    def energy_mj(self) -> float | None:
        if self.nvml is None:
            return None
        return try_read(lambda: float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)))


def energy_per_call(monitor: Monitor, call: Callable[[], Any], synchronize: Callable[[], None],
                    window_s: float = ENERGY_WINDOW_S) -> dict[str, Any]:
    """Run ``call`` back to back for ``window_s``; J per call and average W, with the method used."""
    if monitor.nvml is None:
        return {"energy_unavailable": monitor.unavailable}
    synchronize()
    before_readings = len(monitor.readings)
    start_mj, start = monitor.energy_mj(), time.perf_counter()
    calls = 0
    while True:
        call()
        calls += 1
        if calls % 8 == 0 and time.perf_counter() - start >= window_s:
            break
    synchronize()
    seconds, end_mj = time.perf_counter() - start, monitor.energy_mj()
    if start_mj is not None and end_mj is not None and end_mj > start_mj:
        joules, method = (end_mj - start_mj) / 1e3, "nvml_total_energy"
    else:
        powers = [r.power_w for r in monitor.readings[before_readings:] if r.power_w is not None]
        if not powers:
            return {"energy_unavailable": "NVML reports neither the energy counter nor the power draw"}
        joules, method = statistics.mean(powers) * seconds, "nvml_power_x_time"
    return {"energy_j_per_call": joules / calls, "average_w": joules / seconds, "energy_method": method,
            "energy_calls": calls, "energy_window_s": seconds}


def measure_telemetry(monitor: Monitor, timed: Callable[[], Any], call: Callable[[], Any],
                      synchronize: Callable[[], None], energy: bool = True) -> tuple[Any, Telemetry]:
    """Run ``timed()`` under the monitor, then the energy window on ``call``; returns timed()'s result."""
    monitor.start()
    try:
        result = timed()
        timed_readings = list(monitor.readings)
        watts: dict[str, Any] = ({"energy_unavailable": "not measured (--no-energy)"} if not energy
                                 else energy_per_call(monitor, call, synchronize))
    finally:
        monitor.stop()
    if monitor.nvml is None:
        return result, Telemetry(unavailable=monitor.unavailable)
    return result, Telemetry(**summarize_readings(timed_readings), **watts)
