"""The apex_bench pytest fixture, driven as a user drives it: pytest in a child process on a test file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from apex_core.history.store import HistoryStore
from apex_core.report.schema import validate_report

FAST = ["--apex-bench-min-time", "0.05", "--apex-bench-max-time", "0.2"]

TESTS = '''
import os
import time

import torch


def scale(x):
    return x * 2.0


def wrong(x):
    return x * 2.0 + 0.5


def boom(x):
    raise RuntimeError("kernel exploded")


def nap(x):
    # a planted slowdown: SLOW doubles the time of every call
    time.sleep(0.002 if os.environ.get("SLOW") else 0.001)
    return x + 1.0


def counted(x):
    with open(os.environ["CALLS_FILE"], "a") as calls:
        calls.write("call\\n")
    return x * 2.0


def test_scale(apex_bench):
    x = torch.randn(4096)
    out = apex_bench(scale, x, reference=lambda x: x * 2.0)
    assert torch.equal(out, x * 2.0)


def test_two_functions(apex_bench):
    x = torch.randn(256)
    apex_bench(scale, x, reference=lambda x: x * 2.0)
    apex_bench(torch.mul, x, 2.0, reference=lambda x, y: x * y)


def test_wrong(apex_bench):
    apex_bench(wrong, torch.randn(1024), reference=lambda x: x * 2.0)


def test_boom(apex_bench):
    apex_bench(boom, torch.randn(8))


def test_nap(apex_bench):
    apex_bench(nap, torch.randn(16), reference=lambda x: x + 1.0)


def test_counted(apex_bench):
    apex_bench(counted, torch.randn(16), reference=lambda x: x * 2.0)
'''


def run_pytest(folder: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    (folder / "test_kernels.py").write_text(TESTS, encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=",
                           "test_kernels.py", *args], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, "CALLS_FILE": str(folder / "calls.txt"), **(env or {})},
                          timeout=600)


def outcome(result: subprocess.CompletedProcess[str], test: str) -> str:
    """PASSED or FAILED for one test of a ``-rA`` summary."""
    for line in result.stdout.splitlines():
        if line.startswith(("PASSED", "FAILED")) and f"::{test}" in line:
            return line.split()[0]
    raise AssertionError(f"{test} not in the summary:\n{result.stdout}")


def test_each_call_is_timed_checked_and_written_as_one_cell(tmp_path: Path) -> None:
    result = run_pytest(tmp_path, "-rA", *FAST, "--apex-bench-json", "r.json")
    assert result.returncode == 1, result.stdout + result.stderr
    record = json.loads((tmp_path / "r.json").read_text())
    validate_report(record)
    cells = {(c["workload"], c["backend"], c["case"]): c for c in record["benchmarks"]}
    assert cells[("test_kernels.py::test_scale", "scale", "default")]["status"] == "ok"
    assert cells[("test_kernels.py::test_scale", "scale", "default")]["correctness"] == "passed"
    assert {k[1] for k in cells if k[0] == "test_kernels.py::test_two_functions"} == {"scale", "mul"}
    assert cells[("test_kernels.py::test_wrong", "wrong", "default")]["status"] == "incorrect"
    assert record["suite"] == "pytest" and record["status"] == "complete"
    assert outcome(result, "test_scale") == "PASSED"
    # a wrong function fails its test with the mismatch
    assert outcome(result, "test_wrong") == "FAILED"
    assert "wrong result before-timing: out: 1024/1024 elements off" in result.stdout
    # a function that raises fails its test with its own exception and frames, not the harness's
    assert outcome(result, "test_boom") == "FAILED"
    assert "RuntimeError: kernel exploded" in result.stdout
    assert "session.py" not in result.stdout and "plugin.py" not in result.stdout
    # the terminal's table names each timed call
    assert "test_kernels.py::test_scale" in result.stdout.split("apex-bench")[-1]


def test_under_xdist_the_workers_cells_make_one_report(tmp_path: Path) -> None:
    result = run_pytest(tmp_path, "-n", "2", *FAST, "--apex-bench-json", "r.json", "-k", "scale or two or nap")
    assert result.returncode == 0, result.stdout + result.stderr
    record = json.loads((tmp_path / "r.json").read_text())
    validate_report(record)
    assert sorted(c["workload"].rsplit("::", 1)[1] for c in record["benchmarks"]) == [
        "test_nap", "test_scale", "test_two_functions", "test_two_functions"]


def test_compare_fails_the_test_that_got_slower_with_its_verdict(tmp_path: Path) -> None:
    base = run_pytest(tmp_path, *FAST, "--apex-bench-json", "base.json", "-k", "nap or scale")
    assert base.returncode == 0, base.stdout + base.stderr
    slow = run_pytest(tmp_path, "-rA", *FAST, "--apex-bench-compare", "base.json", "-k", "nap",
                      env={"SLOW": "1"})
    assert outcome(slow, "test_nap") == "FAILED"
    assert "slower than the baseline base.json: test_kernels.py::test_nap/default/nap/fp32/" in slow.stdout
    assert "verdict slower" in slow.stdout


def test_a_baseline_that_cannot_serve_fails_each_test_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "other.json").write_text(json.dumps({"schema_version": 99, "suite": "x"}))
    result = run_pytest(tmp_path, "-rA", *FAST, "--apex-bench-compare", "other.json", "-k", "scale")
    assert result.returncode == 1, result.stdout + result.stderr
    assert outcome(result, "test_scale") == "FAILED"
    assert "--apex-bench-compare: other.json: field environment_key: missing" in result.stdout
    assert "INTERNALERROR" not in result.stdout + result.stderr


def test_disable_calls_once_and_still_checks(tmp_path: Path) -> None:
    result = run_pytest(tmp_path, "-rA", "--apex-bench-disable", "--apex-bench-json", "r.json",
                        "-k", "counted or wrong")
    assert (tmp_path / "calls.txt").read_text().count("call") == 1
    assert outcome(result, "test_counted") == "PASSED"
    assert outcome(result, "test_wrong") == "FAILED"
    assert "wrong result" in result.stdout
    assert json.loads((tmp_path / "r.json").read_text())["benchmarks"] == []


def test_history_records_the_test_run(tmp_path: Path) -> None:
    result = run_pytest(tmp_path, *FAST, "--apex-bench-history", "h.sqlite", "-k", "scale")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "recorded as run 1 in h.sqlite" in result.stdout
    with HistoryStore.open(tmp_path / "h.sqlite", create=False) as history:
        assert len(history.runs()) == 1


@pytest.mark.parametrize("flag", ["--apex-bench-json", "--apex-bench-history"])
def test_an_output_that_cannot_be_written_is_one_usage_line(tmp_path: Path, flag: str) -> None:
    (tmp_path / "folder").mkdir()
    result = run_pytest(tmp_path, flag, "folder", "-k", "scale")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "Traceback" not in result.stderr
    assert "folder" in result.stderr and len(result.stderr.strip().splitlines()) == 1
