"""A run whose timer floor differs from the baseline's by more than a quarter is another kind of
machine: the compare says so, and a failing cell near the floor names it (compare.floor_note)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apex_core.baseline import compare, emit_baseline, load_baseline, write_baseline
from apex_core.baseline.artifacts import render_markdown
from apex_core.baseline.io import load_report
from tests.apex_core.baseline.conftest import write
from tests.apex_core.baseline.gpu_reports import fingerprint, gpu_cell, gpu_report

CARD = fingerprint("GPU-a")
SHORT, LONG = "tilepack/default/triton/fp16/p50_ms", "ff-infer/default/triton/fp16/p50_ms"


@pytest.fixture(autouse=True)
def _reports_in(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def _run(name: str, floor_ms: float, short_ms: float = 0.0030, long_ms: float = 0.060, seed: int = 0):
    """A short cell (within twice the floor) and a long one, both timed over ``floor_ms``."""
    cells = [gpu_cell("tilepack", short_ms, 1e6, seed=seed, floor_ms=floor_ms),
             gpu_cell("ff-infer", long_ms, 1e6, seed=seed + 1, floor_ms=floor_ms)]
    return load_report(write(Path(f"{name}.json"), gpu_report(cells, CARD)))


@pytest.fixture()
def baseline():
    return emit_baseline([_run(f"base-{i}", floor) for i, floor in enumerate((0.00296, 0.00292, 0.00300))])


def test_the_baseline_keeps_each_cells_median_floor_and_an_old_one_has_none(tmp_path, baseline) -> None:
    assert baseline.metrics[SHORT].timer_floor_ms == pytest.approx(0.00296)
    write_baseline(tmp_path / "b.json", baseline)
    assert load_baseline(tmp_path / "b.json").metrics[SHORT].timer_floor_ms == pytest.approx(0.00296)
    record = json.loads((tmp_path / "b.json").read_text())
    for metric in record["metrics"].values():
        del metric["timer_floor_ms"]
    (tmp_path / "old.json").write_text(json.dumps(record))
    old = load_baseline(tmp_path / "old.json")
    assert old.metrics[SHORT].timer_floor_ms is None
    summary = compare(old, "old.json", _run("other", 0.0044, short_ms=0.0039))
    assert not any("timer floor" in d for d in summary.environment_differences)
    assert "not comparable" not in next(c for c in summary.checks if c.metric == SHORT).reason


def test_another_kind_of_machine_is_named_and_its_short_cells_failures_explained(baseline) -> None:
    # the two-GPU H200 machine of 2026-11-29: floors 4.3-4.6 us against 2.9-3.0, tilepack +30 %
    summary = compare(baseline, "base.json", _run("other", 0.0044, short_ms=0.0039, long_ms=0.078))
    assert summary.status == "fail"
    (difference,) = [d for d in summary.environment_differences if d.startswith("timer floor")]
    assert "baseline 2.96 us, current 4.4 us (medians over 2 cells)" in difference
    failed = {c.metric: c.reason for c in summary.failed_checks}
    assert "the timer's floor was 4.4 us here and 2.96 us in the baseline's runs" in failed[SHORT]
    # a cell far above the floor is judged as ever: its failure says nothing of the floor
    assert "floor" not in failed[LONG]
    assert "environment differs: timer floor" in render_markdown(summary)


def test_the_same_kind_of_machine_says_nothing_of_the_floor(baseline) -> None:
    summary = compare(baseline, "base.json", _run("same", 0.00320, short_ms=0.0039))
    assert summary.status == "fail"  # a real 30 % slowdown is still one
    assert not any("timer floor" in d for d in summary.environment_differences)
    assert "floor" not in next(c for c in summary.failed_checks if c.metric == SHORT).reason


@pytest.mark.parametrize(("floor_ms", "named"), [
    (0.00296 * 1.20, False), (0.00296 / 1.20, False),  # within a quarter, either way
    (0.00296 * 1.30, True), (0.00296 / 1.30, True),  # a quarter and more: a higher or a lower floor
    (0.0, False),  # no floor subtracted (a CPU-like cell): nothing to compare
])
def test_a_floor_is_another_machines_beyond_a_quarter_either_way(baseline, floor_ms, named) -> None:
    summary = compare(baseline, "base.json", _run("other", floor_ms, short_ms=0.0039))
    assert any(d.startswith("timer floor") for d in summary.environment_differences) is named
    short = next(c for c in summary.failed_checks if c.metric == SHORT)
    assert ("not comparable between the two machines" in short.reason) is named


def test_a_confirmed_gate_names_the_floor_of_the_runs_it_judged(baseline) -> None:
    runs = [_run(f"confirm-{i}", 0.0044, short_ms=0.0039, seed=10 * i) for i in range(3)]
    summary = compare(baseline, "base.json", runs, combine="median")
    named = "timer floor: baseline 2.96 us, current 4.4 us"
    assert any(d.startswith(named) for d in summary.environment_differences)
    short = next(c for c in summary.failed_checks if c.metric == SHORT)
    assert "the timer's floor was 4.4 us here" in short.reason
