"""A second Ctrl-C (or SIGTERM) while a run shuts down is ignored: exit 130/143, the report valid."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from apex_core.cli.signals import Terminated, handle_stop_signals, keep_ignoring_if_stopping
from tests.apex_core.isolation_helpers import kill_leftovers, load, signal_run, start_cli, wait_for


@pytest.mark.parametrize(("first", "raised"),
                         [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, Terminated)])
def test_the_first_signal_stops_and_later_ones_are_ignored(restored_handlers, capfd, first, raised):
    handle_stop_signals()
    with pytest.raises(raised):
        os.kill(os.getpid(), first)
        time.sleep(1)  # the handler runs at the next bytecode
    for later in (signal.SIGINT, signal.SIGTERM):
        os.kill(os.getpid(), later)  # nothing raised: the shutdown goes on
        time.sleep(0.05)
    assert "apex-bench: already stopping" in capfd.readouterr().err
    keep_ignoring_if_stopping()  # past main(): ignored by the system, not by a Python handler
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN


def test_without_a_stop_the_handlers_stay_as_they_are(restored_handlers):
    handle_stop_signals()
    keep_ignoring_if_stopping()
    assert signal.getsignal(signal.SIGINT) not in (signal.SIG_IGN, signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.parametrize(("first", "code", "gap_s"), [
    (signal.SIGINT, 130, 0.05), (signal.SIGINT, 130, 0.2), (signal.SIGINT, 130, 0.5),
    (signal.SIGTERM, 143, 0.2)])
def test_a_second_signal_during_shutdown_keeps_the_exit_code_and_the_report(
        tmp_path, plugin_on_path, first, code, gap_s):
    out = tmp_path / "r.json"
    marker = f"APEX_TEST_SECOND_SIGNAL_{os.getpid()}"
    process = start_cli(["--device", "cpu", "--workloads", "test-scale", "--backends", "test-working,test-hang",
                         "--min-time", "0", "--max-time", "0.2", "--timeout", "120", "--no-history",
                         "--output-json", str(out), "--output-md", str(tmp_path / "r.md")],
                        tmp_path, {marker: "1"})
    try:
        wait_for(lambda: out.exists() and len(json.loads(out.read_text())["benchmarks"]) >= 1, 120,
                 "the first cell")
        time.sleep(1.0)  # the hanging cell has started
        signal_run(process, first)
        time.sleep(gap_s)
        if process.poll() is None:
            signal_run(process, signal.SIGINT)  # the impatient second Ctrl-C
        _, stderr = process.communicate(timeout=60)
    finally:
        kill_leftovers(process, marker)
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr
    assert load(out)["status"] == "interrupted"
