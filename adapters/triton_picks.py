"""The triton backend's use of the shipped autotuning picks (``apex_kernels/tuned.py``).

Once per process the picks file of this GPU model is read; before each cell's first
launch every autotuner imported so far is seeded from it (keys already tuned or seeded
stay). The cell's metadata says what happened (``autotune_picks``), and its
``triton_autotune`` entries say per kernel and shape whether the configuration was
shipped or tuned. ``retune`` (``--retune``) skips the file: every shape is tuned here.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from apex_kernels.tuned import Picks, PicksError, Seeding, kernel_ids, picks_path, read_picks, seed_autotuners


class ShippedPicks:
    """One process's picks file (or why there is none) and what was seeded from it."""

    def __init__(self, device_name: str, directory: Path | None = None) -> None:
        self.seeding = Seeding()
        path = picks_path(device_name) if directory is None else picks_path(device_name, directory)
        self.picks: Picks | None = None
        self.reason = ""
        if not path.is_file():
            self.reason = f"no picks shipped for {device_name} ({path.name})"
            return
        try:
            picks = read_picks(path)
        except PicksError as exc:
            self.reason = f"picks file unreadable, every shape tuned here: {exc}"
            return
        if picks.device != device_name:
            self.reason = f"{path.name} is for {picks.device!r}, not {device_name!r}"
            return
        self.picks = picks

    def seed(self, tuners: Mapping[str, Any]) -> tuple[Seeding | None, dict[int, str], dict[str, Any]]:
        """Seed ``tuners`` (``autotuners()``: those imported now); the seeding, their names, the metadata."""
        names = kernel_ids(tuners)
        if self.picks is None:
            return None, names, {"state": "none", "reason": self.reason}
        seed_autotuners(self.picks, tuners, self.seeding)
        return self.seeding, names, {
            "state": "shipped", "file": f"apex_kernels/picks/{self.picks.path.name}",
            "picks": self.picks.count, "stale": len(self.seeding.stale), **self.picks.provenance}


RETUNE = {"state": "retune", "reason": "--retune: every shape tuned here, the shipped picks not used"}


@functools.lru_cache(maxsize=1)
def shipped_picks(device_name: str) -> ShippedPicks:
    """This process's picks, read on first use (and again only for another GPU model)."""
    return ShippedPicks(device_name)
