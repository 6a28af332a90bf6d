"""The rule that scales a time from one card to another of its model, and when it refuses."""

from __future__ import annotations

import pytest

from apex_core.baseline.normalize import (
    BANDWIDTH,
    COMPUTE,
    REFUSED,
    SAME_CARD,
    CellTiming,
    card_of,
    card_of_report,
    pooled_fingerprint,
    scaling,
    tally,
)
from tests.apex_core.baseline.gpu_reports import H200, fingerprint

FAST = card_of(fingerprint("GPU-a", copy_gbps=3000.0, clock_mhz=1800.0))
SLOW = card_of(fingerprint("GPU-b", copy_gbps=2880.0, clock_mhz=1710.0))
STREAMING = CellTiming(p50_ms=1.0, gbps=2400.0, timer_floor_ms=0.0034, timing_method="cuda_event_held")
ARITHMETIC = CellTiming(p50_ms=1.0, gbps=300.0, timer_floor_ms=0.0034, timing_method="cuda_event_held")


def test_a_bandwidth_bound_cell_scales_by_the_copy_bandwidths_ratio() -> None:
    found = scaling(FAST, SLOW, STREAMING)
    assert (found.bound, found.factor) == (BANDWIDTH, pytest.approx(3000 / 2880))
    assert found.scaled and found.text() == "x1.042 bandwidth"
    assert "80% of the copy bandwidth" in found.reason and "3000 -> 2880 GB/s" in found.reason


def test_a_compute_bound_cell_scales_by_the_sm_clocks_ratio() -> None:
    found = scaling(FAST, SLOW, ARITHMETIC)
    assert (found.bound, found.factor) == (COMPUTE, pytest.approx(1800 / 1710))
    # a cell that moves no bytes at all is arithmetic too
    assert scaling(FAST, SLOW, CellTiming(p50_ms=1.0, gbps=0.0)).bound == COMPUTE


def test_cards_within_their_figures_precision_compare_as_measured() -> None:
    # 1.5 % apart in copy bandwidth and 0.8 % in clock: within what one card's own figure moves
    near = card_of(fingerprint("GPU-c", copy_gbps=2955.0, clock_mhz=1785.0))
    for cell, bound in ((STREAMING, BANDWIDTH), (ARITHMETIC, COMPUTE)):
        found = scaling(FAST, near, cell)
        assert (found.bound, found.factor) == (bound, 1.0) and "within the figure's precision" in found.reason
    beyond = card_of(fingerprint("GPU-d", copy_gbps=2925.0, clock_mhz=1800.0))  # 2.6 % slower memory
    assert scaling(FAST, beyond, STREAMING).factor == pytest.approx(3000 / 2925)


def test_the_bound_is_the_reference_cards_half_of_its_copy_bandwidth() -> None:
    at_half = CellTiming(p50_ms=1.0, gbps=1500.0)
    below = CellTiming(p50_ms=1.0, gbps=1499.0)
    assert (scaling(FAST, SLOW, at_half).bound, scaling(FAST, SLOW, below).bound) == (BANDWIDTH, COMPUTE)


def test_the_same_card_needs_no_factor() -> None:
    again = card_of(fingerprint("GPU-a", copy_gbps=2950.0, clock_mhz=1790.0))  # its figures moved a little
    found = scaling(FAST, again, STREAMING)
    assert (found.bound, found.factor, found.text()) == (SAME_CARD, 1.0, "same card")


@pytest.mark.parametrize(("reference", "current", "cell", "label"), [
    (FAST, card_of(fingerprint("GPU-c", gpu=H200)), STREAMING, "different GPU models"),
    (None, SLOW, STREAMING, "no fingerprint"),
    (FAST, None, STREAMING, "no fingerprint"),
    # a launch-bound cell timed without the hold: the host's launch gaps are in its time
    (FAST, SLOW, CellTiming(p50_ms=1.0, gbps=2400.0, launch_bound=True, timing_method="cuda_event"),
     "launch-bound"),
    (FAST, SLOW, CellTiming(p50_ms=0.006, gbps=2400.0, timer_floor_ms=0.0034), "near the timer's floor"),
    (FAST, SLOW, CellTiming(p50_ms=1.0, gbps=None), "no byte count"),
    (FAST, card_of(fingerprint("GPU-c", clock_mhz=None)), ARITHMETIC, "no SM clock"),
    (card_of(fingerprint("GPU-c", copy_gbps=None)), SLOW, STREAMING, "no copy bandwidth"),
    (FAST, card_of(fingerprint("GPU-c", copy_gbps=2000.0)), STREAMING, "copy bandwidth too far apart"),
    (FAST, card_of(fingerprint("GPU-c", clock_mhz=1400.0)), ARITHMETIC, "SM clock too far apart"),
])
def test_refusals_keep_the_time_as_measured_and_say_why(reference, current, cell, label) -> None:
    found = scaling(reference, current, cell)
    assert (found.bound, found.factor, found.label) == (REFUSED, 1.0, label)
    assert found.text() == f"no: {label}"


def test_a_launch_bound_cell_timed_with_the_hold_still_scales() -> None:
    held = CellTiming(p50_ms=1.0, gbps=2400.0, launch_bound=True, timing_method="cuda_event_held")
    assert scaling(FAST, SLOW, held).bound == BANDWIDTH


def test_a_fingerprint_that_does_not_name_its_model_is_none() -> None:
    assert card_of({"copy_gbps": 2866.0, "sm_clock_under_load_mhz": None}) is None  # rebuilt from old facts
    assert card_of(None) is None and card_of(fingerprint(gpu="")) is None
    bad = card_of(fingerprint(uuid="", copy_gbps=-1.0, clock_mhz=float("nan")))
    assert bad is not None and (bad.uuid, bad.copy_gbps, bad.sm_clock_mhz) == (None, None, None)
    assert card_of_report({"environment": {"device_facts": {"identity": ["not", "an", "object"]}}}) is None


def test_a_baseline_of_several_runs_keeps_their_median_figures() -> None:
    runs = [fingerprint("GPU-a", 3000.0, 1800.0), fingerprint("GPU-a", 2990.0, 1790.0),
            fingerprint("GPU-a", 3010.0, None)]
    pooled = pooled_fingerprint(runs)
    assert (pooled["uuid"], pooled["copy_gbps"], pooled["sm_clock_under_load_mhz"]) == ("GPU-a", 3000.0, 1795.0)
    mixed = pooled_fingerprint([fingerprint("GPU-a"), None, fingerprint("GPU-b", 2900.0)])
    assert (mixed["uuid"], mixed["copy_gbps"]) == (None, 2950.0)  # several cards: no one UUID
    assert pooled_fingerprint([None, {"copy_gbps": 1.0}]) is None


def test_the_tally_says_what_scaled_what() -> None:
    found = [scaling(FAST, SLOW, STREAMING), scaling(FAST, SLOW, ARITHMETIC),
             scaling(FAST, SLOW, CellTiming(p50_ms=1.0, gbps=None))]
    assert tally(found) == ("1 by copy bandwidth (x1.042), 1 by SM clock (x1.053), "
                            "1 kept as measured (no byte count)")
