"""How busy the machine was while a cell sampled (apex_core/measure/host_load.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from apex_core.measure import host_load


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/stat")
def test_a_process_spinning_beside_the_window_counts_as_other_load() -> None:
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # past its start-up
        window = host_load.Window()
        time.sleep(1.0)  # this process sleeps: what the machine did meanwhile was someone else's
        load = window.close()
    finally:
        spinner.kill()
        spinner.wait()
    assert load is not None and load["cores"] >= 1
    # a spinning process takes a whole core unless the machine is oversubscribed
    assert load["other_busy_cores"] >= host_load.CONTENDED_CORES


def test_own_work_is_not_counted_as_other_load(monkeypatch: pytest.MonkeyPatch) -> None:
    # 1.5 CPU-seconds of the machine's over 1 s of wall, 0.9 of them this process's own: the
    # others kept 0.6 cores busy. Faked clocks, since on a real machine this process's share
    # depends on what else runs (CI's other test processes)
    busy = iter([10.0, 11.5])
    clocks = SimpleNamespace(process_time=iter([2.0, 2.9]).__next__, monotonic=iter([100.0, 101.0]).__next__)
    monkeypatch.setattr(host_load, "_busy_seconds", lambda: next(busy))
    monkeypatch.setattr(host_load, "time", clocks)
    load = host_load.Window().close()
    assert load is not None
    assert load["other_busy_cores"] == pytest.approx(0.6)


def test_contended_reads_the_figure_against_the_machines_size() -> None:
    assert host_load.contended({"other_busy_cores": 0.5, "cores": 2})
    assert not host_load.contended({"other_busy_cores": 0.49, "cores": 2})
    # a core of sixteen busy elsewhere is not contention; four are
    assert not host_load.contended({"other_busy_cores": 1.1, "cores": 16})
    assert host_load.contended({"other_busy_cores": 4.0, "cores": 16})
    assert not host_load.contended(None)
