"""The winner map: overlapping origins at larger K, three launches.

A prepass lists each image's tiles in ascending priority by the bands of T pixel rows
they meet, a second finds each pixel's winning tile element from its band's list (a
winner map, one int32 per pixel), and a streaming pass copies from the winner or from
base. At the large profile (K = 1024, H200) that took the walk's 48 % of copy bandwidth
to over 70 %; at the fixed profile (K = 32) three launches cost more than the walk saves.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from apex_kernels._utils import KernelLaunch, Launcher, autotune_configs
from apex_kernels.tile_stage1 import band_program
from apex_kernels.tileunpack._shared import (
    NO_KEY,
    SLOT_UNIT,
    _store_run_bounds,
    _store_winners,
    _zero_run_bounds,
    bind_unpack,
    unpack_bucket,
)
from apex_kernels.tileunpack.walk import WALK_CONFIGS

# Overlapping origins take this path from this K on (up to the walk's MAX_KC).
OVERLAP_RUNS_MIN_K = 128
# Tiles of a band's list tested at once against a winner-map block of
# OVERLAP_MAP_ROWS x OVERLAP_MAP_COLUMNS pixels.
OVERLAP_RUN_CHUNK = 16
OVERLAP_MAP_ROWS = 8
OVERLAP_MAP_COLUMNS = 128

STREAM_CONFIGS = [
    *WALK_CONFIGS,
    triton.Config({"BLOCK_P": 256, "BLOCK_C": 8, "CB": 16}, num_warps=4),
    triton.Config({"BLOCK_P": 256, "BLOCK_C": 16, "CB": 16}, num_warps=8),
    triton.Config({"BLOCK_P": 512, "BLOCK_C": 8, "CB": 16}, num_warps=8),
]


@triton.jit
def _row_band_runs_kernel(origins, levels, run_k, run_start, run_end, K, bands, T: tl.constexpr,
                          KC: tl.constexpr, ZB: tl.constexpr):
    """One program per image: its tiles grouped by the bands of T pixel rows they meet.

    A tile with origin row ``oy`` meets band ``oy // T`` and, unless aligned, the next
    one, so it is listed once or twice. Band r's tiles are
    ``run_k[b, run_start[b, r]:run_end[b, r]]`` (empty: both 0), in ascending priority
    (level, k): a pixel's winner is its covering tile listed last in its band.
    """
    b = tl.program_id(0)
    row = b.to(tl.int64) * bands
    _zero_run_bounds(run_start, run_end, row, bands, ZB)
    i = tl.arange(0, 2 * KC)  # lane i lists tile i % KC in its first (i < KC) or second band
    k = i % KC
    oy = tl.load(origins + (b * K + k) * 2, mask=k < K, other=0)
    lv = tl.load(levels + b * K + k, mask=k < K, other=0)
    band = tl.where(i < KC, oy // T, (oy + T - 1) // T)
    listed = (k < K) & ((i < KC) | (oy % T != 0))
    # levels are checked non-negative and K <= MAX_KC, so the key stays below SLOT_UNIT
    key = band.to(tl.int64) * SLOT_UNIT + lv.to(tl.int64) * K + k
    ordered = tl.sort(tl.where(listed, key, NO_KEY))
    n = tl.sum(listed.to(tl.int32), axis=0)  # the listed entries sort first
    tl.store(run_k + b * 2 * K + i, ((ordered % SLOT_UNIT) % K).to(tl.int32), mask=i < n)
    _store_run_bounds(ordered, n, run_start, run_end, row, 2 * KC)


@triton.jit
def _winner_map_kernel(origins, run_k, run_start, run_end, winners, H, W, HW, K, bands,
                       T: tl.constexpr, RB: tl.constexpr, BW: tl.constexpr,
                       RUN_CHUNK: tl.constexpr, LIST_INDEX: tl.constexpr = False):
    """``winners[b, y * W + x]``: ``k * T*T + offset in tile`` of each pixel's winning tile
    element, -1 where no tile covers it; one program per RB rows x BW columns of a band.

    A pixel's candidates are the tiles listed for its band, in ascending priority, so its
    winner is the covering tile at the highest list index j. RUN_CHUNK tiles are tested
    at once, and the row and column tests are separable: per (tile, row) ``j * T*T +
    dy * T`` or far below zero, per (tile, column) ``dx`` or far below zero; their sum,
    maximised over the tiles, is negative exactly where no tile covers the pixel and
    otherwise names the list index and the place in the winning tile.
    """
    CHUNKS: tl.constexpr = (T + RB - 1) // RB
    MISS: tl.constexpr = -(2**30)  # the launcher keeps 2 * K * T*T below 2**29
    b, band, chunk, cb = band_program(tl.program_id(0), bands, tl.cdiv(W, BW), CHUNKS)
    dy0 = chunk * RB + tl.arange(0, RB)
    y = band * T + dy0
    x = cb * BW + tl.arange(0, BW)
    row = b.to(tl.int64) * bands
    runs = run_k + b.to(tl.int64) * 2 * K
    best = tl.full([RB, BW], -1, tl.int32)
    start = tl.load(run_start + row + band)
    end = tl.load(run_end + row + band)
    for j0 in range(start, end, RUN_CHUNK):
        j = j0 + tl.arange(0, RUN_CHUNK)
        listed = j < end
        k = tl.load(runs + j, mask=listed, other=0)
        oy = tl.load(origins + (b * K + k) * 2, mask=listed, other=-2 * T)
        ox = tl.load(origins + (b * K + k) * 2 + 1, mask=listed, other=-2 * T)
        dy = y[None, :] - oy[:, None]
        dx = x[None, :] - ox[:, None]
        in_rows = tl.where((dy >= 0) & (dy < T), j[:, None] * (T * T) + dy * T, MISS)
        in_cols = tl.where((dx >= 0) & (dx < T), dx, MISS)
        best = tl.maximum(best, tl.max(in_rows[:, :, None] + in_cols[:, None, :], axis=0))
    covered = best >= 0
    if LIST_INDEX:  # the index in the band's list instead of k (scripts/dev/overlap_staged.py)
        code = tl.where(covered, best - start * (T * T), -1)
    else:
        k = tl.load(runs + best // (T * T), mask=covered, other=0)
        code = tl.where(covered, k * (T * T) + best % (T * T), -1)
    mask = ((dy0 < T) & (y < H))[:, None] & (x < W)[None, :]
    tl.store(winners + b.to(tl.int64) * HW + (y * W)[:, None] + x[None, :], code, mask=mask)


@triton.autotune(configs=autotune_configs(STREAM_CONFIGS), key=["C", "HW", "K", "T"])
@triton.jit
def _unpack_winner_map_kernel(base, packed, winners, out, C, HW, K, T: tl.constexpr,
                              BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr, CB: tl.constexpr):
    """Override from the winner map: a streaming pass over base, out and the winning tiles."""
    blocks = tl.cdiv(HW, BLOCK_P)
    b = tl.program_id(0) // blocks
    p = (tl.program_id(0) % blocks) * BLOCK_P + tl.arange(0, BLOCK_P)
    pmask = p < HW
    code = tl.load(winners + b.to(tl.int64) * HW + p, mask=pmask, other=-1)
    covered = code >= 0
    win = (code // (T * T)).to(tl.int64) * C * T * T + code % (T * T)
    _store_winners(base, packed, out, b, p, pmask, win, covered, C, HW, K, T, BLOCK_C, CB,
                   True)


def fits_winner_map(k: int, tile_size: int, max_kc: int) -> bool:
    """Whether K tiles of this size take the winner map: from OVERLAP_RUNS_MIN_K up to the
    walk's register chunk, with the map's int32 candidates (list index * T*T + offset)
    keeping headroom."""
    return OVERLAP_RUNS_MIN_K <= k <= max_kc and 2 * k * tile_size * tile_size < 2**29


def winner_map_launcher(base: torch.Tensor, packed: torch.Tensor, origins: torch.Tensor,
                        levels: torch.Tensor, out: torch.Tensor) -> Launcher:
    """Override with any origins in three launches: band lists, winner map, streaming copy."""
    b, c, h, w = base.shape
    k, t = packed.shape[1], packed.shape[-1]
    bands = triton.cdiv(h, t)
    kc = triton.next_power_of_2(k)
    # written by the prepasses on every call (allocated once, here)
    run_k = torch.empty((b, 2 * k), dtype=torch.int32, device=base.device)
    run_bounds = torch.empty((2, b, bands), dtype=torch.int32, device=base.device)
    winners = torch.empty((b, h * w), dtype=torch.int32, device=base.device)
    # its sort has 2 * KC lanes: at K = 1024 (H200) 16 warps took 11 us off 8 warps' time
    runs_config = {"KC": kc, "ZB": 1024, "num_warps": 4 if kc <= 128 else 8 if kc <= 256 else 16}
    rb = min(OVERLAP_MAP_ROWS, triton.next_power_of_2(t))
    bw = min(OVERLAP_MAP_COLUMNS, triton.next_power_of_2(w))
    map_config = {"RB": rb, "BW": bw, "RUN_CHUNK": OVERLAP_RUN_CHUNK, "num_warps": 4}
    map_grid = (b * bands * triton.cdiv(t, rb) * triton.cdiv(w, bw),)
    bucket = unpack_bucket(base, packed)
    prepass = (
        KernelLaunch("tileunpack-override", _row_band_runs_kernel, (b,),
                     (origins, levels, run_k, run_bounds[0], run_bounds[1], k, bands),
                     {"T": t, **runs_config}, bucket, runs_config),
        KernelLaunch("tileunpack-override", _winner_map_kernel, map_grid,
                     (origins, run_k, run_bounds[0], run_bounds[1], winners, h, w, h * w, k,
                      bands), {"T": t, **map_config}, bucket, map_config),
    )

    def grid(meta: dict[str, Any]) -> tuple[int, int]:
        # sized from the config the autotuner actually runs, never from a fixed block
        return (b * triton.cdiv(h * w, meta["BLOCK_P"]), triton.cdiv(c, meta["BLOCK_C"] * meta["CB"]))

    constexprs = {"T": t}
    metadata = {
        "decomposition": "three launches: each image's tiles listed in ascending priority by "
                         "the bands of T rows they meet (_row_band_runs_kernel, one program "
                         "per image); each pixel's winning tile element from its band's list "
                         "(_winner_map_kernel, RB rows x BW columns per program); then "
                         "axis0 = (b, flat pixel block), axis1 = CB channel blocks copying "
                         "from the winner or from base",
        "prepass": "_row_band_runs_kernel, _winner_map_kernel",
        **constexprs,
        **{n: v for n, v in map_config.items() if n != "num_warps"},
        "autotuned": ["BLOCK_P", "BLOCK_C", "CB", "num_warps"],
    }
    return bind_unpack("override", base, packed, base, out, (_unpack_winner_map_kernel, None),
                       (base, packed, winners), grid, (c, h * w, k), constexprs, metadata,
                       prepass)
