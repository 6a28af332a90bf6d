"""Frozen values read back from the history: runs, their cells, series points and the leaderboard."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from apex_core.baseline.normalize import Card, CellTiming


@attrs.frozen(kw_only=True)
class RunSummary:
    """One recorded run without its report: ids, time, git, environment, tags and cell counts."""

    run_id: int
    recorded_utc: str  # when the history stored it
    timestamp_utc: str  # when the run started (the report's own timestamp)
    suite: str
    status: str  # the report's status: complete, interrupted, running
    commit: str | None
    branch: str | None
    dirty: bool | None
    environment_id: str  # 12 hex digits naming environment_key
    environment_key: Mapping[str, Any]
    device: str | None
    hardware: str | None
    tags: tuple[str, ...] = ()
    cells_total: int = 0
    cells_ok: int = 0


@attrs.frozen(kw_only=True)
class CellMetrics:
    """One cell of a run as indexed: identity, status and the metric columns (None where absent)."""

    workload: str
    case: str
    backend: str
    dtype: str
    device: str
    status: str
    reason: str
    timing_method: str | None
    units: str | None
    p50_ms: float | None
    p95_ms: float | None
    min_ms: float | None
    mean_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    gbps: float | None
    tflops: float | None
    units_per_s: float | None
    peak_memory_mb: float | None
    energy_j_per_call: float | None
    launch_bound: bool | None = attrs.field(default=None, converter=attrs.converters.optional(bool))
    timer_floor_ms: float | None = None

    @property
    def key(self) -> str:
        return f"{self.workload}/{self.case}/{self.backend}/{self.dtype}/{self.device}"


@attrs.frozen(kw_only=True)
class StoredRun:
    """A run with its indexed cells and the whole JSON report as recorded."""

    summary: RunSummary
    cells: tuple[CellMetrics, ...]
    report: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class SeriesPoint:
    """One value of a metric in one run's ok cell."""

    run_id: int
    recorded_utc: str
    commit: str | None
    environment_id: str
    workload: str
    case: str
    backend: str
    dtype: str
    device: str
    value: float
    # what scales the value to another card (apex_core/baseline/normalize.py); None on CPU runs
    card: Card | None = None
    timing: CellTiming | None = None

    @property
    def cell_key(self) -> tuple[str, str, str, str, str, str]:
        """What makes points one series: the cell and the environment."""
        return (self.environment_id, self.workload, self.case, self.backend, self.dtype, self.device)


@attrs.frozen(kw_only=True)
class BackendTime:
    """A backend's p50 in one leaderboard group: the median of its latest runs' p50s."""

    backend: str
    p50_ms: float
    ratio_to_fastest: float
    runs: int


@attrs.frozen(kw_only=True)
class LeaderboardGroup:
    """One workload, case and dtype: backends fastest first."""

    workload: str
    case: str
    dtype: str
    entries: tuple[BackendTime, ...]


@attrs.frozen(kw_only=True)
class OverallRank:
    """A backend's geometric mean of p50 / fastest p50 over the groups it ran with at least one rival."""

    backend: str
    geomean_ratio: float
    groups: int
    groups_total: int


@attrs.frozen(kw_only=True)
class Leaderboard:
    """Backends ranked per group and overall, for one environment."""

    environment_id: str
    runs: int
    last: int
    groups: tuple[LeaderboardGroup, ...]
    overall: tuple[OverallRank, ...]
    # with normalize: which card the p50s were scaled to, and how many of them by which figure
    normalized: str = ""
