"""Triton tilepack: gather the selected t x t tiles of an NCHW map into ``[B, K, C, t, t]``.

Also home of the small helpers the tile kernels share (dtype support, shape buckets).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

from apex_core.results import Case
from apex_kernels.tuning import TRACKER, autotune_configs

SUPPORTED_DTYPES: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
}

Launcher = tuple[Callable[[], dict[str, torch.Tensor]], dict[str, torch.Tensor], dict[str, Any]]


def dtype_reason(op_name: str, dtype_name: str) -> str | None:
    """Why ``op_name`` cannot run in ``dtype_name`` (None when it can)."""
    if dtype_name in SUPPORTED_DTYPES:
        return None
    return (f"the {op_name} Triton kernel supports {', '.join(SUPPORTED_DTYPES)}, not {dtype_name}"
            " (loads and stores are typed by the input; fp8 has no arithmetic path here)")


def check_data_tensors(op_name: str, tensors: dict[str, torch.Tensor]) -> None:
    """Raise ``ValueError`` at prepare time for a dtype or layout the kernel cannot read."""
    supported = set(SUPPORTED_DTYPES.values())
    for name, tensor in tensors.items():
        if tensor.is_floating_point() and tensor.dim() > 0 and tensor.dtype not in supported:
            raise ValueError(f"{op_name}: input {name!r} has dtype {tensor.dtype}; "
                             f"supported: {', '.join(SUPPORTED_DTYPES)}")
        if not tensor.is_contiguous():
            # a contiguous copy would not see the runner's in-place refreshes
            raise ValueError(f"{op_name}: input {name!r} must be contiguous")


def shape_bucket(b: int, c: int, h: int, w: int, t: int, k: int) -> str:
    """The tracker's shape key, e.g. ``B1-C128-H128-W128-t8-K32``."""
    return f"B{b}-C{c}-H{h}-W{w}-t{t}-K{k}"


def supports(case: Case, dtype_name: str) -> str | None:
    """Reason tilepack cannot run this case in ``dtype_name``, or None."""
    return dtype_reason("tilepack", dtype_name)


# Pixels per channel one program covers; bigger tiles are split into row chunks.
PIXEL_BUDGET = 512

# BLOCK_C channels x one tile (or RB rows of it) per program: 64 pixels at t = 8, so the
# block holds 256..4096 elements; small blocks give more programs when B*K is small.
_CONFIGS = [
    triton.Config({"BLOCK_C": 8}, num_warps=2),
    triton.Config({"BLOCK_C": 4}, num_warps=1),
    triton.Config({"BLOCK_C": 16}, num_warps=2),
    triton.Config({"BLOCK_C": 16}, num_warps=4),
    triton.Config({"BLOCK_C": 32}, num_warps=4),
    triton.Config({"BLOCK_C": 64}, num_warps=8),
]


@triton.autotune(configs=autotune_configs(_CONFIGS), key=["C", "K", "T"])
@triton.jit
def _tilepack_kernel(features, idx, packed, C, H, W, K,
                     T: tl.constexpr, TP: tl.constexpr, RB: tl.constexpr, BLOCK_C: tl.constexpr):
    """One (b, k, row chunk) per axis-0 program, BLOCK_C channels per axis-1 program."""
    CHUNKS: tl.constexpr = (T + RB - 1) // RB
    pid = tl.program_id(0)
    chunk = pid % CHUNKS
    bk = pid // CHUNKS  # flat (b, k): the packed tile this program writes
    b = bk // K
    tile = tl.load(idx + bk)
    per_row = W // T
    y0 = (tile // per_row) * T
    x0 = (tile % per_row) * T
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    dy = chunk * RB + tl.arange(0, RB)
    dx = tl.arange(0, TP)
    c3 = c[:, None, None]
    dy3 = dy[None, :, None]
    dx3 = dx[None, None, :]
    mask = (c3 < C) & (dy3 < T) & (dx3 < T)
    # int64 planes: B*C*H*W may pass 2**31 at large profiles; dx innermost keeps loads vectorised
    plane = (b.to(tl.int64) * C + c3) * H * W
    vals = tl.load(features + plane + (y0 + dy3) * W + (x0 + dx3), mask=mask)
    dst = ((bk.to(tl.int64) * C + c3) * T + dy3) * T + dx3
    tl.store(packed + dst, vals, mask=mask)


def tile_rows_per_program(tile_size: int) -> tuple[int, int]:
    """``(TP, RB)``: the padded tile width and how many tile rows one program handles.

    A whole tile per program up to t = 16; bigger tiles are split into row chunks
    so one channel's block stays near PIXEL_BUDGET elements.
    """
    tp = triton.next_power_of_2(tile_size)
    return tp, min(tp, max(1, PIXEL_BUDGET // tp))


def make_launcher(case: Case, inputs: dict[str, torch.Tensor]) -> Launcher:
    """Allocate ``packed`` once; return the launch closure, the outputs and the launch metadata."""
    features, idx = inputs["features"], inputs["idx"]
    check_data_tensors("tilepack", {"features": features, "idx": idx})
    b, c, h, w = features.shape
    k, t = idx.shape[1], case.params.tile_size
    tp, rb = tile_rows_per_program(t)
    chunks = triton.cdiv(t, rb)
    packed = torch.empty((b, k, c, t, t), dtype=features.dtype, device=features.device)
    outputs = {"packed": packed}
    bucket = shape_bucket(b, c, h, w, t, k)

    def grid(meta: dict[str, Any]) -> tuple[int, int]:
        # sized from the config the autotuner actually runs, never from a fixed block
        return (b * k * chunks, triton.cdiv(c, meta["BLOCK_C"]))

    def launch() -> dict[str, torch.Tensor]:
        TRACKER.launch("tilepack", _tilepack_kernel, grid, bucket,
                       features, idx, packed, c, h, w, k, T=t, TP=tp, RB=rb)
        return outputs

    metadata = {
        "kernel": "_tilepack_kernel",
        "decomposition": "axis0 = (b, k, row chunk), axis1 = channel block",
        "programs_axis0": b * k * chunks,
        "TP": tp,
        "RB": rb,
        "autotuned": ["BLOCK_C", "num_warps"],
    }
    return launch, outputs, metadata
