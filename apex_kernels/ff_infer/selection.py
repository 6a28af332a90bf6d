"""ff-infer's selection of each frame's tiles on the device: both levels' tile ids and the split
parents' slots, by a kernel of its own or in registers inside level 0's tile means
(``kernels._select_tile_mean_kernel``).

Utilities are ranked pairwise (ties: the lower index first), so a frame's top-k needs no sort and
no host synchronisation.
"""

from __future__ import annotations

import triton
import triton.language as tl

from apex_kernels._dependent import await_previous

SELECT_BLOCK = 64  # utilities compared per step: [64, 64] pairs


@triton.jit
def _ranked_ahead(v_i, i, v_j, j, valid_j):
    # how many j come before each i in a descending top-k (ties: the lower index first)
    ahead = (v_j[None, :] > v_i[:, None]) | ((v_j[None, :] == v_i[:, None]) & (j[None, :] < i[:, None]))
    return tl.sum((ahead & valid_j[None, :]).to(tl.int32), axis=1)


@triton.jit
def _select_kernel(util_ptr, split_ptr, ids0_ptr, ids1_ptr, slot_ptr, N0, K0, J, COLS0, BLOCK: tl.constexpr,
                   PDL: tl.constexpr = 0):
    """One frame: ids0 = top-K0 of util0; ids1 = the children of the top-J parents by split_util;
    slot[k] = the place of level-0 tile k among those parents, -1 if it is not one."""
    # dependent too, so that the kernel after it launches early (whatever ran before it is waited for)
    await_previous(PDL)
    b = tl.program_id(0).to(tl.int64)
    util = util_ptr + b * N0
    split = split_ptr + b * N0
    ids0 = ids0_ptr + b * K0
    ids1 = ids1_ptr + b * 4 * J
    slot = slot_ptr + b * K0
    lanes = tl.arange(0, BLOCK)
    # a tile's rank is its position in the descending order: scatter it there if < K0
    for i0 in range(0, N0, BLOCK):
        i = i0 + lanes
        v_i = tl.load(util + i, mask=i < N0, other=0.0).to(tl.float32)
        rank = tl.zeros([BLOCK], dtype=tl.int32)
        for j0 in range(0, N0, BLOCK):
            j = j0 + lanes
            v_j = tl.load(util + j, mask=j < N0, other=0.0).to(tl.float32)
            rank += _ranked_ahead(v_i, i, v_j, j, j < N0)
        tl.store(ids0 + rank, i, mask=(i < N0) & (rank < K0))
    tl.debug_barrier()  # ids0 written by some threads is read back by others
    for k0 in range(0, K0, BLOCK):
        k = k0 + lanes
        parent = tl.load(ids0 + k, mask=k < K0, other=0)
        v_k = tl.load(split + parent, mask=k < K0, other=0.0).to(tl.float32)
        rank = tl.zeros([BLOCK], dtype=tl.int32)
        for j0 in range(0, K0, BLOCK):
            j = j0 + lanes
            v_j = tl.load(split + tl.load(ids0 + j, mask=j < K0, other=0), mask=j < K0,
                          other=0.0).to(tl.float32)
            rank += _ranked_ahead(v_k, k, v_j, j, j < K0)
        _store_children(ids1, slot, k, parent, rank, k < K0, J, COLS0)


@triton.jit
def _store_children(ids1, slot, place, parent, split_rank, valid, J, COLS0):
    """For the level-0 parents at ``place`` among the top K0: ``slot[place]`` = their place among the
    J split ones (-1 for the others), and a split one's four children at ``ids1[4 split_rank + q]``,
    row-major inside the parent, on the grid of half the tile size."""
    tl.store(slot + place, tl.where(split_rank < J, split_rank, -1), mask=valid)
    quad = tl.arange(0, 4)
    rows = 2 * (parent // COLS0)[:, None] + quad[None, :] // 2
    cols = 2 * (parent % COLS0)[:, None] + quad[None, :] % 2
    tl.store(ids1 + 4 * split_rank[:, None] + quad[None, :], rows * (2 * COLS0) + cols,
             mask=(valid & (split_rank < J))[:, None])


@triton.jit
def _frame_ranks(util, N0, K0, BLOCK: tl.constexpr):
    """One frame of N0 <= BLOCK tiles, in registers: each tile's place in the descending order of
    util (ties: the lower index), and whether it is among the top K0 (a parent)."""
    i = tl.arange(0, BLOCK)
    valid = i < N0
    v = tl.load(util + i, mask=valid, other=0.0).to(tl.float32)
    rank = _ranked_ahead(v, i, v, i, valid)
    return i, rank, valid & (rank < K0)


@triton.jit
def _store_frame_ids(split, ids0, ids1, slot, i, rank, parent, J, COLS0):
    """ids0[rank] = tile; the four children of each of the top-J parents by split (ties: the lower
    rank) at 4 * their place among the parents, and that place in slot[rank] (-1 for the others):
    both levels' ids as ``_select_kernel`` writes them."""
    s = tl.load(split + i, mask=parent, other=0.0).to(tl.float32)
    split_rank = _ranked_ahead(s, rank, s, rank, parent)
    tl.store(ids0 + rank, i, mask=parent)
    _store_children(ids1, slot, rank, i, split_rank, parent, J, COLS0)
