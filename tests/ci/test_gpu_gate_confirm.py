"""scripts/gpu_gate_confirm.sh: a failed GPU gate measured again twice, judged by the median run.

No GPU: a stand-in ``apex-bench`` first on PATH answers the two runs with prepared reports (a
CUDA-like ~10 us cell) and hands ``compare`` to the real command line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from apex_core.baseline.emit import emit_baseline
from apex_core.baseline.io import write_baseline
from tests.apex_core.baseline.test_gate_rule import gpu_report
from tests.conftest import ROOT, run_cli

CONFIRM = ROOT / "scripts" / "gpu_gate_confirm.sh"
STAND_IN = """#!/usr/bin/env bash
# compare goes to the real command line; a run copies the next prepared report to --output-json
if [ "$1" = compare ]; then exec "{python}" -m apex_core.cli.main "$@"; fi
echo "$*" >> "$FAKE_DIR/runs.txt"
while [ $# -gt 0 ]; do [ "$1" = --output-json ] && out=$2; shift; done
n=$(wc -l < "$FAKE_DIR/runs.txt")
cp "$FAKE_DIR/run$n.json" "$out"
"""

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="a bash script")


@pytest.fixture()
def gate(tmp_path: Path):
    """A baseline at 10 us, and a function running the confirmation after a gated run at
    ``first`` with the two runs after it at ``then`` (ms); returns its exit code and summary."""
    work = tmp_path / "work"
    work.mkdir()
    base = [gpu_report(work, f"base-{i}.json", 0.010 * (1 + d), seed=i, spread=0.002)
            for i, d in enumerate((0.0, 0.005, -0.005))]
    write_baseline(tmp_path / "b.json", emit_baseline(base))
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "apex-bench").write_text(STAND_IN.format(python=sys.executable))
    (fake / "apex-bench").chmod(0o755)

    def run(first: float, then: tuple[float, float]) -> tuple[int, dict, str]:
        out = tmp_path / "out"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        (fake / "runs.txt").unlink(missing_ok=True)
        gpu_report(work, "first.json", first, seed=10, spread=0.002)
        shutil.copy(work / "first.json", out / "apex-bench.json")
        for n, median in enumerate(then, start=1):
            gpu_report(work, f"then-{n}.json", median, seed=20 + n, spread=0.002)
            shutil.copy(work / f"then-{n}.json", fake / f"run{n}.json")
        gated = run_cli(["compare", "--baseline", str(tmp_path / "b.json"), "--current", "apex-bench.json",
                         "--summary", "compare-summary.json", "--quiet"], cwd=out)
        assert gated.returncode == 1, "the first run must fail the gate"
        env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "FAKE_DIR": str(fake)}
        done = subprocess.run(["bash", str(CONFIRM), str(out), str(tmp_path / "b.json")], capture_output=True,
                              text=True, env=env, timeout=300)
        runs = (fake / "runs.txt").read_text() if (fake / "runs.txt").exists() else ""
        return done.returncode, json.loads((out / "compare-summary.json").read_text()), runs

    return run


def test_one_slow_process_is_set_aside_by_the_two_runs_after_it(gate):
    code, summary, runs = gate(0.0108, (0.0100, 0.01005))
    assert code == 0 and summary["status"] == "pass"
    # only the failing cell, measured again on the device at the fixed profile
    assert runs.count("--workloads spin:10us --backends test-working") == 2 and "--device cuda" in runs
    assert len(summary["current"]) == 3


def test_a_slowdown_that_holds_in_two_of_three_runs_fails(gate):
    code, summary, _ = gate(0.0108, (0.01075, 0.0100))
    assert code == 1 and summary["status"] == "fail"


def test_a_suspect_cell_is_final_and_nothing_is_measured_again(tmp_path):
    from tests.apex_core.baseline.conftest import cell, report, write

    suspect = cell("spin", "10us", "test-working", "fp16", status="suspect", reason="a clock replaced")
    out = tmp_path / "out"
    out.mkdir()
    record = report([suspect], device="cuda", gpu="NVIDIA H100 80GB HBM3", dtypes=("fp16",))
    write(out / "apex-bench.json", record)
    (out / "compare-summary.json").write_text(json.dumps({"checks": [
        {"metric": "spin/10us/test-working/fp16/p50_ms", "status": "fail"}]}))
    done = subprocess.run(["bash", str(CONFIRM), str(out), str(tmp_path / "b.json")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1 and "failed cells (final): spin/10us/test-working" in done.stderr
    assert not list(out.glob("confirm*.json"))
