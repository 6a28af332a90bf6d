"""Change points on synthetic series: steps found where they are, noise and outliers never flagged."""

from __future__ import annotations

import random

import pytest

from apex_core.history.changepoints import change_points


def noisy(level: float, n: int, rng: random.Random, sigma: float = 0.02) -> list[float]:
    return [level * (1.0 + rng.gauss(0.0, sigma)) for _ in range(n)]


def test_a_clean_step_is_found_at_its_index() -> None:
    rng = random.Random(1)
    series = noisy(1.0, 20, rng) + noisy(1.2, 20, rng)
    (change,) = change_points(series)
    assert change.index == 20
    assert change.before == pytest.approx(1.0, rel=0.02)
    assert change.after == pytest.approx(1.2, rel=0.02)
    assert change.relative_change == pytest.approx(0.2, abs=0.03)


def test_a_step_down_is_found_too() -> None:
    rng = random.Random(2)
    (change,) = change_points(noisy(2.0, 8, rng) + noisy(1.5, 8, rng))
    assert change.index == 8
    assert change.relative_change < -0.2


@pytest.mark.parametrize("seed", range(20))
def test_a_flat_noisy_series_has_none(seed: int) -> None:
    rng = random.Random(seed)
    assert change_points(noisy(1.0, 100, rng, sigma=0.05)) == ()


def test_single_outlier_runs_are_not_change_points() -> None:
    rng = random.Random(3)
    series = noisy(1.0, 30, rng)
    series[5], series[17], series[29] = 3.0, 2.5, 4.0  # one unlucky run here and there, one at the end
    assert change_points(series) == ()


def test_a_step_smaller_than_the_minimum_is_not_reported() -> None:
    series = [1.0] * 10 + [1.03] * 10  # noiseless, so only the relative threshold can refuse it
    assert change_points(series) == ()
    assert [c.index for c in change_points(series, min_relative_step=0.02)] == [10]


def test_a_pulse_gives_two_change_points() -> None:
    rng = random.Random(4)
    series = noisy(1.0, 10, rng, 0.01) + noisy(1.2, 10, rng, 0.01) + noisy(1.0, 10, rng, 0.01)
    changes = change_points(series)
    assert [c.index for c in changes] == [10, 20]
    assert changes[0].after == changes[1].before


def test_a_step_must_hold_for_min_segment_runs() -> None:
    series = [1.0] * 10 + [1.5] * 2
    assert change_points(series) == ()  # two slow runs: the gate's business, not a trend yet
    assert [c.index for c in change_points(series + [1.5])] == [10]


def test_short_series_and_bad_parameters() -> None:
    assert change_points([]) == ()
    assert change_points([1.0, 2.0, 3.0, 4.0, 5.0]) == ()
    with pytest.raises(ValueError, match="min_segment"):
        change_points([1.0] * 10, min_segment=0)


def test_many_steps_in_a_long_series() -> None:
    rng = random.Random(5)
    series = [v for level in range(6) for v in noisy(1.0 + 0.1 * level, 40, rng, 0.01)]
    assert [c.index for c in change_points(series)] == [40, 80, 120, 160, 200]
