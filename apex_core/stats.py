"""Summary statistics of timing samples.

One percentile method everywhere: linear interpolation between closest ranks
(numpy's default "linear", Hyndman & Fan type 7).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs


@attrs.frozen
class Stats:
    """Summary statistics of a list of timing samples, in milliseconds.

    Percentiles use linear interpolation between closest ranks (the method numpy
    calls "linear", Hyndman & Fan type 7) everywhere in apex-bench.
    """

    n: int
    mean: float
    std: float
    min: float
    max: float
    p50: float
    p90: float
    p95: float
    p99: float
    cv: float  # std / mean

    @classmethod
    def from_samples(cls, samples_ms: tuple[float, ...] | list[float]) -> Stats:
        return summarize(samples_ms)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of already sorted values, by linear interpolation."""
    if not sorted_values:
        raise ValueError("percentile of an empty sample")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile {q} is outside [0, 100]")
    position = (len(sorted_values) - 1) * q / 100.0
    lower = math.floor(position)
    upper = min(lower + 1, len(sorted_values) - 1)
    fraction = position - lower
    return sorted_values[lower] + (sorted_values[upper] - sorted_values[lower]) * fraction


def summarize(samples_ms: Sequence[float]) -> Stats:
    """Stats of a non-empty sample list; std is the sample (n-1) standard deviation."""
    if not samples_ms:
        raise ValueError("cannot summarize zero samples")
    ordered = sorted(float(s) for s in samples_ms)
    n = len(ordered)
    mean = math.fsum(ordered) / n
    variance = math.fsum((s - mean) ** 2 for s in ordered) / (n - 1) if n > 1 else 0.0
    std = math.sqrt(variance)
    return Stats(
        n=n,
        mean=mean,
        std=std,
        min=ordered[0],
        max=ordered[-1],
        p50=percentile(ordered, 50),
        p90=percentile(ordered, 90),
        p95=percentile(ordered, 95),
        p99=percentile(ordered, 99),
        cv=std / mean if mean > 0 else 0.0,
    )


def relative_noise(samples_ms: Sequence[float]) -> float:
    """Coefficient of variation (std / mean) of the samples; inf for fewer than two."""
    if len(samples_ms) < 2:
        return math.inf
    return summarize(samples_ms).cv
