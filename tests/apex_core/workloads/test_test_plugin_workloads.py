"""Every workload of the test plugin runs under the current Workload API on the CPU.

The GPU measurements (scripts/gpu_suite.sh, docs/baselines.md) use ``test-spin`` and
``test-spin-pair``; an API change that breaks them shows here, not first on a GPU.
"""

import json

from tests.conftest import run_cli

FAST = ["--warmup", "1", "--iters", "3", "--min-time", "0", "--max-time", "0.05"]
WORKLOADS = ["test-spin", "test-spin-pair", "test-scale", "test-affine"]


def test_every_test_plugin_workload_runs_ok_on_the_reference(tmp_path, plugin_on_path):
    result = run_cli(["--workloads", ",".join(WORKLOADS), "--backends", "torch-reference", "--device", "cpu",
                      "--dtype", "fp32", *FAST, "--inline", "--no-history", "--output-json", "r.json",
                      "--output-md", "r.md", "--quiet"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr + result.stdout
    cells = json.loads((tmp_path / "r.json").read_text())["benchmarks"]
    assert {c["workload"] for c in cells} == set(WORKLOADS)
    assert [(c["workload"], c["case"], c["reason"]) for c in cells if c["status"] != "ok"] == []
