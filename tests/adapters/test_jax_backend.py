"""The jax backend: probe reasons, DLPack sharing, and a run of every built-in workload on the CPU."""

from __future__ import annotations

import importlib.util
import json
import os
import types

import pytest
import torch

import apex_core
from adapters import jax_backend, jax_setup
from adapters.jax_backend import CPU_METHOD, JaxBackend, TorchView, share_inputs
from apex_core.registry import Registry
from tests.apex_core.fakes import Axpy
from tests.conftest import run_cli

HAS_JAX = importlib.util.find_spec("jax") is not None
needs_jax = pytest.mark.skipif(not HAS_JAX, reason="jax not installed (pip install 'apex-bench[jax]')")
BUILTIN = ("tilepack", "tileunpack", "fusiongate", "tilessm-scan", "tile-stage1", "ff-infer")
FAST = ["--warmup", "1", "--iters", "2", "--min-time", "0", "--max-time", "0.05"]


def test_probe_says_jax_is_not_installed(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "jax" else real(name, *a))
    monkeypatch.delitem(__import__("sys").modules, "jax", raising=False)
    availability = JaxBackend().probe("cpu")
    assert not availability.ok
    assert availability.reason.startswith("jax not installed (pip install 'apex-bench[jax]'")


def test_supports_only_the_ported_workloads():
    registry = Registry.discover()
    backend = JaxBackend()
    for name in BUILTIN:
        workload = registry.workloads[name]
        for case in workload.cases(workload.make_params("smoke")):
            assert backend.supports(workload, case, "fp16").ok
    axpy = Axpy()
    support = backend.supports(axpy, axpy.cases(axpy.make_params())[0], "fp32")
    assert not support.ok and support.reason == (
        "axpy brings no jax.numpy implementation (its Workload.implementations has no 'jax')")


def test_preallocation_left_on_is_a_reason(monkeypatch):
    monkeypatch.setenv(jax_setup.PREALLOCATE, "true")
    reason = jax_setup.preallocation_reason()
    assert reason.startswith("XLA_PYTHON_CLIENT_PREALLOCATE=true: JAX would preallocate 75% of the GPU")
    monkeypatch.setenv(jax_setup.PREALLOCATE, "false")
    assert jax_setup.preallocation_reason() == ""


def test_gpu_reason_names_the_missing_platform_then_preallocation(monkeypatch):
    def devices(kind=None):
        if kind == "gpu":
            raise RuntimeError("Unknown backend: 'gpu' requested")
        return [types.SimpleNamespace(platform="cpu")]

    cpu_only = types.SimpleNamespace(__version__="0.0-test", devices=devices)
    reason = jax_setup.gpu_reason(cpu_only)
    assert reason == ("jax 0.0-test has no GPU platform (platforms: cpu); install a CUDA jaxlib: "
                      "pip install 'jax[cuda12]'")
    # (no GPU exists here, so a jax with one is a stand-in; the preallocation check is the real one)
    with_gpu = types.SimpleNamespace(__version__="0.0-test", devices=lambda kind=None: ["gpu0"])
    monkeypatch.setenv(jax_setup.PREALLOCATE, "1")
    assert jax_setup.gpu_reason(with_gpu).startswith("XLA_PYTHON_CLIENT_PREALLOCATE=1: ")


@needs_jax
def test_probe_on_cuda_says_what_is_missing_here(monkeypatch):
    reason = jax_backend.cuda_reason()
    availability = JaxBackend().probe("cuda")
    if reason:  # this machine: no CUDA device, said first
        assert availability.reason == reason
    monkeypatch.setattr(jax_backend, "cuda_reason", lambda: "")
    import jax

    if any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("this jax has a GPU platform")
    assert "has no GPU platform" in JaxBackend().probe("cuda").reason


@needs_jax
def test_loading_jax_leaves_the_environment_as_it_was():
    before = dict(os.environ)
    jax, reason = jax_setup.load_jax()
    assert jax is not None and reason == ""
    assert dict(os.environ) == before
    assert JaxBackend().probe("cpu").ok


@needs_jax
def test_inputs_are_shared_not_copied_and_refreshes_are_seen():
    import jax

    inputs = {"x": torch.arange(6, dtype=torch.float32).reshape(2, 3), "a": torch.tensor(2.0),
              "i": torch.arange(4, dtype=torch.int32)}
    arrays = share_inputs(jax, inputs)
    for name, tensor in inputs.items():
        assert arrays[name].unsafe_buffer_pointer() == tensor.data_ptr()
    double = jax.jit(lambda d: {"y": d["x"] * d["a"]})
    inputs["x"].copy_(torch.ones(2, 3))  # as the runner refreshes inputs between checks
    out = TorchView(double(arrays))
    assert isinstance(out["y"], torch.Tensor) and torch.equal(out["y"], torch.full((2, 3), 2.0))
    assert list(out) == ["y"] and len(out) == 1


@needs_jax
def test_every_case_in_every_dtype_matches_the_reference_inline():
    registry = Registry.discover()
    timing = apex_core.TimingOptions(warmup=1, min_iters=2, min_time_s=0, max_time_s=0.05)
    report = apex_core.run(list(BUILTIN), ["jax"], device="cpu", dtypes=["fp32", "fp16", "bf16"],
                           profile="smoke", timing=timing, isolation="inline", registry=registry)
    assert len(report.cells) == 3 * sum(len(registry.workloads[w].case_names) for w in BUILTIN)
    for cell in report.cells:
        assert cell.status == "ok", (cell.key, cell.reason)
        assert all(a.passed for a in cell.accuracy) and len(cell.accuracy) == 2
        assert "process_state_restored" not in cell.metadata  # jax's setup leaves no trace


@needs_jax
def test_smoke_run_of_every_workload_through_the_cli(tmp_path):
    """What CI runs: apex-bench --backends jax at the smoke profile, in worker processes; all ok."""
    result = run_cli(["--device", "cpu", "--profile", "smoke", "--backends", "jax", *FAST,
                      "--output-json", "r.json", "--output-md", "r.md"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr + result.stdout
    cells = json.loads((tmp_path / "r.json").read_text())["benchmarks"]
    assert len(cells) == 10  # every case of the six built-in workloads
    assert {c["workload"] for c in cells} == set(BUILTIN)
    assert {c["status"] for c in cells} == {"ok"}, [c["reason"] for c in cells]
    assert {c["timing_method"] for c in cells} == {CPU_METHOD}
    assert all(c["metadata"]["platform"] == "cpu" and c["build_time_s"] > 0 for c in cells)
    assert f"jax: {CPU_METHOD}" in (tmp_path / "r.md").read_text()
