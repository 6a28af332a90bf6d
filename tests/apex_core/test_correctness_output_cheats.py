"""Output cheats, run as a user would (the CLI, the test plugin's cheat backends, the CPU):
every cell ``incorrect`` with the problem named; every built-in cell stays ``ok``."""

from __future__ import annotations

import pytest

from tests.apex_core.isolation_helpers import FAST, load
from tests.conftest import run_cli

CHEATS = {
    "cheat-zeros": "all zeros where the reference is not",
    "cheat-nan": "NaN/Inf value(s) where the reference is finite",
    "cheat-constant": "one constant value",
    "cheat-precision": "precision downgrade",
}


def _cells(tmp_path, *args):
    result = run_cli(["--device", "cpu", "--profile", "smoke", "--dtype", "fp32", "--no-history", *FAST,
                      "--output-json", "r.json", "--output-md", "r.md", *args], cwd=tmp_path, timeout=600)
    assert "Traceback" not in result.stderr, result.stderr
    return result, load(tmp_path / "r.json")["benchmarks"]


@pytest.mark.slow
def test_every_output_cheat_is_incorrect_on_every_workload_with_its_problem_named(tmp_path, plugin_on_path):
    workloads = "test-loose-check,test-scale,ff-infer,fusiongate,tile-stage1,tilepack,tilessm-scan,tileunpack"
    result, cells = _cells(tmp_path, "--workloads", workloads, "--backends", ",".join(CHEATS))
    assert result.returncode == 1, result.stderr
    assert len(cells) == 4 * 12  # 12 cases: the loose one, test-scale and the built-in 10
    for cell in cells:
        loose_precision = cell["backend"] == "cheat-precision" and cell["workload"] == "test-loose-check"
        if loose_precision:  # within a tolerance of 100 half precision is an honest answer
            assert cell["status"] == "ok"
            continue
        assert cell["status"] == "incorrect", cell
        assert CHEATS[cell["backend"]] in cell["reason"], cell["reason"]


@pytest.mark.slow
def test_a_loose_tolerance_lets_an_honest_backend_pass(tmp_path, plugin_on_path):
    result, cells = _cells(tmp_path, "--workloads", "test-loose-check", "--backends", "test-working")
    assert result.returncode == 0, result.stderr
    assert [c["status"] for c in cells] == ["ok"]


@pytest.mark.slow
def test_every_built_in_backend_on_every_built_in_workload_stays_ok(tmp_path):
    """The honest side: the checks flag no built-in cell (TRITON_INTERPRET=1 runs triton)."""
    result, cells = _cells(tmp_path, "--backends", "all")
    assert result.returncode == 0, result.stderr + result.stdout
    ran = [c for c in cells if c["status"] != "skipped"]
    assert {c["status"] for c in ran} == {"ok"}, [(c["name"], c["reason"]) for c in ran if c["status"] != "ok"]
    backends = {c["backend"] for c in ran}
    assert {"torch-reference", "torch-compile"} <= backends  # the others run where installed
    assert all(a["passed"] for c in ran for a in c["accuracy"])
