"""Change points of a metric's series: binary segmentation on the median.

Why this method: the runs of one cell form a series of p50s that is flat with noise and
moves in steps (a commit makes a kernel slower; a driver update makes it faster). A
segmentation that minimizes the sum of absolute deviations from each segment's median
(the L1 cost) finds such steps and, unlike a mean-based fit, is not pulled by the single
unlucky run that timing histories always hold. Binary segmentation (split the series
where the cost drops most, then split each side again) is O(n^2) per level on a few
hundred runs and has two parameters a person can read:

- ``min_segment`` (3): a step must hold for that many runs on each side (that many runs
  beyond the midpoint of the two levels), so one or two outlier runs are never a change
  point (the gate judges single runs; the trend looks for shifts);
- ``min_relative_step`` (5 %): the medians either side must differ by that much, the
  smallest effect the gate itself treats as a regression on CUDA.

A split is also kept only when the step stands out from the noise: it must exceed
``z`` (4) times the standard error of the difference of the two medians. Sigma comes
from the median of the absolute differences of successive points (1.4826 * MAD / sqrt(2)):
a step, or a pulse of a few runs inside the segment, moves only one or two differences,
so it does not inflate the noise it is judged against; a median's standard error is
1.2533 * sigma / sqrt(n). asv's detector (a penalized L1 fit solved exactly
by dynamic programming) finds the same steps on such series; it needs a penalty tuned to
the noise, where these thresholds are stated in the series' own units.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import attrs

MIN_SEGMENT = 3
MIN_RELATIVE_STEP = 0.05
NOISE_Z = 4.0
_MAD_TO_SIGMA = 1.4826  # sigma of a normal distribution from its median absolute deviation
_MEDIAN_EFFICIENCY = 1.2533  # the standard error of a median is this times sigma / sqrt(n)


@attrs.frozen
class ChangePoint:
    """The series steps from ``before`` to ``after`` at ``index`` (the first point of the new level)."""

    index: int
    before: float
    after: float

    @property
    def relative_change(self) -> float:
        """``after / before - 1`` (inf when the level before was 0)."""
        return self.after / self.before - 1.0 if self.before else math.inf


def _l1_cost(values: Sequence[float]) -> float:
    centre = statistics.median(values)
    return sum(abs(v - centre) for v in values)


def _best_split(values: Sequence[float], min_segment: int) -> int | None:
    """Where the cost of the two sides is least (the first such index)."""
    return min(range(min_segment, len(values) - min_segment + 1), default=None,
               key=lambda k: _l1_cost(values[:k]) + _l1_cost(values[k:]))


def _noise_sigma(values: Sequence[float]) -> float:
    """Sigma of the noise from the median of successive differences: a step moves one difference only."""
    differences = [abs(b - a) for a, b in zip(values, values[1:], strict=False)]
    return _MAD_TO_SIGMA * statistics.median(differences) / math.sqrt(2.0) if differences else 0.0


def _is_step(left: Sequence[float], right: Sequence[float], min_segment: int, min_relative_step: float,
             z: float) -> bool:
    before, after = statistics.median(left), statistics.median(right)
    step = abs(after - before)
    # each level must hold for min_segment runs: a median of 3 moved by 2 outliers is no level
    midpoint, sign = (before + after) / 2.0, 1.0 if after > before else -1.0
    if (sum(sign * (v - midpoint) < 0 for v in left) < min_segment
            or sum(sign * (v - midpoint) > 0 for v in right) < min_segment):
        return False
    base = min(abs(before), abs(after))
    if step == 0 or (base > 0 and step / base < min_relative_step):
        return False
    sigma = _noise_sigma([*left, *right])
    standard_error = _MEDIAN_EFFICIENCY * sigma * math.sqrt(1.0 / len(left) + 1.0 / len(right))
    return step > z * standard_error


def change_points(values: Sequence[float], *, min_segment: int = MIN_SEGMENT,
                  min_relative_step: float = MIN_RELATIVE_STEP, z: float = NOISE_Z) -> tuple[ChangePoint, ...]:
    """The steps of ``values`` in order of index; none on a series shorter than ``2 * min_segment``.

    Each change point's ``before`` and ``after`` are the medians of the final segments either side.
    """
    if min_segment < 1:
        raise ValueError(f"min_segment must be >= 1, got {min_segment}")
    data = [float(v) for v in values]
    cuts: list[int] = []
    pending = [(0, len(data))]
    while pending:
        lo, hi = pending.pop()
        if hi - lo < 2 * min_segment:
            continue
        split = _best_split(data[lo:hi], min_segment)
        if split is None or not _is_step(data[lo:lo + split], data[lo + split:hi], min_segment,
                                               min_relative_step, z):
            continue
        cuts.append(lo + split)
        pending += [(lo, lo + split), (lo + split, hi)]
    if not cuts:
        return ()
    bounds = [0, *sorted(cuts), len(data)]
    medians = [statistics.median(data[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    return tuple(ChangePoint(index=cut, before=medians[i], after=medians[i + 1])
                 for i, cut in enumerate(bounds[1:-1]))
