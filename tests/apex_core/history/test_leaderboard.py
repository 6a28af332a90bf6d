"""The leaderboard: per-group ranks from the median of the latest runs, overall geometric means."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from apex_core.history import HistoryError, HistoryStore
from apex_core.history.leaderboard import build_leaderboard
from tests.apex_core.history.conftest import make_report, ok_cell


def test_groups_and_overall_from_synthetic_times() -> None:
    cells = [(2, "a", "default", "fp32", "fast", 1.0), (2, "a", "default", "fp32", "slow", 2.0),
             (2, "b", "default", "fp32", "fast", 4.0), (2, "b", "default", "fp32", "slow", 2.0),
             (2, "b", "default", "fp32", "alone-elsewhere", 8.0), (2, "c", "default", "fp32", "solo", 1.0),
             (1, "a", "default", "fp32", "fast", 9.0)]  # an older run, beyond last=1
    board = build_leaderboard("env", cells, last=1)
    assert board.runs == 2
    a, b, c = board.groups
    assert [(e.backend, e.p50_ms, e.ratio_to_fastest) for e in a.entries] == [("fast", 1.0, 1.0),
                                                                             ("slow", 2.0, 2.0)]
    assert [e.backend for e in b.entries] == ["slow", "fast", "alone-elsewhere"]
    assert [e.backend for e in c.entries] == ["solo"]
    overall = {o.backend: o for o in board.overall}
    assert overall["fast"].geomean_ratio == pytest.approx(math.sqrt(1.0 * 2.0))
    assert overall["slow"].geomean_ratio == pytest.approx(math.sqrt(2.0 * 1.0))
    assert overall["alone-elsewhere"].geomean_ratio == pytest.approx(4.0)
    assert (overall["fast"].groups, overall["fast"].groups_total) == (2, 2)
    assert "solo" not in overall  # a group with one backend ranks nothing
    assert [o.backend for o in board.overall][-1] == "alone-elsewhere"


def test_median_of_the_last_runs() -> None:
    cells = [(i, "a", "default", "fp32", "x", v) for i, v in zip((5, 4, 3, 2, 1), (1.0, 1.1, 5.0, 9.0, 9.0),
                                                                 strict=True)]
    (group,) = build_leaderboard("env", cells, last=3).groups
    assert group.entries[0].p50_ms == 1.1 and group.entries[0].runs == 3
    with pytest.raises(ValueError, match="last"):
        build_leaderboard("env", cells, last=0)


def test_leaderboard_of_ten_runs(ten_runs: Path) -> None:
    with HistoryStore.open(ten_runs) as store:
        board = store.leaderboard(None)
        assert board.runs == 10 and board.last == 5
        assert [(g.workload, g.case, g.dtype) for g in board.groups] == [("fusiongate", "default", "fp32"),
                                                                         ("tilepack", "default", "fp32")]
        tilepack = board.groups[1]
        assert [e.backend for e in tilepack.entries] == ["torch-compile", "triton", "torch-reference"]
        assert tilepack.entries[0].p50_ms == pytest.approx(0.13, rel=0.02)  # 4 of its last 5 runs were slow
        assert [o.backend for o in board.overall] == ["torch-compile", "triton", "torch-reference"]
        only = store.leaderboard(board.environment_id[:6], workload="fusiongate")
        assert [g.workload for g in only.groups] == ["fusiongate"]
        with pytest.raises(HistoryError, match="no ok cell of workload 'nope' .*it has fusiongate, tilepack"):
            store.leaderboard(None, workload="nope")
        with pytest.raises(HistoryError, match="no run in environment 'ffff'"):
            store.leaderboard("ffff")


def test_one_environment_at_a_time(ten_runs: Path) -> None:
    with HistoryStore.open(ten_runs) as store:
        store.record(make_report([ok_cell("tilepack", "torch-reference", 5.0),
                                  ok_cell("tilepack", "triton", 1.0)], profile="fixed"))
        newest = store.leaderboard(None)  # the newest run's environment
        assert newest.runs == 1
        assert [e.backend for e in newest.groups[0].entries] == ["triton", "torch-reference"]
        first = store.run(1).summary.environment_key
        assert store.leaderboard(first).runs == 10


def test_an_empty_history_has_no_leaderboard(history_path: Path) -> None:
    with HistoryStore.open(history_path) as store, pytest.raises(HistoryError, match="holds no runs"):
        store.leaderboard(None)
