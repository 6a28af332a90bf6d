"""Probes run in the worker under a timeout: one that segfaults or hangs costs only its backend."""

from __future__ import annotations

import time

import pytest

from apex_core.running.probing import (
    ERROR,
    OK,
    TIMEOUT,
    UNAVAILABLE,
    ProbeRequest,
    ProbeResult,
    Probes,
    inline_prober,
)
from tests.apex_core.fakes import Eager
from tests.apex_core.isolation_helpers import FAST, load
from tests.conftest import run_cli

PROBE_FAULTS = {"APEX_TESTPLUGIN_PROBE_FAULTS": "1"}


def test_each_backend_is_probed_once_per_device():
    asked: list[ProbeRequest] = []

    def prober(request):
        asked.append(request)
        return ProbeResult(OK)

    class CpuOnly(Eager):
        name = "cpu-only"
        devices = frozenset({"cpu"})

    probes = Probes({"eager": Eager(), "cpu-only": CpuOnly()}, prober, lambda name: {"opt": name})
    for _ in range(3):
        assert probes.result("eager", "cpu").status == OK
        assert probes.result("cpu-only", "cuda").status == UNAVAILABLE
    assert asked == [ProbeRequest("eager", "cpu", {"opt": "eager"})]  # cuda never reaches cpu-only's probe
    assert "runs on cpu, not cuda" in probes.result("cpu-only", "cuda").reason


@pytest.mark.slow
def test_a_probe_that_segfaults_or_hangs_is_one_row_per_cell_and_the_run_goes_on(tmp_path, plugin_on_path):
    result = run_cli(["--device", "cpu", "--workloads", "test-scale", "--dtype", "fp32,fp16",
                      "--backends", "test-probe-segfault,test-probe-hangs,test-working",
                      "--probe-timeout", "3", "--timeout", "60", *FAST,
                      "--output-json", "r.json", "--output-md", "r.md"],
                     cwd=tmp_path, env=PROBE_FAULTS, timeout=120)
    assert result.returncode == 1, result.stderr + result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    record = load(tmp_path / "r.json")
    assert record["status"] == "complete"
    rows = {(b["backend"], b["dtype"]): b for b in record["benchmarks"]}
    for dtype in ("fp32", "fp16"):
        segfault, hangs = rows[("test-probe-segfault", dtype)], rows[("test-probe-hangs", dtype)]
        assert segfault["status"] == "error"
        assert "probe() crashed the worker: worker killed by signal SIGSEGV" in segfault["reason"]
        assert "in probe (apex_testplugin/backends.py:" in segfault["reason"]
        assert hangs["status"] == "timeout"
        assert hangs["reason"].startswith("probe() ran past the 3 s probe timeout in probe")
        assert rows[("test-working", dtype)]["status"] == "ok"
    log = (tmp_path / "r.log").read_text()
    # one probe per backend and device, whatever the number of cells; its stacks in the log
    assert log.count("probe of test-probe-hangs on cpu") == 1
    assert log.count("probe of test-probe-segfault on cpu") == 1
    assert "Fatal Python error: Segmentation fault" in log


@pytest.mark.slow
def test_list_finishes_within_the_probe_timeout_when_probes_crash_or_hang(tmp_path, plugin_on_path):
    started = time.monotonic()
    result = run_cli(["--list", "--device", "cpu", "--probe-timeout", "4"], cwd=tmp_path,
                     env=PROBE_FAULTS, timeout=120)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip()
            for line in result.stdout.splitlines() if line.count("│") > 3 and line.split("│")[1].strip()}
    assert rows["test-probe-hangs"] == TIMEOUT
    assert rows["test-probe-segfault"] == ERROR
    assert rows["test-working"] == "ok" and rows["torch-reference"] == "ok"
    # one timeout, plus the starts of three workers (the first, and one after each failure)
    assert elapsed < 4 + 60, elapsed


def test_an_inline_probe_that_hangs_is_a_timeout_naming_where_it_hangs():
    class Hangs(Eager):
        name = "hangs"

        def probe(self, device):
            time.sleep(60)

    started = time.monotonic()
    result = Probes({"hangs": Hangs()}, inline_prober({"hangs": Hangs()}, 0.5)).result("hangs", "cpu")
    assert time.monotonic() - started < 10
    assert result.status == TIMEOUT
    assert result.reason.startswith("probe() ran past the 0.5 s probe timeout in probe "
                                    "(running/test_isolation_probes.py:")
    assert "test_isolation_probes.py" in result.log  # the hung thread's stack, for the log


@pytest.mark.slow
def test_an_inline_list_shows_a_hanging_probe_as_timed_out(tmp_path, plugin_on_path):
    started = time.monotonic()
    result = run_cli(["--list", "--inline", "--device", "cpu", "--probe-timeout", "3"], cwd=tmp_path,
                     env={"APEX_TESTPLUGIN_PROBE_FAULTS": "hangs"}, timeout=120)
    assert result.returncode == 0, result.stderr
    rows = {line.split("│")[1].strip(): line.split("│")[2:4]
            for line in result.stdout.splitlines() if line.count("│") > 3 and line.split("│")[1].strip()}
    assert rows["test-probe-hangs"][0].strip() == TIMEOUT
    assert "probe() ran past the 3 s probe" in rows["test-probe-hangs"][1]
    assert rows["test-working"][0].strip() == "ok"
    assert time.monotonic() - started < 60
