"""Sanity flags on every timed cell, in the spirit of torch.utils.benchmark's warnings.

A flag never changes a number; it tells the reader why not to trust one as it stands:

- ``noisy``: the coefficient of variation stayed above the run's noise target;
- ``p50_over_min``: the median is more than 1.5x the fastest sample (a bimodal or disturbed run);
- ``launch_bound``: issuing one call costs the host more than the device spends on it;
- ``throttled``: NVML saw a power or thermal limit hold the clocks down during the timing;
- ``faster_than_physics``: the cell moved its minimal bytes faster than this device's copy
  bandwidth, measured once per run (``environment.device_facts.copy_gbps``), allows: it
  skipped work, or its ``work()`` counts more bytes than it must move. ``--strict`` fails the
  run on it.
"""

from __future__ import annotations

from typing import Any

from apex_core.results import CellResult, Timing

P50_OVER_MIN_LIMIT = 1.5
STRICT_FLAGS = ("faster_than_physics",)


def is_launch_bound(timing: Timing) -> bool | None:
    """True when issuing one call costs the host more than the device spends on it (None: unknown)."""
    if timing.host_ms is None:
        return None
    return timing.host_ms > timing.stats.p50


def cell_flags(cell: CellResult, environment: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """The flags of one cell (empty when it was not timed)."""
    timing = cell.timing
    if timing is None:
        return []
    flags = []
    stats = timing.stats
    noise_target = (config.get("timing") or {}).get("noise_target", 0.005)
    if stats.cv > noise_target:
        flags.append("noisy")
    if stats.min > 0 and stats.p50 / stats.min > P50_OVER_MIN_LIMIT:
        flags.append("p50_over_min")
    if is_launch_bound(timing):
        flags.append("launch_bound")
    if cell.telemetry is not None and cell.telemetry.throttled:
        flags.append("throttled")
    copy_gbps = (environment.get("device_facts") or {}).get("copy_gbps")
    if (cell.device.startswith("cuda") and copy_gbps and cell.derived is not None
            and cell.derived.bytes_moved > 0 and timing.method != "triton_interpreter"):
        floor_ms = cell.derived.bytes_moved / (copy_gbps * 1e9) * 1e3
        if stats.p50 < floor_ms:
            flags.append("faster_than_physics")
    return flags


def strict_failures(cells: list[CellResult], environment: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """One line per cell whose flags fail a ``--strict`` run."""
    failures = []
    for cell in cells:
        bad = [f for f in cell_flags(cell, environment, config) if f in STRICT_FLAGS]
        if bad:
            failures.append(f"{cell.key}: {', '.join(bad)}")
    return failures
