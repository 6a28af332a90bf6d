"""Track what Triton really launched: the autotuner's choice, launches, cache hits and misses.

Every launch wrapper in ``apex_kernels`` launches through ``TRACKER.launch(...)``.
For an autotuned kernel the selected configuration is read back from the
autotuner after the launch (``best_config``), and a launch counts as a cache miss
when it made the autotuner tune (its cache grew), else as a hit. For a kernel
launched with a configuration chosen by our own heuristic, the source is
``heuristic``. The triton backend copies ``TRACKER.snapshot()`` into each cell's
metadata, and the report sums it up in its ``triton_autotune`` block.

Under ``TRITON_INTERPRET=1`` autotuning would benchmark every configuration in the
interpreter; ``autotune_configs`` then keeps only the first one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import attrs


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def autotune_configs(configs: Sequence[Any]) -> list[Any]:
    """The configurations to autotune over: all on a GPU, the first in the interpreter."""
    return list(configs[:1]) if interpreting() else list(configs)


def config_dict(config: Any) -> dict[str, Any]:
    """A triton.Config (or a plain dict of meta-parameters) as a JSON-ready dict."""
    if isinstance(config, dict):
        return dict(config)
    out = dict(getattr(config, "kwargs", {}))
    for field in ("num_warps", "num_stages", "num_ctas"):
        value = getattr(config, field, None)
        if value is not None:
            out[field] = value
    return out


def pin_config(kernel: Any, config: Any | None) -> tuple[Any, dict[str, Any]]:
    """The autotuned kernel as is, or its bare jit function with one config's meta-parameters.

    Tests pin each configuration in turn, since the interpreter only ever runs the first.
    """
    if config is None:
        return kernel, {}
    return kernel.fn, config_dict(config)


@attrs.define
class LaunchRecord:
    """Counters for one kernel at one shape bucket."""

    op_name: str
    kernel_name: str
    shape_bucket: str
    selected_config: dict[str, Any]
    selection_source: str
    launches: int = 0
    cache_hits: int = 0
    cache_misses: int = 0


class LaunchTracker:
    """Process-wide record of launches, keyed by (op, kernel, shape bucket)."""

    def __init__(self) -> None:
        self.records: dict[tuple[str, str, str], LaunchRecord] = {}

    def reset(self) -> None:
        self.records.clear()

    def launch(self, op_name: str, kernel: Any, grid: Any, shape_bucket: str, *args: Any,
               heuristic_config: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        """Launch ``kernel[grid](*args, **kwargs)`` and record what was selected."""
        cache = getattr(kernel, "cache", None)
        before = len(cache) if isinstance(cache, dict) else None
        result = kernel[grid](*args, **kwargs)
        name = getattr(getattr(kernel, "fn", kernel), "__name__", str(kernel))
        key = (op_name, name, shape_bucket)
        if before is not None:
            miss = len(cache) > before
            best = getattr(kernel, "best_config", None)
            config = config_dict(best) if best is not None else {}
            source = "triton_best_config"
        else:
            miss = key not in self.records
            config = dict(heuristic_config or kwargs_meta(kwargs))
            source = "heuristic"
        record = self.records.get(key)
        if record is None:
            record = self.records[key] = LaunchRecord(op_name, name, shape_bucket, config, source)
        record.selected_config = config
        record.launches += 1
        if miss:
            record.cache_misses += 1
        else:
            record.cache_hits += 1
        return result

    def snapshot(self) -> list[dict[str, Any]]:
        return [attrs.asdict(r) for r in self.records.values()]


def kwargs_meta(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The compile-time meta-parameters among launch keyword arguments (upper-case names)."""
    return {k: v for k, v in kwargs.items()
            if k.isupper() or k in ("num_warps", "num_stages", "num_ctas")}


TRACKER = LaunchTracker()

LauncherFactory = Callable[..., tuple[Callable[[], dict[str, Any]], dict[str, Any], dict[str, Any]]]
