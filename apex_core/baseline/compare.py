"""The gate: two rules per baseline metric, the environment check, and the verdict beside them.

A metric fails when

- its statistical rule says so (``GateRule``): the bootstrap interval of
  ``current / baseline`` lies wholly above ``1 + min_effect``, i.e. slower with confidence
  and by more than the smallest change that matters; or
- it exceeds the hard cap ``value_ms * (1 + max_regression_ratio) + max_regression_abs_ms``
  (a backstop that needs no samples).

A metric the report lacks is ``missing`` (a failure unless missing metrics are allowed); a
cell that is not ``ok`` fails its metrics. Without a rule (baselines of schema version 1,
or metrics emitted without one) only the cap gates, and the verdict is shown beside it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from apex_core.baseline.across_cards import normalized_baseline
from apex_core.baseline.errors import EnvironmentMismatchError
from apex_core.baseline.extra_metrics import ExtraLimit, metric_kind
from apex_core.baseline.io import check_suite
from apex_core.baseline.model import (
    FAIL,
    FAILED_BY_CAP,
    FAILED_BY_CELL,
    FAILED_BY_MISSING,
    FAILED_BY_RULE,
    MISSING,
    PASS,
    QUANTILE_STATS,
    Baseline,
    Check,
    CompareSummary,
    LoadedReport,
    MetricLimit,
    ReportCell,
    Verdict,
    metric_stat,
)
from apex_core.baseline.normalize import NEAR_FLOOR, floors_differ
from apex_core.baseline.verdict import CONFIDENCE, judge, metric_seed
from apex_core.measure.host_load import contended

# Fields that change what a number measures: a difference refuses the comparison.
REFUSED_FIELDS = ("device", "profile", "dtypes", "cache", "graph", "timing_methods")
# The hardware field holds the GPU model on cuda (refused) and the CPU model string on cpu,
# which differs between CI machines of one kind, so there it is only noted; the CPU class
# is pinned by the logical core count instead.
REFUSED_ON_CUDA = ("hardware",)
REFUSED_ON_CPU = ("cpu_count",)
# Software versions are what the gate exists to judge (a torch upgrade that slows a
# kernel is a regression to catch, not a reason to refuse): noted, never refused.
NOTED_FIELDS = ("torch", "triton", "tensorrt", "driver")


def _normalized(value: Any) -> Any:
    return sorted(value) if isinstance(value, list) else value


def _differences(baseline_key: Mapping[str, Any], current_key: Mapping[str, Any],
                 fields: tuple[str, ...]) -> list[str]:
    return [f"{name}: baseline {baseline_key.get(name)!r}, current {current_key.get(name)!r}"
            for name in fields
            if name in baseline_key and _normalized(baseline_key.get(name)) != _normalized(
                current_key.get(name))]


def refused_differences(baseline_key: Mapping[str, Any], current_key: Mapping[str, Any],
                        skip: tuple[str, ...] = ()) -> list[str]:
    """The differences that make two environments' numbers incomparable."""
    on_device = REFUSED_ON_CUDA if baseline_key.get("device") == "cuda" else REFUSED_ON_CPU
    fields = tuple(f for f in REFUSED_FIELDS + on_device if f not in skip)
    return _differences(baseline_key, current_key, fields)


def check_environment(baseline: Baseline, baseline_path: Path | str, current_key: Mapping[str, Any],
                      current_path: Path | str, *, force: bool,
                      skip: tuple[str, ...] = ()) -> tuple[tuple[str, ...], bool]:
    """Refuse a comparison across environments; returns (differences, whether force overrode one)."""
    refused = refused_differences(baseline.environment_key, current_key, skip)
    on_cpu = () if baseline.environment_key.get("device") == "cuda" else REFUSED_ON_CUDA
    noted = _differences(baseline.environment_key, current_key, NOTED_FIELDS + on_cpu)
    if refused and not force:
        first = refused[0].split(":", 1)[0]
        raise EnvironmentMismatchError(
            current_path, f"environment_key.{first}",
            f"measured where baseline {baseline_path} does not apply ({'; '.join(refused)}); "
            "use --force to compare anyway")
    return tuple(refused + noted), bool(refused)


def check_metric(name: str, limit: MetricLimit, cell: ReportCell | None,
                 baseline_samples: tuple[float, ...] = ()) -> Check:
    """Apply the metric's statistical rule and hard cap; the verdict (and its interval) comes along."""
    current: float | None = None
    failed_by = ""
    rule = limit.rule
    if cell is None:
        status, reason, verdict = MISSING, "no cell for this metric in the report", \
            Verdict.inconclusive("not in the report")
        failed_by = FAILED_BY_MISSING
    elif cell.status != "ok":
        status, reason, verdict = FAIL, f"cell {cell.status}: {cell.reason}".strip(), \
            Verdict.inconclusive(f"the cell is {cell.status}")
        failed_by = FAILED_BY_CELL
    else:
        current = cell.stats_ms[metric_stat(name)]
        verdict = judge(baseline_samples, cell.samples_ms, QUANTILE_STATS[metric_stat(name)],
                        seed=metric_seed(name), confidence=rule.confidence if rule else CONFIDENCE)
        status, reason = PASS, ""
        if current > limit.allowed_max_ms:
            status, failed_by = FAIL, FAILED_BY_CAP
            reason = f"{current:.4g} ms exceeds the allowed {limit.allowed_max_ms:.4g} ms (the hard cap)"
        elif rule is not None and verdict.ci_low is not None and verdict.ci_low > rule.threshold:
            status, failed_by = FAIL, FAILED_BY_RULE
            reason = (f"slower with confidence: the {rule.confidence:.0%} interval of the ratio "
                      f"[{verdict.ci_low:.3f}, {verdict.ci_high:.3f}] lies above 1 + {rule.min_effect:.1%}")
    return Check(metric=name, status=status, baseline_ms=limit.value_ms,
                 allowed_max_ms=limit.allowed_max_ms, current_ms=current,
                 regression_ratio=None if current is None else current / limit.value_ms - 1.0,
                 verdict=verdict, reason=reason, rule=rule, failed_by=failed_by,
                 contention=contention_text(cell.host_load) if status == FAIL and cell is not None else "")


def _floors(limit: MetricLimit, cell: ReportCell | None) -> tuple[float, float] | None:
    """(baseline, current) timer floors in ms, where both were subtracted."""
    if cell is None or not limit.timer_floor_ms or not cell.timer_floor_ms:
        return None
    return limit.timer_floor_ms, cell.timer_floor_ms


def _floor_difference(limits: Mapping[str, MetricLimit], cells: Mapping[str, ReportCell]) -> str:
    """The run's timer floor against the baseline's (medians over the cells with both), when they
    differ by more than ``FLOOR_MISMATCH``; "" otherwise."""
    # one pair per cell: its p50 and p95 metrics share the cell and its floor
    pairs = {name.rsplit("/", 1)[0]: f for name, limit in limits.items()
             if (f := _floors(limit, cells.get(name))) is not None}
    if not pairs:
        return ""
    baseline_ms, current_ms = (statistics.median(side) for side in zip(*pairs.values(), strict=True))
    if not floors_differ(baseline_ms, current_ms):
        return ""
    return (f"timer floor: baseline {baseline_ms * 1e3:.3g} us, current {current_ms * 1e3:.3g} us "
            f"(medians over {len(pairs)} cells): cells within {NEAR_FLOOR:g}x of it are not comparable "
            "between the two machines (docs/baselines.md, \"Another kind of machine\")")


def _with_floor_note(check: Check, limit: MetricLimit, cell: ReportCell | None) -> Check:
    """A failed check of a cell whose p50 is within ``NEAR_FLOOR`` times its timer floor, with why
    that may be the machine's; for a run whose floor differs from the baseline's (``_floor_difference``)."""
    floors = _floors(limit, cell)
    p50 = cell.stats_ms.get("p50_ms") if cell is not None and cell.status == "ok" else None
    if check.status != FAIL or floors is None or p50 is None or p50 >= NEAR_FLOOR * floors[1]:
        return check
    note = (f"the timer's floor was {floors[1] * 1e3:.3g} us here and {floors[0] * 1e3:.3g} us in the "
            f"baseline's runs: a cell within {NEAR_FLOOR:g}x of it is not comparable between the two machines "
            "(docs/baselines.md, \"Another kind of machine\")")
    return attrs.evolve(check, reason=f"{check.reason}; {note}")


def noted_floors(checks: Sequence[Check], limits: Mapping[str, MetricLimit],
                 cells: Mapping[str, ReportCell]) -> tuple[str, tuple[Check, ...]]:
    """Where the run's timer floor differs from the baseline's: the difference in words, and the checks
    with each failed one near the floor saying so; else "" and the checks as they were."""
    difference = _floor_difference(limits, cells)
    if not difference:
        return "", tuple(checks)
    return difference, tuple(_with_floor_note(c, limits[c.metric], cells.get(c.metric)) for c in checks)


def contention_text(load: Any) -> str:
    """Why a failure may be the machine's and not the code's, when other processes kept it busy."""
    if not contended(load):
        return ""
    return (f"measured while other processes kept {load['other_busy_cores']:.1f} of {load.get('cores')} cores "
            f"busy (load average {load.get('load_avg_1m')}): run it again on a quiet machine")


def check_extra(name: str, limit: ExtraLimit, cell: ReportCell | None) -> Check:
    """An extra metric (throughput, memory, energy, error) against its plain limit; no samples, no verdict."""
    kind = metric_kind(name)
    current: float | None = None
    failed_by, reason = "", ""
    if cell is None:
        status, failed_by, reason = MISSING, FAILED_BY_MISSING, "no cell for this metric in the report"
    elif cell.status != "ok":
        status, failed_by, reason = FAIL, FAILED_BY_CELL, f"cell {cell.status}: {cell.reason}".strip()
    elif kind.name not in cell.extras:
        status, failed_by, reason = MISSING, FAILED_BY_MISSING, f"the cell reports no {kind.description}"
    else:
        current = cell.extras[kind.name]
        status = PASS if limit.passes(current) else FAIL
        if status == FAIL:
            failed_by = FAILED_BY_CAP
            side = "below the allowed minimum" if limit.better == "higher" else "above the allowed"
            reason = f"{current:.4g} {kind.unit} is {side} {limit.limit:.4g} {kind.unit}".replace("  ", " ")
    return Check(metric=name, status=status, baseline_ms=limit.value, allowed_max_ms=limit.limit,
                 current_ms=current, regression_ratio=None if current is None else limit.worse_by(current),
                 verdict=Verdict.inconclusive("one value per run: no samples to judge"), reason=reason,
                 failed_by=failed_by, unit=kind.unit, better=limit.better)


def _cells_by_rank(reports: Sequence[LoadedReport], pick: Callable[[int], int]) -> dict[str, ReportCell]:
    """Per metric, of the runs where its cell is ok, ordered fastest first (the earlier run first on
    a tie), the one at index ``pick(count)``; the first run's cell where it is ok in none."""
    runs: dict[str, list[ReportCell]] = {}
    for report in reports:
        for name, cell in report.cells_by_metric().items():
            runs.setdefault(name, []).append(cell)
    chosen = {}
    for name, cells in runs.items():
        ok = sorted((c for c in cells if c.status == "ok"), key=lambda c: c.stats_ms[metric_stat(name)])
        chosen[name] = ok[pick(len(ok))] if ok else cells[0]
    return chosen


def best_cells(reports: Sequence[LoadedReport]) -> dict[str, ReportCell]:
    """Per metric, the cell of the best run: contention only ever slows a run down, so of
    several runs of one build the fastest is the closest to what the code costs."""
    return _cells_by_rank(reports, lambda count: 0)


def median_cells(reports: Sequence[LoadedReport]) -> dict[str, ReportCell]:
    """Per metric, the cell of the median run of those where it is ok (of an even count, the faster
    middle one): one fresh process can read a short GPU cell 6-8 % off the others on either side,
    and the median of three sets it aside where the best of them would also set aside a real
    slowdown's slower runs (docs/baselines.md, "Confirming a failed GPU gate")."""
    return _cells_by_rank(reports, lambda count: (count - 1) // 2)


# how several reports of one build give each metric its cell: "best" (the CPU gate's retries) or "median"
COMBINE = {"best": best_cells, "median": median_cells}


def compare(baseline: Baseline, baseline_path: Path | str,
            reports: LoadedReport | Sequence[LoadedReport], *, allow_missing: bool = False,
            force: bool = False, normalize: bool = True, combine: str = "best") -> CompareSummary:
    """Check every baseline metric against the report(s); raises on a suite or environment mismatch.

    Several reports are runs of one build (a retry of a failed gate): each metric takes its best
    run, or with ``combine="median"`` its median run.
    With ``normalize``, a baseline measured on another card of the same model has its times scaled
    to the card of the run each metric's cell came from (across_cards.py).
    """
    reports = [reports] if isinstance(reports, LoadedReport) else list(reports)
    differences: list[str] = []
    forced = False
    for report in reports:
        check_suite(baseline, baseline_path, report)
        found, overridden = check_environment(baseline, baseline_path, report.environment_key, report.path,
                                              force=force)
        differences += [d for d in found if d not in differences]
        forced = forced or overridden
    cells = COMBINE[combine](reports)
    origin = {id(cell): report for report in reports for cell in report.cells}
    scaled, scalings, normalization = normalized_baseline(
        baseline, cells, {name: origin[id(cell)].fingerprint for name, cell in cells.items()},
        enabled=normalize)
    checks = tuple(attrs.evolve(check_metric(name, limit, cells.get(name), scaled.samples_for(name)),
                                scaling=scalings.get(name))
                   for name, limit in scaled.metrics.items())
    floors, checks = noted_floors(checks, baseline.metrics, cells)
    if floors:
        differences.append(floors)
    if baseline.extra_metrics:
        # one value per run and no best-of rule: the cell of the first report that has it
        extra_cells = {cell.metric(kind): cell for report in reversed(reports) for cell in report.cells
                       for kind in (n.rsplit("/", 1)[-1] for n in baseline.extra_metrics)}
        checks += tuple(check_extra(name, limit, extra_cells.get(name))
                        for name, limit in baseline.extra_metrics.items())
    return CompareSummary(suite=baseline.suite, forced=forced,
                          allow_missing=allow_missing, checks=checks,
                          environment_differences=tuple(differences), baseline_path=str(baseline_path),
                          current_paths=tuple(r.path for r in reports), combine=combine,
                          timestamp_utc=max(r.timestamp_utc for r in reports), normalization=normalization)
