"""Frozen values of the gate: baselines, their metric limits, report cells, checks and verdicts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from apex_core.baseline.extra_metrics import ExtraLimit
from apex_core.baseline.normalize import HostNormalization, Scaling

# 2 added the statistical rule per metric (``gate_rule``); files of version 1 load with the cap only
BASELINE_SCHEMA_VERSION = 2

# Metric name suffix -> the percentile it names (the minimum is the 0th); the statistics the gate knows.
QUANTILE_STATS: Mapping[str, float] = {"min_ms": 0.0, "p50_ms": 50.0, "p90_ms": 90.0, "p95_ms": 95.0,
                                       "p99_ms": 99.0}

PASS, FAIL, MISSING = "pass", "fail", "missing"


def metric_name(workload: str, case: str, backend: str, dtype: str, stat: str) -> str:
    """The stable, readable name of one metric: ``{workload}/{case}/{backend}/{dtype}/{stat}``."""
    return f"{workload}/{case}/{backend}/{dtype}/{stat}"


def metric_stat(name: str) -> str:
    """The statistic a metric name ends with (``p50_ms``)."""
    return name.rsplit("/", 1)[-1]


@attrs.frozen(kw_only=True)
class GateRule:
    """The statistical rule of one metric (docs/baselines.md).

    The metric fails when the bootstrap interval of ``current / baseline`` (at ``confidence``,
    two-sided) lies wholly above ``1 + min_effect``: slower with confidence, by more than the
    smallest change worth a red build. ``run_spread`` is the relative range of the metric over
    the runs the baseline was made from (None from one run); emit never sets ``min_effect``
    below it, since the interval sees the noise within a run and not the drift between runs.
    """

    min_effect: float
    confidence: float = 0.95
    run_spread: float | None = None

    @property
    def threshold(self) -> float:
        """The ratio the interval's lower bound must exceed for the metric to fail."""
        return 1.0 + self.min_effect


@attrs.frozen(kw_only=True)
class MetricLimit:
    """One baseline metric: its value, its statistical rule and the hard cap on how much slower it may be."""

    value_ms: float
    max_regression_ratio: float
    max_regression_abs_ms: float
    samples_ms: tuple[float, ...] = ()
    rule: GateRule | None = None
    # the timer's floor the runs subtracted from this cell (their median), where they did: a run
    # whose floor differs much cannot be compared on cells near it (compare.noted_floors)
    timer_floor_ms: float | None = None

    @property
    def allowed_max_ms(self) -> float:
        """The hard cap: ``value_ms * (1 + ratio) + abs_ms``."""
        return self.value_ms * (1.0 + self.max_regression_ratio) + self.max_regression_abs_ms


@attrs.frozen(kw_only=True)
class Baseline:
    """A baseline file: the suite, where it was measured, and the metric limits."""

    suite: str
    environment_key: Mapping[str, Any]
    metrics: Mapping[str, MetricLimit]
    baseline_notes: str = ""
    source_report: Mapping[str, Any] | None = None
    schema_version: int = BASELINE_SCHEMA_VERSION
    # opt-in metrics beyond time (extra_metrics.py), named like the time metrics
    extra_metrics: Mapping[str, ExtraLimit] = attrs.field(factory=dict)
    # the card the values were measured on (normalize.pooled_fingerprint); None in older files
    fingerprint: Mapping[str, Any] | None = None

    def samples_for(self, name: str) -> tuple[float, ...]:
        """The metric's own samples, else those stored on another metric of the same cell."""
        if self.metrics[name].samples_ms:
            return self.metrics[name].samples_ms
        cell = name.rsplit("/", 1)[0] + "/"
        return next((m.samples_ms for other, m in self.metrics.items()
                     if other.startswith(cell) and m.samples_ms), ())


@attrs.frozen(kw_only=True)
class ReportCell:
    """The parts of one report cell the gate reads."""

    workload: str
    case: str
    backend: str
    dtype: str
    status: str
    reason: str
    stats_ms: Mapping[str, float]
    samples_ms: tuple[float, ...]
    timing_method: str | None
    # the extra metrics this cell reports (throughput, memory, energy, error), by kind
    extras: Mapping[str, float] = attrs.field(factory=dict)
    # how busy the machine was while it sampled (apex_core/measure/host_load.py); None in older reports
    host_load: Mapping[str, Any] | None = None
    # what tells the cell's bound when its time is scaled to another card (normalize.py)
    bytes_moved: float | None = None
    launch_bound: bool | None = None
    timer_floor_ms: float | None = None

    def metric(self, stat: str) -> str:
        return metric_name(self.workload, self.case, self.backend, self.dtype, stat)


@attrs.frozen(kw_only=True)
class LoadedReport:
    """A validated JSON report, reduced to what the gate needs."""

    path: str
    suite: str
    timestamp_utc: str
    environment_key: Mapping[str, Any]
    cells: tuple[ReportCell, ...]
    git_commit: str | None = None
    status: str = "complete"  # the run's status: complete, interrupted, running (a killed run)
    fingerprint: Mapping[str, Any] | None = None  # the card it ran on (device_fingerprint.fingerprint_of)

    def cells_by_metric(self, stats: tuple[str, ...] = tuple(QUANTILE_STATS)) -> dict[str, ReportCell]:
        """Every metric name this report could answer, mapped to its cell."""
        return {cell.metric(stat): cell for cell in self.cells for stat in stats}


@attrs.frozen(kw_only=True)
class Verdict:
    """The statistical verdict on one metric from the raw samples of both runs."""

    label: str  # faster, same, slower, inconclusive
    ratio: float | None = None  # current statistic / baseline statistic
    ci_low: float | None = None
    ci_high: float | None = None
    reason: str = ""

    @classmethod
    def inconclusive(cls, reason: str, ratio: float | None = None) -> Verdict:
        return cls(label="inconclusive", ratio=ratio, reason=reason)


# What failed a check: the statistical rule, the hard cap, a cell that is not ok, or no cell.
FAILED_BY_RULE, FAILED_BY_CAP, FAILED_BY_CELL, FAILED_BY_MISSING = "rule", "cap", "cell", "missing"


@attrs.frozen(kw_only=True)
class Check:
    """The rules applied to one baseline metric: the statistical rule, the hard cap, and the verdict."""

    metric: str
    status: str  # pass, fail, missing
    baseline_ms: float
    allowed_max_ms: float
    current_ms: float | None
    regression_ratio: float | None  # current / baseline - 1: 0.30 is 30 % slower
    verdict: Verdict
    reason: str = ""
    rule: GateRule | None = None
    failed_by: str = ""  # one of FAILED_BY_*; "" when the check passed
    # extra metrics: their unit, and "higher" when more is better (allowed_max_ms is then the
    # allowed minimum, and regression_ratio how much worse: baseline / current - 1)
    unit: str = "ms"
    better: str = "lower"
    # a failure measured on a busy machine says so (compare.contention_text); "" otherwise
    contention: str = ""
    # how the baseline's value was scaled to the current card (baseline_ms is the scaled value); None
    # when the comparison did not normalize
    scaling: Scaling | None = None


@attrs.frozen(kw_only=True)
class CompareSummary:
    """The outcome of one comparison: every check and whether the gate passed."""

    suite: str
    forced: bool
    allow_missing: bool
    checks: tuple[Check, ...]
    environment_differences: tuple[str, ...]
    baseline_path: str
    current_paths: tuple[str, ...]  # several runs of one build: each metric takes the run ``combine`` names
    timestamp_utc: str
    # what the comparison did about the runs' cards; None when neither run names its card (CPU runs)
    normalization: HostNormalization | None = None
    # which of several runs gives each metric its cell: "best" or "median" (compare.COMBINE)
    combine: str = "best"

    @property
    def failed_checks(self) -> tuple[Check, ...]:
        """Checks that make the gate fail (missing ones only unless allowed)."""
        return tuple(c for c in self.checks
                     if c.status == FAIL or (c.status == MISSING and not self.allow_missing))

    @property
    def status(self) -> str:
        """The gate's outcome: fail when any check makes it fail."""
        return FAIL if self.failed_checks else PASS
