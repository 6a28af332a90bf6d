"""Behaviour of the sampler's stop rule and options; no assertions on measured speed."""

import pytest

from apex_core.timing import StopRule, TimingOptions, measure_cpu


def test_options_validate():
    with pytest.raises(ValueError, match="iters"):
        TimingOptions(min_iters=0)
    with pytest.raises(ValueError):
        TimingOptions(min_time_s=2.0, max_time_s=1.0)
    with pytest.raises(ValueError):
        TimingOptions(cache="lukewarm")


def test_stop_rule_waits_for_min_iters_and_min_time():
    rule = StopRule(TimingOptions(min_iters=5, min_time_s=1.0, max_time_s=10.0))
    assert rule.reason([1.0] * 4, 2.0) is None  # too few samples
    assert rule.reason([1.0] * 10, 0.5) is None  # too little time
    assert rule.reason([1.0] * 10, 1.5) == "noise"  # zero noise once both minimums are met


def test_stop_rule_caps_time_and_samples():
    opts = TimingOptions(min_iters=1, min_time_s=0.0, max_time_s=1.0, max_samples=20)
    assert StopRule(opts).reason([1.0, 3.0], 1.0) == "time_cap"
    assert StopRule(opts).reason([1.0, 3.0] * 10, 0.1) == "sample_cap"


def test_stop_rule_detects_converged_noise():
    rule = StopRule(TimingOptions(min_iters=2, min_time_s=0.0, max_time_s=100.0))
    samples = [1.0, 2.0] * 5  # constant 33 % noise: never under target, but stable
    reasons = []
    for _ in range(40):
        samples = samples + [1.0, 2.0] * 50
        reasons.append(rule.reason(samples, 1.0))
    assert "converged" in reasons


def test_measure_cpu_returns_samples_and_stats():
    calls = []
    timing = measure_cpu(lambda: calls.append(1), TimingOptions(warmup=3, min_iters=7,
                                                                min_time_s=0.0, max_time_s=1.0))
    assert timing.method == "cpu_perf_counter"
    assert timing.stats.n == len(timing.samples_ms) >= 7
    assert len(calls) == 3 + timing.stats.n
    assert all(s >= 0 for s in timing.samples_ms)
