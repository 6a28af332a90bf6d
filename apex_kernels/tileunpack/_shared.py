"""What the tileunpack paths share: priority keys, run bounds and the winner store.

A tile's priority key is ``level * K + k``: higher level wins, ties go to the later k.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from apex_kernels._utils import KernelLaunch, Launcher, sequential, shape_bucket

# Above every priority key (levels are int32, so |level * K + k| < 2**62).
NO_KEY = tl.constexpr(2**62)
# Weight of a group (tile slot or band) above the priority key in a sort key: levels are
# checked to be non-negative int32 and K <= 2**10 where it is used, so keys stay below 2**41.
SLOT_UNIT = tl.constexpr(2**41)


@triton.jit
def _store_winners(base, packed, out, b, p, pmask, win, covered, C, HW, K, T: tl.constexpr,
                   BLOCK_C: tl.constexpr, CB: tl.constexpr, READ_ALL_BASE: tl.constexpr):
    """Each output element once: from the pixel's winning tile element, else from base.

    ``win`` holds each pixel's offset in image b's packed tiles for channel 0 (int64;
    int32 offsets measured slower on H200). With
    READ_ALL_BASE, base is read under the block's own mask, not only where no tile wins:
    a per-pixel mask splits the load into scalar ones, a block mask keeps it vectorised
    (the minimal bytes count all of base read once either way).
    """
    cov2 = covered[None, :]
    tiles = packed + b.to(tl.int64) * K * C * T * T
    for i in range(CB):
        c = (tl.program_id(1) * CB + i) * BLOCK_C + tl.arange(0, BLOCK_C)
        m2 = (c < C)[:, None] & pmask[None, :]
        in_tiles = (c.to(tl.int64) * T * T)[:, None] + win[None, :]
        tile_val = tl.load(tiles + in_tiles, mask=m2 & cov2)
        offs = ((b.to(tl.int64) * C + c) * HW)[:, None] + p[None, :]
        base_val = tl.load(base + offs, mask=m2 if READ_ALL_BASE else m2 & ~cov2)
        tl.store(out + offs, tl.where(cov2, tile_val, base_val), mask=m2)


@triton.jit
def _zero_run_bounds(run_start, run_end, row, n, ZB: tl.constexpr):
    """Empty runs for all ``n`` groups of one image, before the bounds are stored."""
    zeros = tl.zeros([ZB], tl.int32)
    for s0 in range(0, n, ZB):
        s = s0 + tl.arange(0, ZB)
        tl.store(run_start + row + s, zeros, mask=s < n)
        tl.store(run_end + row + s, zeros, mask=s < n)
    # other threads of this program overwrite some of these zeros afterwards
    tl.debug_barrier()


@triton.jit
def _store_run_bounds(ordered, n, run_start, run_end, row, LANES: tl.constexpr):
    """Where each group's run starts and ends in ``ordered`` (group * SLOT_UNIT + key,
    sorted; its first ``n`` lanes are real)."""
    i = tl.arange(0, LANES)
    group = (ordered // SLOT_UNIT).to(tl.int32)
    prev_group = tl.gather(group, tl.maximum(i - 1, 0), 0)
    next_group = tl.gather(group, tl.minimum(i + 1, LANES - 1), 0)
    valid = i < n
    first = valid & ((i == 0) | (prev_group != group))
    last = valid & ((i == n - 1) | (next_group != group))
    tl.store(run_start + row + group, i, mask=first)
    tl.store(run_end + row + group, i + 1, mask=last)


def unpack_bucket(base: torch.Tensor, packed: torch.Tensor) -> str:
    b, c, h, w = base.shape
    return shape_bucket(b, c, h, w, packed.shape[-1], packed.shape[1])


def bind_unpack(mode: str, base: torch.Tensor, packed: torch.Tensor, alpha: torch.Tensor,
                out: torch.Tensor, kernels: tuple[Any, Any],
                data: tuple[torch.Tensor | None, ...], grid: Any, sizes: tuple[int, ...],
                constexprs: dict[str, Any], metadata: dict[str, Any],
                prepass: tuple[KernelLaunch, ...] = ()) -> Launcher:
    """Bind the mode's kernel (override or blend) to its arguments, after any prepass launches.

    ``data`` are the kernel's tensor arguments before alpha/out; a prepass is launched
    before the kernel on every call (same stream, so no synchronisation).
    """
    if mode == "override":
        kernel, args = kernels[0], (*data, out, *sizes)
    else:
        kernel, args = kernels[1], (*data, alpha, out, *sizes)
    main = KernelLaunch(f"tileunpack-{mode}", kernel, grid, args, constexprs,
                        unpack_bucket(base, packed))
    launches = (*prepass, main)
    outputs = {"out": out}
    return Launcher(sequential(launches, outputs), outputs, launches,
                    {"kernel": kernel.fn.__name__, "mode": mode, **metadata})
