"""The cards of the history: their figures, the outlier rule, migrated histories, and --normalize."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from apex_core.baseline.normalize import Card
from apex_core.cli.main import main
from apex_core.history import HistoryStore
from apex_core.history.cards import HistoryCard, scaled_series, standing
from apex_core.history.schema import SCHEMA_VERSION
from tests.apex_core.baseline.gpu_reports import H100, fingerprint, gpu_report, two_cells
from tests.apex_core.history.test_schema import version_of, write_v1_history

COPY = {"GPU-a": 3000.0, "GPU-b": 2990.0, "GPU-c": 3010.0, "GPU-low": 2850.0}  # GPU-low: 5 % under


def h100(uuid: str, copy: float, clock: float = 1800.0) -> Card:
    return Card(model=H100, uuid=uuid, copy_gbps=copy, sm_clock_mhz=clock)


def _card(uuid: str, copy: float, clock: float = 1800.0) -> HistoryCard:
    return HistoryCard(card=h100(uuid, copy, clock), runs=1, last_run_id=1)


@pytest.fixture()
def four_cards(history_path: Path) -> Path:
    """Two runs on each of four H100 cards; the last card streams 5 % slower than the others."""
    with HistoryStore.open(history_path) as store:
        for uuid, copy in COPY.items():
            for run in range(2):
                card = fingerprint(uuid, copy_gbps=copy + run, clock_mhz=1800.0)
                store.record(gpu_report(two_cells(seed=run), card))
    return history_path


def test_each_card_counts_once_with_its_median_figures(four_cards: Path) -> None:
    with HistoryStore.open(four_cards) as store:
        cards = {c.card.uuid: c for c in store.cards(H100)}
        assert set(cards) == set(COPY) and store.cards("NVIDIA H200") == ()
    assert (cards["GPU-a"].runs, cards["GPU-a"].card.copy_gbps, cards["GPU-a"].last_run_id) == (2, 3000.5, 2)


def test_a_card_outside_its_models_spread_is_an_outlier(four_cards: Path) -> None:
    with HistoryStore.open(four_cards) as store:
        cards = store.cards(H100)
    low = next(c.card for c in cards if c.card.uuid == "GPU-low")
    judged = standing(low, cards)
    assert (judged.outlier, judged.peers) == (True, 3)
    assert judged.text.startswith("GPU-low is an outlier of the NVIDIA H100 80GB HBM3: copy bandwidth "
                                  "2850 GB/s is 5.0% below the median 3000 of 3 other cards "
                                  "(they span 2990-3010)")
    usual = standing(next(c.card for c in cards if c.card.uuid == "GPU-a"), cards)
    assert usual.outlier is False and "within its model's usual spread" in usual.text


def test_an_outlier_needs_both_3_percent_from_the_median_and_outside_the_range() -> None:
    wide = [_card("p1", 2900.0), _card("p2", 3000.0), _card("p3", 3100.0)]
    assert standing(h100("x", 2910.0), wide).outlier is False  # 3 % off, within the range
    tight = [_card("p1", 2990.0), _card("p2", 3000.0), _card("p3", 3010.0)]
    assert standing(h100("x", 3025.0), tight).outlier is False  # outside, 0.8 % off
    assert standing(h100("x", 3000.0, clock=1700.0), tight).outlier is True  # the clock, 5.6 % off


def test_with_too_few_cards_it_says_so() -> None:
    judged = standing(h100("x", 2500.0), [_card("p1", 3000.0), _card("p2", 3000.0)])
    assert judged.outlier is None
    assert judged.text == ("x: not enough runs of this model to judge (2 other NVIDIA H100 80GB HBM3 card(s) "
                           "in the history; 3 needed)")


def test_a_migrated_history_gets_its_cards_from_the_stored_reports(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite"
    report = gpu_report(two_cells(), fingerprint("GPU-old", copy_gbps=2950.0, clock_mhz=1750.0))
    for cell in report["benchmarks"]:
        cell.update(tflops=0.5, peak_memory_mb=10.0)
    write_v1_history(path, report)
    with HistoryStore.open(path) as store:
        assert store.run(1).report == report  # readable as it was
        (card,) = store.cards()
        assert (card.card.uuid, card.card.copy_gbps, card.card.sm_clock_mhz) == ("GPU-old", 2950.0, 1750.0)
        (cell,) = store.run(1).cells
        assert (cell.launch_bound, cell.timer_floor_ms) == (False, 0.0034)
        (point,) = store.series("p50", workload=cell.workload)
        assert point.card == card.card and point.timing.timer_floor_ms == 0.0034
    assert version_of(path) == SCHEMA_VERSION == 3


def test_cpu_runs_name_no_card(ten_runs: Path) -> None:
    with HistoryStore.open(ten_runs) as store:
        assert store.cards() == ()
        assert all(p.card is None for p in store.series("p50"))


@pytest.fixture()
def two_card_history(history_path: Path) -> Path:
    """Three runs on a fast card, then three on one whose figures are both 4 % lower (times 4.2 % longer)."""
    with HistoryStore.open(history_path) as store:
        for run in range(3):
            store.record(gpu_report(two_cells(seed=run), fingerprint("GPU-fast", 3000.0, 1800.0)))
        for run in range(3):
            store.record(gpu_report(two_cells(3000.0 / 2880.0, seed=10 + run),
                                    fingerprint("GPU-slow", 2880.0, 1728.0)))
    return history_path


def test_a_series_scaled_to_its_newest_card_is_level(two_card_history: Path) -> None:
    with HistoryStore.open(two_card_history) as store:
        points = store.series("p50", workload="tilepack")
    scaled, scalings = scaled_series(points)
    assert [s.text() for s in scalings] == ["x1.042 bandwidth"] * 3 + ["same card"] * 3
    assert max(p.value for p in scaled) / min(p.value for p in scaled) < 1.01
    assert max(p.value for p in points) / min(p.value for p in points) > 1.03


def test_history_trend_and_leaderboard_normalize(two_card_history: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "trend", "p50", "--workload", "fusiongate", "--normalize",
                 "--history", str(two_card_history)]) == 0
    out = capsys.readouterr().out
    assert ("scaled to the card of run 6, GPU-slow (copy bandwidth 2880 GB/s, SM clock 1728 MHz): "
            "3 by SM clock (x1.042), 3 measured on that card") in out
    assert "x1.042 compute" in out and "normalized" in out
    assert main(["history", "trend", "gbps", "--normalize", "--history", str(two_card_history)]) == 0
    assert "not normalized: --normalize scales times (the *_ms metrics), not gbps" in capsys.readouterr().out
    assert main(["leaderboard", "--normalize", "--history", str(two_card_history)]) == 0
    assert "p50s scaled to the card of run 6, GPU-slow" in capsys.readouterr().out
    assert main(["leaderboard", "--history", str(two_card_history)]) == 0
    assert "scaled" not in capsys.readouterr().out


def test_history_cards_and_show_flag_the_outlier(four_cards: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "cards", "--history", str(four_cards)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["model", "card", "runs", "copy", "GB/s", "SM", "MHz", "floor", "us", "last",
                                "run", "verdict"]
    assert any("GPU-low" in line and line.endswith("OUTLIER") for line in lines)
    assert lines[-1].startswith("  GPU-low is an outlier")
    assert main(["history", "show", "8", "--history", str(four_cards)]) == 0
    out = capsys.readouterr().out
    assert "card NVIDIA H100 80GB HBM3, GPU-low (copy bandwidth 2851 GB/s, SM clock 1800 MHz)" in out
    assert "  GPU-low is an outlier of the NVIDIA H100 80GB HBM3" in out


def _floored(cells: list, floor_ms: float) -> list:
    for cell in cells:
        cell["timer_floor_ms"] = floor_ms
    return cells


def test_a_card_in_another_kind_of_machine_is_an_outlier_by_its_timer_floor(history_path: Path, capsys) -> None:
    # three cards of one-GPU machines (floors 2.9-3.1 us) and one of a two-GPU machine (4.4 us),
    # their copy figures and clocks alike (2026-11-29, H200)
    floors = {"GPU-a": 0.0029, "GPU-b": 0.0030, "GPU-c": 0.0031, "GPU-pair": 0.0044}
    with HistoryStore.open(history_path) as store:
        for uuid, floor in floors.items():
            for run in range(2):
                card = fingerprint(uuid, copy_gbps=3000.0)
                store.record(gpu_report(_floored(two_cells(seed=run), floor), card))
        cards = store.cards(H100)
    by_uuid = {c.card.uuid: c for c in cards}
    assert by_uuid["GPU-pair"].timer_floor_ms == pytest.approx(0.0044)
    pair = standing(by_uuid["GPU-pair"].card, cards, by_uuid["GPU-pair"].timer_floor_ms)
    assert pair.outlier is True
    assert ("timer floor 4.4 us is more than 25% off the median 3 us of 3 other cards: another kind of "
            "machine") in pair.text
    usual = standing(by_uuid["GPU-a"].card, cards, by_uuid["GPU-a"].timer_floor_ms)
    assert usual.outlier is False and "timer floor 2.9 us, -6.5% from the median of 3 other cards" in usual.text
    # without the floor (a report that kept none) the card is judged on its figures alone
    assert standing(by_uuid["GPU-pair"].card, cards).outlier is False
    assert main(["history", "cards", "--history", str(history_path)]) == 0
    printed = capsys.readouterr().out
    assert "floor us" in printed and "4.40" in printed and "another kind of machine" in printed


def test_a_floor_a_quarter_off_but_within_its_models_range_is_usual() -> None:
    floors = (0.0029, 0.0031, 0.0045)
    wide = [attrs.evolve(_card(f"p{i}", 3000.0), timer_floor_ms=f) for i, f in enumerate(floors)]
    assert standing(h100("x", 3000.0), wide, 0.0040).outlier is False  # 29 % off the median, within the range
    assert standing(h100("x", 3000.0), wide, 0.0060).outlier is True
