"""Recording runs and reading them back: rows, tags, git state, environments and filters."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from apex_core.errors import UsageError
from apex_core.history import HistoryError, HistoryStore, environment_identity
from apex_core.history.schema import SCHEMA_VERSION
from tests.apex_core.history.conftest import make_report, ok_cell, skipped_cell


def test_record_and_read_back_one_run(history_path: Path) -> None:
    report = make_report([ok_cell("tilepack", "torch-reference", 0.25, energy_j=0.003),
                          skipped_cell("tilepack", "triton")], commit="c" * 40)
    with HistoryStore.open(history_path) as store:
        run_id = store.record(report, tags=["nightly", "v1", "nightly"], branch="main")
        stored = store.run(run_id)
    assert run_id == 1
    assert stored.report == report
    s = stored.summary
    assert (s.commit, s.branch, s.dirty, s.tags) == ("c" * 40, "main", False, ("nightly", "v1"))
    assert (s.cells_total, s.cells_ok, s.device, s.hardware, s.suite) == (2, 1, "cpu", "Test CPU", "apex-bench")
    key, key_id = environment_identity(report)
    assert s.environment_id == key_id and dict(s.environment_key) == key
    ok, skipped = stored.cells
    stats = report["benchmarks"][0]["stats"]
    assert (ok.p50_ms, ok.p95_ms, ok.min_ms, ok.p99_ms) == (stats["p50_ms"], stats["p95_ms"], stats["min_ms"],
                                                            stats["p99_ms"])
    assert ok.energy_j_per_call == 0.003 and ok.units == "tiles"
    assert ok.units_per_s == report["benchmarks"][0]["tiles_per_s"]
    assert ok.gbps == report["benchmarks"][0]["gbps"] and ok.peak_memory_mb == 1.5
    assert (skipped.status, skipped.reason, skipped.p50_ms) == ("skipped", "no CUDA device", None)


def test_the_file_is_versioned_and_in_wal_mode(history_path: Path) -> None:
    HistoryStore.open(history_path).close()
    conn = sqlite3.connect(history_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_commit_comes_from_the_report_unless_given(history_path: Path) -> None:
    with HistoryStore.open(history_path) as store:
        first = store.record(make_report([ok_cell("tilepack", "torch-reference", 0.2)], commit="d" * 40))
        second = store.record(make_report([ok_cell("tilepack", "torch-reference", 0.2)], commit=None),
                              commit="e" * 40, branch="feature/x")
        third = store.record(make_report([ok_cell("tilepack", "torch-reference", 0.2)], commit=None))
        assert store.run(first).summary.commit == "d" * 40
        assert (store.run(second).summary.commit, store.run(second).summary.branch) == ("e" * 40, "feature/x")
        assert store.run(third).summary.commit is None


def test_runs_are_filtered_and_newest_first(ten_runs: Path) -> None:
    with HistoryStore.open(ten_runs) as store:
        assert [r.run_id for r in store.runs()] == list(range(10, 0, -1))
        assert [r.run_id for r in store.runs(limit=3)] == [10, 9, 8]
        assert [r.run_id for r in store.runs(tag="nightly")] == [9, 7, 5, 3, 1]
        assert [r.run_id for r in store.runs(tag="v1.0")] == [4]
        assert [r.run_id for r in store.runs(commit="0505")] == [5]
        environment = store.run(1).summary.environment_id
        assert len(store.runs(environment_key=environment)) == 10
        assert len(store.runs(environment_key=environment[:4])) == 10
        assert len(store.runs(environment_key=store.run(1).summary.environment_key)) == 10
        assert store.runs(environment_key="ffffffffffff") == ()
        with pytest.raises(ValueError, match="lacks timing_methods"):
            store.runs(environment_key=make_report([])["config"])  # not an environment key at all
        assert store.tags() == ("nightly", "v1.0")


def test_a_different_profile_is_a_different_environment(history_path: Path) -> None:
    with HistoryStore.open(history_path) as store:
        smoke = store.record(make_report([ok_cell("tilepack", "torch-reference", 0.2)]))
        fixed = store.record(make_report([ok_cell("tilepack", "torch-reference", 0.2)], profile="fixed"))
        again = store.record(make_report([ok_cell("tilepack", "torch-compile", 0.1)]))
        ids = [store.run(r).summary.environment_id for r in (smoke, fixed, again)]
    assert ids[0] != ids[1] and ids[0] == ids[2]


@pytest.mark.parametrize("tag", ["", "42", "latest", "has space", "-dash", "x" * 101, "a\nb"])
def test_bad_tags_are_usage_errors_and_record_nothing(history_path: Path, tag: str) -> None:
    with HistoryStore.open(history_path) as store:
        with pytest.raises(UsageError, match="tag"):
            store.record(make_report([ok_cell("tilepack", "torch-reference", 0.2)]), tags=[tag])
        assert store.runs() == ()


def test_a_malformed_report_is_refused_naming_the_field(history_path: Path) -> None:
    report = make_report([ok_cell("tilepack", "torch-reference", 0.2)])
    del report["benchmarks"][0]["backend"]
    with HistoryStore.open(history_path) as store:
        with pytest.raises(HistoryError, match=r"benchmarks\[0\]"):
            store.record(report)
        with pytest.raises(HistoryError, match="'suite'"):
            store.record({"benchmarks": []})
        assert store.runs() == ()


def test_reading_a_missing_history_does_not_create_it(tmp_path: Path) -> None:
    missing = tmp_path / "none" / "history.sqlite"
    with pytest.raises(HistoryError, match="no history file here") as caught:
        HistoryStore.open(missing, create=False)
    assert str(missing) in str(caught.value)
    assert not missing.parent.exists()


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="is a directory"):
        HistoryStore.open(tmp_path)


def test_recording_creates_the_folder(tmp_path: Path) -> None:
    path = tmp_path / "artifacts" / "history.sqlite"
    with HistoryStore.open(path) as store:
        store.record(make_report([ok_cell("tilepack", "torch-reference", 0.2)]))
    assert path.is_file()


def test_an_unknown_run_id_names_the_newest(ten_runs: Path) -> None:
    unknown = pytest.raises(HistoryError, match="no run 11 .*newest run id is 10")
    with HistoryStore.open(ten_runs) as store, unknown:
        store.run(11)


def test_series_in_run_order_with_filters_and_limit(ten_runs: Path) -> None:
    with HistoryStore.open(ten_runs) as store:
        points = store.series("p50", workload="tilepack", backend="torch-compile")
        assert [p.run_id for p in points] == list(range(1, 11))
        assert points[0].value == pytest.approx(0.10, rel=0.02)
        assert points[-1].value == pytest.approx(0.13, rel=0.02)
        assert len({p.cell_key for p in store.series("p50_ms", workload="tilepack")}) == 3
        last_three = store.series("gbps", workload="tilepack", backend="triton", limit=3)
        assert [p.run_id for p in last_three] == [8, 9, 10]
        assert store.series("energy", workload="tilepack") == ()  # no cell measured energy
        assert store.series("p50", backend="triton", workload="fusiongate") == ()  # skipped cells have no value
        with pytest.raises(UsageError, match="unknown metric 'p5'.*did you mean"):
            store.series("p5")


def test_reports_of_real_cpu_runs(history_path: Path) -> None:
    """Two real smoke runs (inline, one cell each): the history reads what the report writer writes."""
    import apex_core
    from apex_core.report.records import report_record

    with HistoryStore.open(history_path) as store:
        ids = []
        for _ in range(2):
            report = report_record(apex_core.run(workloads=["tilepack:default"], backends=["torch-reference"],
                                                 device="cpu", profile="smoke", isolation="inline"))
            ids.append(store.record(report, tags=["smoke"]))
        first = store.run(ids[0])
        cell = first.cells[0]
        stats = first.report["benchmarks"][0]["stats"]
        assert (cell.status, cell.p50_ms, cell.units) == ("ok", stats["p50_ms"], "tiles")
        assert cell.units_per_s is not None and cell.units_per_s > 0
        assert store.run(ids[1]).summary.environment_id == first.summary.environment_id
        board = store.leaderboard(first.summary.environment_key)
        assert [e.backend for e in board.groups[0].entries] == ["torch-reference"]
        assert board.groups[0].entries[0].runs == 2
        assert [p.run_id for p in store.series("p50", backend="torch-reference")] == ids
