"""Aligned origins (on the tile grid): one program per band of tile slots, override or blend.

Each program owns RB pixel rows x NTB whole tile slots of one tile row and CB steps of
BLOCK_C channels. While K < RUNS_MIN_K, each program sorts its band's tiles by (slot,
priority) itself: one launch. From RUNS_MIN_K on (up to ALIGNED_MAX_K) a small prepass,
one program per image, sorts the image's tiles once into per-slot runs and the band
kernels read their slots' runs: two launches.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from apex_kernels._utils import KernelLaunch, Launcher, autotune_configs
from apex_kernels.tile_stage1 import BAND_CONFIGS, band_block, band_shape
from apex_kernels.tileunpack._shared import (
    NO_KEY,
    SLOT_UNIT,
    _store_run_bounds,
    _zero_run_bounds,
    bind_unpack,
    unpack_bucket,
)

# Aligned origins take the band kernels below while K fits one sort of this many lanes
# (keys then stay below SLOT_UNIT); the walk serves larger K.
ALIGNED_MAX_K = 1024
# From this K on, the band kernels read per-slot runs sorted once per image by a prepass
# instead of sorting all K tiles in each program: at K = 1024 (H200, fp16, large
# profile) every program's own sort made the band kernels L1-bound (override 1337 us,
# blend 1384 us, 41-49 % of copy bandwidth). Below it one launch beats two.
RUNS_MIN_K = 128
# The prepass keys slots above priority keys (SLOT_UNIT) and below NO_KEY.
RUNS_MAX_SLOTS = 2**21
# Pixels per channel of one band program (as tile-stage1: NTB tiles side by side).
BAND_COLUMN_BUDGET = 128
BAND_PIXEL_BUDGET = 1024
# The band configs of tile-stage1, plus deeper channel loops: each program sorts its
# band's tiles once, so at large K more channels per program amortise the sort. And one
# channel a step over two or four steps: at the large profile (H200) the autotuner takes
# these for both modes, blend 728 -> 705 us and override 642 -> 628 us.
ALIGNED_CONFIGS = [*BAND_CONFIGS,
                   triton.Config({"BLOCK_C": 4, "CB": 32}, num_warps=4),
                   triton.Config({"BLOCK_C": 8, "CB": 32}, num_warps=8),
                   triton.Config({"BLOCK_C": 1, "CB": 2}, num_warps=2),
                   triton.Config({"BLOCK_C": 1, "CB": 4}, num_warps=2),
                   triton.Config({"BLOCK_C": 1, "CB": 2}, num_warps=4)]


@triton.jit
def _band_tiles(origins, levels, row0, K, ty, col0, T: tl.constexpr, NTB: tl.constexpr,
                KC: tl.constexpr):
    """The band's tiles grouped by slot, ascending priority inside each slot.

    Returns ``(sorted, start, count)``: ``sorted`` holds ``slot * SLOT_UNIT + key`` for
    every tile on one of this band's NTB slots (others sort last), ``start[s]`` and
    ``count[s]`` where slot s's run begins in it and how long it is. One sort per program
    replaces a walk over all K keys per priority step.
    """
    kk = tl.arange(0, KC)
    km = kk < K
    oy = tl.load(origins + (row0 + kk) * 2, mask=km, other=-1)
    ox = tl.load(origins + (row0 + kk) * 2 + 1, mask=km, other=0)
    lv = tl.load(levels + row0 + kk, mask=km, other=0)
    slot = ox // T - col0
    inband = km & (oy == ty * T) & (slot >= 0) & (slot < NTB)
    key = lv.to(tl.int64) * K + kk
    packed_key = tl.where(inband, slot.to(tl.int64) * SLOT_UNIT + key,
                          tl.full([KC], NTB, tl.int64) * SLOT_UNIT)
    ordered = tl.sort(packed_key)
    count = tl.histogram(slot, NTB, mask=inband)
    start = tl.cumsum(count, 0) - count
    return ordered, start, count


@triton.jit
def _band_runs(origins, levels, run_k, run_start, run_end, b, K, ty, cb, W, H,
               T: tl.constexpr, NTB: tl.constexpr, KC: tl.constexpr, PRESORTED: tl.constexpr):
    """Per band slot where its run of tiles (ascending priority) starts and how long it is.

    Returns ``(table, start, count)``; ``table`` is the band's own sort when the runs
    are not presorted (``_band_tiles``), else unused: the k's are read from ``run_k``.
    """
    if PRESORTED:
        per_row = W // T
        tcol = cb * NTB + tl.arange(0, NTB)
        at = b.to(tl.int64) * (H // T) * per_row + ty * per_row + tcol
        start = tl.load(run_start + at, mask=tcol < per_row, other=0)
        count = tl.load(run_end + at, mask=tcol < per_row, other=0) - start
        table = start
    else:
        table, start, count = _band_tiles(origins, levels, b * K, K, ty, cb * NTB, T, NTB, KC)
    return table, start, count


@triton.jit
def _slot_tile(table, run_k, b, start, count, j, K, KC: tl.constexpr, PRESORTED: tl.constexpr):
    """Per slot, the k of its j-th tile in ascending priority, and whether it has one."""
    has = (j >= 0) & (j < count)
    if PRESORTED:
        k = tl.load(run_k + b * K + start + j, mask=has, other=0)
    else:
        at = tl.minimum(start + j, KC - 1)
        k = (tl.gather(table, tl.maximum(at, 0), 0) % SLOT_UNIT) % K
    return k, has


@triton.jit
def _slot_runs_kernel(origins, levels, run_k, run_start, run_end, K, per_row, slots,
                      T: tl.constexpr, KC: tl.constexpr, ZB: tl.constexpr):
    """One program per image: its tiles sorted by (slot, level, k) and each slot's run bounds.

    ``run_k[b, i]`` is the k of the i-th tile in that order; slot s's tiles are
    ``run_k[b, run_start[b, s]:run_end[b, s]]`` (empty: both 0).
    """
    b = tl.program_id(0)
    row = b.to(tl.int64) * slots
    _zero_run_bounds(run_start, run_end, row, slots, ZB)
    i = tl.arange(0, KC)
    valid = i < K
    oy = tl.load(origins + (b * K + i) * 2, mask=valid, other=0)
    ox = tl.load(origins + (b * K + i) * 2 + 1, mask=valid, other=0)
    lv = tl.load(levels + b * K + i, mask=valid, other=0)
    slot = (oy // T) * per_row + ox // T
    key = tl.where(valid, slot.to(tl.int64) * SLOT_UNIT + lv.to(tl.int64) * K + i, NO_KEY)
    ordered = tl.sort(key)  # the K real keys first
    tl.store(run_k + b * K + i, ((ordered % SLOT_UNIT) % K).to(tl.int32), mask=valid)
    _store_run_bounds(ordered, K, run_start, run_end, row, KC)


@triton.autotune(configs=autotune_configs(ALIGNED_CONFIGS), key=["C", "H", "W", "K", "T", "PRESORTED"])
@triton.jit
def _unpack_override_band_kernel(base, packed, origins, levels, run_k, run_start, run_end, out,
                                 C, H, W, K,
                                 T: tl.constexpr, TP: tl.constexpr, RB: tl.constexpr,
                                 NTB: tl.constexpr, KC: tl.constexpr, PRESORTED: tl.constexpr,
                                 BLOCK_C: tl.constexpr, CB: tl.constexpr):
    """Each slot takes its highest-priority tile (the last of its run); empty slots copy base."""
    b, ty, cb, y4, x4, pix_ok = band_block(tl.program_id(0), H, W, T, TP, RB, NTB)
    table, start, count = _band_runs(origins, levels, run_k, run_start, run_end, b, K, ty, cb,
                                     W, H, T, NTB, KC, PRESORTED)
    k, has = _slot_tile(table, run_k, b, start, count, count - 1, K, KC, PRESORTED)
    has4 = has[None, None, :, None]
    # offset of each pixel inside its slot's winning tile, minus the channel term
    in_tile = ((b.to(tl.int64) * K + k[None, None, :, None]) * C * T + (y4 - ty * T)) * T + x4 % T
    for i in range(CB):  # a loop, not unrolled: CB runs up to 32
        c = (tl.program_id(1) * CB + i) * BLOCK_C + tl.arange(0, BLOCK_C)
        c4 = c[:, None, None, None]
        mask = (c4 < C) & pix_ok
        offs = ((b.to(tl.int64) * C + c4) * H + y4) * W + x4
        # one load per output element: from the winning tile, or from base where none
        tile_val = tl.load(packed + in_tile + c4.to(tl.int64) * T * T, mask=mask & has4)
        base_val = tl.load(base + offs, mask=mask & ~has4)
        tl.store(out + offs, tl.where(has4, tile_val, base_val), mask=mask)


@triton.jit
def _blend_tiles(acc, tile_ptrs, take, mask, a):
    """``(1 - a) * acc + a * P`` where ``take``, P read at ``tile_ptrs``; acc elsewhere."""
    tile_val = tl.load(tile_ptrs, mask=mask & take, other=0.0).to(tl.float32)
    return tl.where(take, (1.0 - a) * acc + a * tile_val, acc)


@triton.autotune(configs=autotune_configs(ALIGNED_CONFIGS), key=["C", "H", "W", "K", "T", "PRESORTED"])
@triton.jit
def _unpack_blend_band_kernel(base, packed, origins, levels, run_k, run_start, run_end, alpha, out,
                              C, H, W, K,
                              T: tl.constexpr, TP: tl.constexpr, RB: tl.constexpr,
                              NTB: tl.constexpr, KC: tl.constexpr, PRESORTED: tl.constexpr,
                              BLOCK_C: tl.constexpr, CB: tl.constexpr):
    """Per slot its tiles in ascending priority: ``out = (1 - a) * out + a * P``, all slots at once."""
    b, ty, cb, y4, x4, pix_ok = band_block(tl.program_id(0), H, W, T, TP, RB, NTB)
    table, start, count = _band_runs(origins, levels, run_k, run_start, run_end, b, K, ty, cb,
                                     W, H, T, NTB, KC, PRESORTED)
    depth = tl.max(count, 0)
    a = tl.load(alpha).to(tl.float32)
    within = (y4 - ty * T) * T + x4 % T
    # each slot's first tile, found once: its load is then issued beside base's in every
    # channel step instead of after it (most slots hold at most one tile)
    k0, has0 = _slot_tile(table, run_k, b, start, count, 0, K, KC, PRESORTED)
    first = has0[None, None, :, None]
    in_first = (b.to(tl.int64) * K + k0[None, None, :, None]) * C * T * T + within
    for i in range(CB):  # a loop, not unrolled: CB runs up to 32
        c = (tl.program_id(1) * CB + i) * BLOCK_C + tl.arange(0, BLOCK_C)
        c4 = c[:, None, None, None]
        mask = (c4 < C) & pix_ok
        offs = ((b.to(tl.int64) * C + c4) * H + y4) * W + x4
        # fp32 accumulator, rounded once at the store
        acc = tl.load(base + offs, mask=mask, other=0.0).to(tl.float32)
        acc = _blend_tiles(acc, packed + in_first + c4.to(tl.int64) * T * T, first, mask, a)
        # level j applies every slot's j-th tile at once: depth steps, each over the block
        for j in range(1, depth):
            k, has = _slot_tile(table, run_k, b, start, count, j, K, KC, PRESORTED)
            has4 = has[None, None, :, None]
            src = ((b.to(tl.int64) * K + k[None, None, :, None]) * C + c4) * T * T + within
            acc = _blend_tiles(acc, packed + src, has4, mask, a)
        tl.store(out + offs, acc.to(out.dtype.element_ty), mask=mask)


def aligned_launcher(mode: str, base: torch.Tensor, packed: torch.Tensor, origins: torch.Tensor,
                     levels: torch.Tensor, alpha: torch.Tensor, out: torch.Tensor) -> Launcher:
    """The band kernels, with the per-slot runs prepass from RUNS_MIN_K tiles on."""
    b, c, h, w = base.shape
    k, t = packed.shape[1], packed.shape[-1]
    per_row = w // t
    slots = (h // t) * per_row
    presorted = k >= RUNS_MIN_K and slots <= RUNS_MAX_SLOTS
    tp, rb, ntb = band_shape(t, per_row, BAND_COLUMN_BUDGET, BAND_PIXEL_BUDGET)
    programs_axis0 = b * (h // t) * triton.cdiv(t, rb) * triton.cdiv(per_row, ntb)
    kc = triton.next_power_of_2(k)
    constexprs = {"T": t, "TP": tp, "RB": rb, "NTB": ntb, "KC": kc, "PRESORTED": presorted}
    # without presorted runs the run arguments are None (constexpr, never read): each
    # tensor argument adds host time to every launch, and at the fixed profile the
    # host already issues a launch about as slowly as the GPU runs it
    data: tuple[torch.Tensor | None, ...] = (base, packed, origins, levels, None, None, None)
    prepass: tuple[KernelLaunch, ...] = ()
    if presorted:
        # per-slot runs, written by the prepass on every call (allocated once, here)
        run_k = torch.empty((b, k), dtype=torch.int32, device=base.device)
        run_bounds = torch.empty((2, b, slots), dtype=torch.int32, device=base.device)
        data = (base, packed, origins, levels, run_k, run_bounds[0], run_bounds[1])
        runs_config = {"KC": kc, "ZB": 1024, "num_warps": 4 if kc <= 256 else 8}
        prepass = (KernelLaunch(f"tileunpack-{mode}", _slot_runs_kernel, (b,),
                                (origins, levels, run_k, run_bounds[0], run_bounds[1], k,
                                 per_row, slots), {"T": t, **runs_config},
                                unpack_bucket(base, packed), runs_config),)

    def grid(meta: dict[str, Any]) -> tuple[int, int]:
        # sized from the config the autotuner actually runs, never from a fixed block
        return (programs_axis0, triton.cdiv(c, meta["BLOCK_C"] * meta["CB"]))

    order = ("runs of every image's tiles sorted once by (slot, level, k) in a prepass "
             "(_slot_runs_kernel, one program per image)" if presorted
             else "the band's tiles sorted once per program by (slot, level, k)")
    metadata = {
        "decomposition": "axis0 = (b, tile row, row chunk, block of NTB tile slots), axis1 = CB "
                         f"channel blocks; {order}",
        "programs_axis0": programs_axis0,
        **constexprs,
        "autotuned": ["BLOCK_C", "CB", "num_warps"],
    }
    if presorted:
        metadata["prepass"] = "_slot_runs_kernel"
    return bind_unpack(mode, base, packed, alpha, out,
                       (_unpack_override_band_kernel, _unpack_blend_band_kernel), data, grid,
                       (c, h, w, k), constexprs, metadata, prepass)
