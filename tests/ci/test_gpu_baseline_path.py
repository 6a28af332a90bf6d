"""perf_gpu.yml picks the committed baseline of the runner's GPU model (scripts/gpu_baseline_path.sh)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "gpu_baseline_path.sh"


def _path_for(tmp_path, name: str) -> subprocess.CompletedProcess[str]:
    fake = tmp_path / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\nprintf '%s\\n' '{name}'\n" if name else "#!/bin/sh\nexit 9\n")
    fake.chmod(0o755)
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"})


@pytest.mark.parametrize(("name", "path"), [
    ("NVIDIA H100 80GB HBM3", "baselines/gpu-fixed-h100-80gb-hbm3.json"),
    ("NVIDIA H200", "baselines/gpu-fixed-h200.json"),
    ("Tesla V100-SXM2-16GB", "baselines/gpu-fixed-tesla-v100-sxm2-16gb.json"),
])
def test_each_gpu_model_names_its_own_file(tmp_path, name, path):
    done = _path_for(tmp_path, name)
    assert done.returncode == 0 and done.stdout.strip() == path


def test_no_gpu_is_a_one_line_error(tmp_path):
    done = _path_for(tmp_path, "")
    assert done.returncode == 2 and done.stderr.strip() == "gpu_baseline_path: nvidia-smi named no GPU"


def test_the_workflow_uses_it_unless_a_variable_names_a_file():
    workflow = (ROOT / ".github" / "workflows" / "perf_gpu.yml").read_text()
    assert 'APEX_GPU_BASELINE="${APEX_GPU_BASELINE:-$(bash scripts/gpu_baseline_path.sh)}"' in workflow
