"""What Triton's autotuners chose for a cell's launches, read once after the cell.

Nothing is tracked per call: the kernels' ``Launcher`` lists the launches of one call,
and after the cell each autotuner's ``cache`` is read at the key Triton computed for
that launch (``best_config`` where the key cannot be rebuilt). The entries feed the
report's ``triton_autotune`` block (``apex_core/running/autotune.py``):

- ``selected_config``: the autotuner's choice for this shape (``selection_source``
  ``triton_best_config``: tuned here; ``shipped_picks``: taken from the picks file of
  this GPU model, ``apex_kernels/tuned.py``), or the configuration the launch was bound
  with (``heuristic``: a kernel without an autotuner, or a pinned config);
- ``kernel_id`` and ``tuning_key`` of an autotuned launch: what a picks file is written
  from (``scripts/emit_triton_picks.py``);
- ``launches``: launches of this kernel at this shape in one call of the cell's function
  (the timed loop is not counted: counting it cost ~2 us per call);
- ``cache_misses`` 1 when this cell made the autotuner tune this shape, else
  ``cache_hits`` 1 (the choice was already cached, or there was one config to choose);
  both 0 for heuristic launches, which have no cache.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from apex_kernels._utils import KernelLaunch, config_dict
from apex_kernels.tuned import Seeding

_LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas")


def _is_autotuner(kernel: Any) -> bool:
    return hasattr(kernel, "configs") and isinstance(getattr(kernel, "cache", None), dict)


def tuning_key(autotuner: Any, args: tuple[Any, ...], meta: dict[str, Any]) -> tuple[Any, ...]:
    """The key Triton's ``Autotuner.run`` caches this launch's choice under.

    The ``key`` arguments' values, then the dtype of every tensor argument, in argument
    order (triton 3.x).
    """
    named = {**dict(zip(autotuner.arg_names, args, strict=False)), **meta}
    named = {name: value for name, value in named.items() if name in autotuner.arg_names}
    key: list[Any] = [named[name] for name in autotuner.keys if name in named]
    key += [str(value.dtype) for value in named.values() if hasattr(value, "dtype")]
    return tuple(key)


def cached_keys(launches: Iterable[KernelLaunch]) -> dict[int, frozenset]:
    """Each autotuner's cached keys now (before the cell's first call), by ``id``."""
    return {id(launch.kernel): frozenset(launch.kernel.cache)
            for launch in launches if _is_autotuner(launch.kernel)}


def _heuristic_config(launch: KernelLaunch) -> dict[str, Any]:
    if launch.config is not None:
        return dict(launch.config)
    # the compile-time meta-parameters among the keyword arguments (upper-case names)
    return {k: v for k, v in launch.meta.items() if k.isupper() or k in _LAUNCH_OPTIONS}


def _autotuned(launch: KernelLaunch, before: dict[int, frozenset], seeding: Seeding | None
               ) -> tuple[dict[str, Any], str, bool, tuple[Any, ...] | None]:
    """The autotuner's choice for this launch, where it came from, whether this cell tuned it, its key."""
    tuner = launch.kernel
    if len(tuner.configs) <= 1:  # Triton skips its cache with a single config
        return config_dict(tuner.configs[0]), "triton_best_config", False, None
    key = tuning_key(tuner, launch.args, launch.meta)
    if key in tuner.cache:
        shipped = seeding is not None and seeding.was_seeded(tuner, key)
        tuned = key not in before.get(id(tuner), frozenset())
        return (config_dict(tuner.cache[key]), "shipped_picks" if shipped else "triton_best_config",
                tuned and not shipped, key)
    best = getattr(tuner, "best_config", None)
    return (config_dict(best) if best is not None else {}), "triton_best_config", False, None


def autotune_entries(launches: Iterable[KernelLaunch], before: dict[int, frozenset],
                     seeding: Seeding | None = None, names: dict[int, str] | None = None
                     ) -> list[dict[str, Any]]:
    """One entry per (op, kernel, shape) of one call's launches, as the report stores them.

    ``seeding`` says which keys came from a picks file; ``names`` gives each autotuner's
    ``kernel_id`` (by ``id``), recorded with the tuning key so a run can be written out as
    picks.
    """
    entries: dict[tuple[str, str, str], dict[str, Any]] = {}
    for launch in launches:
        key = (launch.op_name, launch.kernel_name, launch.shape_bucket)
        if key in entries:
            entries[key]["launches"] += 1
            continue
        extra: dict[str, Any] = {}
        if _is_autotuner(launch.kernel):
            config, source, tuned, tuning = _autotuned(launch, before, seeding)
            hits, misses = int(not tuned), int(tuned)
            if tuning is not None and names and id(launch.kernel) in names:
                extra = {"kernel_id": names[id(launch.kernel)], "tuning_key": list(tuning)}
        else:
            config, source, hits, misses = _heuristic_config(launch), "heuristic", 0, 0
        entries[key] = {"op_name": launch.op_name, "kernel_name": launch.kernel_name,
                        "shape_bucket": launch.shape_bucket, "selected_config": config,
                        "selection_source": source, "launches": 1, "cache_hits": hits,
                        "cache_misses": misses, **extra}
    return list(entries.values())
