"""End-to-end runs of the CLI on the smoke profile, with the third-party test plugins."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.apex_core.isolation_helpers import load
from tests.conftest import run_cli

FAST = ["--min-time", "0.02", "--max-time", "0.2", "--warmup", "2"]
pytestmark = pytest.mark.slow


def statuses(record):
    return {b["backend"]: b["status"] for b in record["benchmarks"]}


def test_misbehaving_plugins_land_as_rows_and_the_run_goes_on(tmp_path, plugin_on_path):
    backends = "test-crash,test-hang,test-broken,test-unavailable,test-raises,test-wrong,test-working"
    result = run_cli(["--device", "cpu", "--workloads", "test-scale", "--backends", backends,
                      "--timeout", "15", *FAST, "--output-json", "r.json", "--output-md", "r.md"],
                     cwd=tmp_path)
    assert result.returncode == 1, result.stderr + result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    record = load(tmp_path / "r.json")
    assert record["status"] == "complete"
    assert statuses(record) == {
        "test-crash": "crashed",
        "test-hang": "timeout",
        "test-broken": "error",
        "test-unavailable": "skipped",
        "test-raises": "error",
        "test-wrong": "incorrect",
        "test-working": "ok",
    }
    reasons = {b["backend"]: b["reason"] for b in record["benchmarks"]}
    assert "SIGSEGV" in reasons["test-crash"]
    assert "15 s timeout" in reasons["test-hang"]
    assert "apex_testplugin_missing_dependency" in reasons["test-broken"]
    assert reasons["test-unavailable"] == "libfoo.so not found (set EXAMPLE_HOME)".replace(
        "libfoo.so", "libexample.so")
    assert reasons["test-raises"].startswith("ValueError during prepare: kernel launch failed")
    # The traceback is in the log file, not on the terminal.
    assert "Traceback" in (tmp_path / "r.log").read_text()
    assert any(p["name"] == "test-broken" for p in record["plugins"])
    markdown = (tmp_path / "r.md").read_text()
    assert "| test-scale | default | fp32 |" in markdown and "crashed [" in markdown


def test_list_shows_broken_and_unavailable_plugins(tmp_path, plugin_on_path):
    result = run_cli(["--list", "--device", "cpu"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    flat = " ".join(result.stdout.split())
    for fragment in ("test-broken", "error", "test-unavailable", "unavailable", "test-scale",
                     "torch-reference", "tilessm-scan"):
        assert fragment in flat


def test_sigkill_leaves_a_valid_partial_report(tmp_path, plugin_on_path):
    out = tmp_path / "r.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "apex_core.cli.main", "--device", "cpu", "--workloads", "test-scale",
         "--backends", "test-working", "--dtype", "fp32,fp16,bf16", "--min-time", "1.5",
         "--max-time", "1.5", "--output-json", str(out), "--output-md", str(tmp_path / "r.md")],
        # A millisecond per call makes each cell sample for its full 1.5 s: without it the
        # cells end at the sample cap within 0.1 s of each other and the kill can miss them.
        cwd=tmp_path, env={**os.environ, "APEX_TESTPLUGIN_DELAY_S": "0.001"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if out.exists() and len(json.loads(out.read_text())["benchmarks"]) >= 1:
                break
            time.sleep(0.1)
        else:
            pytest.fail("no cell finished in time")
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    record = load(out)
    assert record["status"] == "running"
    assert 1 <= len(record["benchmarks"]) < 3
    assert record["benchmarks"][0]["status"] == "ok"


def test_smoke_profile_reference_and_compile_all_ok(tmp_path):
    """The issue's bar: every workload x case ok and correct on the smoke profile."""
    result = run_cli(["--device", "cpu", "--profile", "smoke", "--backends",
                      "torch-reference,torch-compile", *FAST, "--output-json", "r.json",
                      "--output-md", "r.md"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr + result.stdout
    record = load(tmp_path / "r.json")
    cells = record["benchmarks"]
    assert len(cells) == 2 * 10  # 10 workload cases x 2 backends
    assert {b["status"] for b in cells} == {"ok"}, [b["reason"] for b in cells]
    assert all(a["passed"] for b in cells for a in b["accuracy"])
    assert all(len(b["accuracy"]) == 2 for b in cells)
    markdown = (tmp_path / "r.md").read_text()
    assert markdown.count("| tileunpack |") == 3


def test_bare_run_skips_what_cannot_run_here(tmp_path):
    """A bare run (here: smoke, one workload) shows GPU-only backends as skipped with reasons."""
    result = run_cli(["--profile", "smoke", "--workloads", "tilepack", "--backends", "all",
                      *FAST], cwd=tmp_path, env={"TRITON_INTERPRET": "0"})
    assert result.returncode == 0, result.stderr + result.stdout
    record = load(tmp_path / "artifacts" / "apex-bench.json")
    by = {b["backend"]: b for b in record["benchmarks"]}
    assert by["torch-reference"]["status"] == "ok"
    assert by["triton"]["status"] == "skipped" and "TRITON_INTERPRET=1" in by["triton"]["reason"]
    assert by["tensorrt-engine"]["status"] == "skipped"
    assert "tensorrt" in by["tensorrt-engine"]["reason"]


def _processes_with(marker):
    """Pids of live processes whose environment carries ``marker`` (the run's own and its children)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if marker.encode() in handle.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_a_hanging_cell_leaves_an_interrupted_report_and_no_process(
        tmp_path, plugin_on_path, sig, code):
    out = tmp_path / "r.json"
    marker = f"APEX_TEST_RUN_{os.getpid()}_{sig}"
    process = subprocess.Popen(
        [sys.executable, "-m", "apex_core.cli.main", "--device", "cpu", "--workloads", "test-scale",
         "--backends", "test-working,test-hang", "--min-time", "0", "--max-time", "0.2", "--timeout", "120",
         "--output-json", str(out), "--output-md", str(tmp_path / "r.md")],
        cwd=tmp_path, env={**os.environ, marker: "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the working cell is in; the hanging one has started
            if out.exists() and len(json.loads(out.read_text())["benchmarks"]) >= 1:
                break
            time.sleep(0.1)
        else:
            pytest.fail("no cell finished in time")
        time.sleep(1.0)
        process.send_signal(sig)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr
    assert load(out)["status"] == "interrupted"
    deadline = time.monotonic() + 10
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_with(marker) == []
