"""Gated metrics beyond time: throughput, peak memory, energy per call and accuracy drift.

Time gates by default; these are opt-in (``baseline emit --metrics ...``) because each has
its own noise and its own direction. Each is one number per cell with no samples, so each
has a plain limit: a metric where lower is better fails above ``value * (1 + ratio) + abs``,
one where higher is better fails below ``value * (1 - ratio) - abs``. Accuracy drift follows
the suites our users come from: the largest absolute error over the cell's outputs may not
grow beyond its bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import attrs

LOWER, HIGHER = "lower", "higher"


@attrs.frozen(kw_only=True)
class ExtraMetric:
    """One kind of extra metric: how to read it off a report cell and its default limit."""

    name: str
    unit: str
    better: str  # LOWER or HIGHER
    read: Callable[[Mapping[str, Any]], float | None]
    ratio: float
    absolute: float
    description: str


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _energy_mj(cell: Mapping[str, Any]) -> float | None:
    joules = _number((cell.get("telemetry") or {}).get("energy_j_per_call"))
    return None if joules is None else joules * 1e3


def _max_abs_error(cell: Mapping[str, Any]) -> float | None:
    errors = [_number(output.get("max_abs_error")) for check in cell.get("accuracy") or ()
              for output in check.get("outputs") or ()]
    known = [e for e in errors if e is not None]
    return max(known) if known else None


# The default limits: throughput follows the median's 10 % cap; peak memory is exact between
# runs of one build (1 MB of slack for the allocator's rounding); energy per call may double:
# measured eagerly it is mostly the host's launch time and moved by up to 88 % between fresh
# processes of one build (docs/baselines.md), so gate it on --graph runs; an error may double
# before it counts as drift, plus a small absolute slack for errors near 0.
EXTRA_METRICS: Mapping[str, ExtraMetric] = {m.name: m for m in (
    ExtraMetric(name="gbps", unit="GB/s", better=HIGHER, read=lambda c: _number(c.get("gbps")),
                ratio=0.10, absolute=0.0, description="achieved GB/s (minimal bytes / p50)"),
    ExtraMetric(name="tflops", unit="TFLOP/s", better=HIGHER, read=lambda c: _number(c.get("tflops")),
                ratio=0.10, absolute=0.0, description="achieved TFLOP/s (FLOPs / p50)"),
    ExtraMetric(name="peak_memory_mb", unit="MB", better=LOWER, read=lambda c: _number(c.get("peak_memory_mb")),
                ratio=0.10, absolute=1.0, description="peak device memory of the cell"),
    ExtraMetric(name="energy_mj", unit="mJ/call", better=LOWER, read=_energy_mj, ratio=1.0, absolute=0.0,
                description="energy per call (NVML)"),
    ExtraMetric(name="max_abs_error", unit="", better=LOWER, read=_max_abs_error, ratio=1.0, absolute=1e-6,
                description="largest absolute error against the reference (accuracy drift)"),
)}


@attrs.frozen(kw_only=True)
class ExtraLimit:
    """One extra metric of a baseline: its value and how far it may move the wrong way."""

    value: float
    better: str
    max_change_ratio: float
    max_change_abs: float

    @property
    def limit(self) -> float:
        """The worst value that still passes: a ceiling when lower is better, a floor when higher is."""
        if self.better == HIGHER:
            return max(self.value * (1.0 - self.max_change_ratio) - self.max_change_abs, 0.0)
        return self.value * (1.0 + self.max_change_ratio) + self.max_change_abs

    def passes(self, current: float) -> bool:
        return current >= self.limit if self.better == HIGHER else current <= self.limit

    def worse_by(self, current: float) -> float | None:
        """How much worse than the value, as a fraction (0.2 = 20 % worse), or None against 0."""
        if self.better == HIGHER:
            return self.value / current - 1.0 if current > 0 else None
        return current / self.value - 1.0 if self.value > 0 else None


def metric_kind(name: str) -> ExtraMetric:
    """The kind of an extra metric name ``{workload}/{case}/{backend}/{dtype}/{metric}``."""
    return EXTRA_METRICS[name.rsplit("/", 1)[-1]]


def parse_metric_list(text: str) -> tuple[str, ...]:
    """``gbps,energy_mj`` -> the names, refusing unknown ones (a usage error at the CLI)."""
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [n for n in names if n not in EXTRA_METRICS and n != "time"]
    if unknown or not names:
        raise ValueError(f"unknown metric(s) {', '.join(unknown) or repr(text)}; choose from time, "
                         f"{', '.join(EXTRA_METRICS)}")
    return names
