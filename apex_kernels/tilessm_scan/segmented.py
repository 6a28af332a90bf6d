"""The split path for long K: segments of ``SEGMENT_STEPS`` steps, one program each.

The one-program walk cannot fill a GPU once K is long: the chunks run in series, and
narrow channel blocks read 8-32 bytes per step row. Above ``MAX_BLOCK_K`` steps K is
split into segments instead, in three launches:

1. ``_segment_totals_kernel``: each segment's end state from a zero start (forward,
   and for backward the state after its first step scanning in reverse);
2. ``_segment_carries_kernel``: per (row, channel block), a scan over the segments'
   affine maps ``s -> d**len * s + total`` gives every segment's starting state (and the
   final states);
3. ``_segment_apply_kernel``: each segment rescans its tokens from its starting state(s)
   and stores y once.

Inside a segment each thread first composes ``SCAN_GROUP`` consecutive steps in
registers, so the ``tl.associative_scan`` runs over a quarter of the rows. Tokens are
read twice and y written once, by thousands of programs at once.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from apex_kernels._utils import KernelLaunch, autotune_configs, pin_config
from apex_kernels.tilessm_scan._scan import (
    _affine_combine,
    _channel_params,
    _decay,
    _drive,
    _last_row,
    _store_merged,
    scan_config,
)

# Segment length of the split path (K > MAX_BLOCK_K); one program each.
SEGMENT_STEPS = 64
# Steps a thread composes in registers before the scan across rows (the bidirectional
# segment kernel spells out its four steps)
SCAN_GROUP = 4
# Segments folded per step of the carries kernel's walk
FOLD_BLOCK = 256
FOLD_BLOCK_C = 32
MIN_FOLD_K = 16  # the fold's tile is at least this many segments deep

# The split path has B * segments programs per channel block, so it can afford channel
# blocks wide enough for full 32-byte sectors (16 fp16 channels) and beyond; its tiles
# are SEGMENT_STEPS / SCAN_GROUP rows deep.
SPLIT_CONFIGS = [
    scan_config(64, 4),
    scan_config(16, 2),
    scan_config(32, 2),
    scan_config(32, 4),
    scan_config(64, 8),
    scan_config(128, 4),
    scan_config(128, 8),
    scan_config(256, 8),
]



@triton.jit
def _steps(base, pos, SEG: tl.constexpr, REVERSE: tl.constexpr):
    # position ``pos`` of a segment in scan order; reversed, position 0 is its last step
    if REVERSE:
        return base + (SEG - 1 - pos)
    return base + pos


@triton.jit
def _group_maps(tok, base, groups, offs_c, mask_c, d, gain, sbias, K, C, CLAMP,
                GROUP: tl.constexpr, SEG: tl.constexpr, REVERSE: tl.constexpr):
    """Affine map of ``GROUP`` consecutive steps (in scan order) per row: group ``groups[m]``.

    Each thread composes its rows' steps one after another in registers, so the scan
    across rows that follows has GROUP times fewer elements. Groups outside the
    segment are the identity.
    """
    inside = (groups >= 0) & (groups < SEG // GROUP)
    a_grp = tl.full([groups.shape[0], offs_c.shape[0]], 1.0, tl.float32)
    b_grp = tl.zeros([groups.shape[0], offs_c.shape[0]], dtype=tl.float32)
    for i in tl.static_range(GROUP):
        times = _steps(base, groups * GROUP + i, SEG, REVERSE)
        a, b = _drive(tok, times, inside & (times < K), offs_c, mask_c, d, gain, sbias, C,
                      CLAMP)
        a_grp, b_grp = _affine_combine(a_grp, b_grp, a, b)
    return a_grp, b_grp


@triton.jit
def _segment_total(tok, base, offs_c, mask_c, d, gain, sbias, K, C, CLAMP,
                   GROUP: tl.constexpr, SEG: tl.constexpr, REVERSE: tl.constexpr):
    """The state after scanning the segment (in scan order) from zero."""
    rows = tl.arange(0, SEG // GROUP)
    a, b = _group_maps(tok, base, rows, offs_c, mask_c, d, gain, sbias, K, C, CLAMP, GROUP,
                       SEG, REVERSE)
    _, b_cum = tl.associative_scan((a, b), 0, _affine_combine)
    return _last_row(b_cum, SEG // GROUP)


@triton.jit
def _segment_program(N_SEG, C, BLOCK_C: tl.constexpr):
    """This program's batch row, segment and channel block (axis 0 is row * N_SEG + seg)."""
    pid = tl.program_id(0)
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    return (pid // N_SEG).to(tl.int64), pid % N_SEG, offs_c, offs_c < C


@triton.autotune(configs=autotune_configs(SPLIT_CONFIGS),
                 key=["K", "C", "DIRECTION", "BLOCK_K"])
@triton.jit
def _segment_totals_kernel(
    tok_ptr, decay_ptr, gain_ptr, sbias_ptr, tot_ptr, K, C, N_SEG, DIR_STRIDE, CLAMP,
    D_MIN, D_MAX, DIRECTION: tl.constexpr, BLOCK_K: tl.constexpr, GROUP: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    """End state of each segment scanned from zero: ``tot[dir, b, seg, c]``."""
    pid_b, seg, offs_c, mask_c = _segment_program(N_SEG, C, BLOCK_C)
    d, gain, sbias = _channel_params(decay_ptr, gain_ptr, sbias_ptr, offs_c, mask_c, D_MIN,
                                     D_MAX)
    tok = tok_ptr + pid_b * K * C
    base = seg * BLOCK_K
    out = tot_ptr + (pid_b * N_SEG + seg) * C + offs_c
    if DIRECTION != 1:
        total = _segment_total(tok, base, offs_c, mask_c, d, gain, sbias, K, C, CLAMP, GROUP,
                               BLOCK_K, False)
        tl.store(out, total, mask=mask_c)
    if DIRECTION != 0:
        total = _segment_total(tok, base, offs_c, mask_c, d, gain, sbias, K, C, CLAMP, GROUP,
                               BLOCK_K, True)
        tl.store(out + (DIR_STRIDE if DIRECTION == 2 else 0), total, mask=mask_c)


@triton.jit
def _power(d, n, LOG2_BK: tl.constexpr):
    """``d ** n`` for 0 <= n <= 2**LOG2_BK, by binary exponentiation."""
    acc = tl.full(d.shape, 1.0, tl.float32)
    p = d
    for i in tl.static_range(LOG2_BK + 1):
        acc = tl.where(((n >> i) & 1) == 1, acc * p, acc)
        p = p * p
    return acc


@triton.jit
def _fold_tile(tot, segs, valid, offs_c, mask_c, a_full, a_last, N_SEG, C, carry):
    """States after each of the tile's segments (row i is segment ``segs[i]``), from ``carry``."""
    mask = valid[:, None] & mask_c[None, :]
    total = tl.load(tot + segs[:, None] * C + offs_c[None, :], mask=mask, other=0.0)
    a = tl.where((segs == N_SEG - 1)[:, None], a_last[None, :], a_full[None, :])
    a = tl.where(mask, a, 1.0)
    b = tl.where(mask, total, 0.0)
    a_cum, b_cum = tl.associative_scan((a, b), 0, _affine_combine)
    return b_cum + a_cum * carry[None, :]


@triton.jit
def _segment_carries_kernel(
    tot_ptr, decay_ptr, init_ptr, carry_ptr, sf_ptr, sb_ptr, K, C, N_SEG, DIR_STRIDE,
    CARRY_STRIDE, D_MIN, D_MAX, DIRECTION: tl.constexpr, BLOCK_K: tl.constexpr,
    LOG2_BK: tl.constexpr, FOLD_K: tl.constexpr, BLOCK_C: tl.constexpr,
):
    """Starting state of every segment, ``carry[dir, b, 0..N_SEG, c]``, and the final states.

    Forward: entry ``i`` is the state before segment ``i`` (entry 0 the initial state,
    entry N_SEG the final one). Backward: entry ``i`` is the state after scanning
    segments ``N_SEG-1 .. i`` in reverse (entry N_SEG the initial state, entry 0 final).
    """
    pid_b = tl.program_id(0).to(tl.int64)
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_c = offs_c < C
    d = _decay(decay_ptr, offs_c, mask_c, D_MIN, D_MAX)
    init = tl.load(init_ptr + pid_b * C + offs_c, mask=mask_c, other=0.0).to(tl.float32)
    # a segment maps s -> d**len * s + total; only the last segment can be short
    a_full = _power(d, BLOCK_K, LOG2_BK)
    a_last = _power(d, K - (N_SEG - 1) * BLOCK_K, LOG2_BK)
    tot = tot_ptr + pid_b * N_SEG * C
    car = carry_ptr + pid_b * (N_SEG + 1) * C
    if DIRECTION != 1:
        _fold_direction(tot, car, sf_ptr + pid_b * C, init, offs_c, mask_c, a_full, a_last,
                        N_SEG, C, FOLD_K, False)
    if DIRECTION != 0:
        if DIRECTION == 2:
            tot += DIR_STRIDE
            car += CARRY_STRIDE
        _fold_direction(tot, car, sb_ptr + pid_b * C, init, offs_c, mask_c, a_full, a_last,
                        N_SEG, C, FOLD_K, True)


@triton.jit
def _fold_direction(tot, car, state_ptr, init, offs_c, mask_c, a_full, a_last, N_SEG, C,
                    FOLD_K: tl.constexpr, REVERSE: tl.constexpr):
    """One direction's walk over the segments, FOLD_K at a time, carrying the state.

    Forward stores the state after segment i at entry i + 1; backward reads rows
    reversed, as _one_direction does, and stores it at entry i.
    """
    rows = tl.arange(0, FOLD_K)
    if REVERSE:
        rows = FOLD_K - 1 - rows
    n_tiles = tl.cdiv(N_SEG, FOLD_K)
    tl.store(car + (N_SEG if REVERSE else 0) * C + offs_c, init, mask=mask_c)
    carry = init
    for jj in range(0, n_tiles):
        j = (n_tiles - 1 - jj) if REVERSE else jj
        segs = j * FOLD_K + rows
        valid = segs < N_SEG
        s = _fold_tile(tot, segs, valid, offs_c, mask_c, a_full, a_last, N_SEG, C, carry)
        tl.store(car + (segs[:, None] + (0 if REVERSE else 1)) * C + offs_c[None, :], s,
                 mask=valid[:, None] & mask_c[None, :])
        carry = _last_row(s, FOLD_K)
    tl.store(state_ptr + offs_c, carry, mask=mask_c)


@triton.jit
def _group_starts(tok, base, rows, start, offs_c, mask_c, d, gain, sbias, K, C, CLAMP,
                  GROUP: tl.constexpr, SEG: tl.constexpr, REVERSE: tl.constexpr):
    """The state before each row's group (in scan order), the segment starting at ``start``."""
    # row m composes group m - 1, so the inclusive scan over rows is the exclusive one
    a, b = _group_maps(tok, base, rows - 1, offs_c, mask_c, d, gain, sbias, K, C, CLAMP,
                       GROUP, SEG, REVERSE)
    a_cum, b_cum = tl.associative_scan((a, b), 0, _affine_combine)
    return b_cum + a_cum * start[None, :]


@triton.jit
def _one_direction_segment(tok, y_row, base, start, offs_c, mask_c, d, gain, sbias, ogain,
                           K, C, CLAMP, GROUP: tl.constexpr, SEG: tl.constexpr,
                           REVERSE: tl.constexpr):
    """y of one segment in one direction: group starts, then each row's steps in turn."""
    rows = tl.arange(0, SEG // GROUP)
    s = _group_starts(tok, base, rows, start, offs_c, mask_c, d, gain, sbias, K, C, CLAMP,
                      GROUP, SEG, REVERSE)
    for i in tl.static_range(GROUP):
        times = _steps(base, rows * GROUP + i, SEG, REVERSE)
        valid = times < K
        a, b = _drive(tok, times, valid, offs_c, mask_c, d, gain, sbias, C, CLAMP)
        s = a * s + b
        tl.store(y_row + times[:, None] * C + offs_c[None, :],
                 (ogain[None, :] * s).to(y_row.dtype.element_ty),
                 mask=valid[:, None] & mask_c[None, :])


@triton.jit
def _bidirectional_segment(tok, y_row, base, start_f, start_b, offs_c, mask_c, d, gain, sbias,
                           ogain, gate, K, C, CLAMP, MERGE: tl.constexpr, GROUP: tl.constexpr,
                           SEG: tl.constexpr):
    """y of one segment in both directions, merged per step before the single store.

    Rows are forward groups in both directions, so a step's forward and backward states
    meet in the same thread: the backward group starts are scanned in reversed row order
    and flipped once, a tile of SEG / GROUP rows rather than SEG. (The scan's own
    ``reverse=True`` is avoided: triton-lang/triton#4362 reports wrong results for
    non-commutative combines.)
    """
    tl.static_assert(GROUP == 4)
    rows = tl.arange(0, SEG // GROUP)
    s_f = _group_starts(tok, base, rows, start_f, offs_c, mask_c, d, gain, sbias, K, C, CLAMP,
                        GROUP, SEG, False)
    s_b = _group_starts(tok, base, rows, start_b, offs_c, mask_c, d, gain, sbias, K, C, CLAMP,
                        GROUP, SEG, True)
    s_b = tl.flip(s_b, 0)  # row m: the backward state entering group m from its end
    t0 = base + rows * GROUP
    a0, b0 = _drive(tok, t0, t0 < K, offs_c, mask_c, d, gain, sbias, C, CLAMP)
    a1, b1 = _drive(tok, t0 + 1, t0 + 1 < K, offs_c, mask_c, d, gain, sbias, C, CLAMP)
    a2, b2 = _drive(tok, t0 + 2, t0 + 2 < K, offs_c, mask_c, d, gain, sbias, C, CLAMP)
    a3, b3 = _drive(tok, t0 + 3, t0 + 3 < K, offs_c, mask_c, d, gain, sbias, C, CLAMP)
    f0 = a0 * s_f + b0
    f1 = a1 * f0 + b1
    f2 = a2 * f1 + b2
    f3 = a3 * f2 + b3
    r3 = a3 * s_b + b3
    r2 = a2 * r3 + b2
    r1 = a1 * r2 + b1
    r0 = a0 * r1 + b0
    _store_merged(y_row, t0, f0, r0, ogain, gate, offs_c, mask_c, K, C, MERGE)
    _store_merged(y_row, t0 + 1, f1, r1, ogain, gate, offs_c, mask_c, K, C, MERGE)
    _store_merged(y_row, t0 + 2, f2, r2, ogain, gate, offs_c, mask_c, K, C, MERGE)
    _store_merged(y_row, t0 + 3, f3, r3, ogain, gate, offs_c, mask_c, K, C, MERGE)


@triton.autotune(configs=autotune_configs(SPLIT_CONFIGS),
                 key=["K", "C", "DIRECTION", "MERGE", "BLOCK_K"])
@triton.jit
def _segment_apply_kernel(
    tok_ptr, decay_ptr, gain_ptr, ogain_ptr, sbias_ptr, gate_ptr, carry_ptr, y_ptr,
    K, C, N_SEG, CARRY_STRIDE, CLAMP, D_MIN, D_MAX, DIRECTION: tl.constexpr,
    MERGE: tl.constexpr, BLOCK_K: tl.constexpr, GROUP: tl.constexpr, BLOCK_C: tl.constexpr,
):
    """y of one segment, rescanned from its starting state(s)."""
    pid_b, seg, offs_c, mask_c = _segment_program(N_SEG, C, BLOCK_C)
    d, gain, sbias = _channel_params(decay_ptr, gain_ptr, sbias_ptr, offs_c, mask_c, D_MIN,
                                     D_MAX)
    ogain = tl.load(ogain_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32)
    tok = tok_ptr + pid_b * K * C
    y_row = y_ptr + pid_b * K * C
    car = carry_ptr + pid_b * (N_SEG + 1) * C
    base = seg * BLOCK_K
    if DIRECTION == 0:
        start = tl.load(car + seg * C + offs_c, mask=mask_c, other=0.0)
        _one_direction_segment(tok, y_row, base, start, offs_c, mask_c, d, gain, sbias, ogain,
                               K, C, CLAMP, GROUP, BLOCK_K, False)
    elif DIRECTION == 1:
        start = tl.load(car + (seg + 1) * C + offs_c, mask=mask_c, other=0.0)
        _one_direction_segment(tok, y_row, base, start, offs_c, mask_c, d, gain, sbias, ogain,
                               K, C, CLAMP, GROUP, BLOCK_K, True)
    else:
        gate = tl.load(gate_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32)
        start_f = tl.load(car + seg * C + offs_c, mask=mask_c, other=0.0)
        start_b = tl.load(car + CARRY_STRIDE + (seg + 1) * C + offs_c, mask=mask_c, other=0.0)
        _bidirectional_segment(tok, y_row, base, start_f, start_b, offs_c, mask_c, d, gain,
                               sbias, ogain, gate, K, C, CLAMP, MERGE, GROUP, BLOCK_K)


def segmented_launches(tokens: torch.Tensor, params: tuple[torch.Tensor, ...],
                       init: torch.Tensor, outputs: dict[str, torch.Tensor], direction: int,
                       merge: int, clamp: float, decay_bounds: tuple[float, float],
                       bucket: str, seg_steps: int,
                       config: triton.Config | None) -> tuple[list[KernelLaunch], dict[str, Any]]:
    """The three launches of the split path (module docstring), over scratch allocated here."""
    b, k, c = tokens.shape
    decay, gain, ogain, sbias, gate = params
    y = outputs["y"]
    # one direction writes its final state to "state"; both write state_fwd and state_bwd
    state_f = outputs["state_fwd" if direction == 2 else "state"]
    state_b = outputs["state_bwd" if direction == 2 else "state"]
    n_seg = triton.cdiv(k, seg_steps)
    dirs = 2 if direction == 2 else 1
    # scratch, float32: segment totals [dirs, B, n_seg, C], starting states [dirs, B, n_seg+1, C]
    totals = torch.empty((dirs, b, n_seg, c), dtype=torch.float32, device=tokens.device)
    carries = torch.empty((dirs, b, n_seg + 1, c), dtype=torch.float32, device=tokens.device)
    fold_k = min(FOLD_BLOCK, max(MIN_FOLD_K, triton.next_power_of_2(n_seg)))

    def seg_grid(meta: dict[str, Any]) -> tuple[int, int]:
        # one program per (batch row, segment) and channel block, whichever BLOCK_C is picked
        return (b * n_seg, triton.cdiv(c, meta["BLOCK_C"]))

    fold_grid = (b, triton.cdiv(c, FOLD_BLOCK_C))
    totals_args = (tokens, decay, gain, sbias, totals, k, c, n_seg, b * n_seg * c, clamp,
                   *decay_bounds)
    carries_args = (totals, decay, init, carries, state_f, state_b, k, c, n_seg,
                    b * n_seg * c, b * (n_seg + 1) * c, *decay_bounds)
    apply_args = (tokens, decay, gain, ogain, sbias, gate, carries, y, k, c, n_seg,
                  b * (n_seg + 1) * c, clamp, *decay_bounds)
    fold_meta = {"DIRECTION": direction, "BLOCK_K": seg_steps,
                 "LOG2_BK": seg_steps.bit_length() - 1, "FOLD_K": fold_k, "BLOCK_C": FOLD_BLOCK_C}
    meta = {"DIRECTION": direction, "BLOCK_K": seg_steps, "GROUP": SCAN_GROUP}
    totals_kernel, pinned = pin_config(_segment_totals_kernel, config)
    apply_kernel, _ = pin_config(_segment_apply_kernel, config)
    # a pinned config is recorded as chosen here; otherwise the autotuner's choice is read
    totals_meta = {**meta, **pinned}
    apply_meta = {**meta, **pinned, "MERGE": merge}
    launches = [
        KernelLaunch("tilessm-scan", totals_kernel, seg_grid, totals_args, totals_meta, bucket,
                     totals_meta if pinned else None),
        KernelLaunch("tilessm-scan", _segment_carries_kernel, fold_grid, carries_args, fold_meta,
                     bucket, fold_meta),
        KernelLaunch("tilessm-scan", apply_kernel, seg_grid, apply_args, apply_meta, bucket,
                     apply_meta if pinned else None),
    ]
    metadata = {"kernel": "tilessm_segmented_associative_scan", "block_k": seg_steps,
                "segments": n_seg,
                "configs": 1 if pinned else len(autotune_configs(SPLIT_CONFIGS))}
    return launches, metadata
