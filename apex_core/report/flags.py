"""Sanity flags on every timed cell, in the spirit of torch.utils.benchmark's warnings.

A flag never changes a number; it tells the reader why not to trust one as it stands:

- ``noisy``: the coefficient of variation stayed above the run's noise target;
- ``p50_over_min``: the median is more than 1.5x the fastest sample (a bimodal or disturbed run);
- ``launch_bound``: issuing one call costs the host more than the device spends on it;
- ``throttled``: more than ``results.THROTTLED_BATCHES_LIMIT`` of the cell's batches of samples ran
  while a power or thermal limit, or an SM clock below nvbench's floor, held the card down (their
  samples were set aside: ``telemetry.batches``), or throttled samples had to be kept; where no batch
  was read (older reports), NVML saw a limit hold the clocks at any time during the timing;
- ``contended``: other processes kept at least half a core busy (a quarter of the cores on a
  larger machine) while it sampled
  (``metadata.host_load``, apex_core/measure/host_load.py): its time may be the machine's;
- ``faster_than_physics``: the cell moved its minimal bytes faster than this device's memory
  can (``physics_gbps``: its peak from NVML, ``environment.device_facts.dram_peak_gbps``, else
  the copy bandwidth measured once per run with a margin): it skipped work, or its ``work()``
  counts more bytes than it must move. ``--strict`` fails the run on it.

Three flags mark a degenerate cell, whose numbers stand but mean less than they seem; each
has a note saying what to do (``flag_note``), which the Markdown and the HTML show:

- ``no_device_work``: the p50 is 0 ms (every sample, or most, read nothing): the timer saw no
  work in the call. The cell keeps its samples; it gets no speed-up.
- ``below_timer_floor``: the p50, net of the timer's floor, is at or below that floor, which
  the event timer cannot resolve.
- ``few_samples``: the statistics rest on fewer samples than asked (``--iters``, or
  ``--fixed-iters``), e.g. because a single call took longer than ``--max-time``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from apex_core.errors import plural
from apex_core.measure.doctor import physics_gbps
from apex_core.measure.host_load import contended
from apex_core.measure.l2_flush import RESET_THEN_WRITE
from apex_core.results import CellResult, Timing

P50_OVER_MIN_LIMIT = 1.5
# every flag a cell can carry (report.schema.json lists the same)
FLAGS = ("noisy", "p50_over_min", "launch_bound", "throttled", "faster_than_physics",
         "no_device_work", "below_timer_floor", "few_samples", "contended")
STRICT_FLAGS = ("faster_than_physics",)
# flags whose cells' times are not the work's (the timer saw none, or the bytes moved faster than the
# memory can): such a cell is never a row's fastest in a summary
NOT_THE_WORK = ("no_device_work", "faster_than_physics")


def is_launch_bound(timing: Timing) -> bool | None:
    """True when issuing one call costs the host more than the device spends on it (None: unknown)."""
    if timing.host_ms is None:
        return None
    return timing.host_ms > timing.stats.p50


@attrs.frozen
class FlagFacts:
    """What the degenerate-cell rules and their notes read, from a CellResult or a JSON record."""

    device: str
    method: str
    p50: float
    max_ms: float
    n: int
    stop_reason: str
    floor_ms: float | None
    asked: int | None  # samples the run asked for: --iters, or --fixed-iters N
    max_time_s: Any
    max_samples: Any

    @classmethod
    def of_cell(cls, cell: CellResult, timing: Timing, config: Mapping[str, Any]) -> FlagFacts:
        stats = timing.stats
        return cls.make(cell.device, timing.method, stats.p50, stats.max, stats.n, timing.stop_reason,
                        timing.floor_ms, config)

    @classmethod
    def of_record(cls, record: Mapping[str, Any], config: Mapping[str, Any]) -> FlagFacts:
        stats = record.get("stats") or {}
        return cls.make(str(record.get("device") or ""), str(record.get("timing_method") or ""),
                        stats.get("p50_ms") or 0.0, stats.get("max_ms") or 0.0, stats.get("n") or 0,
                        str(record.get("stop_reason") or ""), record.get("timer_floor_ms"), config)

    @classmethod
    def make(cls, device: str, method: str, p50: float, max_ms: float, n: int, stop_reason: str,
             floor_ms: float | None, config: Mapping[str, Any]) -> FlagFacts:
        timing = config.get("timing") if isinstance(config, Mapping) else None
        timing = timing if isinstance(timing, Mapping) else {}
        asked = timing.get("fixed_iters") if timing.get("mode") == "fixed_iters" else timing.get("min_iters")
        return cls(device, method, p50, max_ms, n, stop_reason, floor_ms,
                   asked if isinstance(asked, int) and not isinstance(asked, bool) else None,
                   timing.get("max_time_s"), timing.get("max_samples"))


def degenerate_flags(facts: FlagFacts) -> list[str]:
    """``no_device_work``, ``below_timer_floor`` and ``few_samples``, where they apply."""
    flags = []
    if not facts.p50 > 0:  # 0, or a negative or NaN p50 a record could carry
        flags.append("no_device_work")
    elif facts.floor_ms is not None and facts.floor_ms > 0 and facts.p50 <= facts.floor_ms:
        flags.append("below_timer_floor")
    if facts.asked is not None and facts.n < facts.asked:
        flags.append("few_samples")
    return flags


def flag_note(flag: str, facts: FlagFacts) -> str:
    """What a degenerate flag means for this cell and what to do about it ("" for the other flags)."""
    if flag == "no_device_work":
        if facts.method == "kernel_profiler":
            return ("no_device_work: the profiler saw no device activity in any timed call, on any stream: "
                    "the call runs no GPU work when timed (its work is done ahead of the call, on the host, "
                    "or was dropped by a compiler); check the backend computes inside the call")
        if facts.device.startswith("cuda"):
            return ("no_device_work: the timer saw no time in the calls (p50 0 ms net of its floor), so the "
                    "call queues no work where the timer looks (work on a private stream, done outside the "
                    "call, or dropped by a compiler); time it with --timer kernel, which sees every stream, "
                    "and check the backend runs its work inside the call on the current stream")
        return ("no_device_work: the clock saw no time in the calls (p50 0 ms): the call does no work "
                "when timed, or less than the clock's step; check the backend computes inside the call, "
                "or use a larger size")
    if flag == "below_timer_floor":
        remedy = "at a larger size" if facts.method == "kernel_profiler" else \
            "with --timer kernel or at a larger size"
        return (f"below_timer_floor: the p50 net of the timer's floor is at or below the floor itself "
                f"({facts.floor_ms:.3g} ms), where the timer cannot resolve it; time it {remedy} "
                "(--set, --profile large)")
    if flag == "few_samples":
        return (f"few_samples: its statistics rest on {plural(facts.n, 'sample')}, fewer than the "
                f"{facts.asked} asked: "
                + _few_samples_why(facts))
    return ""


def _few_samples_why(facts: FlagFacts) -> str:
    cap_s = facts.max_time_s if isinstance(facts.max_time_s, (int, float)) else None
    if facts.stop_reason == "time_cap" and cap_s is not None and facts.max_ms < cap_s * 1e3:
        return (f"its calls took far longer than the timer reads of them, and sampling stopped after "
                f"--iters x --max-time ({cap_s} s); check what the call does outside the timed work")
    if facts.stop_reason == "time_cap":
        return (f"a single call took longer than --max-time ({facts.max_time_s} s); raise --max-time or "
                "use a smaller size for more samples")
    if facts.stop_reason == "sample_cap":
        return f"the sample cap ({facts.max_samples}) is below --iters"
    return f"sampling stopped early ({facts.stop_reason or 'no stop reason recorded'})"


def cell_flags(cell: CellResult, environment: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """The flags of one cell (empty when it was not timed)."""
    timing = cell.timing
    if timing is None:
        return []
    stats = timing.stats
    simple = {
        "noisy": stats.cv > (config.get("timing") or {}).get("noise_target", 0.005),
        "p50_over_min": stats.min > 0 and stats.p50 / stats.min > P50_OVER_MIN_LIMIT,
        "launch_bound": is_launch_bound(timing),
        "throttled": cell.telemetry is not None and cell.telemetry.throttled,
        "contended": contended(cell.metadata.get("host_load")),
    }
    flags = [flag for flag, raised in simple.items() if raised]
    flags += degenerate_flags(FlagFacts.of_cell(cell, timing, config))
    bound_gbps = physics_gbps(environment.get("device_facts") or {})
    if (cell.device.startswith("cuda") and bound_gbps and cell.derived is not None
            and cell.derived.bytes_moved > 0 and timing.method != "triton_interpreter"):
        floor_ms = cell.derived.bytes_moved / (bound_gbps * 1e9) * 1e3
        if stats.p50 < floor_ms:
            flags.append("faster_than_physics")
    return flags


def strict_failures(cells: list[CellResult], environment: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """One line per cell whose flags fail a ``--strict`` run."""
    bad = ((cell, [f for f in cell_flags(cell, environment, config) if f in STRICT_FLAGS]) for cell in cells)
    return [f"{cell.key}: {', '.join(flags)}" for cell, flags in bad if flags]


def cut_short_words(status: str) -> str:
    """How a run that did not complete ended, in the words of both renderers: a report whose last
    write still said "running" is a killed run's, which never ended."""
    return "the run was interrupted" if status == "interrupted" else "the run never ended"


def flush_caveat(environment: Mapping[str, Any]) -> str:
    """Where a cold flush could not reset the L2's persisting lines, the words that say so for both
    renderers ("" where it did, or on a record from before the reset): cells that load with
    ``evict_last`` then read L2-warm (docs/timing.md, "The cold-L2 flush")."""
    flush = str(environment.get("l2_flush") or "")
    if not flush or flush == RESET_THEN_WRITE:
        return ""
    return f"cold samples' L2 flush: {flush}; kernels that load with evict_last may have kept their data in L2"


# a cell whose cheat signs in timing the confirmation after it cleared (metadata.integrity_unconfirmed)
UNCONFIRMED_NOTE = ("a spot check saw during timing what a cheat would show (reading the outputs much slower "
                    "than the call, or calls on fresh inputs much slower than the rest) and the confirmation "
                    "after timing did not: kept ok; what was seen is in metadata.integrity_unconfirmed of the "
                    "JSON report (docs/anti-cheat.md)")
