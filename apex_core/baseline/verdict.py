"""A statistical verdict on one metric from the raw samples of two runs.

The verdict bootstraps the ratio ``current statistic / baseline statistic`` (the statistic
is the metric's percentile: the median for ``p50_ms``) and reads a percentile confidence
interval off the resampled ratios:

- ``slower``  when the whole interval lies above ``1 + margin``;
- ``faster``  when it lies below ``1 - margin``;
- ``same``    when it lies within ``[1 - margin, 1 + margin]``;
- ``inconclusive`` otherwise (the interval straddles a margin), or with fewer than
  ``MIN_SAMPLES`` samples on either side.

The interval reflects the noise within each run only; a drift between runs larger than
the margin shows up as a small but confident ``slower`` or ``faster`` with its ratio.

Resampling is exact and cheap: the k-th smallest of n draws from the empirical
distribution is ``sorted[floor(U * n)]`` with ``U ~ Beta(k, n - k + 1)`` (the k-th order
statistic of n uniforms), and the next one is ``U + (1 - U) * Beta(1, n - k)``. So one
bootstrap replicate of a percentile costs two Beta draws instead of n draws and a sort,
and a seeded ``random.Random`` keeps the verdict reproducible without numpy.
"""

from __future__ import annotations

import math
import random
import zlib
from collections.abc import Sequence

from apex_core.baseline.model import Verdict
from apex_core.stats import percentile

SAME_MARGIN = 0.02  # |ratio - 1| within 2 % counts as the same speed
MIN_SAMPLES = 10
RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 20240601


def _order_statistic(sorted_values: Sequence[float], u: float) -> float:
    """The sample value at uniform position ``u`` of the empirical distribution."""
    return sorted_values[min(int(u * len(sorted_values)), len(sorted_values) - 1)]


def bootstrap_percentile(sorted_values: Sequence[float], q: float, rng: random.Random) -> float:
    """One bootstrap replicate of the q-th percentile (linear interpolation, as ``apex_core.stats``)."""
    n = len(sorted_values)
    position = (n - 1) * q / 100.0
    lower = math.floor(position)
    fraction = position - lower
    k = lower + 1  # 1-based rank of the lower order statistic
    u = rng.betavariate(k, n - k + 1)
    low = _order_statistic(sorted_values, u)
    if fraction == 0.0 or k == n:
        return low
    u_next = u + (1.0 - u) * rng.betavariate(1, n - k)
    return low + (_order_statistic(sorted_values, u_next) - low) * fraction


def ratio_interval(baseline: Sequence[float], current: Sequence[float], q: float, *,
                   resamples: int = RESAMPLES, confidence: float = CONFIDENCE,
                   seed: int = SEED) -> tuple[float, float]:
    """Percentile bootstrap interval of ``percentile(current) / percentile(baseline)``."""
    rng = random.Random(seed)
    base_sorted, current_sorted = sorted(baseline), sorted(current)
    ratios = []
    for _ in range(resamples):
        denominator = bootstrap_percentile(base_sorted, q, rng)
        numerator = bootstrap_percentile(current_sorted, q, rng)
        ratios.append(numerator / denominator if denominator > 0 else math.inf)
    ratios.sort()
    tail = (1.0 - confidence) / 2.0 * 100.0
    return percentile(ratios, tail), percentile(ratios, 100.0 - tail)


def metric_seed(metric: str, seed: int = SEED) -> int:
    """A per-metric seed, so a verdict does not depend on which other metrics were judged."""
    return seed ^ zlib.crc32(metric.encode("utf-8"))


def judge(baseline: Sequence[float], current: Sequence[float], q: float = 50.0, *,
          margin: float = SAME_MARGIN, resamples: int = RESAMPLES, seed: int = SEED,
          confidence: float = CONFIDENCE) -> Verdict:
    """faster / same / slower / inconclusive for the q-th percentile of ``current`` vs ``baseline``."""
    if not baseline:
        return Verdict.inconclusive("the baseline holds no samples for this metric")
    if not current:
        return Verdict.inconclusive("the current report holds no samples for this metric")
    base_value = percentile(sorted(baseline), q)
    # a baseline at 0 ms (GPU samples net of the timer's floor) or nearly so has no finite ratio
    ratio = percentile(sorted(current), q) / base_value if base_value > 0 else math.inf
    if not math.isfinite(ratio):
        return Verdict.inconclusive(f"the baseline's statistic ({base_value:.4g} ms) is too close to 0 "
                                    "for a ratio")
    if min(len(baseline), len(current)) < MIN_SAMPLES:
        return Verdict.inconclusive(
            f"too few samples ({len(baseline)} baseline, {len(current)} current; need {MIN_SAMPLES})",
            ratio)
    low, high = ratio_interval(baseline, current, q, resamples=resamples, confidence=confidence, seed=seed)
    if not math.isfinite(high):
        return Verdict.inconclusive("the baseline's resampled statistic reaches 0 ms: no interval for the "
                                    "ratio", ratio)
    if low > 1.0 + margin:
        label = "slower"
    elif high < 1.0 - margin:
        label = "faster"
    elif low >= 1.0 - margin and high <= 1.0 + margin:
        label = "same"
    else:
        label = "inconclusive"
    reason = "" if label != "inconclusive" else f"the interval straddles 1 ± {margin:.0%}"
    return Verdict(label=label, ratio=ratio, ci_low=low, ci_high=high, reason=reason)
