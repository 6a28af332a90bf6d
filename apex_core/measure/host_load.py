"""How busy the machine was while a cell sampled, besides the cell itself.

Read around the sampling window from ``/proc/stat`` (the CPU time every process took) less this
process's own (``time.process_time``): the cores other processes kept busy, on average over the
window, and the 1-minute load average. A CPU cell shares cores, caches and memory bandwidth with
them; a CUDA cell's launches wait for a core. Two smoke runs on a loaded 2-core machine differed
by +14,022 % on one cell with nothing saying why: this is the why. No Linux ``/proc``: ``None``.
"""

from __future__ import annotations

import os
import time
from typing import Any

# A cell is flagged ``contended`` when other processes kept at least this many cores busy while
# it sampled: half a core taken from a 2-core CI machine already moves its CPU cells...
CONTENDED_CORES = 0.5
# ...and at least this share of the machine's cores: on a 16-core H100 host, builders compiling on
# one core (other_busy_cores 0.95-1.11) left the fixed-profile cells where they were
CONTENDED_SHARE = 0.25


def _busy_seconds() -> float | None:
    """CPU seconds all processes have spent since boot (everything but idle and iowait)."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    # guest time is counted inside user time already
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class Window:
    """Opened just before a cell samples and read just after."""

    def __init__(self) -> None:
        self.busy = _busy_seconds()
        self.own = time.process_time()
        self.wall = time.monotonic()

    def close(self) -> dict[str, Any] | None:
        """``{"other_busy_cores", "load_avg_1m", "cores"}`` over the window, or None without /proc."""
        busy, wall = _busy_seconds(), time.monotonic() - self.wall
        if busy is None or self.busy is None or wall <= 0:
            return None
        others = max(0.0, (busy - self.busy) - (time.process_time() - self.own)) / wall
        return {"other_busy_cores": round(others, 2), "load_avg_1m": round(os.getloadavg()[0], 2),
                "cores": os.cpu_count()}


def contended(load: Any) -> bool:
    """Whether other processes kept the machine busy enough to move a cell's numbers."""
    if not isinstance(load, dict):
        return False
    threshold = max(CONTENDED_CORES, CONTENDED_SHARE * float(load.get("cores") or 1))
    return float(load.get("other_busy_cores") or 0.0) >= threshold
