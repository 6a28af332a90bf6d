"""Promote a baseline: replace it with new runs only when those runs agree among themselves.

A gain (or an accepted loss) counts after several stable runs: ``promote`` takes at least
``MIN_RUNS`` reports of one build, refuses when any metric's spread over them,
``(max - min) / median``, is above its allowance (the metric's min_effect, or the cap ratio
where it has no statistical rule, for three runs; for more, widened as their expected range
widens, d2(n) / d2(3), so that more runs never make the same noise fail), or when a cell is
not ok in every run, and otherwise
emits a new baseline from them. Limits a person tuned in the old baseline (the cap's ratio
and floor) carry over to the metrics they name; every metric's change is reported, against
the old baseline's times scaled to the new runs' card where the two baselines name different
cards of one model (across_cards.py), so a change of card is not read as a change of code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from apex_core.baseline.across_cards import normalized_baseline
from apex_core.baseline.compare import best_cells, check_environment, check_suite
from apex_core.baseline.emit import emit_baseline, min_effect_table, range_d2, ratio_table, run_spread
from apex_core.baseline.errors import InputFileError
from apex_core.baseline.model import QUANTILE_STATS, Baseline, LoadedReport, Verdict, metric_stat
from apex_core.baseline.verdict import judge, metric_seed
from apex_core.errors import plural

MIN_RUNS = 3


@attrs.frozen(kw_only=True)
class MetricChange:
    """One metric's old and new value, and the verdict of the new runs against the old samples."""

    metric: str
    old_ms: float | None  # None: a metric the old baseline did not have
    new_ms: float | None  # None: dropped, no ok cell in the runs
    verdict: Verdict | None = None
    old_scale: float = 1.0  # the old time scaled by this to the new runs' card before comparing

    @property
    def change(self) -> float | None:
        """new / (old on the new runs' card) - 1."""
        if self.old_ms is None or self.new_ms is None:
            return None
        return self.new_ms / (self.old_ms * self.old_scale) - 1.0


@attrs.frozen(kw_only=True)
class Disagreement:
    """A metric whose runs disagree more than its allowance (or a cell that failed in a run)."""

    metric: str
    spread: float | None
    allowed: float
    detail: str


class PromotionRefused(InputFileError):
    """The candidate runs disagree: nothing is written."""

    def __init__(self, path: str, disagreements: Sequence[Disagreement]) -> None:
        self.disagreements = tuple(disagreements)
        names = ", ".join(d.metric for d in disagreements[:5])
        more = f" and {len(disagreements) - 5} more" if len(disagreements) > 5 else ""
        super().__init__(path, None, f"promotion refused: the runs disagree on {len(disagreements)} "
                                     f"metric(s): {names}{more}")


def allowances(device: str, stats: Sequence[str], runs: int = MIN_RUNS) -> dict[str, float]:
    """How far apart ``runs`` runs of each statistic may be: its min_effect, else its cap ratio,
    for three runs. The range of n runs grows with n (d2(n) standard deviations, expected), so
    the allowance grows alike: ten runs as steady as three may span 1.8x their range."""
    rules, caps = min_effect_table(device), ratio_table(device)
    widen = range_d2(runs) / range_d2(MIN_RUNS)
    return {stat: round(rules.get(stat, caps.get(stat, (0.10, 0.10))[0]) * widen, 6) for stat in stats}


def disagreements(runs: Sequence[LoadedReport], stats: Sequence[str],
                  allowed: Mapping[str, float]) -> list[Disagreement]:
    """Every metric whose spread over the runs is above its allowance, or that is not ok in every run."""
    values: dict[str, list[float]] = {}
    failures: dict[str, str] = {}
    for run in runs:
        for cell in run.cells:
            for stat in stats:
                name = cell.metric(stat)
                if cell.status != "ok" or stat not in cell.stats_ms:
                    failures.setdefault(name, f"{cell.status} in {run.path}")
                else:
                    values.setdefault(name, []).append(cell.stats_ms[stat])
    found = [Disagreement(metric=name, spread=None, allowed=allowed[metric_stat(name)], detail=why)
             for name, why in failures.items()]
    for name, series in values.items():
        allowance = allowed[metric_stat(name)]
        if name in failures:
            continue
        if len(series) != len(runs):
            found.append(Disagreement(metric=name, spread=None, allowed=allowance,
                                      detail=f"in {len(series)} of {plural(len(runs), 'run')}"))
        elif (spread := run_spread(series)) is not None and spread > allowance:
            found.append(Disagreement(metric=name, spread=spread, allowed=allowance,
                                      detail=f"{min(series):.4g}-{max(series):.4g} ms"))
    return sorted(found, key=lambda d: d.metric)


def promote(old: Baseline, old_path: str, runs: Sequence[LoadedReport], *, max_spread: float | None = None,
            min_runs: int = MIN_RUNS) -> tuple[Baseline, list[MetricChange]]:
    """The new baseline from ``runs`` and what changed; raises ``PromotionRefused`` when they disagree."""
    if len(runs) < min_runs:
        raise InputFileError(runs[0].path if runs else old_path, None,
                             f"promotion needs at least {min_runs} runs of one build, got {len(runs)}")
    for run in runs:
        check_suite(old, old_path, run)
        check_environment(old, old_path, run.environment_key, run.path, force=False)
    device = str(old.environment_key.get("device"))
    stats = tuple(ratio_table(device))
    allowed = allowances(device, stats, len(runs)) if max_spread is None else dict.fromkeys(stats, max_spread)
    found = disagreements(runs, stats, allowed)
    if found:
        raise PromotionRefused(old_path, found)
    fresh = emit_baseline(runs, extra_metrics=sorted({n.rsplit("/", 1)[-1] for n in old.extra_metrics}))
    metrics = {}
    for name, limit in fresh.metrics.items():
        kept = old.metrics.get(name)
        metrics[name] = limit if kept is None else attrs.evolve(
            limit, max_regression_ratio=kept.max_regression_ratio,
            max_regression_abs_ms=kept.max_regression_abs_ms)
    new = attrs.evolve(fresh, metrics=metrics, baseline_notes=(
        f"Promoted by 'apex-bench baseline promote' from {len(runs)} agreeing runs (spread within "
        f"{', '.join(f'{s} {a:.1%}' for s, a in allowed.items())}); replaces {old_path}. "
        + fresh.baseline_notes))
    # the old times as the new runs' card would read them (the new baseline's pooled card); each
    # metric's bound judged on the cell compare would take (its best run)
    cells = best_cells(runs)
    on_new_card, scalings, _ = normalized_baseline(old, cells, dict.fromkeys(cells, new.fingerprint))
    changes = []
    for name in sorted(set(old.metrics) | set(new.metrics)):
        before, after = old.metrics.get(name), new.metrics.get(name)
        verdict = None
        if before is not None and after is not None:
            verdict = judge(on_new_card.samples_for(name), new.samples_for(name),
                            QUANTILE_STATS[metric_stat(name)], seed=metric_seed(name))
        changes.append(MetricChange(metric=name, old_ms=before.value_ms if before else None,
                                    new_ms=after.value_ms if after else None, verdict=verdict,
                                    old_scale=scalings[name].factor if name in scalings else 1.0))
    return new, changes
