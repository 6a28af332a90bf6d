"""No process of a run outlives it: workers, their helpers and multiprocessing's resource tracker."""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.apex_core.isolation_helpers import (
    FAST,
    commands_with,
    kill_leftovers,
    load,
    processes_with,
    signal_run,
    start_cli,
    wait_for,
    wait_until_gone,
)
from tests.conftest import run_cli

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("sig", "code", "status"), [
    (signal.SIGINT, 130, "interrupted"),
    (signal.SIGTERM, 143, "interrupted"),
    (signal.SIGKILL, -signal.SIGKILL, "running"),
])
def test_a_signal_to_the_run_during_a_hanging_cell_leaves_no_process(tmp_path, plugin_on_path,
                                                                     sig, code, status):
    out = tmp_path / "r.json"
    marker = f"APEX_TEST_ORPHANS_{os.getpid()}_{int(sig)}"
    process = start_cli(["--device", "cpu", "--workloads", "test-scale", "--backends",
                         "test-working,test-spawns-helper", "--timeout", "120", *FAST,
                         "--output-json", str(out), "--output-md", str(tmp_path / "r.md")],
                        tmp_path, {marker: "1"})
    try:
        wait_for(lambda: out.exists() and len(json.loads(out.read_text())["benchmarks"]) >= 1, 120,
                 "the first cell")
        # the hanging cell has started its helper (beside the worker and the resource tracker)
        wait_for(lambda: "sleep 1000" in commands_with(marker), 60, "the helper's start")
        signal_run(process, sig)
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == code, stderr
        assert "Traceback" not in stderr
        assert load(out)["status"] == status
        assert wait_until_gone(marker) == []
    finally:
        kill_leftovers(process, marker)


def test_helpers_of_timed_out_and_crashed_cells_are_gone_when_the_run_ends(tmp_path, plugin_on_path):
    marker = f"APEX_TEST_HELPERS_{os.getpid()}"
    try:
        result = run_cli(["--device", "cpu", "--workloads", "test-scale", "--backends",
                          "test-spawns-helper,test-spawns-helper-crash,test-working", "--timeout", "3",
                          *FAST, "--output-json", "r.json", "--output-md", "r.md"],
                         cwd=tmp_path, env={marker: "1"}, timeout=120)
        assert result.returncode == 1, result.stderr + result.stdout
        statuses = {b["backend"]: b["status"] for b in load(tmp_path / "r.json")["benchmarks"]}
        assert statuses == {"test-spawns-helper": "timeout", "test-spawns-helper-crash": "crashed",
                            "test-working": "ok"}
        assert wait_until_gone(marker, 5) == []
    finally:
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)
