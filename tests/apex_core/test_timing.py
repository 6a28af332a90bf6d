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


def test_the_time_cap_waits_for_min_iters_while_each_call_is_shorter_than_the_cap():
    rule = StopRule(TimingOptions(min_iters=10, min_time_s=0.0, max_time_s=3.0))
    # 1 s calls: the cap is reached at the fourth sample, yet the cell takes its ten
    assert [rule.reason([1000.0] * n, n * 1.0) for n in (4, 9)] == [None, None]
    assert rule.reason([1000.0] * 10, 10.0) == "time_cap"


def test_a_call_longer_than_the_cap_stops_after_one_sample():
    # a 10 s call with --iters 10 does not run 100 s
    rule = StopRule(TimingOptions(min_iters=10, min_time_s=0.0, max_time_s=3.0))
    assert rule.reason([10_000.0], 10.0) == "time_cap"


def test_calls_whose_wall_time_the_timer_does_not_see_stop_at_iters_times_the_cap():
    # each call reads 1 ms to its timer but takes 10 s of wall time (host-bound)
    rule = StopRule(TimingOptions(min_iters=10, min_time_s=0.0, max_time_s=3.0))
    assert rule.reason([1.0] * 2, 20.0) is None
    assert rule.reason([1.0] * 3, 30.0) == "time_cap"


def test_a_batch_checked_sample_by_sample_is_not_cut_at_its_first_sample():
    # timers check the rule per sample after a batch: the elapsed time covers the whole batch
    rule = StopRule(TimingOptions(min_iters=10, min_time_s=0.0, max_time_s=3.0))
    batch = [500.0] * 10  # ten 0.5 s calls queued at once, 5 s in all
    reasons = [rule.reason(batch[:n], 5.0) for n in range(1, 11)]
    assert reasons == [None] * 9 + ["time_cap"]


def test_the_cpu_timer_takes_iters_samples_of_calls_longer_than_the_time_cap_allows():
    import time

    options = TimingOptions(warmup=0, min_iters=5, min_time_s=0.0, max_time_s=0.1)
    timing = measure_cpu(lambda: time.sleep(0.03), options)
    # five 30 ms calls outlast the 100 ms cap; the cell still has its five samples
    assert timing.stats.n == 5 and timing.stop_reason == "time_cap"
    one = measure_cpu(lambda: time.sleep(0.12), options)
    assert one.stats.n == 1 and one.stop_reason == "time_cap"  # one call is longer than the cap
