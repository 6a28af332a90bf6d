import math

import pytest

from apex_core.results import Stats
from apex_core.stats import percentile, relative_noise, summarize


def test_percentile_interpolates_between_ranks():
    values = [1.0, 2.0, 3.0, 4.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile(values, 50) == pytest.approx(2.5)
    assert percentile(values, 90) == pytest.approx(3.7)  # (4-1)*0.9 = 2.7 -> 3 + 0.7


def test_percentile_rejects_bad_input():
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_summarize_matches_hand_computation():
    stats = summarize([3.0, 1.0, 2.0, 4.0, 10.0])
    assert stats.n == 5
    assert stats.min == 1.0 and stats.max == 10.0
    assert stats.p50 == 3.0
    assert stats.mean == pytest.approx(4.0)
    assert stats.std == pytest.approx(math.sqrt((9 + 1 + 4 + 0 + 36) / 4))
    assert stats.cv == pytest.approx(stats.std / 4.0)
    assert stats.p99 == pytest.approx(4.0 + 6.0 * 0.96)


def test_single_sample_has_zero_spread():
    stats = Stats.from_samples([0.5])
    assert (stats.n, stats.std, stats.cv, stats.p95) == (1, 0.0, 0.0, 0.5)


def test_empty_samples_are_an_error():
    with pytest.raises(ValueError):
        summarize([])


def test_relative_noise():
    assert relative_noise([1.0]) == math.inf
    assert relative_noise([2.0, 2.0, 2.0]) == 0.0
