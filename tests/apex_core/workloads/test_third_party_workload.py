"""A third-party workload declared only in the installed test plugin (tests/plugins: ``test-affine``),
with its own profiles and ONNX export recipe, runs under ``--profile smoke``, the ``onnxruntime``
backend, ``export-onnx`` and ``sweep``, exactly as a built-in does.
"""

import json

import pytest

from tests.apex_core.isolation_helpers import load
from tests.conftest import run_cli

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

FAST = ["--warmup", "1", "--iters", "3", "--min-time", "0", "--max-time", "0.05"]


@pytest.mark.slow
def test_a_plugin_workload_with_its_own_profiles_and_export_runs_everywhere(tmp_path, plugin_on_path):
    result = run_cli(["--workloads", "test-affine,test-scale", "--backends", "torch-reference,onnxruntime",
                      "--profile", "smoke", "--device", "cpu", "--dtype", "fp32", *FAST,
                      "--output-json", "r.json", "--output-md", "r.md", "--quiet"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr + result.stdout
    record = load(tmp_path / "r.json")
    cells = {(b["workload"], b["backend"]): b for b in record["benchmarks"]}
    affine = cells[("test-affine", "onnxruntime")]
    # its own smoke profile, not the suite's sizes (it has no channels to set to 8)
    assert affine["params"] == {"rows": 6, "cols": 5}
    assert affine["status"] == "ok" and affine["correctness"] == "passed"
    assert affine["units"] == "samples" and affine["samples_per_s"] > 0
    assert affine["bytes_moved"] == (2 * 30 + 2 * 5) * 4  # fp32: 4 bytes per element
    assert cells[("test-affine", "torch-reference")]["status"] == "ok"
    # a workload without a smoke profile runs with its own defaults, and the report says so
    scale = cells[("test-scale", "torch-reference")]
    assert scale["status"] == "ok" and scale["params"] == {"channels": 16, "height": 32, "width": 32}
    assert record["config"]["profile_fallbacks"] == ["test-scale"]
    assert "test-scale: no smoke profile, ran with its defaults" in (tmp_path / "r.md").read_text()
    skipped = cells[("test-scale", "onnxruntime")]
    assert skipped["status"] == "skipped" and "does not define export_recipe()" in skipped["reason"]

    result = run_cli(["export-onnx", "--workloads", "test-affine", "--profile", "smoke", "--output-dir", "exp"],
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr + result.stdout
    manifest = json.loads((tmp_path / "exp" / "manifest.json").read_text())
    (model,) = manifest["models"]
    assert model["inputs"][0]["dynamic_axes"] == {"0": "rows"} and model["params"] == {"rows": 6, "cols": 5}

    result = run_cli(["sweep", "--engine", f"exp/{model['file']}", "--shape-case", "r6:x=6x5",
                      "--shape-case", "r64:x=64x5", *FAST, "--output-json", "s.json", "--output-md", "s.md"],
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr + result.stdout
    sweep = load(tmp_path / "s.json")
    assert [(b["name"], b["status"], b["correctness"]) for b in sweep["benchmarks"]] == [
        (f"test-affine-default-fp32/{case}/onnxruntime/fp32/cpu", "ok", "unchecked") for case in ("r6", "r64")]
    assert sweep["benchmarks"][1]["metadata"]["outputs"]["y"]["shape"] == [64, 5]
