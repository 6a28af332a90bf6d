"""The gate across cards of one model: a slower card passes after normalization, a slower build still fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apex_core.baseline import compare, emit_baseline, load_baseline, write_baseline
from apex_core.baseline.artifacts import render_markdown, summary_record
from apex_core.baseline.io import load_report
from apex_core.baseline.normalize import BANDWIDTH, COMPUTE, REFUSED
from apex_core.baseline.promote import promote
from apex_core.cli.baseline_command import main as baseline_main
from tests.apex_core.baseline.conftest import cell, report, samples, write
from tests.apex_core.baseline.gpu_reports import fingerprint, gpu_cell, gpu_report, two_cells

FAST_CARD = fingerprint("GPU-fast", copy_gbps=3000.0, clock_mhz=1800.0)
SLOW_CARD = fingerprint("GPU-slow", copy_gbps=2880.0, clock_mhz=1728.0)  # both figures 4 % lower
CARD_SLOWDOWN = 3000.0 / 2880.0  # = 1800 / 1728: what the slower card costs every cell


@pytest.fixture(autouse=True)
def _reports_in(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # each report is a file of this test's folder (a baseline names its source)


def _loaded(record, name):
    return load_report(write(Path(f"{name}.json"), record))


@pytest.fixture()
def fast_baseline():
    """Three runs on the fast card, gating at a 3 % effect (the slower card's 4 % would fail it)."""
    runs = [_loaded(gpu_report(two_cells(seed=10 * i), FAST_CARD), f"base-{i}") for i in range(3)]
    return emit_baseline(runs, min_effect=0.03)


def _on_slow_card(slower_build: float = 1.0, seed: int = 100):
    return _loaded(gpu_report(two_cells(CARD_SLOWDOWN * slower_build, seed=seed), SLOW_CARD), "current")


def test_a_run_on_a_4_percent_slower_card_fails_as_measured_and_passes_normalized(fast_baseline) -> None:
    current = _on_slow_card()
    as_measured = compare(fast_baseline, "base.json", current, normalize=False)
    assert as_measured.status == "fail"
    normalized = compare(fast_baseline, "base.json", current)
    assert normalized.status == "pass", [c.reason for c in normalized.failed_checks]
    bounds = {c.metric.split("/")[0]: c.scaling.bound for c in normalized.checks}
    assert bounds == {"tilepack": BANDWIDTH, "fusiongate": COMPUTE}
    p50 = next(c for c in normalized.checks if c.metric.endswith("tilepack/default/triton/fp16/p50_ms"))
    assert p50.baseline_ms == pytest.approx(fast_baseline.metrics[p50.metric].value_ms * CARD_SLOWDOWN)
    assert normalized.normalization.applied
    assert "GPU-fast (copy bandwidth 3000 GB/s, SM clock 1800 MHz)" in normalized.normalization.summary
    assert "2 by copy bandwidth (x1.042), 2 by SM clock (x1.042)" in normalized.normalization.summary


def test_a_planted_10_percent_slowdown_still_fails_after_normalization(fast_baseline) -> None:
    summary = compare(fast_baseline, "base.json", _on_slow_card(slower_build=1.10))
    assert summary.status == "fail"
    failed = {c.metric for c in summary.failed_checks}
    assert {"tilepack/default/triton/fp16/p50_ms", "fusiongate/default/triton/fp16/p50_ms"} <= failed


def test_the_same_card_compares_as_measured(fast_baseline) -> None:
    summary = compare(fast_baseline, "base.json", _loaded(gpu_report(two_cells(seed=7), FAST_CARD), "again"))
    assert summary.status == "pass" and all(c.scaling is None for c in summary.checks)
    assert summary.normalization.summary == "both runs measured on GPU-fast: nothing to normalize"


def test_a_refused_cell_keeps_the_baselines_value(tmp_path) -> None:
    cells = [gpu_cell("tilepack", 1.0, None)]  # no byte count: its bound is unknown
    baseline = emit_baseline(_loaded(gpu_report(cells, FAST_CARD), "base"))
    current = _loaded(gpu_report([gpu_cell("tilepack", 1.0, None, seed=3)], SLOW_CARD), "current")
    summary = compare(baseline, "base.json", current)
    check = summary.checks[0]
    assert (check.scaling.bound, check.baseline_ms) == (REFUSED, baseline.metrics[check.metric].value_ms)
    assert not summary.normalization.applied
    assert "kept as measured (no byte count)" in summary.normalization.summary


def test_the_baseline_file_keeps_its_card_and_an_old_one_compares_as_before(tmp_path, fast_baseline) -> None:
    write_baseline(tmp_path / "base.json", fast_baseline)
    assert load_baseline(tmp_path / "base.json").fingerprint["uuid"] == "GPU-fast"
    # a baseline emitted from a report without fingerprint: no field, and the gate as it was
    old = emit_baseline([_loaded(gpu_report(two_cells(seed=10 * i), None), f"old-{i}") for i in range(3)],
                        min_effect=0.03)
    write_baseline(tmp_path / "old.json", old)
    assert "fingerprint" not in json.loads((tmp_path / "old.json").read_text())
    old = load_baseline(tmp_path / "old.json")
    with_card = compare(old, "old.json", _on_slow_card())
    without_card = compare(old, "old.json", _loaded(gpu_report(two_cells(CARD_SLOWDOWN, seed=100), None), "c"))
    assert [(c.status, c.baseline_ms) for c in with_card.checks] == \
        [(c.status, c.baseline_ms) for c in without_card.checks]
    assert with_card.normalization.summary.startswith("baseline has no fingerprint: not normalized")
    assert without_card.normalization is None


def test_no_normalize_compares_as_measured_and_says_so(fast_baseline) -> None:
    summary = compare(fast_baseline, "base.json", _on_slow_card(), normalize=False)
    assert summary.normalization.summary == "not normalized (--no-normalize)"
    assert all(c.scaling is None for c in summary.checks)


def test_cpu_comparisons_say_nothing_new() -> None:
    record = report([cell("tilepack", values=samples(0.2, seed=1))])
    summary = compare(emit_baseline(_loaded(record, "base")), "base.json", _loaded(record, "current"))
    assert summary.normalization is None and summary.checks[0].scaling is None
    assert "normalization" not in summary_record(summary)
    assert "normalization" not in summary_record(summary)["checks"][0]
    assert "normalized" not in render_markdown(summary)


def test_the_artifacts_say_which_cards_figures_scaled_what(fast_baseline) -> None:
    summary = compare(fast_baseline, "base.json", _on_slow_card())
    record = summary_record(summary)
    assert record["normalization"]["applied"] and record["normalization"]["baseline_card"]["uuid"] == "GPU-fast"
    assert record["checks"][0]["normalization"]["bound"] in (BANDWIDTH, COMPUTE)
    markdown = render_markdown(summary)
    assert "- normalized across cards: the baseline's times, measured on GPU-fast" in markdown
    assert "| verdict | normalized |" in markdown and "x1.042 bandwidth |" in markdown


def test_promotion_onto_a_slower_card_reads_the_same_build_as_unchanged(fast_baseline) -> None:
    runs = [_loaded(gpu_report(two_cells(CARD_SLOWDOWN, seed=200 + i), SLOW_CARD), f"new-{i}")
            for i in range(3)]
    _, changes = promote(fast_baseline, "base.json", runs)
    p50 = {c.metric.split("/")[0]: c for c in changes if c.metric.endswith("/p50_ms")}
    for change in p50.values():
        # measured 4 % slower on the slower card; scaled, the same build reads within noise
        assert change.old_scale == pytest.approx(CARD_SLOWDOWN)
        assert change.new_ms / change.old_ms - 1 == pytest.approx(CARD_SLOWDOWN - 1, abs=0.01)
        assert abs(change.change) < 0.01 and change.verdict.label != "slower"
    same_card = [_loaded(gpu_report(two_cells(seed=300 + i), FAST_CARD), f"same-{i}") for i in range(3)]
    _, changes = promote(fast_baseline, "base.json", same_card)
    assert all(c.old_scale == 1.0 for c in changes)


def test_the_promote_command_says_which_old_times_it_scaled(fast_baseline, capsys) -> None:
    write_baseline(Path("base.json"), fast_baseline)
    for i in range(3):
        _loaded(gpu_report(two_cells(CARD_SLOWDOWN, seed=400 + i), SLOW_CARD), f"new-{i}")
    assert baseline_main(["promote", "--baseline", "base.json", "--runs", "new-0.json", "new-1.json",
                          "new-2.json", "--dry-run"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "p50_ms" in line]
    scaled = "(the old time x1.042, scaled to the new runs' card)"
    assert len(lines) == 2 and all(scaled in line for line in lines)


def test_a_baseline_from_one_card_says_runs_from_several_hold_better(capsys) -> None:
    for i in range(3):
        _loaded(gpu_report(two_cells(seed=500 + i), FAST_CARD), f"one-{i}")
    _loaded(gpu_report(two_cells(seed=510), SLOW_CARD), "other")
    one_card = ["one-0.json", "one-1.json", "one-2.json"]
    assert baseline_main(["emit", "--from", *one_card, "--output", "one.json"]) == 0
    assert "note: 3 runs, all on one card (GPU-fast); a gate on other machines holds better" in \
        capsys.readouterr().out
    # runs from two cards: the baseline keeps no card, and there is nothing to say
    assert baseline_main(["emit", "--from", "one-0.json", "other.json", "--output", "two.json"]) == 0
    assert "note:" not in capsys.readouterr().out
    # promote says it too: the runs that replace a baseline came from one card
    assert baseline_main(["promote", "--baseline", "two.json", "--runs", *one_card,
                          "--output", "promoted.json"]) == 0
    assert "note: 3 runs, all on one card (GPU-fast)" in capsys.readouterr().out
