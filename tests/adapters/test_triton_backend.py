"""The triton backend and torch.compile on CUDA where Triton is not installed (it is an extra)."""

from __future__ import annotations

import importlib.util

import pytest

from adapters.torch_compile import TorchCompileBackend
from adapters.triton_backend import TritonBackend


@pytest.fixture
def no_triton(monkeypatch: pytest.MonkeyPatch) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "triton" else find_spec(name, *args))


@pytest.mark.usefixtures("no_triton")
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_triton_backend_names_the_extra_when_triton_is_missing(device: str) -> None:
    availability = TritonBackend().probe(device)
    assert not availability.ok
    assert availability.reason == "triton not installed (pip install 'apex-bench[triton]'; Linux only)"


@pytest.mark.usefixtures("no_triton")
def test_torch_compile_on_cuda_names_the_extra_when_triton_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("adapters.torch_compile.cuda_reason", lambda: "")
    availability = TorchCompileBackend().probe("cuda")
    assert not availability.ok
    assert "pip install 'apex-bench[triton]'" in availability.reason
