"""The one stream every CUDA timer of a process samples on, chosen once per device.

Right after the cold-L2 flush, an empty kernel's held events read about 3.0 us on some streams
and 3.6-4.7 us on others, and a short cell's raw time rose with it by 1-2 us. On an H200, taking
torch's pool streams in turn in a fresh process, streams 1, 3 and 5 read high in every process
that took them and 0, 2, 4, 6, 7 and 8 low (eight processes on four machines); with a warm L2
every stream read 2.8-3.0 us (docs/perf.md, 2026-11-29, "the stream decides"). A timer used to
take the pool's next stream, so which level a cell got followed how many streams the process had
taken before it: the floors of one run's cells moved 2.95-4.05 us between fresh processes and
the cells with them (fusiongate 8.3 vs 10.0 us raw), and two cells of one process could read on
different levels.

So the first timer of a process on a device takes ``CANDIDATES`` streams from torch's pool (32 a
device, handed out in turn), times the floor's empty kernel cold on each (``probe``, supplied
by the timer), and every timer after it in the process uses the fastest. Which stream is fast is
the hardware's business; this makes the choice once, by measurement. A probe that fails leaves
the process on one plain pool stream, with the reason kept. The pool hands the chosen stream
out again every 32 requests: code that takes pool streams of its own may get it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import attrs

from apex_core.errors import first_line

# the candidates are the pool's next streams; 3 of the first 8 read high on an H200, so 9 leave
# several low ones to choose from. Each costs two short floor rounds, once per process.
CANDIDATES = 9

log = logging.getLogger(__name__)


@attrs.frozen
class StreamChoice:
    """The stream a process times on; the cold floor measured on each candidate (us), in the
    order the pool gave them; which one was chosen; or why none was measured ("" if all were)."""

    stream: Any
    floors_us: tuple[float, ...] = ()
    chosen: int = 0
    failed: str = ""

    def as_metadata(self) -> dict[str, Any]:
        """What a cell's report keeps of it."""
        if self.failed:
            return {"chosen": None, "floors_us": [], "note": f"not chosen: {self.failed}"}
        return {"chosen": self.chosen, "floors_us": [round(floor, 3) for floor in self.floors_us],
                "note": f"candidate {self.chosen} of {len(self.floors_us)} (counted from 0), the lowest "
                        "cold empty-kernel floor"}


_chosen: dict[Any, StreamChoice] = {}


def choose(device: Any, new_stream: Callable[[], Any], probe: Callable[[Any], float]) -> StreamChoice:
    """This process's timing stream on ``device``: the candidate from ``new_stream`` whose
    ``probe`` (an empty kernel's cold floor, ms) reads lowest, chosen on the first call."""
    if device in _chosen:
        return _chosen[device]
    candidates = [new_stream() for _ in range(CANDIDATES)]
    try:
        floors = tuple(probe(stream) * 1e3 for stream in candidates)
    except Exception as exc:  # the timer's own sampling fails the same way later, and says so there
        choice = StreamChoice(candidates[0], failed=f"the probe failed: {first_line(exc)}")
    else:
        best = min(range(len(candidates)), key=floors.__getitem__)
        choice = StreamChoice(candidates[best], floors, best)
    _chosen[device] = choice
    log.debug("timing stream on device %s: %s", device, choice.as_metadata())
    return choice


def chosen(device: Any) -> StreamChoice | None:
    """The choice made in this process for ``device``, if any."""
    return _chosen.get(device)
