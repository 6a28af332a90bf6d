"""How busy the machine was while a cell sampled (apex_core/measure/host_load.py)."""

from __future__ import annotations

import subprocess
import sys
import time

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


def test_own_work_is_not_counted_as_other_load() -> None:
    window = host_load.Window()
    end = time.monotonic() + 0.5
    while time.monotonic() < end:  # this process keeps a core busy
        pass
    load = window.close()
    assert load is not None
    own_share = 1.0
    # whatever else ran, this process's own core is not in the figure
    busy = load["other_busy_cores"]
    assert busy <= (load["cores"] or 1) - own_share + 0.05


def test_contended_reads_the_figure_against_the_machines_size() -> None:
    assert host_load.contended({"other_busy_cores": 0.5, "cores": 2})
    assert not host_load.contended({"other_busy_cores": 0.49, "cores": 2})
    # a core of sixteen busy elsewhere is not contention; four are
    assert not host_load.contended({"other_busy_cores": 1.1, "cores": 16})
    assert host_load.contended({"other_busy_cores": 4.0, "cores": 16})
    assert not host_load.contended(None)
