"""The scan's shared Triton pieces: affine maps of the recurrence, tile scans, the merge.

A step of ``s_t = d * s_{t-1} + (1 - d) * (g * x_t + bias)`` is the affine map
``s -> a * s + b``; composing maps is associative, so ``tl.associative_scan`` over
``(a, b)`` pairs gives every state of a tile in log depth. Padding rows are identity
maps (a = 1, b = 0).
"""

from __future__ import annotations

import triton
import triton.language as tl


def scan_config(block_c: int, warps: int) -> triton.Config:
    return triton.Config({"BLOCK_C": block_c}, num_warps=warps)


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
def _scan_tile_both(tok_ptr, times, valid, offs_c, mask_c, d, gain, sbias, carry_f, carry_b, C, CLAMP):
    """Forward and backward states of one tile, from one read of its tokens: the backward scan is
    ``associative_scan(..., reverse=True)`` (the flip-scan-flip of the same maps), so no reversed
    read or flipped copy exists. ``carry_b`` is the state entering the tile from its end."""
    a, b = _drive(tok_ptr, times, valid, offs_c, mask_c, d, gain, sbias, C, CLAMP)
    af, bf = tl.associative_scan((a, b), 0, _affine_combine)
    ab, bb = tl.associative_scan((a, b), 0, _affine_combine, reverse=True)
    return bf + af * carry_f[None, :], bb + ab * carry_b[None, :]


@triton.jit
def _first_row(s, BLOCK_K: tl.constexpr):
    # the backward state after the tile: its first row (a tile's padding is only at its end)
    rows = tl.arange(0, BLOCK_K)
    return tl.sum(tl.where((rows == 0)[:, None], s, 0.0), axis=0)


@triton.jit
def _last_row(s, BLOCK_K: tl.constexpr):
    # the state after the tile: identity padding makes the last row the last valid state
    rows = tl.arange(0, BLOCK_K)
    return tl.sum(tl.where((rows == BLOCK_K - 1)[:, None], s, 0.0), axis=0)



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
