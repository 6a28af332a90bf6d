"""Triton tilepack: gather the selected t x t tiles of an NCHW map into ``[B, K, C, t, t]``.

``tilepack(features, indices, tile_size)`` returns ``packed[b, k, c, dy, dx] =
features[b, c, y0 + dy, x0 + dx]``, where tile id ``i`` is row-major over the
``(H / t) x (W / t)`` grid with origin ``(i // (W / t) * t, i % (W / t) * t)``. Order is
kept and duplicates are allowed; ids must lie in the grid (not checked on the device).
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from apex_kernels._utils import (
    KernelLaunch,
    Launcher,
    autotune_configs,
    check_tensors,
    output_buffer,
    sequential,
    shape_bucket,
)

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


def tilepack_launcher(features: torch.Tensor, indices: torch.Tensor, tile_size: int,
                      out: torch.Tensor | None = None) -> Launcher:
    """Bind tilepack to its tensors; each call of the result packs their current contents.

    ``features [B, C, H, W]`` (fp32, fp16 or bf16), ``indices [B, K]`` (int32 tile ids),
    ``out [B, K, C, t, t]`` in the features' dtype (allocated when None).
    """
    check_tensors("tilepack", {"features": features, "indices": indices})
    if features.dim() != 4 or indices.dim() != 2 or indices.shape[0] != features.shape[0]:
        raise ValueError(f"tilepack: features must be [B, C, H, W] and indices [B, K], got "
                         f"{list(features.shape)} and {list(indices.shape)}")
    b, c, h, w = features.shape
    k, t = indices.shape[1], tile_size
    if t < 1 or h % t or w % t:
        raise ValueError(f"tilepack: tile_size {t} must divide height {h} and width {w}")
    tp, rb = tile_rows_per_program(t)
    chunks = triton.cdiv(t, rb)
    packed = output_buffer(out, "out", features, (b, k, c, t, t))
    outputs = {"packed": packed}

    def grid(meta: dict[str, Any]) -> tuple[int, int]:
        # sized from the config the autotuner actually runs, never from a fixed block
        return (b * k * chunks, triton.cdiv(c, meta["BLOCK_C"]))

    launch = KernelLaunch("tilepack", _tilepack_kernel, grid,
                          (features, indices, packed, c, h, w, k), {"T": t, "TP": tp, "RB": rb},
                          shape_bucket(b, c, h, w, t, k))
    metadata = {
        "kernel": "_tilepack_kernel",
        "decomposition": "axis0 = (b, k, row chunk), axis1 = channel block",
        "programs_axis0": b * k * chunks,
        "TP": tp,
        "RB": rb,
        "autotuned": ["BLOCK_C", "num_warps"],
    }
    return Launcher(sequential([launch], outputs), outputs, (launch,), metadata)


def tilepack(features: torch.Tensor, indices: torch.Tensor, tile_size: int,
             out: torch.Tensor | None = None) -> torch.Tensor:
    """Gather the ``indices`` tiles of ``features`` into ``[B, K, C, t, t]`` (see the module doc)."""
    return tilepack_launcher(features, indices, tile_size, out)()["packed"]
