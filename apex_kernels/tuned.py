"""Autotuned configurations shipped per GPU model, and how an autotuner starts from them.

Triton's autotuner times every configuration of a kernel the first time it meets a shape,
in each new process, which costs seconds per kernel (docs/perf.md), and on a kernel of
a few microseconds its pick can differ between processes. A picks file,
``picks/<model>.json`` beside this module, holds the configuration the autotuner chose
for each kernel and tuning key on one GPU model; ``seed_autotuners`` puts them in the
autotuners' caches before the first launch, so those shapes launch their shipped
configuration at once and never tune. A shape without a pick is tuned as usual.

A pick is used only when the file's GPU model is this GPU's and its configuration is
still one of the kernel's configurations (a kernel whose configurations changed tunes
again). The file says which Triton, torch and method chose its picks; refreshing it is
a GPU run without the picks (docs/kernels.md, "Shipped configurations").

Everything here speaks of Triton objects and files only; nothing knows about a
benchmark harness.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apex_kernels._utils import config_dict

PICKS_DIR = Path(__file__).resolve().parent / "picks"
FORMAT = "apex-kernels-picks/1"


def model_slug(device_name: str) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``h100-80gb-hbm3``: the GPU model as a file name."""
    name = re.sub(r"^nvidia\s+", "", device_name.strip(), flags=re.IGNORECASE)
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()


def picks_path(device_name: str, directory: Path = PICKS_DIR) -> Path:
    return directory / f"{model_slug(device_name)}.json"


def kernel_id(module: str, attribute: str) -> str:
    """How a picks file names a kernel: ``apex_kernels.tilepack:_tilepack_kernel``."""
    return f"{module}:{attribute}"


def autotuners(modules: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every Triton autotuner of the imported ``apex_kernels`` modules, by ``kernel_id``.

    Each is named after the module its kernel is written in, so an autotuner imported into
    another module is found once, under one name.
    """
    from triton.runtime.autotuner import Autotuner

    found = {}
    for name, module in list((sys.modules if modules is None else modules).items()):
        if module is None or not (name == "apex_kernels" or name.startswith("apex_kernels.")):
            continue
        for attribute, value in vars(module).items():
            if isinstance(value, Autotuner) and _home(value) == name:
                found[kernel_id(name, attribute)] = value
    return found


def kernel_ids(tuners: Mapping[str, Any]) -> dict[int, str]:
    """Each autotuner's ``kernel_id`` by ``id()``: how a launch's kernel object is named."""
    return {id(tuner): name for name, tuner in tuners.items()}


def _home(tuner: Any) -> str | None:
    """The module the autotuner's Python function was written in."""
    fn = tuner
    while hasattr(fn, "fn"):
        fn = fn.fn
    return getattr(fn, "__module__", None)


@dataclass(frozen=True)
class Picks:
    """One picks file: the GPU model, how the picks were made, and the picks themselves."""

    path: Path
    device: str
    provenance: dict[str, Any]
    # kernel_id -> [(tuning key, configuration as config_dict gives it)]
    picks: dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]]

    @property
    def count(self) -> int:
        return sum(len(entries) for entries in self.picks.values())


class PicksError(ValueError):
    """A picks file that cannot be read as one."""


def read_picks(path: Path) -> Picks:
    """Parse a picks file; ``PicksError`` says what is wrong with it."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PicksError(f"{path}: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise PicksError(f"{path}: not a picks file (format {FORMAT!r} expected)")
    picks: dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {}
    for entry in data.get("picks", []):
        try:
            key = tuple(entry["key"])
            config = dict(entry["config"])
            picks.setdefault(str(entry["kernel"]), []).append((key, config))
        except (KeyError, TypeError, ValueError):
            raise PicksError(f"{path}: a pick needs kernel, key (a list) and config (an object), "
                             f"got {entry!r}") from None
    provenance = {k: v for k, v in data.items() if k not in ("format", "device", "picks")}
    return Picks(path, str(data.get("device", "")), provenance, picks)


def write_picks(path: Path, device: str, provenance: Mapping[str, Any],
                picks: Iterable[tuple[str, tuple[Any, ...], Mapping[str, Any]]]) -> None:
    """Write a picks file: ``picks`` are (kernel_id, tuning key, configuration), kept in a stable order."""
    entries = sorted(({"kernel": kernel, "key": list(key), "config": dict(config)}
                      for kernel, key, config in picks), key=lambda e: (e["kernel"], json.dumps(e["key"])))
    data = {"format": FORMAT, "device": device, **provenance, "picks": entries}
    path.write_text(json.dumps(data, indent=1) + "\n")


@dataclass
class Seeding:
    """What ``seed_autotuners`` did: the keys it filled per autotuner (by ``id``), and what it skipped."""

    seeded: dict[int, set[tuple[Any, ...]]] = field(default_factory=dict)
    # (kernel_id, key) of picks whose configuration the kernel no longer has
    stale: set[tuple[str, tuple[Any, ...]]] = field(default_factory=set)

    def was_seeded(self, tuner: Any, key: tuple[Any, ...]) -> bool:
        return key in self.seeded.get(id(tuner), set())


def seed_autotuners(picks: Picks, tuners: Mapping[str, Any], seeding: Seeding | None = None) -> Seeding:
    """Put each pick in its autotuner's cache, unless that key is already there (tuned or seeded).

    Only a configuration the autotuner still has is used: the cached object is the
    autotuner's own ``Config``, exactly as if it had chosen it.
    """
    seeding = seeding if seeding is not None else Seeding()
    for kernel, entries in picks.picks.items():
        tuner = tuners.get(kernel)
        if tuner is None:
            continue  # not imported (yet), or no longer a kernel of ours
        by_dict = [(config_dict(config), config) for config in tuner.configs]
        for key, wanted in entries:
            if key in tuner.cache:
                continue
            match = next((config for as_dict, config in by_dict if as_dict == wanted), None)
            if match is None:
                seeding.stale.add((kernel, key))
                continue
            tuner.cache[key] = match
            seeding.seeded.setdefault(id(tuner), set()).add(key)
    return seeding
