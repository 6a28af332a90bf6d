"""Availability checks shared by the TensorRT backends (tensorrt is imported lazily)."""

from __future__ import annotations

from adapters.lazy_import import cuda_reason, try_import

TENSORRT_HINT = "pip install tensorrt; needs NVIDIA's package index"


def tensorrt_reason(device: str) -> str:
    """Empty when TensorRT can run on ``device`` here, else the first reason it cannot."""
    _trt, reason = try_import("tensorrt", TENSORRT_HINT)
    if reason:
        return reason
    if device != "cuda":
        return "TensorRT runs on CUDA devices only (use --device cuda)"
    return cuda_reason()
