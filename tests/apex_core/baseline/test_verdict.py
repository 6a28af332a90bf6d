"""The statistical verdict on synthetic samples, and the exactness of its cheap bootstrap."""

import random
from collections import Counter

import pytest

from apex_core.baseline.verdict import MIN_SAMPLES, bootstrap_percentile, judge, ratio_interval
from apex_core.stats import percentile
from tests.apex_core.baseline.conftest import samples


@pytest.mark.parametrize(("current_ms", "label"), [(1.3, "slower"), (0.7, "faster"), (1.0, "same")])
def test_clear_cases(current_ms, label):
    verdict = judge(samples(1.0, n=400, seed=1), samples(current_ms, n=400, seed=2))
    assert verdict.label == label
    assert verdict.ratio == pytest.approx(current_ms, rel=0.01)
    assert verdict.ci_low <= verdict.ratio <= verdict.ci_high


def test_same_means_the_interval_lies_within_the_margin():
    verdict = judge(samples(1.0, n=400, seed=1), samples(1.0, n=400, seed=2))
    assert 0.98 <= verdict.ci_low <= verdict.ci_high <= 1.02


def test_too_few_samples_is_inconclusive():
    verdict = judge(samples(1.0, n=MIN_SAMPLES - 1), samples(2.0, n=400))
    assert verdict.label == "inconclusive"
    assert "too few samples" in verdict.reason
    assert verdict.ratio == pytest.approx(2.0, rel=0.02)  # the ratio is still shown
    assert verdict.ci_low is None


def test_no_baseline_samples_is_inconclusive():
    verdict = judge([], samples(1.0))
    assert verdict.label == "inconclusive" and "no samples" in verdict.reason


def test_noise_wider_than_the_change_is_inconclusive():
    verdict = judge(samples(1.0, n=30, spread=0.5, seed=3), samples(1.03, n=30, spread=0.5, seed=4))
    assert verdict.label == "inconclusive"
    assert verdict.ci_low < 1.0 < verdict.ci_high


def test_seeded_and_reproducible():
    base, current = samples(1.0, seed=5), samples(1.05, seed=6)
    assert judge(base, current, seed=7) == judge(base, current, seed=7)


def test_tail_percentile_is_judged_on_the_tail():
    base = samples(1.0, n=400, seed=1)
    current = [s * 1.5 if s > 1.015 else s for s in samples(1.0, n=400, seed=2)]  # slower tail only
    assert judge(base, current, 50).label == "same"
    assert judge(base, current, 95).label == "slower"


def _brute_force(values, q, rng):
    return percentile(sorted(rng.choices(values, k=len(values))), q)


@pytest.mark.parametrize("n", [21, 20])
def test_order_statistic_bootstrap_matches_resampling(n):
    """Two Beta draws give the same distribution as resampling n values and sorting them."""
    values = sorted(random.Random(0).uniform(0, 10) for _ in range(n))
    reps = 20000
    fast = [bootstrap_percentile(values, 50, random.Random(i)) for i in range(reps)]
    rng = random.Random(1)
    slow = [_brute_force(values, 50, rng) for _ in range(reps)]
    if n % 2:  # the median is one order statistic: compare the whole discrete distribution
        fast_freq, slow_freq = Counter(fast), Counter(slow)
        total_variation = sum(abs(fast_freq[v] - slow_freq[v]) for v in set(fast) | set(slow)) / 2 / reps
        assert total_variation < 0.03
    for q in (5, 50, 95):
        assert percentile(sorted(fast), q) == pytest.approx(percentile(sorted(slow), q), abs=0.25)


def test_interval_of_identical_samples_is_one():
    values = samples(1.0, n=100)
    low, high = ratio_interval(values, values, 50, resamples=500)
    assert low < 1.0 < high and high - low < 0.02


@pytest.mark.parametrize("baseline", [[0.0] * 50, [2.2250738585072014e-308] * 50],
                         ids=["zeros", "smallest-normal"])
def test_a_baseline_at_or_near_0_ms_is_inconclusive_not_infinite(baseline):
    # GPU samples net of the timer's floor may be 0; a ratio over them has no finite value
    verdict = judge(baseline, samples(1e3, seed=3))
    assert verdict.label == "inconclusive"
    assert verdict.ratio is None and verdict.ci_low is None and verdict.ci_high is None
    assert "too close to 0" in verdict.reason


def test_a_baseline_whose_resampled_median_can_be_0_has_no_interval():
    baseline = [0.0] * 24 + [0.2] * 26  # the median is 0.2, but a resample's median may be 0
    verdict = judge(baseline, samples(0.2, seed=4))
    assert verdict.label == "inconclusive" and "no interval" in verdict.reason
    assert verdict.ratio == pytest.approx(1.0, rel=0.03)
    assert verdict.ci_low is None and verdict.ci_high is None
