"""Triton tilessm-scan: the per-channel linear recurrence as a chunked parallel scan, fp32 state.

The recurrence ``s_t = d * s_{t-1} + (1 - d) * (g * x_t + bias)`` is the composition of
affine maps ``s -> a_t * s + b_t``, which is associative, so ``tl.associative_scan``
over ``(a, b)`` pairs along K computes every state of a ``[BLOCK_K, BLOCK_C]`` tile
in log depth. A program owns one batch row and ``BLOCK_C`` channels and walks the
sequence in chunks of ``BLOCK_K`` steps, carrying the state from chunk to chunk in
registers (``s = B_scan + A_scan * carry``). Tokens are read once and y written once.

The backward direction reads the chunk with reversed row indices (row i holds step
``start + BLOCK_K - 1 - i``), so no flipped copy exists anywhere; padding rows are
identity maps (a = 1, b = 0) and, reversed, they sit before the valid steps.
Bidirectional keeps both scans of a chunk in registers and flips the backward tile
back with ``tl.flip`` before the merge and the single store of y. When K spans
several chunks, a first sweep stores the forward carry at each chunk start into a
small ``[B, chunks, C]`` scratch; the second, backward sweep rescans each chunk
forward from its stored carry, so tokens are read twice but y is never re-read.

That walk keeps one program per (batch row, channel block), which cannot fill a GPU
once K is long: the chunks run in series, and narrow channel blocks read 8-32 bytes
per step row. Above ``MAX_BLOCK_K`` steps the launcher splits K into segments of
``SEGMENT_STEPS`` instead, one program each, in three launches:

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

from apex_core.results import Case
from apex_core.workloads.tilessm_scan import DECAY_MAX, DECAY_MIN
from apex_kernels.tuning import TRACKER, autotune_configs, config_dict, pin_config

SUPPORTED_DTYPES = ("fp32", "fp16", "bf16")
DIRECTION_CODES = {"forward": 0, "backward": 1, "bidirectional": 2}
MERGE_CODES = {"sum": 0, "avg": 1, "gated": 2}
# Longest chunk scanned in one piece: at K = 256 (the fixed profile) one chunk holds the
# whole sequence, so the bidirectional path needs no scratch and reads tokens once.
MAX_BLOCK_K = 256
MIN_BLOCK_K = 16  # tiny K still gets a tile the compiler lays out across a warp
# Segment length of the split path (K > MAX_BLOCK_K); one program each.
SEGMENT_STEPS = 64
# Steps a thread composes in registers before the scan across rows (the bidirectional
# segment kernel spells out its four steps)
SCAN_GROUP = 4
# Segments folded per step of the carries kernel's walk
FOLD_BLOCK = 256
FOLD_BLOCK_C = 32
_INT32_LIMIT = 2**31
_GRID_LIMIT = 65535
_FP32_MAX = 3.4028234663852886e38  # CLAMP travels as a float32 kernel argument


def _config(block_c: int, warps: int) -> triton.Config:
    return triton.Config({"BLOCK_C": block_c}, num_warps=warps)


# The scan is latency-bound at the fixed profile (B = 1, C = 128: 64 KiB of fp16 tokens),
# so fewer channels per program (more programs on more SMs) beat full 32-byte sectors:
# H100, cold L2, graph replay, forward: BLOCK_C 8 / 4 warps 8.0 us, 4 / 2 warps 8.6 us,
# 16 / 4 warps 10.0 us, 64 / 8 warps 16.9 us; bidirectional holds two scans and a flip in
# registers and falls off faster (4 / 2 warps 11.7 us, 16 / 4 warps 18.4 us, 32 / 4 warps
# 72 us from spills). Wide configs stay for large B * C, where bandwidth matters. The
# first config is what the interpreter runs.
CONFIGS = [
    _config(4, 2),
    _config(8, 4),
    _config(8, 2),
    _config(2, 1),
    _config(4, 1),
    _config(16, 4),
    _config(16, 8),
    _config(32, 8),
]
# The split path has B * segments programs per channel block, so it can afford channel
# blocks wide enough for full 32-byte sectors (16 fp16 channels) and beyond; its tiles
# are SEGMENT_STEPS / SCAN_GROUP rows deep.
SPLIT_CONFIGS = [
    _config(64, 4),
    _config(16, 2),
    _config(32, 2),
    _config(32, 4),
    _config(64, 8),
    _config(128, 4),
    _config(128, 8),
    _config(256, 8),
]


@triton.jit
def _affine_combine(a1, b1, a2, b2):
    # apply (a1, b1) then (a2, b2): s -> a2 * (a1 * s + b1) + b2
    return a1 * a2, a2 * b1 + b2


@triton.jit
def _drive(tok_ptr, times, valid, offs_c, mask_c, d, gain, sbias, C, CLAMP):
    """The affine maps ``(a, b)`` of the tile whose row i is step ``times[i]``."""
    mask = valid[:, None] & mask_c[None, :]
    x = tl.load(tok_ptr + times[:, None] * C + offs_c[None, :], mask=mask, other=0.0)
    x = x.to(tl.float32)
    # nan_to_num then clamp: NaN -> 0, +-inf -> +-max -> +-CLAMP
    x = tl.where(x != x, 0.0, x)
    x = tl.minimum(tl.maximum(x, -CLAMP), CLAMP)
    drive = (1.0 - d)[None, :] * (gain[None, :] * x + sbias[None, :])
    # padding rows are the identity map so they leave any scan undisturbed
    a = tl.where(mask, d[None, :], 1.0)
    b = tl.where(mask, drive, 0.0)
    return a, b


@triton.jit
def _scan_tile(tok_ptr, times, valid, offs_c, mask_c, d, gain, sbias, carry, C, CLAMP):
    """States of the tile whose row i is step ``times[i]``, continuing from ``carry``."""
    a, b = _drive(tok_ptr, times, valid, offs_c, mask_c, d, gain, sbias, C, CLAMP)
    a_cum, b_cum = tl.associative_scan((a, b), 0, _affine_combine)
    return b_cum + a_cum * carry[None, :]


@triton.jit
def _last_row(s, BLOCK_K: tl.constexpr):
    # the state after the tile: identity padding makes the last row the last valid state
    rows = tl.arange(0, BLOCK_K)
    return tl.sum(tl.where((rows == BLOCK_K - 1)[:, None], s, 0.0), axis=0)


@triton.jit
def _one_direction(tok_ptr, y_ptr, state_ptr, offs_c, mask_c, d, gain, sbias, ogain, init,
                   K, C, CLAMP, REVERSE: tl.constexpr, BLOCK_K: tl.constexpr):
    """Forward (or, reading rows reversed, backward) scan of one row of channels."""
    rows = tl.arange(0, BLOCK_K)
    if REVERSE:
        rows = BLOCK_K - 1 - rows
    n_chunks = tl.cdiv(K, BLOCK_K)
    carry = init
    for jj in range(0, n_chunks):
        j = (n_chunks - 1 - jj) if REVERSE else jj
        times = j * BLOCK_K + rows
        valid = times < K
        s = _scan_tile(tok_ptr, times, valid, offs_c, mask_c, d, gain, sbias, carry, C, CLAMP)
        y = ogain[None, :] * s
        tl.store(y_ptr + times[:, None] * C + offs_c[None, :], y.to(y_ptr.dtype.element_ty),
                 mask=valid[:, None] & mask_c[None, :])
        carry = _last_row(s, BLOCK_K)
    tl.store(state_ptr + offs_c, carry, mask=mask_c)


@triton.jit
def _merge(s_f, s_b, ogain, gate, MERGE: tl.constexpr):
    """y of a bidirectional tile from the forward and backward states of the same steps."""
    y_f = ogain[None, :] * s_f
    y_b = ogain[None, :] * s_b
    if MERGE == 0:
        y = y_f + y_b
    elif MERGE == 1:
        y = (y_f + y_b) * 0.5
    else:
        y = gate[None, :] * y_f + (1.0 - gate)[None, :] * y_b
    return y


@triton.jit
def _store_merged(y_row, times, s_f, s_b, ogain, gate, offs_c, mask_c, K, C,
                  MERGE: tl.constexpr):
    """The merged y of the rows' steps ``times``, stored where they lie inside K."""
    y = _merge(s_f, s_b, ogain, gate, MERGE)
    tl.store(y_row + times[:, None] * C + offs_c[None, :], y.to(y_row.dtype.element_ty),
             mask=(times < K)[:, None] & mask_c[None, :])


@triton.jit
def _bidirectional(tok_ptr, y_ptr, sf_ptr, sb_ptr, carry_ptr, offs_c, mask_c, d, gain, sbias,
                   ogain, gate, init, K, C, CLAMP, MERGE: tl.constexpr, BLOCK_K: tl.constexpr):
    """Both directions of one row of channels, merged before the single store of y."""
    rows = tl.arange(0, BLOCK_K)
    n_chunks = tl.cdiv(K, BLOCK_K)
    # sweep 1 (only when K spans several chunks): forward carries at each chunk start
    carry_f = init
    for j in range(0, n_chunks - 1):
        tl.store(carry_ptr + j * C + offs_c, carry_f, mask=mask_c)
        times = j * BLOCK_K + rows
        s = _scan_tile(tok_ptr, times, times < K, offs_c, mask_c, d, gain, sbias, carry_f,
                       C, CLAMP)
        carry_f = _last_row(s, BLOCK_K)
    tl.debug_barrier()  # carries stored by one thread are read back by another
    # sweep 2, last chunk first: backward scan, forward rescan, merge, store
    carry_b = init
    for jj in range(0, n_chunks):
        j = n_chunks - 1 - jj
        stored = tl.load(carry_ptr + j * C + offs_c, mask=mask_c & (jj > 0), other=0.0)
        start_f = tl.where(jj == 0, carry_f, stored)
        times = j * BLOCK_K + rows
        valid = times < K
        s_f = _scan_tile(tok_ptr, times, valid, offs_c, mask_c, d, gain, sbias, start_f,
                         C, CLAMP)
        # the final forward state is the last row of the last chunk, scanned at jj == 0
        tl.store(sf_ptr + offs_c, _last_row(s_f, BLOCK_K), mask=mask_c & (jj == 0))
        times_r = j * BLOCK_K + (BLOCK_K - 1 - rows)
        s_r = _scan_tile(tok_ptr, times_r, times_r < K, offs_c, mask_c, d, gain, sbias,
                         carry_b, C, CLAMP)
        carry_b = _last_row(s_r, BLOCK_K)
        # row i of s_r is step start + BLOCK_K - 1 - i
        _store_merged(y_ptr, times, s_f, tl.flip(s_r, 0), ogain, gate, offs_c, mask_c, K, C,
                      MERGE)
    tl.store(sb_ptr + offs_c, carry_b, mask=mask_c)


@triton.jit
def _decay(decay_ptr, offs_c, mask_c, D_MIN, D_MAX):
    # float32, the state's precision, clamped as the reference clamps it
    d = tl.load(decay_ptr + offs_c, mask=mask_c, other=0.5).to(tl.float32)
    return tl.minimum(tl.maximum(d, D_MIN), D_MAX)


@triton.jit
def _channel_params(decay_ptr, gain_ptr, sbias_ptr, offs_c, mask_c, D_MIN, D_MAX):
    """Per-channel decay, input gain and state bias, in float32."""
    d = _decay(decay_ptr, offs_c, mask_c, D_MIN, D_MAX)
    gain = tl.load(gain_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32)
    sbias = tl.load(sbias_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32)
    return d, gain, sbias


@triton.autotune(configs=autotune_configs(CONFIGS),
                 key=["K", "C", "DIRECTION", "MERGE", "BLOCK_K"])
@triton.jit
def _ssm_scan_kernel(
    tok_ptr, decay_ptr, gain_ptr, ogain_ptr, sbias_ptr, gate_ptr, init_ptr,
    y_ptr, sf_ptr, sb_ptr, carry_ptr, K, C, N_CHUNKS, CLAMP, D_MIN, D_MAX,
    DIRECTION: tl.constexpr, MERGE: tl.constexpr, BLOCK_K: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    pid_b = tl.program_id(0).to(tl.int64)  # B * K * C may pass 2**31
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_c = offs_c < C
    d, gain, sbias = _channel_params(decay_ptr, gain_ptr, sbias_ptr, offs_c, mask_c, D_MIN,
                                     D_MAX)
    ogain = tl.load(ogain_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32)
    init = tl.load(init_ptr + pid_b * C + offs_c, mask=mask_c, other=0.0).to(tl.float32)
    tok = tok_ptr + pid_b * K * C
    y = y_ptr + pid_b * K * C
    if DIRECTION == 2:
        gate = tl.load(gate_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32)
        _bidirectional(tok, y, sf_ptr + pid_b * C, sb_ptr + pid_b * C,
                       carry_ptr + pid_b * N_CHUNKS * C, offs_c, mask_c, d, gain, sbias, ogain,
                       gate, init, K, C, CLAMP, MERGE, BLOCK_K)
    else:
        _one_direction(tok, y, sf_ptr + pid_b * C, offs_c, mask_c, d, gain, sbias, ogain, init,
                       K, C, CLAMP, DIRECTION == 1, BLOCK_K)


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


def block_k_for(steps: int) -> int:
    """Chunk length: the next power of two of K, at least MIN_BLOCK_K, at most MAX_BLOCK_K."""
    return min(MAX_BLOCK_K, max(MIN_BLOCK_K, triton.next_power_of_2(steps)))


def supports(case: Case, dtype_name: str) -> str | None:
    """A reason this kernel cannot run ``case`` in ``dtype_name``, or None when it can."""
    if dtype_name not in SUPPORTED_DTYPES:
        return f"tilessm-scan kernel supports {', '.join(SUPPORTED_DTYPES)}, not {dtype_name}"
    p = case.params
    if case.name not in DIRECTION_CODES:
        return f"tilessm-scan kernel has no direction {case.name!r}"
    if p.steps * p.channels >= _INT32_LIMIT:
        return "tilessm-scan kernel needs K*C < 2**31 (int32 offsets within one sequence)"
    if p.channels > _GRID_LIMIT:  # grid dimension 1 holds at least one program per channel
        return f"tilessm-scan kernel needs channels <= {_GRID_LIMIT}"
    if p.clamp > _FP32_MAX:
        return f"tilessm-scan kernel needs clamp <= {_FP32_MAX:.4g} (a float32 argument)"
    return None


def _check_inputs(inputs: dict[str, torch.Tensor]) -> tuple[int, int, int]:
    """Shapes (B, K, C), checked once here so the launch path never validates."""
    tokens = inputs["tokens"]
    if tokens.dim() != 3:
        raise ValueError(f"tokens must be [B, K, C], got shape {list(tokens.shape)}")
    b, k, c = tokens.shape
    expected = {"tokens": (b, k, c), "init_state": (b, c)}
    expected.update({n: (c,) for n in ("decay", "input_gain", "output_gain", "state_bias",
                                        "gate")})
    for name, shape in expected.items():
        t = inputs[name]
        if tuple(t.shape) != shape:
            raise ValueError(f"{name} has shape {list(t.shape)}, expected {list(shape)}")
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous")
    if k * c >= _INT32_LIMIT or c > _GRID_LIMIT:
        raise ValueError(f"shape {[b, k, c]} is beyond this kernel's limits")
    return b, k, c


def segment_steps_for(steps: int) -> int:
    """Segment length of the split path for K = ``steps``, or 0 for the one-program walk."""
    return SEGMENT_STEPS if steps > MAX_BLOCK_K else 0


def make_launcher(case: Case, inputs: dict[str, torch.Tensor], *,
                  config: triton.Config | None = None,
                  segment_steps: int | None = None) -> tuple[Any, dict, dict]:
    """Return ``(fn, outputs, metadata)``; ``fn()`` scans the current ``inputs`` into ``outputs``.

    ``config`` pins one configuration (of ``CONFIGS``, or of ``SPLIT_CONFIGS`` on the
    split path) instead of autotuning; tests use it to run each. ``segment_steps``
    overrides the path: 0 walks K in one program per channel block, a power of two of at
    least ``SCAN_GROUP`` splits K into segments of that many steps; None chooses by K.
    """
    b, k, c = _check_inputs(inputs)
    if case.params.clamp > _FP32_MAX:
        raise ValueError(f"clamp {case.params.clamp} does not fit in float32")
    if segment_steps is None:
        segment_steps = segment_steps_for(k)
    if segment_steps and (segment_steps < SCAN_GROUP or segment_steps & (segment_steps - 1)):
        raise ValueError(f"segment_steps must be 0 or a power of two >= {SCAN_GROUP}, "
                         f"not {segment_steps}")
    direction = DIRECTION_CODES[case.name]
    merge = MERGE_CODES[case.params.merge]
    tokens = inputs["tokens"]
    dev = tokens.device
    y = torch.empty_like(tokens)
    # the reference's state dtype: float32 for every supported token dtype
    state_dtype = torch.promote_types(tokens.dtype, torch.float32)
    state_f = torch.empty((b, c), dtype=state_dtype, device=dev)
    state_b = torch.empty((b, c), dtype=state_dtype, device=dev) if direction == 2 else state_f
    if direction == 2:
        outputs = {"y": y, "state_fwd": state_f, "state_bwd": state_b}
    else:
        outputs = {"y": y, "state": state_f}
    params = (inputs["decay"], inputs["input_gain"], inputs["output_gain"],
              inputs["state_bias"], inputs["gate"])
    bucket = f"B{b}_K{k}_C{c}_{case.name}_{case.params.merge}_{str(tokens.dtype).removeprefix('torch.')}"
    common = {"direction": case.name, "merge": case.params.merge,
              "pinned": config_dict(config) if config is not None else {}}
    if segment_steps:
        split_fn, metadata = _split_launcher(b, k, c, segment_steps, direction, merge, tokens,
                                             params, inputs["init_state"], outputs,
                                             float(case.params.clamp), bucket, config)
        return split_fn, outputs, {**metadata, **common}

    block_k = block_k_for(k)
    n_chunks = triton.cdiv(k, block_k)
    # forward carries at chunk starts, used by the bidirectional multi-chunk path only
    scratch = (b * n_chunks * c) if direction == 2 and n_chunks > 1 else 1
    carries = torch.empty(scratch, dtype=torch.float32, device=dev)

    def grid(meta: dict[str, Any]) -> tuple[int, int]:
        # one program per (batch row, channel block) for whichever BLOCK_C is picked
        return (b, triton.cdiv(c, meta["BLOCK_C"]))

    decay, gain, ogain, sbias, gate = params
    args = (tokens, decay, gain, ogain, sbias, gate, inputs["init_state"], y, state_f, state_b,
            carries, k, c, n_chunks, float(case.params.clamp), DECAY_MIN, DECAY_MAX)
    meta = {"DIRECTION": direction, "MERGE": merge, "BLOCK_K": block_k}
    kernel, pinned = pin_config(_ssm_scan_kernel, config)

    def fn() -> dict[str, torch.Tensor]:
        TRACKER.launch("tilessm-scan", kernel, grid, bucket, *args,
                       heuristic_config={**meta, **pinned} if pinned else None, **meta, **pinned)
        return outputs

    metadata = {"kernel": "tilessm_chunked_associative_scan", "block_k": block_k,
                "chunks": n_chunks, "configs": 1 if pinned else len(autotune_configs(CONFIGS))}
    return fn, outputs, {**metadata, **common}


def _split_launcher(b: int, k: int, c: int, seg_steps: int, direction: int, merge: int,
                    tokens: torch.Tensor, params: tuple[torch.Tensor, ...],
                    init: torch.Tensor, outputs: dict[str, torch.Tensor], clamp: float,
                    bucket: str,
                    config: triton.Config | None) -> tuple[Any, dict]:
    """The three launches of the split path (module docstring), over preallocated scratch."""
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
    fold_k = min(FOLD_BLOCK, max(MIN_BLOCK_K, triton.next_power_of_2(n_seg)))

    def seg_grid(meta: dict[str, Any]) -> tuple[int, int]:
        # one program per (batch row, segment) and channel block, whichever BLOCK_C is picked
        return (b * n_seg, triton.cdiv(c, meta["BLOCK_C"]))

    fold_grid = (b, triton.cdiv(c, FOLD_BLOCK_C))
    totals_args = (tokens, decay, gain, sbias, totals, k, c, n_seg, b * n_seg * c, clamp,
                   DECAY_MIN, DECAY_MAX)
    carries_args = (totals, decay, init, carries, state_f, state_b, k, c, n_seg,
                    b * n_seg * c, b * (n_seg + 1) * c, DECAY_MIN, DECAY_MAX)
    apply_args = (tokens, decay, gain, ogain, sbias, gate, carries, y, k, c, n_seg,
                  b * (n_seg + 1) * c, clamp, DECAY_MIN, DECAY_MAX)
    fold_meta = {"DIRECTION": direction, "BLOCK_K": seg_steps,
                 "LOG2_BK": seg_steps.bit_length() - 1, "FOLD_K": fold_k, "BLOCK_C": FOLD_BLOCK_C}
    meta = {"DIRECTION": direction, "BLOCK_K": seg_steps, "GROUP": SCAN_GROUP}
    totals_kernel, pinned = pin_config(_segment_totals_kernel, config)
    apply_kernel, _ = pin_config(_segment_apply_kernel, config)
    # a pinned config is recorded as the heuristic's choice; otherwise the autotuner's is read
    totals_pin = {**meta, **pinned} if pinned else None
    apply_pin = {**meta, **pinned, "MERGE": merge} if pinned else None

    def fn() -> dict[str, torch.Tensor]:
        TRACKER.launch("tilessm-scan", totals_kernel, seg_grid, bucket, *totals_args,
                       heuristic_config=totals_pin, **meta, **pinned)
        TRACKER.launch("tilessm-scan", _segment_carries_kernel, fold_grid, bucket,
                       *carries_args, **fold_meta)
        TRACKER.launch("tilessm-scan", apply_kernel, seg_grid, bucket, *apply_args,
                       heuristic_config=apply_pin, MERGE=merge, **meta, **pinned)
        return outputs

    metadata = {"kernel": "tilessm_segmented_associative_scan", "block_k": seg_steps,
                "segments": n_seg,
                "configs": 1 if pinned else len(autotune_configs(SPLIT_CONFIGS))}
    return fn, metadata
