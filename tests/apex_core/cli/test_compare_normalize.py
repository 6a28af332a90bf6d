"""``apex-bench compare`` across cards of one model: the normalized column, the notes, --no-normalize."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apex_core.cli.main import main
from apex_core.history import HistoryStore
from tests.apex_core.baseline.conftest import write
from tests.apex_core.baseline.gpu_reports import fingerprint, gpu_report, two_cells

FAST = fingerprint("GPU-fast", copy_gbps=3000.0, clock_mhz=1800.0)
SLOW = fingerprint("GPU-slow", copy_gbps=2880.0, clock_mhz=1728.0)


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    """A baseline from three runs on the fast card (3 % effect), a run of that build on the slower card."""
    runs = [write(tmp_path / f"base-{i}.json", gpu_report(two_cells(seed=10 * i), FAST)) for i in range(3)]
    assert main(["baseline", "emit", "--from", *map(str, runs), "--output", str(tmp_path / "base.json"),
                 "--min-effect", "0.03"]) == 0
    current = write(tmp_path / "current.json", gpu_report(two_cells(3000.0 / 2880.0, seed=100), SLOW))
    return {"baseline": tmp_path / "base.json", "current": current, "history": tmp_path / "history.sqlite"}


@pytest.fixture(autouse=True)
def _history(files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APEX_BENCH_HISTORY", str(files["history"]))  # where compare judges the card


def _compare(files: dict[str, Path], *extra: str) -> int:
    return main(["compare", "--baseline", str(files["baseline"]), "--current", str(files["current"]), *extra])


def test_the_baseline_names_its_card(files: dict[str, Path]) -> None:
    stored = json.loads(files["baseline"].read_text())["fingerprint"]
    assert (stored["gpu"], stored["uuid"], stored["copy_gbps"]) == ("NVIDIA H100 80GB HBM3", "GPU-fast", 3000.0)


def test_compare_scales_to_the_current_card_and_says_how(files: dict[str, Path],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    summary = files["baseline"].with_name("summary.json")
    assert _compare(files, "--summary", str(summary)) == 0
    out = capsys.readouterr().out
    assert "normalized" in out.splitlines()[0] and "x1.042 bandwidth" in out and "x1.042 compute" in out
    assert ("note: normalized across cards: the baseline's times, measured on GPU-fast (copy bandwidth "
            "3000 GB/s, SM clock 1800 MHz), scaled to GPU-slow (copy bandwidth 2880 GB/s, SM clock "
            "1728 MHz)") in out
    assert "note: card: GPU-slow: not enough runs of this model to judge (no history at" in out
    record = json.loads(summary.read_text())
    assert record["normalization"]["current_card"]["uuid"] == "GPU-slow"
    assert record["checks"][0]["normalization"]["factor"] == pytest.approx(3000 / 2880)


def test_no_normalize_compares_as_measured(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert _compare(files, "--no-normalize") == 1
    out = capsys.readouterr().out
    assert "normalized" not in out.splitlines()[0]
    assert "note: not normalized (--no-normalize)" in out and "apex-bench compare: FAIL" in out


def test_the_current_card_is_judged_in_the_history(files: dict[str, Path],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with HistoryStore.open(files["history"]) as store:
        for uuid in ("GPU-1", "GPU-2", "GPU-3"):
            store.record(gpu_report(two_cells(), fingerprint(uuid, copy_gbps=3000.0, clock_mhz=1800.0)))
    assert _compare(files) == 0
    assert ("note: card: GPU-slow is an outlier of the NVIDIA H100 80GB HBM3: copy bandwidth 2880 GB/s is 4.0% "
            "below the median 3000 of 3 other cards") in capsys.readouterr().out


def test_an_old_baseline_says_it_has_no_card(files: dict[str, Path],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    record = json.loads(files["baseline"].read_text())
    del record["fingerprint"]
    write(files["baseline"], record)
    assert _compare(files, "--quiet") == 1  # the slower card's 4 % fails a 3 % rule, as before
    assert capsys.readouterr().out.startswith("apex-bench compare: FAIL")
    assert _compare(files) == 1
    assert "note: baseline has no fingerprint: not normalized" in capsys.readouterr().out


def test_a_run_on_another_kind_of_machine_is_judged_by_its_timer_floor_too(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    def floored(cells: list, floor_ms: float) -> list:
        for cell in cells:
            cell["timer_floor_ms"] = floor_ms
        return cells

    with HistoryStore.open(files["history"]) as store:
        for uuid, floor in (("GPU-1", 0.0029), ("GPU-2", 0.0030), ("GPU-3", 0.0031)):
            card = fingerprint(uuid, copy_gbps=2880.0, clock_mhz=1728.0)  # the current card's figures
            store.record(gpu_report(floored(two_cells(), floor), card))
    write(files["current"], gpu_report(floored(two_cells(3000.0 / 2880.0, seed=100), 0.0044), SLOW))
    _compare(files)
    assert ("note: card: GPU-slow is an outlier of the NVIDIA H100 80GB HBM3: timer floor 4.4 us is more than "
            "25% off the median 3 us of 3 other cards: another kind of machine") in capsys.readouterr().out
