"""Write a baseline template from one or more reports, with per-metric thresholds a person can tune.

Each ok cell gives one metric per statistic of the device's table below. A metric may
regress to ``value * (1 + ratio) + abs_ms``; the ratio is wider for tail percentiles and for
end-to-end workloads (their runs vary more), and ``abs_ms`` is a floor for microbenchmarks so
short that a few microseconds of jitter are a large fraction. Given several reports of one
build, each metric's value is the median over them, so one unlucky run does not set it.
The CPU table comes from the run-to-run spread measured in docs/baselines.md.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from apex_core.baseline.compare import refused_differences
from apex_core.baseline.errors import InputFileError
from apex_core.baseline.extra_metrics import ExtraLimit, metric_kind
from apex_core.baseline.io import MIN_BASELINE_MS, file_sha256
from apex_core.baseline.model import Baseline, GateRule, LoadedReport, MetricLimit, ReportCell
from apex_core.baseline.normalize import median_floor_ms, pooled_fingerprint
from apex_core.baseline.verdict import metric_seed
from apex_core.errors import plural

# device -> statistic -> (max_regression_ratio, the same for end-to-end workloads).
# GPU timings repeat within a few percent, so the median and p95 gate tightly. On a shared
# 2-core CPU VM a run's median moved up to 2.8x from the median of 14 A/A runs, its p95 up to
# 28x, but its fastest sample at most 1.61x and never below 0.95x (docs/baselines.md): there
# the minimum is the gate (1.75x passes, a 2x slowdown fails) and the median a guard against
# gross regressions; the p95 is scheduler time slices and is not gated.
DEFAULT_RATIOS: Mapping[str, Mapping[str, tuple[float, float]]] = {
    "cuda": {"p50_ms": (0.10, 0.15), "p95_ms": (0.20, 0.30)},
    "cpu": {"min_ms": (0.75, 0.75), "p50_ms": (2.00, 3.00)},
}
DEFAULT_ABS_MS: Mapping[str, float] = {"cuda": 0.005, "cpu": 0.002}
# device -> statistic -> min_effect of the statistical rule (GateRule); statistics not named
# have the cap only. On the GPU fresh processes of one build agree within 4.2 % on every
# cell's median (docs/timing.md), so a change is worth a red build above 5 %; the p95 moves
# with a run's few slow samples and keeps the cap. On the shared CPU VM the spread between
# runs is what the ratios above allow, so the rule asks for the same there.
DEFAULT_MIN_EFFECT: Mapping[str, Mapping[str, float]] = {
    "cuda": {"p50_ms": 0.05},
    "cpu": {"min_ms": 0.75, "p50_ms": 2.00},
}
RULE_CONFIDENCE = 0.95
END_TO_END_WORKLOADS = frozenset({"ff-infer"})
# the largest min_effect and run_spread a baseline file holds (baseline.schema.json)
MAX_RULE_VALUE = 1e6
MAX_STORED_SAMPLES = 1000  # enough for the verdict's interval, small enough to commit


def ratio_table(device: str, ratio: float | None = None) -> dict[str, tuple[float, float]]:
    """The device's ratios; ``ratio`` sets the first statistic's and scales the rest alike."""
    table = DEFAULT_RATIOS.get(device, DEFAULT_RATIOS["cuda"])
    scale = 1.0 if ratio is None else ratio / next(iter(table.values()))[0]
    return {stat: (round(r * scale, 4), round(e2e * scale, 4)) for stat, (r, e2e) in table.items()}


def min_effect_table(device: str, min_effect: float | None = None) -> dict[str, float]:
    """The device's min_effect per statistic; ``min_effect`` sets the first and scales the rest alike."""
    table = DEFAULT_MIN_EFFECT.get(device, DEFAULT_MIN_EFFECT["cuda"])
    scale = 1.0 if min_effect is None else min_effect / next(iter(table.values()))
    return {stat: round(value * scale, 6) for stat, value in table.items()}


def run_spread(values: Sequence[float]) -> float | None:
    """(max - min) / median of one metric over several runs; None from fewer than two."""
    if len(values) < 2:
        return None
    middle = statistics.median(values)
    return (max(values) - min(values)) / middle if middle > 0 else None


# d2: the expected range of n normal samples in standard deviations (control-chart tables),
# so that range / d2(n) estimates the standard deviation between runs from a few of them.
_RANGE_D2 = {2: 1.128, 3: 1.693, 4: 2.059, 5: 2.326, 6: 2.534, 7: 2.704, 8: 2.847, 9: 2.970, 10: 3.078,
             11: 3.173, 12: 3.258, 13: 3.336, 14: 3.407, 15: 3.472}
# A fresh run of the same build passes while its median lies within this many of those
# standard deviations of the baseline's (a control chart's limits). The interval of the
# statistical rule sees only the noise within one run, not the drift between processes: six
# fresh H100 processes of one build put the fusiongate triton cell at 5.93-6.34 us, and a
# baseline from the first three (spread 3.8 %, min_effect 5 %) failed the sixth at +6.5 %
# (docs/perf.md, 2026-11-27).
RUN_SIGMAS = 3.0


def range_d2(runs: int) -> float:
    """d2(runs): how many standard deviations the range of that many runs spans, expected."""
    return _RANGE_D2[min(max(runs, 2), max(_RANGE_D2))]


def spread_allowance(spread: float | None, runs: int) -> float:
    """The smallest min_effect the runs' own spread allows: RUN_SIGMAS x spread / d2(runs)."""
    if spread is None or runs < 2:
        return 0.0
    return RUN_SIGMAS * spread / range_d2(runs)


def gate_rule(stat: str, values: Sequence[float], min_effects: Mapping[str, float]) -> GateRule | None:
    """The statistic's rule: its min_effect never below what the baseline's own runs' spread allows."""
    if stat not in min_effects:
        return None
    spread = run_spread(values)
    spread = None if spread is None else round(spread, 6)  # as the file stores it
    allowance = round(spread_allowance(spread, len(values)), 6)
    return GateRule(min_effect=max(min_effects[stat], allowance), confidence=RULE_CONFIDENCE,
                    run_spread=spread)


def stored_samples(metric: str, samples: Sequence[float], limit: int = MAX_STORED_SAMPLES) -> tuple[float, ...]:
    """A seeded random subsample (in measurement order) of at most ``limit`` samples."""
    if len(samples) <= limit:
        return tuple(samples)
    keep = sorted(random.Random(metric_seed(metric)).sample(range(len(samples)), limit))
    return tuple(samples[i] for i in keep)


def check_complete(reports: Sequence[LoadedReport], allow_partial: bool) -> None:
    """A baseline comes from runs that finished: an interrupted or killed run lacks the cells it
    never reached, and its metrics would silently vanish from the gate."""
    for report in reports:
        if report.status != "complete" and not allow_partial:
            raise InputFileError(report.path, "status", f"is {report.status!r}: the run did not finish "
                                 f"({plural(len(report.cells), 'cell')} recorded); a baseline needs "
                                 "complete runs (--allow-partial takes the cells it has)")


def _check_alike(reports: Sequence[LoadedReport]) -> None:
    """Reports merged into one baseline must come from one suite and one environment."""
    first = reports[0]
    for other in reports[1:]:
        if other.suite != first.suite:
            raise InputFileError(other.path, "suite", f"{other.suite!r} differs from {first.suite!r} "
                                                      f"of {first.path}")
        refused = refused_differences(first.environment_key, other.environment_key)
        if refused:
            raise InputFileError(other.path, f"environment_key.{refused[0].split(':')[0]}",
                                 f"differs from {first.path} ({'; '.join(refused)})")


def _metrics(reports: Sequence[LoadedReport], ratios: Mapping[str, tuple[float, float]],
             abs_ms: float, min_effects: Mapping[str, float]) -> dict[str, MetricLimit]:
    runs: dict[tuple[str, str], list[ReportCell]] = {}
    for report in reports:
        for cell in report.cells:
            for stat in ratios:
                if cell.status == "ok" and stat in cell.stats_ms:
                    runs.setdefault((cell.metric(stat), stat), []).append(cell)
    metrics = {}
    for (name, stat), cells in runs.items():
        values = [c.stats_ms[stat] for c in cells]
        _check_agreement(reports, name, values)
        value = statistics.median(values)
        typical = min(cells, key=lambda c: abs(c.stats_ms[stat] - value))  # the run whose samples are kept
        ratio, end_to_end = ratios[stat]
        # A cell's samples are stored once, on its first metric; its other metrics read them there.
        first = stat == next(iter(ratios))
        metrics[name] = MetricLimit(
            # below the nanosecond a baseline stores (0 for a kernel at the timer's floor): the
            # resolution itself, so the limit stays a positive time and the ratio finite
            value_ms=max(value, MIN_BASELINE_MS),
            max_regression_ratio=end_to_end if typical.workload in END_TO_END_WORKLOADS else ratio,
            max_regression_abs_ms=abs_ms,
            samples_ms=stored_samples(name, typical.samples_ms) if first else (),
            rule=gate_rule(stat, values, min_effects),
            timer_floor_ms=median_floor_ms(c.timer_floor_ms for c in cells))
    return metrics


def _check_agreement(reports: Sequence[LoadedReport], name: str, values: Sequence[float]) -> None:
    """Refuse runs whose spread on one metric is past what a baseline file holds (its schema's bound)."""
    spread = run_spread(values)
    if spread is not None and max(spread, spread_allowance(spread, len(values))) > MAX_RULE_VALUE:
        raise InputFileError(reports[0].path, "benchmarks", (
            f"the runs disagree on {name}: {min(values):.4g} to {max(values):.4g} ms over "
            f"{plural(len(values), 'run')}, "
            "more than a baseline can hold; take it from runs of one build that agree"))


def _extra_metrics(reports: Sequence[LoadedReport], kinds: Sequence[str]) -> dict[str, ExtraLimit]:
    """Each chosen extra metric of every ok cell that reports it, at its median over the runs."""
    values: dict[str, list[float]] = {}
    for report in reports:
        for cell in report.cells:
            if cell.status != "ok":
                continue
            for kind in kinds:
                if kind in cell.extras:
                    values.setdefault(cell.metric(kind), []).append(cell.extras[kind])
    extras = {}
    for name, series in values.items():
        metric = metric_kind(name)
        extras[name] = ExtraLimit(value=statistics.median(series), better=metric.better,
                                  max_change_ratio=metric.ratio, max_change_abs=metric.absolute)
    return extras


def default_notes(reports: Sequence[LoadedReport], ratios: Mapping[str, tuple[float, float]],
                  abs_ms: float, min_effects: Mapping[str, float] | None = None) -> str:
    first = reports[0]
    table = ", ".join(f"{stat} {r} (end-to-end {e2e})" for stat, (r, e2e) in ratios.items())
    rules = ", ".join(f"{stat} {value}" for stat, value in (min_effects or {}).items()) or "none"
    return (f"Emitted by 'apex-bench baseline emit' from {len(reports)} report(s), the first {first.path} "
            f"({first.timestamp_utc}, commit {first.git_commit or 'unknown'}); values are medians over the "
            f"reports; statistical rule min_effect {rules} (at {RULE_CONFIDENCE:.0%}, never below what the "
            f"runs' own spread allows); hard cap max_regression_ratio {table}; floor {abs_ms} ms.")


def _source(reports: Sequence[LoadedReport]) -> dict[str, Any]:
    first = reports[0]
    return {"path": Path(first.path).name, "sha256": file_sha256(first.path),
            "timestamp_utc": first.timestamp_utc, "git_commit": first.git_commit,
            "report_count": len(reports)}


def emit_baseline(reports: LoadedReport | Sequence[LoadedReport], *, ratio: float | None = None,
                  abs_ms: float | None = None, notes: str | None = None,
                  min_effect: float | None = None, extra_metrics: Sequence[str] = (),
                  allow_partial: bool = False) -> Baseline:
    """A baseline with the device's metrics for every ok cell, valued at the median over ``reports``.

    Each metric gets the hard cap of the device's ratio table and, for the statistics of its
    min-effect table, the statistical rule (``GateRule``); ``extra_metrics`` names the opt-in
    metrics beyond time (``extra_metrics.EXTRA_METRICS``) to gate as well.
    """
    reports = [reports] if isinstance(reports, LoadedReport) else list(reports)
    check_complete(reports, allow_partial)
    _check_alike(reports)
    device = str(reports[0].environment_key.get("device"))
    ratios = ratio_table(device, ratio)
    floor = DEFAULT_ABS_MS.get(device, DEFAULT_ABS_MS["cuda"]) if abs_ms is None else abs_ms
    min_effects = min_effect_table(device, min_effect)
    metrics = _metrics(reports, ratios, floor, min_effects)
    if not metrics:
        raise InputFileError(reports[0].path, "benchmarks", "holds no ok cell to take a baseline from")
    return Baseline(suite=reports[0].suite, environment_key=dict(reports[0].environment_key),
                    metrics=metrics, baseline_notes=default_notes(reports, ratios, floor, min_effects)
                    if notes is None else notes, source_report=_source(reports),
                    extra_metrics=_extra_metrics(reports, extra_metrics),
                    fingerprint=pooled_fingerprint(r.fingerprint for r in reports))
