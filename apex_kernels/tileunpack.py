"""Triton tileunpack: packed tiles into a copy of the base map, override or blend, by priority.

One pass over the output: each program owns a block of pixels x channels, visits
only the tiles whose box touches its pixels, in ascending priority (key
``level * K + k``; higher level wins, ties go to the later k), and writes every
output element exactly once. No atomics, no sort kernel, no host synchronisation.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from apex_core.results import Case
from apex_kernels.tilepack import Launcher, check_data_tensors, dtype_reason, shape_bucket
from apex_kernels.tuning import TRACKER, autotune_configs

CASE_MODES = {"override": "override", "blend": "blend", "overlap": "override"}

# Above every priority key (levels are int32, so |level * K + k| < 2**62).
NO_KEY = tl.constexpr(2**62)


def supports(case: Case, dtype_name: str) -> str | None:
    """Reason tileunpack cannot run this case in ``dtype_name``, or None."""
    if case.name not in CASE_MODES:
        return f"the tileunpack Triton kernel has no case {case.name!r} ({', '.join(CASE_MODES)})"
    return dtype_reason("tileunpack", dtype_name)


# BLOCK_P flattened pixels (contiguous, so base/out traffic is vectorised) x BLOCK_C
# channels: 1024..8192 elements. Bigger BLOCK_C amortises the per-pixel priority work
# over more channels; bigger BLOCK_P means fewer tiles visited per pixel row.
_CONFIGS = [
    triton.Config({"BLOCK_P": 256, "BLOCK_C": 8}, num_warps=4),
    triton.Config({"BLOCK_P": 128, "BLOCK_C": 16}, num_warps=4),
    triton.Config({"BLOCK_P": 256, "BLOCK_C": 16}, num_warps=4),
    triton.Config({"BLOCK_P": 512, "BLOCK_C": 8}, num_warps=8),
    triton.Config({"BLOCK_P": 256, "BLOCK_C": 32}, num_warps=8),
    triton.Config({"BLOCK_P": 1024, "BLOCK_C": 4}, num_warps=8),
    triton.Config({"BLOCK_P": 64, "BLOCK_C": 32}, num_warps=4),
]


@triton.jit
def _pixel_block(pid, W, HW, BLOCK_P: tl.constexpr):
    """This block's flat pixels and the row/column box that bounds them."""
    first = pid * BLOCK_P
    p = first + tl.arange(0, BLOCK_P)
    last = tl.minimum(first + BLOCK_P, HW) - 1
    r0 = first // W
    r1 = last // W
    # a block inside one image row has a narrow column range; otherwise take the full width
    one_row = r0 == r1
    c0 = tl.where(one_row, first % W, 0)
    c1 = tl.where(one_row, last % W, W - 1)
    return p, p < HW, r0, r1, c0, c1


@triton.jit
def _touching(origins, levels, row0, k0, K, r0, r1, c0, c1, T: tl.constexpr, KC: tl.constexpr):
    """For KC tiles from k0: whether each tile's box meets the pixel box, and its priority key."""
    kk = k0 + tl.arange(0, KC)
    km = kk < K
    oy = tl.load(origins + (row0 + kk) * 2, mask=km, other=0)
    ox = tl.load(origins + (row0 + kk) * 2 + 1, mask=km, other=0)
    lv = tl.load(levels + row0 + kk, mask=km, other=0)
    hit = km & (oy <= r1) & (oy + T > r0) & (ox <= c1) & (ox + T > c0)
    return hit, lv.to(tl.int64) * K + kk


@triton.jit
def _count_touching(origins, levels, row0, K, r0, r1, c0, c1, T: tl.constexpr, KC: tl.constexpr):
    """How many tiles meet the pixel box: the number of steps of the priority walk."""
    count = tl.full([], 0, tl.int32)
    for k0 in range(0, K, KC):
        hit, _ = _touching(origins, levels, row0, k0, K, r0, r1, c0, c1, T, KC)
        count += tl.sum(hit.to(tl.int32), axis=0)
    return count


@triton.jit
def _next_tile(origins, levels, row0, K, prev, r0, r1, c0, c1, T: tl.constexpr, KC: tl.constexpr):
    """The touching tile with the smallest key above ``prev``: ``(key, k, y0, x0)``."""
    best = tl.full([], NO_KEY, tl.int64)
    for k0 in range(0, K, KC):
        hit, key = _touching(origins, levels, row0, k0, K, r0, r1, c0, c1, T, KC)
        best = tl.minimum(best, tl.min(tl.where(hit & (key > prev), key, NO_KEY), axis=0))
    k = ((best % K) + K) % K  # keys are unique, so the key names its k (also for level < 0)
    oy = tl.load(origins + (row0 + k) * 2)
    ox = tl.load(origins + (row0 + k) * 2 + 1)
    return best, k, oy, ox


@triton.autotune(configs=autotune_configs(_CONFIGS), key=["C", "HW", "K", "T"])
@triton.jit
def _unpack_override_kernel(base, packed, origins, levels, out, C, W, HW, K,
                            T: tl.constexpr, KC: tl.constexpr,
                            BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    """Per pixel the highest-priority covering tile wins; uncovered pixels copy base."""
    blocks = tl.cdiv(HW, BLOCK_P)
    b = tl.program_id(0) // blocks
    p, pmask, r0, r1, c0, c1 = _pixel_block(tl.program_id(0) % blocks, W, HW, BLOCK_P)
    py = p // W
    px = p % W
    row0 = b * K
    steps = _count_touching(origins, levels, row0, K, r0, r1, c0, c1, T, KC)
    # winner per pixel as its offset inside this image's packed tiles: found before any
    # tile data is read, so each output element costs one load from base or from a tile
    win = tl.zeros([BLOCK_P], tl.int64)
    covered = p < 0
    prev = tl.full([], -NO_KEY, tl.int64)
    for _ in range(steps):
        prev, k, oy, ox = _next_tile(origins, levels, row0, K, prev, r0, r1, c0, c1, T, KC)
        cov = pmask & (py >= oy) & (py < oy + T) & (px >= ox) & (px < ox + T)
        # ascending priority: a later hit overrides an earlier one
        win = tl.where(cov, k.to(tl.int64) * C * T * T + (py - oy) * T + (px - ox), win)
        covered = covered | cov
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    m2 = (c < C)[:, None] & pmask[None, :]
    cov2 = covered[None, :]
    tiles = packed + b.to(tl.int64) * K * C * T * T
    tile_val = tl.load(tiles + win[None, :] + (c.to(tl.int64) * T * T)[:, None], mask=m2 & cov2)
    offs = ((b.to(tl.int64) * C + c) * HW)[:, None] + p[None, :]
    base_val = tl.load(base + offs, mask=m2 & ~cov2)
    tl.store(out + offs, tl.where(cov2, tile_val, base_val), mask=m2)


@triton.autotune(configs=autotune_configs(_CONFIGS), key=["C", "HW", "K", "T"])
@triton.jit
def _unpack_blend_kernel(base, packed, origins, levels, alpha, out, C, W, HW, K,
                         T: tl.constexpr, KC: tl.constexpr,
                         BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    """Covering tiles composed in ascending priority: ``out = (1 - a) * out + a * P``."""
    blocks = tl.cdiv(HW, BLOCK_P)
    b = tl.program_id(0) // blocks
    p, pmask, r0, r1, c0, c1 = _pixel_block(tl.program_id(0) % blocks, W, HW, BLOCK_P)
    py = p // W
    px = p % W
    row0 = b * K
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    m2 = (c < C)[:, None] & pmask[None, :]
    offs = ((b.to(tl.int64) * C + c) * HW)[:, None] + p[None, :]
    tiles = packed + b.to(tl.int64) * K * C * T * T + (c.to(tl.int64) * T * T)[:, None]
    a = tl.load(alpha).to(tl.float32)
    # fp32 accumulator, rounded once at the end: no per-step rounding in fp16/bf16
    acc = tl.load(base + offs, mask=m2, other=0.0).to(tl.float32)
    steps = _count_touching(origins, levels, row0, K, r0, r1, c0, c1, T, KC)
    prev = tl.full([], -NO_KEY, tl.int64)
    for _ in range(steps):
        prev, k, oy, ox = _next_tile(origins, levels, row0, K, prev, r0, r1, c0, c1, T, KC)
        cov = pmask & (py >= oy) & (py < oy + T) & (px >= ox) & (px < ox + T)
        src = k.to(tl.int64) * C * T * T + (py - oy) * T + (px - ox)
        cov2 = cov[None, :]
        tile_val = tl.load(tiles + src[None, :], mask=m2 & cov2, other=0.0).to(tl.float32)
        acc = tl.where(cov2, (1.0 - a) * acc + a * tile_val, acc)
    tl.store(out + offs, acc.to(out.dtype.element_ty), mask=m2)


def make_launcher(case: Case, inputs: dict[str, torch.Tensor]) -> Launcher:
    """Allocate ``out`` once; return the launch closure, the outputs and the launch metadata."""
    reason = supports(case, "fp32")
    if reason:
        raise ValueError(reason)
    mode = CASE_MODES[case.name]
    base, packed = inputs["base"], inputs["packed"]
    origins, levels, alpha = inputs["origins"], inputs["levels"], inputs["alpha"]
    check_data_tensors("tileunpack", {"base": base, "packed": packed, "origins": origins,
                                      "levels": levels})
    b, c, h, w = base.shape
    k, t = packed.shape[1], packed.shape[-1]
    hw = h * w
    kc = min(triton.next_power_of_2(k), 128)  # tiles scanned per vector step
    out = torch.empty_like(base)
    outputs = {"out": out}
    bucket = shape_bucket(b, c, h, w, t, k)

    def grid(meta: dict[str, Any]) -> tuple[int, int]:
        # sized from the config the autotuner actually runs, never from a fixed block
        return (b * triton.cdiv(hw, meta["BLOCK_P"]), triton.cdiv(c, meta["BLOCK_C"]))

    if mode == "override":
        kernel = _unpack_override_kernel

        def launch() -> dict[str, torch.Tensor]:
            TRACKER.launch(f"tileunpack-{case.name}", kernel, grid, bucket,
                           base, packed, origins, levels, out, c, w, hw, k, T=t, KC=kc)
            return outputs
    else:
        kernel = _unpack_blend_kernel

        def launch() -> dict[str, torch.Tensor]:
            TRACKER.launch(f"tileunpack-{case.name}", kernel, grid, bucket,
                           base, packed, origins, levels, alpha, out, c, w, hw, k, T=t, KC=kc)
            return outputs

    metadata = {
        "kernel": kernel.fn.__name__,
        "mode": mode,
        "decomposition": "axis0 = (b, flat pixel block), axis1 = channel block; "
                         "touching tiles walked in ascending (level, k)",
        "KC": kc,
        "autotuned": ["BLOCK_P", "BLOCK_C", "num_warps"],
    }
    return launch, outputs, metadata
