"""The priority walk: any origins, override or blend, one pass over the output.

Each program owns a block of BLOCK_P flat pixels x CB * BLOCK_C channels, visits only the
tiles that touch its pixels, in ascending priority, and writes every output element
exactly once. The touching keys are kept in registers up to ``MAX_KC`` tiles; larger K
is rescanned from memory (L2) in chunks of that size at each step.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from apex_kernels._utils import Launcher, autotune_configs
from apex_kernels.tileunpack._shared import NO_KEY, _store_winners, bind_unpack

# Tile keys a program keeps in registers for the priority walk; larger K is rescanned
# from memory (L2) in chunks of this size at each step.
MAX_KC = 1024

# BLOCK_P flattened pixels (contiguous, so base/out traffic is vectorised) x BLOCK_C
# channels per step, CB channel steps per program. The priority walk is done once per
# program and reused for its CB * BLOCK_C channels: at large K that amortises the scan of
# the K origins over many channels; at small profiles CB = 1 gives more programs.
WALK_CONFIGS = [
    triton.Config({"BLOCK_P": 128, "BLOCK_C": 4, "CB": 2}, num_warps=4),
    triton.Config({"BLOCK_P": 256, "BLOCK_C": 8, "CB": 1}, num_warps=4),
    triton.Config({"BLOCK_P": 256, "BLOCK_C": 16, "CB": 1}, num_warps=4),
    triton.Config({"BLOCK_P": 512, "BLOCK_C": 8, "CB": 1}, num_warps=8),
    triton.Config({"BLOCK_P": 256, "BLOCK_C": 8, "CB": 4}, num_warps=4),
    triton.Config({"BLOCK_P": 256, "BLOCK_C": 16, "CB": 4}, num_warps=8),
    triton.Config({"BLOCK_P": 128, "BLOCK_C": 16, "CB": 8}, num_warps=4),
    triton.Config({"BLOCK_P": 512, "BLOCK_C": 8, "CB": 8}, num_warps=8),
    triton.Config({"BLOCK_P": 1024, "BLOCK_C": 4, "CB": 8}, num_warps=8),
]
# The winner-map streaming pass: also deeper channel loops (the winner map is loaded once
# per program).


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
    """Keys of the KC tiles from k0 whose box meets the pixel box; NO_KEY for the others."""
    kk = k0 + tl.arange(0, KC)
    km = kk < K
    oy = tl.load(origins + (row0 + kk) * 2, mask=km, other=0)
    ox = tl.load(origins + (row0 + kk) * 2 + 1, mask=km, other=0)
    lv = tl.load(levels + row0 + kk, mask=km, other=0)
    hit = km & (oy <= r1) & (oy + T > r0) & (ox <= c1) & (ox + T > c0)
    return tl.where(hit, lv.to(tl.int64) * K + kk, NO_KEY)


@triton.jit
def _walk_start(origins, levels, row0, K, r0, r1, c0, c1, T: tl.constexpr, KC: tl.constexpr):
    """The first chunk's touching keys (kept in registers) and how many tiles touch in all."""
    keys = _touching(origins, levels, row0, 0, K, r0, r1, c0, c1, T, KC)
    count = tl.sum((keys != NO_KEY).to(tl.int32), axis=0)
    for k0 in range(KC, K, KC):  # only when K > KC
        more = _touching(origins, levels, row0, k0, K, r0, r1, c0, c1, T, KC)
        count += tl.sum((more != NO_KEY).to(tl.int32), axis=0)
    return keys, count


@triton.jit
def _walk_step(origins, levels, row0, K, keys, prev, r0, r1, c0, c1,
               T: tl.constexpr, KC: tl.constexpr, ONE_CHUNK: tl.constexpr):
    """The touching tile with the smallest key above ``prev``: ``(keys, key, k, y0, x0)``."""
    if ONE_CHUNK:
        # all K keys are in registers: take the minimum and retire it
        best = tl.min(keys, axis=0)
        keys = tl.where(keys == best, NO_KEY, keys)
    else:
        best = tl.full([], NO_KEY, tl.int64)
        for k0 in range(0, K, KC):
            chunk = _touching(origins, levels, row0, k0, K, r0, r1, c0, c1, T, KC)
            best = tl.minimum(best, tl.min(tl.where(chunk > prev, chunk, NO_KEY), axis=0))
    k = ((best % K) + K) % K  # keys are unique, so the key names its k (also for level < 0)
    oy = tl.load(origins + (row0 + k) * 2)
    ox = tl.load(origins + (row0 + k) * 2 + 1)
    return keys, best, k, oy, ox


@triton.autotune(configs=autotune_configs(WALK_CONFIGS), key=["C", "HW", "K", "T"])
@triton.jit
def _unpack_override_kernel(base, packed, origins, levels, out, C, W, HW, K,
                            T: tl.constexpr, KC: tl.constexpr, ONE_CHUNK: tl.constexpr,
                            BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr, CB: tl.constexpr):
    """Per pixel the highest-priority covering tile wins; uncovered pixels copy base."""
    blocks = tl.cdiv(HW, BLOCK_P)
    b = tl.program_id(0) // blocks
    p, pmask, r0, r1, c0, c1 = _pixel_block(tl.program_id(0) % blocks, W, HW, BLOCK_P)
    py = p // W
    px = p % W
    row0 = b * K
    keys, steps = _walk_start(origins, levels, row0, K, r0, r1, c0, c1, T, KC)
    # winner per pixel as its offset inside this image's packed tiles: found before any
    # tile data is read, so each output element costs one load, from base or from its
    # winning tile (measured faster on H200 than prefetching all of base before the walk)
    win = tl.zeros([BLOCK_P], tl.int64)
    covered = p < 0
    prev = tl.full([], -NO_KEY, tl.int64)
    for _ in range(steps):
        keys, prev, k, oy, ox = _walk_step(origins, levels, row0, K, keys, prev, r0, r1, c0, c1,
                                           T, KC, ONE_CHUNK)
        cov = pmask & (py >= oy) & (py < oy + T) & (px >= ox) & (px < ox + T)
        # ascending priority: a later hit overrides an earlier one
        win = tl.where(cov, k.to(tl.int64) * C * T * T + (py - oy) * T + (px - ox), win)
        covered = covered | cov
    _store_winners(base, packed, out, b, p, pmask, win, covered, C, HW, K, T, BLOCK_C, CB,
                   False)


@triton.autotune(configs=autotune_configs(WALK_CONFIGS), key=["C", "HW", "K", "T"])
@triton.jit
def _unpack_blend_kernel(base, packed, origins, levels, alpha, out, C, W, HW, K,
                         T: tl.constexpr, KC: tl.constexpr, ONE_CHUNK: tl.constexpr,
                         BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr, CB: tl.constexpr):
    """Covering tiles composed in ascending priority: ``out = (1 - a) * out + a * P``."""
    blocks = tl.cdiv(HW, BLOCK_P)
    b = tl.program_id(0) // blocks
    p, pmask, r0, r1, c0, c1 = _pixel_block(tl.program_id(0) % blocks, W, HW, BLOCK_P)
    py = p // W
    px = p % W
    row0 = b * K
    a = tl.load(alpha).to(tl.float32)
    c = tl.program_id(1) * CB * BLOCK_C + tl.arange(0, BLOCK_C)
    m2 = (c < C)[:, None] & pmask[None, :]
    offs = ((b.to(tl.int64) * C + c) * HW)[:, None] + p[None, :]
    # fp32 accumulator, rounded once at the end: no per-step rounding in fp16/bf16. The
    # first load is issued before the walk so its DRAM latency overlaps the walk's.
    acc = tl.load(base + offs, mask=m2, other=0.0).to(tl.float32)
    first_keys, steps = _walk_start(origins, levels, row0, K, r0, r1, c0, c1, T, KC)
    for i in tl.static_range(CB):
        if i > 0:
            c = (tl.program_id(1) * CB + i) * BLOCK_C + tl.arange(0, BLOCK_C)
            m2 = (c < C)[:, None] & pmask[None, :]
            offs = ((b.to(tl.int64) * C + c) * HW)[:, None] + p[None, :]
            acc = tl.load(base + offs, mask=m2, other=0.0).to(tl.float32)
        tiles = packed + b.to(tl.int64) * K * C * T * T + (c.to(tl.int64) * T * T)[:, None]
        # the walk is replayed per channel step from the keys kept in registers
        keys = first_keys
        prev = tl.full([], -NO_KEY, tl.int64)
        for _ in range(steps):
            keys, prev, k, oy, ox = _walk_step(origins, levels, row0, K, keys, prev, r0, r1, c0, c1,
                                               T, KC, ONE_CHUNK)
            cov = pmask & (py >= oy) & (py < oy + T) & (px >= ox) & (px < ox + T)
            src = k.to(tl.int64) * C * T * T + (py - oy) * T + (px - ox)
            cov2 = cov[None, :]
            tile_val = tl.load(tiles + src[None, :], mask=m2 & cov2, other=0.0).to(tl.float32)
            acc = tl.where(cov2, (1.0 - a) * acc + a * tile_val, acc)
        tl.store(out + offs, acc.to(out.dtype.element_ty), mask=m2)


def walk_launcher(mode: str, base: torch.Tensor, packed: torch.Tensor, origins: torch.Tensor,
                  levels: torch.Tensor, alpha: torch.Tensor, out: torch.Tensor) -> Launcher:
    """The walk's one launch: any origins, any K (keys beyond MAX_KC rescanned in chunks)."""
    b, c, h, w = base.shape
    k, t = packed.shape[1], packed.shape[-1]
    hw = h * w
    kc = min(triton.next_power_of_2(k), MAX_KC)
    constexprs = {"T": t, "KC": kc, "ONE_CHUNK": kc >= k}

    def grid(meta: dict[str, Any]) -> tuple[int, int]:
        # sized from the config the autotuner actually runs, never from a fixed block
        return (b * triton.cdiv(hw, meta["BLOCK_P"]), triton.cdiv(c, meta["BLOCK_C"] * meta["CB"]))

    metadata = {
        "decomposition": "axis0 = (b, flat pixel block), axis1 = CB channel blocks; "
                         "touching tiles walked in ascending (level, k) from keys in registers",
        "KC": kc,
        "ONE_CHUNK": kc >= k,
        "autotuned": ["BLOCK_P", "BLOCK_C", "CB", "num_warps"],
    }
    return bind_unpack(mode, base, packed, alpha, out,
                       (_unpack_override_kernel, _unpack_blend_kernel),
                       (base, packed, origins, levels), grid, (c, w, hw, k), constexprs, metadata)
