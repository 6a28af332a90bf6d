"""Measure what this machine's timers can tell truthfully: floors, launch cost, bandwidth, clock.

``device_facts`` runs once per run (into the report's environment) and by ``apex-bench
doctor``: the copy bandwidth and the memory's peak (NVML) that "faster than physics" is
judged against, each CUDA method's floor (its time for one empty kernel), the host's cost to launch one kernel,
a spin of known cycles read against NVML's SM clock, and the card's fingerprint from them
and NVML's static facts. ``advice`` turns the figures
into a few lines a person can act on. On a machine without CUDA it says what it cannot
measure and times only the CPU clock.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Mapping
from typing import Any

import attrs
import torch

from apex_core.measure import cuda_timer, device_fingerprint, telemetry
from apex_core.measure.cuda_timer import CudaTimer, empty_kernel
from apex_core.measure.kernel_timer import profiler_unavailable_reason

# a long spin reads the clock to well under 1 %: 20 M cycles is ~10 ms at 2 GHz
CLOCK_CHECK_CYCLES = 20_000_000
# the copy that gives the bandwidth: large enough to leave the L2 far behind
COPY_BYTES = 512 * 2**20
# copies a run starts with (0.37 ms each on an H100): over 20 rounds on one H100 (2026-11-28,
# scripts/dev/copy_noise.py) the median of 10 moved by 0.9-1.5 % (stdev), the best of 100 by
# 0.5 %: the fingerprint's figure, which scales cells between cards, is that best
COPY_REPEATS = 100
# where NVML gives no peak: a copy reaches 80-86 % of it (H100 80GB HBM3: 2866 of 3352 GB/s)
COPY_HEADROOM = 1.25


def perf_counter_resolution_ns(tries: int = 2000) -> int:
    """The smallest nonzero step between two ``perf_counter_ns`` readings."""
    steps = []
    for _ in range(tries):
        t0 = time.perf_counter_ns()
        t1 = time.perf_counter_ns()
        while t1 == t0:
            t1 = time.perf_counter_ns()
        steps.append(t1 - t0)
    return min(steps)


def copy_bandwidth(nbytes: int = COPY_BYTES, repeats: int = 10) -> dict[str, Any]:
    """Device-to-device copy, bytes read plus written per second: median and best of ``repeats``."""
    src = torch.randint(0, 255, (nbytes,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    seconds = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        seconds.append(start.elapsed_time(end) / 1e3)
    if not torch.equal(dst[:: 2**20], src[:: 2**20]):
        raise RuntimeError("the copy whose bandwidth was measured is wrong")
    del src, dst
    torch.cuda.empty_cache()
    median = statistics.median(seconds)
    return {"gpu": torch.cuda.get_device_name(), "bytes_per_copy": 2 * nbytes, "median_s": median,
            "copy_gbps": 2 * nbytes / median / 1e9, "best_gbps": 2 * nbytes / min(seconds) / 1e9}


def dram_peak_gbps() -> float:
    """The device memory's peak bandwidth in GB/s from NVML: its highest clock times its bus width,
    two transfers a clock (H100 80GB HBM3: 2619 MHz x 5120 bits = 3352 GB/s, the datasheet's 3.35 TB/s)."""
    nvml, why = telemetry.start_nvml()
    if nvml is None:
        raise RuntimeError(why)
    handle = telemetry.device_handle(nvml, torch.cuda.current_device())
    mhz = nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM)
    bits = nvml.nvmlDeviceGetMemoryBusWidth(handle)
    if not (mhz and bits):
        raise RuntimeError(f"NVML gave memory clock {mhz} MHz and bus width {bits} bits")
    return 2 * mhz * 1e6 * bits / 8 / 1e9


def physics_source(facts: Mapping[str, Any]) -> tuple[str, float] | None:
    """Which device fact bounds every cell's bandwidth, and the factor it is taken with: the
    memory's peak (``dram_peak_gbps``, NVML's clock times bus width), else the measured copy
    (``copy_gbps``) with ``COPY_HEADROOM``. The copy itself is no bound: honest streaming kernels
    that read more than they write beat it (H100, large profile: fusiongate at 3050 GB/s against
    a copy of 2866 GB/s, under the peak of 3352)."""
    if facts.get("dram_peak_gbps"):
        return "dram_peak_gbps", 1.0
    if facts.get("copy_gbps"):
        return "copy_gbps", COPY_HEADROOM
    return None


def physics_gbps(facts: Mapping[str, Any]) -> float | None:
    """The bandwidth no cell's minimal bytes can beat (``physics_source``), in GB/s."""
    source = physics_source(facts)
    return float(facts[source[0]]) * source[1] if source is not None else None


def timer_floors_us() -> dict[str, float | str]:
    """Each CUDA method's p50 for one empty kernel, in us (a reason where it cannot run)."""
    base = cuda_timer.FLOOR_SAMPLING  # sampled as each cell samples its own floor
    variants = {"cuda_event_held": base, "cuda_graph_held": attrs.evolve(base, graph=True),
                "cuda_event_unheld": attrs.evolve(base, hold=False),
                "kernel_profiler": attrs.evolve(base, timer="kernel")}
    floors: dict[str, float | str] = {}
    for name, options in variants.items():
        if options.timer == "kernel" and profiler_unavailable_reason():
            floors[name] = profiler_unavailable_reason()
            continue
        timer = None
        try:
            timer = CudaTimer(options)
            floors[name] = timer.measure(empty_kernel()).stats.p50 * 1e3
        except Exception as exc:  # one method failing must not hide the others
            floors[name] = f"{type(exc).__name__}: {exc}"
        finally:
            if timer is not None:
                timer.close()
    return floors


def launch_cost_us(calls: int = 2000) -> float:
    """The host's median time to launch one empty kernel (no sync), in us."""
    launch = empty_kernel()
    costs = []
    for i in range(calls):
        t0 = time.perf_counter_ns()
        launch()
        costs.append((time.perf_counter_ns() - t0) / 1e3)
        if i % 256 == 255:
            torch.cuda.synchronize()  # keep the queue short: a full queue blocks the launch
    torch.cuda.synchronize()
    return statistics.median(costs)


def clock_check() -> dict[str, Any]:
    """A spin of known cycles timed with events, against NVML's SM clock."""
    torch.cuda._sleep(1000)  # warm the kernel
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(CLOCK_CHECK_CYCLES)
    end.record()
    monitor = telemetry.Monitor(torch.cuda.current_device())
    reading = telemetry.take_reading(monitor.nvml, monitor.handle) if monitor.nvml is not None else None
    end.synchronize()
    spin_mhz = CLOCK_CHECK_CYCLES / (start.elapsed_time(end) * 1e3)
    nvml_mhz = reading.sm_mhz if reading is not None else None
    return {"spin_cycles_per_us": spin_mhz, "nvml_sm_clock_mhz": nvml_mhz,
            "nvml_unavailable": monitor.unavailable,
            "clock_agreement": spin_mhz / nvml_mhz if nvml_mhz else None}


def identity() -> dict[str, Any]:
    """NVML's static facts of the current card (``device_fingerprint.nvml_identity``)."""
    nvml, why = telemetry.start_nvml()
    if nvml is None:
        return {"unavailable": why}
    return device_fingerprint.nvml_identity(nvml, telemetry.device_handle(nvml, torch.cuda.current_device()))


def device_facts(device: str) -> dict[str, Any]:
    """The figures for ``device``, with the card's fingerprint (apex_core/measure/device_fingerprint.py)."""
    started = time.perf_counter()
    facts: dict[str, Any] = {"perf_counter_resolution_ns": perf_counter_resolution_ns()}
    if device != "cuda":
        facts["cuda_unavailable"] = "no CUDA device: GPU timers, copy bandwidth and NVML not measured"
        return facts
    try:
        copy = copy_bandwidth(repeats=COPY_REPEATS)
        facts["copy_gbps"], facts["copy_best_gbps"] = float(copy["copy_gbps"]), float(copy["best_gbps"])
    except Exception as exc:  # a figure that cannot be taken says why, the rest still come
        facts["copy_gbps"], facts["copy_gbps_unavailable"] = None, f"{type(exc).__name__}: {exc}"
    for name, measure in (("dram_peak_gbps", dram_peak_gbps),
                          ("timer_floor_us", timer_floors_us), ("launch_us", launch_cost_us),
                          ("identity", identity)):
        try:
            facts[name] = measure()
        except Exception as exc:  # a figure that cannot be taken says why, the rest still come
            facts[name] = None
            facts[f"{name}_unavailable"] = f"{type(exc).__name__}: {exc}"
    try:  # about 10 ms of spin: the SM clock under load is the fingerprint's second figure
        facts["clock"] = clock_check()
    except Exception as exc:
        facts["clock"] = {"unavailable": f"{type(exc).__name__}: {exc}"}
    facts["fingerprint"] = device_fingerprint.fingerprint(facts)
    facts["measured_in_s"] = round(time.perf_counter() - started, 3)  # a run waits this long for them
    return facts


class BackgroundFacts:
    """A run's ``device_facts``, measured in a thread into ``environment`` while its processes start.

    The figures take seconds (5.2-6.5 s on an H100, 2026-11-27; 7.6 s with the fingerprint,
    2026-11-28; docs/perf.md) and so do the run's worker and builder processes (3.9-6.0 s to
    start); measured first, one waited for the other. Each slot starts its worker and then
    ``wait``s for the figures before its first cell, so no cell is timed while the device is
    measured.
    """

    def __init__(self, device: str, environment: dict[str, Any]) -> None:
        self.device = device
        self.environment = environment
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._measure, name="apex-bench-device-facts", daemon=True)

    def start(self) -> BackgroundFacts:
        self._thread.start()
        return self

    def _measure(self) -> None:
        try:
            self.environment["device_facts"] = device_facts(self.device)
        except BaseException as exc:  # the run goes on without them, and says why
            self.environment["device_facts"] = {"unavailable": f"{type(exc).__name__}: {exc}"}
        finally:
            self.done.set()

    def wait(self, stopping: threading.Event | None = None, poll_s: float = 0.1) -> None:
        """Until the figures are in (or the run stops): Ctrl-C still reaches a waiting main thread."""
        while not self.done.wait(poll_s):
            if stopping is not None and stopping.is_set():
                return


def advice(facts: dict[str, Any]) -> list[str]:
    """A few lines on what this machine can time truthfully and with which method."""
    lines = [f"CPU timer: perf_counter steps of {facts['perf_counter_resolution_ns']} ns."]
    if "cuda_unavailable" in facts:
        return [*lines, f"CUDA: {facts['cuda_unavailable']}; CPU cells are timed with perf_counter."]
    floors = facts.get("timer_floor_us") or {}
    held = floors.get("cuda_event_held")
    kernel = floors.get("kernel_profiler")
    launch = facts.get("launch_us")
    if isinstance(held, float):
        lines.append(f"Held events (default): {held:.2f} us for an empty kernel, subtracted from every "
                     f"sample; calls under ~{4 * held:.0f} us sit close to that floor: compare them with "
                     "--timer kernel.")
    if isinstance(kernel, float):
        lines.append(f"Kernel timer (--timer kernel): {kernel:.2f} us for an empty kernel (its launch on the "
                     "device); it sums kernel time on every stream, so it also times other stacks' streams.")
    elif kernel:
        lines.append(f"Kernel timer: unavailable ({kernel}).")
    if isinstance(launch, float):
        lines.append(f"Host launch: {launch:.1f} us per kernel; a call of N kernels whose device time is under "
                     f"N x {launch:.1f} us is launch-bound when run eagerly (--graph removes the launches).")
    if facts.get("copy_gbps"):
        lines.append(f"Copy bandwidth: {facts['copy_gbps']:.0f} GB/s (the roofline's roof).")
    bound = physics_gbps(facts)
    if bound:
        source = "the memory's peak (NVML)" if facts.get("dram_peak_gbps") else "the copy's, with a 25 % margin"
        lines.append(f"Physics: {bound:.0f} GB/s, {source}; a cell faster than its bytes over this is flagged "
                     "faster than physics.")
    clock = facts.get("clock") or {}
    if clock.get("clock_agreement"):
        lines.append(f"SM clock: a spin of {CLOCK_CHECK_CYCLES:,} cycles ran at "
                     f"{clock['spin_cycles_per_us']:.0f} cycles/us, NVML reads "
                     f"{clock['nvml_sm_clock_mhz']:.0f} MHz "
                     f"({(clock['clock_agreement'] - 1) * 100:+.1f} %).")
    elif clock:
        lines.append(f"SM clock: not checked ({clock.get('nvml_unavailable') or clock.get('unavailable')}).")
    card = facts.get("fingerprint") or {}
    if card.get("gpu"):
        lines.append(f"Card: {card['gpu']} {card.get('uuid') or ''}, driver {card.get('driver')}, "
                     f"power limit {card.get('power_limit_w')} W, ECC {device_fingerprint.ecc_words(card)}, "
                     f"PCIe {card.get('pcie')}; its fingerprint (best copy, clock under load) scales "
                     "comparisons with other cards of its model.")
    return lines
