"""The onnxruntime backend: probe reasons, support, and real runs checked against the reference."""

from __future__ import annotations

import importlib.util
import json

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import apex_core  # noqa: E402
from adapters import onnxruntime_backend  # noqa: E402
from adapters.onnxruntime_backend import OnnxRuntimeBackend  # noqa: E402
from apex_core.registry import Registry  # noqa: E402
from apex_core.results import SkipKind, Status  # noqa: E402
from tests.apex_core.fakes import Axpy  # noqa: E402
from tests.conftest import run_cli  # noqa: E402

FAST = apex_core.TimingOptions(warmup=1, min_iters=2, min_time_s=0, max_time_s=0.05)
REGISTRY = Registry.discover()
BUILTIN = ("tilepack", "tileunpack", "fusiongate", "tilessm-scan", "tile-stage1", "ff-infer")


def test_probe_on_the_cpu_is_ok_here():
    assert OnnxRuntimeBackend().probe("cpu").ok


def test_probe_says_onnxruntime_is_not_installed(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    availability = OnnxRuntimeBackend().probe("cpu")
    assert not availability.ok
    assert availability.reason.startswith("onnxruntime not installed (pip install onnxruntime")


def test_probe_on_cuda_names_what_is_missing(monkeypatch):
    backend = OnnxRuntimeBackend()
    reason = onnxruntime_backend.cuda_reason()
    if reason:  # this machine: no CUDA device, said first
        assert backend.probe("cuda").reason == reason
    # With a CUDA device but the CPU-only onnxruntime package: the provider is what is missing.
    # (No CUDA device exists here, so its check is replaced; onnxruntime is the real one.)
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA execution provider")
    monkeypatch.setattr(onnxruntime_backend, "cuda_reason", lambda: "")
    availability = backend.probe("cuda")
    assert not availability.ok
    assert "has no CUDAExecutionProvider" in availability.reason and "onnxruntime-gpu" in availability.reason


def test_supports_follows_the_export():
    backend = OnnxRuntimeBackend()
    for name in BUILTIN:
        workload = REGISTRY.workloads[name]
        for case in workload.cases(workload.make_params("smoke")):
            assert backend.supports(workload, case, "fp32").ok
            assert backend.supports(workload, case, "fp16").ok
    axpy = Axpy()
    support = backend.supports(axpy, axpy.cases(axpy.make_params())[0], "fp32")
    assert not support.ok and "workload 'axpy' does not define export_recipe()" in support.reason
    gate = REGISTRY.workloads["fusiongate"]
    support = backend.supports(gate, gate.cases(gate.make_params("smoke"))[0], "bf16")
    assert not support.ok and support.reason.startswith("no bf16 ONNX export: ")


def _run(workloads, dtypes):
    return apex_core.run(workloads, ["onnxruntime"], device="cpu", dtypes=dtypes, profile="smoke",
                         timing=FAST, isolation="inline", registry=REGISTRY)


def test_every_builtin_case_runs_correctly_in_fp32_on_the_cpu():
    report = _run(list(BUILTIN), ["fp32"])
    expected = sum(len(REGISTRY.workloads[w].case_names) for w in BUILTIN)
    assert len(report.cells) == expected
    for cell in report.cells:
        assert cell.status == Status.OK, f"{cell.workload}/{cell.case}: {cell.reason}"
        assert cell.accuracy and all(a.passed for a in cell.accuracy)
        assert cell.metadata["providers"] == ["CPUExecutionProvider"]
        assert len(cell.metadata["onnx_sha256"]) == 64


def test_bf16_runs_where_the_cpu_has_kernels_and_skips_with_the_reason_elsewhere():
    report = _run(["tilepack", "tile-stage1", "fusiongate"], ["bf16"])
    cells = {cell.workload: cell for cell in report.cells}
    assert cells["tilepack"].status == Status.OK
    # exported fine, but ONNX Runtime's CPU provider lacks a bf16 kernel: found while preparing
    assert cells["tile-stage1"].status == Status.SKIPPED
    assert "CPUExecutionProvider cannot run" in cells["tile-stage1"].reason
    assert "Could not find an implementation" in cells["tile-stage1"].reason
    # no bf16 export at all: known before the cell starts
    assert cells["fusiongate"].status == Status.SKIPPED
    assert cells["fusiongate"].skip_kind == SkipKind.UNSUPPORTED
    assert cells["fusiongate"].reason.startswith("no bf16 ONNX export")


@pytest.mark.slow
def test_the_cli_bar_onnxruntime_next_to_the_reference(tmp_path):
    result = run_cli(["--device", "cpu", "--profile", "smoke", "--backends", "onnxruntime,torch-reference",
                      "--min-time", "0.02", "--max-time", "0.2", "--warmup", "2",
                      "--output-json", "r.json", "--output-md", "r.md"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr + result.stdout
    record = json.loads((tmp_path / "r.json").read_text())
    ort_cells = [b for b in record["benchmarks"] if b["backend"] == "onnxruntime"]
    assert {(b["workload"], b["case"]) for b in ort_cells} >= {
        (w, c) for w in BUILTIN for c in REGISTRY.workloads[w].case_names}
    for cell in ort_cells:
        if cell["workload"] in BUILTIN or cell["workload"] == "test-affine":  # test-affine has a recipe
            assert cell["status"] == "ok", cell
        else:  # a third-party workload without an export recipe, or the engine workload (no cells)
            assert cell["status"] == "skipped" and "no ONNX export recipe" in cell["reason"]
