"""Triton tile-stage1: pack, gated pointwise op and unpack fused into one pass over the map.

Each program owns a band of the image that lies inside one row of tiles: RB pixel
rows x NTB whole tiles, and CB steps of BLOCK_C channels. It decides once which of
its tiles are selected (a histogram of the K selected ids over its NTB tile ids),
then reads x once and writes out once: ``(x*vs + vb) * max(x*gs + gb, 0)`` on
selected tiles, ``x`` elsewhere. While K < MASK_MIN_K that is one launch and no mask tensor.
From MASK_MIN_K on, a prepass bins the ids once per image into a byte per tile, and each program
reads its NTB bytes of that instead: binning all K ids in every program means, at the large profile
(K = 1024) with 4 channels a program, 131,072 programs each reading 4 KB of ids from L2 (0.54 GB)
and histogramming them, against 1.07 GB of x from DRAM. On an H200 the prepass took that cell
from 716.2 to 608.2 us (docs/perf.md, 2026-11-28).
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

# Selected ids binned per vector step; larger K is binned in chunks.
MAX_KC = 1024
# From this K on, a prepass writes a byte per tile (selected or not) that the main kernel reads.
# Measured only at K = 32 (off, unchanged) and K = 1024 (on, 15 % less time, H200); 128 is where
# tileunpack's prepass starts, not a measured crossover.
MASK_MIN_K = 128
# Tiles a prepass program covers (its histogram's bins).
MASK_BINS = 1024
# Pixels per channel a program covers (columns x rows), before BLOCK_C multiplies it.
COLUMN_BUDGET = 128
PIXEL_BUDGET = 1024


# The band is ~1024 pixels per channel at t = 8 (8 rows x 128 columns); a program does
# CB steps of BLOCK_C channels, reusing its selection for all of them (at large K the
# id compares are then amortised over many channels); CB * BLOCK_C = 1 gives the most
# programs at small profiles.
BAND_CONFIGS = [
    triton.Config({"BLOCK_C": 2, "CB": 2}, num_warps=4),
    triton.Config({"BLOCK_C": 1, "CB": 1}, num_warps=2),
    triton.Config({"BLOCK_C": 2, "CB": 1}, num_warps=4),
    triton.Config({"BLOCK_C": 4, "CB": 1}, num_warps=4),
    triton.Config({"BLOCK_C": 4, "CB": 4}, num_warps=4),
    triton.Config({"BLOCK_C": 8, "CB": 4}, num_warps=8),
    triton.Config({"BLOCK_C": 4, "CB": 16}, num_warps=4),
    triton.Config({"BLOCK_C": 8, "CB": 16}, num_warps=8),
]


@triton.jit
def _selected(idx, row0, K, first_tile, NTB: tl.constexpr, KC: tl.constexpr):
    """Whether each of the NTB tile ids from ``first_tile`` is among ``idx[row0:row0+K]``."""
    count = tl.zeros([NTB], tl.int32)
    for k0 in range(0, K, KC):
        kk = k0 + tl.arange(0, KC)
        pos = tl.load(idx + row0 + kk, mask=kk < K, other=-1) - first_tile
        # a histogram of the in-band ids keeps the ids in a 1-D layout; an [NTB, KC]
        # compare replicated the id loads across threads and saturated L1 (ncu, H200)
        count += tl.histogram(pos, NTB, mask=(kk < K) & (pos >= 0) & (pos < NTB))
    return count > 0


@triton.jit
def _selection_mask_kernel(idx, selected, K, TILES, BINS: tl.constexpr, KC: tl.constexpr):
    """``selected[b, j] = 1`` when tile j is among ``idx[b]``, else 0, for BINS tiles from
    ``program_id(1) * BINS``: every byte is written on every call, so no zeroing is needed."""
    b = tl.program_id(0)
    first = tl.program_id(1) * BINS
    hit = _selected(idx, b * K, K, first, BINS, KC)
    tiles = first + tl.arange(0, BINS)
    tl.store(selected + b.to(tl.int64) * TILES + tiles, hit.to(tl.int8), mask=tiles < TILES)


@triton.jit
def band_program(pid, bands, col_blocks, CHUNKS: tl.constexpr):
    """``(b, band, row chunk, column block)`` of program ``pid``: axis 0 enumerates
    (b, band of T pixel rows, chunk of rows, column block), column blocks fastest."""
    cb = pid % col_blocks
    rest = pid // col_blocks
    chunk = rest % CHUNKS
    rest = rest // CHUNKS
    return rest // bands, rest % bands, chunk, cb


@triton.jit
def band_block(pid, H, W, T: tl.constexpr, TP: tl.constexpr, RB: tl.constexpr, NTB: tl.constexpr):
    """Program ``pid``'s band: ``(b, tile row, tile-column block, y4, x4, pixel mask)``.

    Axis 0 enumerates (b, tile row, row chunk, block of NTB tile columns). The block is
    ``[1, RB, NTB, TP]``: dx innermost and whole tiles side by side, so a row of the
    band is one contiguous run of NTB * t elements.
    """
    CHUNKS: tl.constexpr = (T + RB - 1) // RB
    per_row = W // T
    b, ty, chunk, cb = band_program(pid, H // T, tl.cdiv(per_row, NTB), CHUNKS)
    tcol = cb * NTB + tl.arange(0, NTB)
    dy = chunk * RB + tl.arange(0, RB)
    dx = tl.arange(0, TP)
    y4 = (ty * T + dy)[None, :, None, None]
    x4 = (tcol[:, None] * T + dx[None, :])[None, None, :, :]
    col_ok = (tcol[:, None] < per_row) & (dx[None, :] < T)
    pix_ok = (dy < T)[None, :, None, None] & col_ok[None, None, :, :]
    return b, ty, cb, y4, x4, pix_ok


@triton.autotune(configs=autotune_configs(BAND_CONFIGS), key=["C", "H", "W", "K", "T"])
@triton.jit
def _stage1_kernel(x, idx, selected, vs, vb, gs, gb, out, C, H, W, K,
                   T: tl.constexpr, TP: tl.constexpr, RB: tl.constexpr, NTB: tl.constexpr,
                   KC: tl.constexpr, MASKED: tl.constexpr, BLOCK_C: tl.constexpr, CB: tl.constexpr):
    """Axis 0: (b, tile row, row chunk, tile-column block); axis 1: CB channel blocks. MASKED:
    the selection comes from the prepass's bytes per tile, not from binning the ids here."""
    per_row = W // T
    b, ty, cb, y4, x4, pix_ok = band_block(tl.program_id(0), H, W, T, TP, RB, NTB)
    c = tl.program_id(1) * CB * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (c < C)[:, None, None, None] & pix_ok
    offs = ((b.to(tl.int64) * C + c[:, None, None, None]) * H + y4) * W + x4
    # issued before the id compares so its DRAM latency overlaps them
    xv = tl.load(x + offs, mask=mask)
    if MASKED:
        tiles = cb * NTB + tl.arange(0, NTB)
        hit = tl.load(selected + b.to(tl.int64) * (H // T) * per_row + ty * per_row + tiles,
                      mask=tiles < per_row, other=0) != 0
    else:
        hit = _selected(idx, b * K, K, ty * per_row + cb * NTB, NTB, KC)
    keep = hit[None, None, :, None]
    for i in tl.static_range(CB):
        if i > 0:
            c = (tl.program_id(1) * CB + i) * BLOCK_C + tl.arange(0, BLOCK_C)
            mask = (c < C)[:, None, None, None] & pix_ok
            offs = ((b.to(tl.int64) * C + c[:, None, None, None]) * H + y4) * W + x4
            xv = tl.load(x + offs, mask=mask)
        cm = c < C
        v_scale = tl.load(vs + c, mask=cm).to(tl.float32)[:, None, None, None]
        v_shift = tl.load(vb + c, mask=cm).to(tl.float32)[:, None, None, None]
        g_scale = tl.load(gs + c, mask=cm).to(tl.float32)[:, None, None, None]
        g_shift = tl.load(gb + c, mask=cm).to(tl.float32)[:, None, None, None]
        xf = xv.to(tl.float32)
        res = (xf * v_scale + v_shift) * tl.maximum(xf * g_scale + g_shift, 0.0)
        # unselected pixels store the loaded value itself: an exact copy in every dtype
        tl.store(out + offs, tl.where(keep, res.to(out.dtype.element_ty), xv), mask=mask)


def band_shape(tile_size: int, tiles_per_row: int, column_budget: int | None = None,
               pixel_budget: int | None = None) -> tuple[int, int, int]:
    """``(TP, RB, NTB)``: padded tile width, pixel rows and whole tiles per program.

    About COLUMN_BUDGET columns (NTB tiles side by side) and PIXEL_BUDGET pixels per
    channel (or the budgets given); tiles taller than that are split into row chunks.
    """
    column_budget = COLUMN_BUDGET if column_budget is None else column_budget
    pixel_budget = PIXEL_BUDGET if pixel_budget is None else pixel_budget
    tp = triton.next_power_of_2(tile_size)
    ntb = min(triton.next_power_of_2(tiles_per_row), max(1, column_budget // tp))
    rb = min(tp, max(1, pixel_budget // (ntb * tp)))
    return tp, rb, ntb


def tile_stage1_launcher(x: torch.Tensor, indices: torch.Tensor, value_scale: torch.Tensor,
                         value_bias: torch.Tensor, gate_scale: torch.Tensor,
                         gate_bias: torch.Tensor, tile_size: int,
                         out: torch.Tensor | None = None) -> Launcher:
    """Bind tile-stage1 to its tensors; each call of the result runs on their current contents.

    ``x [B, C, H, W]``, ``indices [B, K]`` (int32 tile ids, unique within a row: not
    checked here), the four per-channel vectors ``[C]``; ``out`` like ``x``.
    """
    vectors = {"value_scale": value_scale, "value_bias": value_bias, "gate_scale": gate_scale,
               "gate_bias": gate_bias}
    if x.dim() != 4 or indices.dim() != 2 or indices.shape[0] != x.shape[0]:
        raise ValueError(f"tile-stage1: x must be [B, C, H, W] and indices [B, K], got "
                         f"{list(x.shape)} and {list(indices.shape)}")
    b, c, h, w = x.shape
    check_tensors("tile-stage1", {"x": x, "indices": indices, **vectors},
                  {name: (c,) for name in vectors})
    k, t = indices.shape[1], tile_size
    if t < 1 or h % t or w % t:
        raise ValueError(f"tile-stage1: tile_size {t} must divide height {h} and width {w}")
    per_row = w // t
    tp, rb, ntb = band_shape(t, per_row)
    kc = min(triton.next_power_of_2(k), MAX_KC)
    programs_axis0 = b * (h // t) * triton.cdiv(t, rb) * triton.cdiv(per_row, ntb)
    result = output_buffer(out, "out", x, (b, c, h, w))
    outputs = {"out": result}
    masked = k >= MASK_MIN_K
    tiles = (h // t) * per_row
    # a byte per tile, rewritten by the prepass on every call (allocated once, here)
    selected = torch.empty((b, tiles) if masked else (1,), dtype=torch.int8, device=x.device)
    prepass: list[KernelLaunch] = []
    if masked:
        bins = min(triton.next_power_of_2(tiles), MASK_BINS)
        meta = {"BINS": bins, "KC": kc, "num_warps": 4}
        prepass.append(KernelLaunch("tile-stage1", _selection_mask_kernel, (b, triton.cdiv(tiles, bins)),
                                    (indices, selected, k, tiles), meta, shape_bucket(b, c, h, w, t, k), meta))

    def grid(meta: dict[str, Any]) -> tuple[int, int]:
        # sized from the config the autotuner actually runs, never from a fixed block
        return (programs_axis0, triton.cdiv(c, meta["BLOCK_C"] * meta["CB"]))

    launch = KernelLaunch("tile-stage1", _stage1_kernel, grid,
                          (x, indices, selected, value_scale, value_bias, gate_scale, gate_bias,
                           result, c, h, w, k),
                          {"T": t, "TP": tp, "RB": rb, "NTB": ntb, "KC": kc, "MASKED": masked},
                          shape_bucket(b, c, h, w, t, k))
    metadata = {
        "kernel": "_stage1_kernel",
        "decomposition": "axis0 = (b, tile row, row chunk, tile-column block), axis1 = CB channel blocks",
        "programs_axis0": programs_axis0,
        "TP": tp,
        "RB": rb,
        "NTB": ntb,
        "KC": kc,
        "MASKED": masked,
        "autotuned": ["BLOCK_C", "CB", "num_warps"],
    }
    if masked:
        metadata["prepass"] = "_selection_mask_kernel"
    launches = (*prepass, launch)
    return Launcher(sequential(launches, outputs), outputs, launches, metadata)


def tile_stage1(x: torch.Tensor, indices: torch.Tensor, value_scale: torch.Tensor,
                value_bias: torch.Tensor, gate_scale: torch.Tensor, gate_bias: torch.Tensor,
                tile_size: int, out: torch.Tensor | None = None) -> torch.Tensor:
    """``(x*vs + vb) * max(x*gs + gb, 0)`` on the selected tiles' pixels, ``x`` elsewhere."""
    return tile_stage1_launcher(x, indices, value_scale, value_bias, gate_scale, gate_bias,
                                tile_size, out)()["out"]
