"""The one stream every CUDA timer of a process samples on, chosen once per device.

Right after the cold-L2 flush, an empty kernel's held events read about 3.0 us on some streams
and 3.6-4.7 us on others, and a short cell's raw time rose with it by 1-2 us: on an H200, in one
process, a new ``torch.cuda.Stream()`` a time, the pool's streams 1, 3 and 5 read high and 0, 2,
4, 6, 7 and 8 low, in eight processes on four machines; with a warm L2 every stream read 2.8-3.0 us
(docs/perf.md, 2026-11-29, "the stream decides"). A timer used to take a new pool stream per
cell, so which level a cell got followed how many streams the process had taken before it: the
floor of one cell moved 3.1-4.0 us between fresh processes and the cell with it (fusiongate 8.3
vs 10.0 us raw), and two cells of one process could read on different levels.

So the first timer of a process takes ``CANDIDATES`` streams, times the floor's empty kernel
cold on each (``probe``, supplied by the timer), and every timer after it in the process uses
the fastest. Which stream is fast is the hardware's business (the driver maps streams onto its
queues); this only makes the choice once, by measurement, and the same in every process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import attrs

# 3 of the 8 pool streams measured read high; a CUDA context spreads its streams over 8 hardware
# queues by default (CUDA_DEVICE_MAX_CONNECTIONS), so 9 reach every queue if the driver assigns
# them in turn (not verified). Each costs a short floor measurement, once per process.
CANDIDATES = 9

log = logging.getLogger(__name__)


@attrs.frozen
class StreamChoice:
    """The stream a process times on; the floor measured on each candidate (us), in the order
    they were taken; which one was chosen."""

    stream: Any
    floors_us: tuple[float, ...]
    chosen: int

    def describe(self) -> str:
        floors = ", ".join(f"{floor:.2f}" for floor in self.floors_us)
        return f"stream {self.chosen + 1} of {len(self.floors_us)} (cold empty-kernel floors {floors} us)"


_chosen: dict[Any, StreamChoice] = {}


def timing_stream(device: Any, new_stream: Callable[[], Any], probe: Callable[[Any], float]) -> StreamChoice:
    """This process's timing stream on ``device``: the candidate from ``new_stream`` whose
    ``probe`` (an empty kernel's cold floor, ms) reads lowest, chosen on the first call."""
    if device in _chosen:
        return _chosen[device]
    candidates = [new_stream() for _ in range(CANDIDATES)]
    floors = tuple(probe(stream) * 1e3 for stream in candidates)
    best = min(range(len(candidates)), key=floors.__getitem__)
    _chosen[device] = choice = StreamChoice(candidates[best], floors, best)
    log.debug("timing on %s", choice.describe())
    return choice


def chosen(device: Any) -> StreamChoice | None:
    """The choice made in this process for ``device``, if any."""
    return _chosen.get(device)
