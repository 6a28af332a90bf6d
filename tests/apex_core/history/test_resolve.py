"""``resolve``: latest, run ids, tags and commit prefixes, and what it says when nothing matches."""

from __future__ import annotations

from pathlib import Path

import pytest

from apex_core.history import HistoryError, HistoryStore
from tests.apex_core.history.conftest import commit_of, make_report, ok_cell


def ids(runs: tuple) -> list[int]:
    return [r.run_id for r in runs]


def test_latest_run_id_tag_and_commit(ten_runs: Path) -> None:
    with HistoryStore.open(ten_runs) as store:
        assert ids(store.resolve("latest")) == [10]
        assert ids(store.resolve("4")) == [4]
        assert ids(store.resolve("nightly")) == [9, 7, 5, 3, 1]
        assert ids(store.resolve("v1.0")) == [4]
        assert ids(store.resolve(commit_of(5)[:7])) == [6]
        assert ids(store.resolve(commit_of(5).upper())) == [6]
        assert ids(store.resolve("0303")) == [3]  # digits with a leading zero: a commit, not run 303


def test_latest_within_an_environment(ten_runs: Path) -> None:
    with HistoryStore.open(ten_runs) as store:
        environment = store.run(10).summary.environment_id
        other = store.record(make_report([ok_cell("tilepack", "torch-reference", 0.2)], profile="fixed"))
        assert ids(store.resolve("latest")) == [other]
        assert ids(store.resolve("latest", environment_key=environment)) == [10]
        other_environment = store.run(other).summary.environment_id
        with pytest.raises(HistoryError, match=f"'nightly' names no run, tag or commit in environment "
                                               f"{other_environment}"):
            store.resolve("nightly", environment_key=store.run(other).summary.environment_key)
        assert ids(store.resolve("4", environment_key=other_environment)) == [4]  # a run id is never narrowed


def test_nothing_matching_lists_the_nearest_tags_and_commits(ten_runs: Path) -> None:
    with HistoryStore.open(ten_runs) as store, pytest.raises(HistoryError) as caught:
        store.resolve("nightli")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{ten_runs}: 'nightli' names no run, tag or commit")
    assert "nearest tags: nightly" in message
    assert commit_of(9)[:12] in message  # the newest commits when none looks alike


def test_a_near_commit_is_suggested(ten_runs: Path) -> None:
    with HistoryStore.open(ten_runs) as store, pytest.raises(HistoryError) as caught:
        store.resolve("0707070f")
    assert f"nearest commits: {commit_of(6)[:12]}" in str(caught.value)


def test_an_ambiguous_commit_prefix_is_refused(history_path: Path) -> None:
    with HistoryStore.open(history_path) as store:
        for commit in ("abcd1111" + "0" * 32, "abcd2222" + "0" * 32):
            store.record(make_report([ok_cell("tilepack", "torch-reference", 0.2)], commit=commit))
        with pytest.raises(HistoryError, match="'abcd' is ambiguous: it matches abcd22220000, abcd11110000"):
            store.resolve("abcd")
        assert ids(store.resolve("abcd1")) == [1]


def test_an_empty_history_and_an_empty_spec(history_path: Path) -> None:
    with HistoryStore.open(history_path) as store:
        with pytest.raises(HistoryError, match="holds no runs"):
            store.resolve("latest")
        with pytest.raises(HistoryError, match="empty name"):
            store.resolve("  ")
        with pytest.raises(HistoryError, match="no runs yet.*nearest tags: \\(none\\)"):
            store.resolve("v2")
