"""ff-infer's own Triton kernels: tile means (level 0's selecting the tiles too, with
``selection``'s helpers), the token MLP, modulate + depthwise, the pointwise mix, norm + gate."""

from __future__ import annotations

import triton
import triton.language as tl

from apex_kernels._dependent import await_previous
from apex_kernels._utils import autotune_configs
from apex_kernels.ff_infer.selection import _frame_ranks, _store_frame_ids


def _cfg(warps: int, **meta: int) -> triton.Config:
    return triton.Config(meta, num_warps=warps)


# Fixed profile: level 0 is 20 tiles of 16 x 16, level 1 is 32 tiles of 8 x 8, C = 128,
# so a level holds 320 to 640 (tile, 8-channel) blocks; small blocks keep more SMs busy.
# The first config of each list is what the interpreter runs.
MEAN_CONFIGS = [_cfg(4, BLOCK_C=16), _cfg(2, BLOCK_C=8), _cfg(4, BLOCK_C=32), _cfg(1, BLOCK_C=4)]
DW_CONFIGS = [_cfg(4, BLOCK_C=8), _cfg(2, BLOCK_C=4), _cfg(4, BLOCK_C=16), _cfg(8, BLOCK_C=32),
              _cfg(2, BLOCK_C=8)]
# group norm needs the whole tile: every program reads all C x s x s values of U for the
# statistics, then applies them to its share (CSPLIT programs per tile split the channels
# of the second pass). Wide blocks mean fewer dependent L2 round trips in the first pass.
NORM_CONFIGS = [_cfg(4, BLOCK_C=8, CSPLIT=1), _cfg(4, BLOCK_C=16, CSPLIT=1),
                _cfg(8, BLOCK_C=32, CSPLIT=1), _cfg(8, BLOCK_C=32, CSPLIT=2),
                _cfg(16, BLOCK_C=64, CSPLIT=1), _cfg(4, BLOCK_C=16, CSPLIT=2),
                _cfg(4, BLOCK_C=8, CSPLIT=4)]
# the token MLP: a level has 20 to 32 tokens at the fixed profile (one or two programs of 16
# rows), thousands at the large one; tl.dot wants every block dimension >= 16
MLP_CONFIGS = [_cfg(4, BLOCK_N=16, BLOCK_K=32, BLOCK_O=64), _cfg(4, BLOCK_N=32, BLOCK_K=64, BLOCK_O=64),
               _cfg(8, BLOCK_N=64, BLOCK_K=64, BLOCK_O=128), _cfg(4, BLOCK_N=16, BLOCK_K=64, BLOCK_O=128)]
# the pointwise mix, [N * s * s, C] @ [C, C]: 2048 to 5120 rows at the fixed profile (tens of
# programs), half a million at the large one; C = 128 fits one BLOCK_K step of the widest config
MIX_CONFIGS = [_cfg(4, BLOCK_M=64, BLOCK_O=64, BLOCK_K=32), _cfg(4, BLOCK_M=64, BLOCK_O=128, BLOCK_K=64),
               _cfg(4, BLOCK_M=32, BLOCK_O=128, BLOCK_K=128), _cfg(4, BLOCK_M=64, BLOCK_O=64, BLOCK_K=128),
               _cfg(8, BLOCK_M=128, BLOCK_O=128, BLOCK_K=64), _cfg(8, BLOCK_M=128, BLOCK_O=256, BLOCK_K=64)]


@triton.jit
def _tile_pixels(ids_ptr, n, C, H, W, K, S: tl.constexpr, SSP: tl.constexpr):
    """Image offset of tile n's frame, its pixels' in-image offsets and their mask."""
    return _pixels_of(tl.load(ids_ptr + n), n, C, H, W, K, S, SSP)


@triton.jit
def _pixels_of(tile, n, C, H, W, K, S: tl.constexpr, SSP: tl.constexpr):
    p = tl.arange(0, SSP)
    return (n // K) * C * H * W, _in_image(tile, p // S, p % S, W, S), p < S * S


@triton.jit
def _in_image(tile, row, col, W, S: tl.constexpr):
    """The in-image offset of pixel (row, col) of ``tile``, numbered row-major on the grid of S x S tiles."""
    per_row = W // S
    return ((tile // per_row) * S + row) * W + (tile % per_row) * S + col


@triton.jit
def _scale_shift(gb_ptr, n, offs_c, mask_c, C):
    gamma = tl.load(gb_ptr + n * 2 * C + offs_c, mask=mask_c, other=0.0).to(tl.float32)
    beta = tl.load(gb_ptr + n * 2 * C + C + offs_c, mask=mask_c, other=0.0).to(tl.float32)
    # 1 + tanh(g) = 2 * sigmoid(2g): no cancellation near 0 and no overflow
    return 2.0 / (1.0 + tl.exp(-2.0 * gamma)), beta


@triton.jit
def _modulate(raw, scale, shift):
    # the reference materialises the modulated tile in the data dtype: round like it
    return (scale[:, None] * raw.to(tl.float32) + shift[:, None]).to(raw.dtype).to(tl.float32)


@triton.autotune(configs=autotune_configs(MEAN_CONFIGS), key=["C", "K", "S"])
@triton.jit
def _tile_mean_kernel(src_ptr, ids_ptr, tok_ptr, C, H, W, K,
                      S: tl.constexpr, SSP: tl.constexpr, BLOCK_C: tl.constexpr, PDL: tl.constexpr = 0):
    """tokens[n, c] = mean of tile n of src over its s x s pixels (fp32 sum)."""
    await_previous(PDL)  # under a dependent launch: wait for the kernel before
    n = tl.program_id(0).to(tl.int64)
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    img, pix, valid = _tile_pixels(ids_ptr, n, C, H, W, K, S, SSP)
    _store_tile_mean(src_ptr, tok_ptr, n, offs_c, img, pix, valid, C, H, W, S)


@triton.jit
def _store_tile_mean(src_ptr, tok_ptr, n, offs_c, img, pix, valid, C, H, W, S: tl.constexpr):
    mask = (offs_c < C)[:, None] & valid[None, :]
    x = tl.load(src_ptr + img + offs_c[:, None] * (H * W) + pix[None, :], mask=mask, other=0.0)
    mean = tl.sum(x.to(tl.float32), axis=1) / (S * S)
    tl.store(tok_ptr + n * C + offs_c, mean.to(tok_ptr.dtype.element_ty), mask=offs_c < C)


# A frame of at most SELECT_BLOCK level-0 tiles (64 at the fixed profile) is ranked in registers by
# every program of level 0's tile means, each for its own tile, and one program a frame writes both
# levels' ids for the kernels after it: the selection kernel, first in the chain, is not launched.
@triton.autotune(configs=autotune_configs(MEAN_CONFIGS), key=["C", "K", "S"])
@triton.jit
def _select_tile_mean_kernel(src_ptr, util_ptr, split_ptr, ids0_ptr, ids1_ptr, slot_ptr, tok_ptr, C, H, W, K,
                             N0, J, COLS0, S: tl.constexpr, SSP: tl.constexpr, BLOCK: tl.constexpr,
                             BLOCK_C: tl.constexpr, PDL: tl.constexpr = 0):
    """``_select_kernel`` and level 0's ``_tile_mean_kernel`` in one launch, for N0 <= BLOCK."""
    await_previous(PDL)  # under a dependent launch: wait for the kernel before
    n = tl.program_id(0).to(tl.int64)
    b, k = n // K, n % K
    i, rank, parent = _frame_ranks(util_ptr + b * N0, N0, K, BLOCK)
    if (tl.program_id(1) == 0) & (k == 0):  # one program a frame writes the ids the later kernels read
        _store_frame_ids(split_ptr + b * N0, ids0_ptr + b * K, ids1_ptr + b * 4 * J, slot_ptr + b * K, i, rank,
                         parent, J, COLS0)
    tile = tl.sum(tl.where(parent & (rank == k), i, 0), axis=0)
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    img, pix, valid = _pixels_of(tile, n, C, H, W, K, S, SSP)
    _store_tile_mean(src_ptr, tok_ptr, n, offs_c, img, pix, valid, C, H, W, S)


@triton.jit
def _dot(a, b, acc, IEEE: tl.constexpr):
    # IEEE: in float32 without TF32, as cuBLAS multiplies float32 for torch (and bf16 in the
    # interpreter, whose tl.dot misreads bf16 operands); else on the tensor cores
    if IEEE:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    return tl.dot(a, b, acc)


@triton.jit
def _rows_times_weight(x_ptr, w_ptr, rows, mask_rows, cols, mask_cols, C, acc,
                       BLOCK_K: tl.constexpr, IEEE: tl.constexpr):
    """acc + x[rows] @ w[cols].T over BLOCK_K channels at a time: x and w row-major, rows of C."""
    for k0 in range(0, C, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + rows[:, None].to(tl.int64) * C + k[None, :],
                    mask=mask_rows[:, None] & (k < C)[None, :], other=0.0)
        w = tl.load(w_ptr + cols[None, :] * C + k[:, None],
                    mask=mask_cols[None, :] & (k < C)[:, None], other=0.0)
        acc = _dot(x, w, acc, IEEE)
    return acc


@triton.autotune(configs=autotune_configs(MLP_CONFIGS), key=["N", "C", "HID"])
@triton.jit
def _token_mlp_kernel(x_ptr, w1_ptr, b1_ptr, w2_ptr, b2_ptr, out_ptr, N, C, HID,
                      HP: tl.constexpr, IEEE: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_O: tl.constexpr,
                      PDL: tl.constexpr = 0):
    """out[n] = relu(x[n] @ w1.T + b1) @ w2.T + b2 for BLOCK_N tokens: both GEMMs, the biases
    and the ReLU in one launch, the hidden layer rounded to the data dtype as F.linear leaves it."""
    await_previous(PDL)  # under a dependent launch: wait for the kernel before
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_n = rows < N
    h = tl.arange(0, HP)
    mask_h = h < HID
    acc = _rows_times_weight(x_ptr, w1_ptr, rows, mask_n, h, mask_h, C,
                             tl.zeros([BLOCK_N, HP], dtype=tl.float32), BLOCK_K, IEEE)
    b1 = tl.load(b1_ptr + h, mask=mask_h, other=0.0).to(tl.float32)
    hidden = tl.maximum(acc + b1[None, :], 0.0).to(x_ptr.dtype.element_ty)
    for o0 in range(0, 2 * C, BLOCK_O):
        o = o0 + tl.arange(0, BLOCK_O)
        mask_o = o < 2 * C
        w2 = tl.load(w2_ptr + o[None, :] * HID + h[:, None], mask=mask_h[:, None] & mask_o[None, :], other=0.0)
        out = _dot(hidden, w2, tl.zeros([BLOCK_N, BLOCK_O], dtype=tl.float32), IEEE)
        out += tl.load(b2_ptr + o, mask=mask_o, other=0.0).to(tl.float32)[None, :]
        tl.store(out_ptr + rows[:, None].to(tl.int64) * (2 * C) + o[None, :], out.to(out_ptr.dtype.element_ty),
                 mask=mask_n[:, None] & mask_o[None, :])


@triton.autotune(configs=autotune_configs(MIX_CONFIGS), key=["M", "C"])
@triton.jit
def _pointwise_mix_kernel(d_ptr, w_ptr, b_ptr, out_ptr, M, C, IEEE: tl.constexpr, BLOCK_M: tl.constexpr,
                          BLOCK_O: tl.constexpr, BLOCK_K: tl.constexpr, PDL: tl.constexpr = 0):
    """out = d @ w.T + b, d [M, C] pixel-major: F.linear's GEMM with its bias, rounded once. In Triton,
    not cuBLAS, so that it launches dependently like the kernels around it."""
    await_previous(PDL)  # under a dependent launch: wait for the kernel before
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    o = tl.program_id(1) * BLOCK_O + tl.arange(0, BLOCK_O)
    mask_m, mask_o = rows < M, o < C
    acc = _rows_times_weight(d_ptr, w_ptr, rows, mask_m, o, mask_o, C,
                             tl.zeros([BLOCK_M, BLOCK_O], dtype=tl.float32), BLOCK_K, IEEE)
    acc += tl.load(b_ptr + o, mask=mask_o, other=0.0).to(tl.float32)[None, :]
    tl.store(out_ptr + rows[:, None].to(tl.int64) * C + o[None, :], acc.to(out_ptr.dtype.element_ty),
             mask=mask_m[:, None] & mask_o[None, :])


# W is left unspecialized so that no tap's load is known to be 16-byte aligned: Triton gives every
# load of one data-flow slice the widest vector any of them allows, and the six taps one pixel to
# the side cannot vectorize, so with the three aligned taps setting the layout each thread read its
# 8 adjacent pixels (4 at level 1) as scalar loads, neighbouring threads 16 bytes apart: 16 sectors
# per warp load, 5.4 of 32 bytes used (ncu, H200, large profile: L1-bound at 97 %, 2.87 ms). With a
# pixel a thread a warp load spans 2-4 sectors on 16 x 16 tiles, 4-8 on 8 x 8 (docs/perf.md,
# 2026-11-29, "Why: its loads").
@triton.autotune(configs=autotune_configs(DW_CONFIGS), key=["C", "K", "S"])
@triton.jit(do_not_specialize=["W"])
def _modulate_dw_kernel(src_ptr, ids_ptr, gb_ptr, dw_ptr, d_ptr, C, H, W, K,
                        S: tl.constexpr, SSP: tl.constexpr, BLOCK_C: tl.constexpr, PDL: tl.constexpr = 0):
    """D[n, p, c] = depthwise 3x3 of the modulated tile n, zero-padded at the tile border."""
    await_previous(PDL)  # under a dependent launch: wait for the kernel before
    n = tl.program_id(0).to(tl.int64)
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_c = offs_c < C
    img, pix, valid = _tile_pixels(ids_ptr, n, C, H, W, K, S, SSP)
    scale, shift = _scale_shift(gb_ptr, n, offs_c, mask_c, C)
    p = tl.arange(0, SSP)
    acc = tl.zeros([BLOCK_C, SSP], dtype=tl.float32)
    # a loop over rows, not unrolled: with all 9 taps' scalar loads in flight at once the tuned
    # config (BLOCK_C 16, 4 warps) took 255 registers and spilled at level 0 (ncu, H200, large);
    # with one row of 3 taps at a time the cell read 12 % less, and Triton 3.9's ptxas counts
    # 251 registers, no spill (docs/perf.md, 2026-11-29)
    for dy in range(-1, 2):
        row_ok = valid & (p // S + dy >= 0) & (p // S + dy < S)
        for dx in tl.static_range(-1, 2):
            inside = row_ok & (p % S + dx >= 0) & (p % S + dx < S)
            mask = mask_c[:, None] & inside[None, :]
            offs = img + offs_c[:, None] * (H * W) + (pix + dy * W + dx)[None, :]
            raw = tl.load(src_ptr + offs, mask=mask, other=0.0)
            # the padding is zeros of the modulated tile, not modulated zeros
            tap_val = tl.where(mask, _modulate(raw, scale, shift), 0.0)
            w = tl.load(dw_ptr + offs_c * 9 + (dy + 1) * 3 + (dx + 1), mask=mask_c, other=0.0).to(tl.float32)
            acc += w[:, None] * tap_val
    # pixel-major [N * s * s, C]: the pointwise mix is then one GEMM with its bias fused
    out = d_ptr + (n * (S * S) + p[None, :]) * C + offs_c[:, None]
    tl.store(out, acc.to(d_ptr.dtype.element_ty), mask=mask_c[:, None] & valid[None, :])


@triton.jit
def _four_pixels(x, BLOCK_C: tl.constexpr, SGP: tl.constexpr):
    """[BLOCK_C, SGP, 4] -> its four [BLOCK_C, SGP] pixels in order. The reshape to [..., 2, 2] is
    row-major, so the first split gives pixels (0, 2) and (1, 3)."""
    even, odd = tl.split(tl.reshape(x, (BLOCK_C, SGP, 2, 2)))
    x0, x2 = tl.split(even)
    x1, x3 = tl.split(odd)
    return x0, x1, x2, x3


@triton.jit
def _row_of_taps(acc, w_left, w_mid, w_right, left, mid, right):
    """acc + the three taps of one row, one at a time (dx = -1, 0, 1), as the taps kernel adds them."""
    acc += w_left[:, None] * left
    acc += w_mid[:, None] * mid
    acc += w_right[:, None] * right
    return acc


# _modulate_dw_kernel with vector loads, for tile sides that are multiples of 4. The taps kernel's
# one-pixel-a-thread loads are 2-byte scalars in fp16, and at the large profile its two launches
# are the largest share of the cell (1.24 and 0.59 ms under ncu, H200). Here a thread holds
# groups of 4 adjacent pixels of a row: per row of taps, the group, its left and its right
# neighbour are three loads of one shape, so one layout, each 4 pixels a thread (8 bytes in fp16;
# W specialized, x0 and the tile origins multiples of 4, so the alignment is known); the left
# group gives pixel x0 - 1, the right one x0 + 4. Each output pixel adds its nine taps in the order
# the taps kernel does (dy, then dx), so both write the same bits. The default up to VEC_MAX_SIDE
# only: why, in docs/kernels-ff-infer.md.
@triton.autotune(configs=autotune_configs(DW_CONFIGS), key=["C", "K", "S"])
@triton.jit
def _modulate_dw_vec_kernel(src_ptr, ids_ptr, gb_ptr, dw_ptr, d_ptr, C, H, W, K,
                            S: tl.constexpr, SGP: tl.constexpr, BLOCK_C: tl.constexpr, PDL: tl.constexpr = 0):
    """``_modulate_dw_kernel`` for S % 4 == 0, 4 pixels a load: SGP = next_power_of_2(S * S / 4)."""
    await_previous(PDL)  # under a dependent launch: wait for the kernel before
    GROUPS: tl.constexpr = S // 4  # groups of 4 pixels a row
    n = tl.program_id(0).to(tl.int64)
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_c = offs_c < C
    scale, shift = _scale_shift(gb_ptr, n, offs_c, mask_c, C)
    g = tl.arange(0, SGP)
    row, col = g // GROUPS, g % GROUPS
    valid = g < S * GROUPS
    first = _in_image(tl.load(ids_ptr + n), row, 4 * col, W, S)  # the group's first pixel
    v = tl.arange(0, 4)
    group = (src_ptr + (n // K) * C * H * W + offs_c[:, None, None] * (H * W) + first[None, :, None]
             + v[None, None, :])
    a0 = tl.zeros([BLOCK_C, SGP], dtype=tl.float32)
    a1 = tl.zeros([BLOCK_C, SGP], dtype=tl.float32)
    a2 = tl.zeros([BLOCK_C, SGP], dtype=tl.float32)
    a3 = tl.zeros([BLOCK_C, SGP], dtype=tl.float32)
    for dy in range(-1, 2):  # a loop over rows, as the taps kernel's
        mid = mask_c[:, None] & (valid & (row + dy >= 0) & (row + dy < S))[None, :]
        left = mid & (col > 0)[None, :]
        right = mid & (col < GROUPS - 1)[None, :]
        at = group + dy * W
        m0, m1, m2, m3 = _four_pixels(tl.load(at, mask=mid[:, :, None], other=0.0), BLOCK_C, SGP)
        _, _, _, l3 = _four_pixels(tl.load(at - 4, mask=left[:, :, None], other=0.0), BLOCK_C, SGP)
        r0, _, _, _ = _four_pixels(tl.load(at + 4, mask=right[:, :, None], other=0.0), BLOCK_C, SGP)
        # the padding is zeros of the modulated tile, not modulated zeros
        pl = tl.where(left, _modulate(l3, scale, shift), 0.0)
        p0 = tl.where(mid, _modulate(m0, scale, shift), 0.0)
        p1 = tl.where(mid, _modulate(m1, scale, shift), 0.0)
        p2 = tl.where(mid, _modulate(m2, scale, shift), 0.0)
        p3 = tl.where(mid, _modulate(m3, scale, shift), 0.0)
        pr = tl.where(right, _modulate(r0, scale, shift), 0.0)
        w_row = dw_ptr + offs_c * 9 + (dy + 1) * 3
        w_left = tl.load(w_row, mask=mask_c, other=0.0).to(tl.float32)
        w_mid = tl.load(w_row + 1, mask=mask_c, other=0.0).to(tl.float32)
        w_right = tl.load(w_row + 2, mask=mask_c, other=0.0).to(tl.float32)
        a0 = _row_of_taps(a0, w_left, w_mid, w_right, pl, p0, p1)
        a1 = _row_of_taps(a1, w_left, w_mid, w_right, p0, p1, p2)
        a2 = _row_of_taps(a2, w_left, w_mid, w_right, p1, p2, p3)
        a3 = _row_of_taps(a3, w_left, w_mid, w_right, p2, p3, pr)
    # join(join(a0, a2), join(a1, a3)) is [..., 2, 2] with [i, j] = a_{2i + j}: row-major a0..a3
    acc = tl.reshape(tl.join(tl.join(a0, a2), tl.join(a1, a3)), (BLOCK_C, SGP, 4))
    # pixel-major [N * s * s, C], pixel 4 g + v, as the taps kernel stores it
    out = d_ptr + (n * (S * S) + 4 * g[None, :, None] + v[None, None, :]) * C + offs_c[:, None, None]
    tl.store(out, acc.to(d_ptr.dtype.element_ty), mask=(mask_c[:, None] & valid[None, :])[:, :, None])


@triton.autotune(configs=autotune_configs(NORM_CONFIGS), key=["C", "K", "S", "BLEND"],
                 restore_value=["dst_ptr"])  # level 1 updates dst in place: undo tuning runs
@triton.jit
def _norm_gate_kernel(src_ptr, ids_ptr, gb_ptr, u_ptr, nw_ptr, nb_ptr, vs_ptr, vb_ptr, gs_ptr,
                      gsh_ptr, alpha_ptr, dst_ptr, slot_ptr, child_tok_ptr, C, H, W, K, J, EPS,
                      S: tl.constexpr, SSP: tl.constexpr, BLEND: tl.constexpr, CHILD_MEANS: tl.constexpr,
                      BLOCK_C: tl.constexpr, CSPLIT: tl.constexpr, PDL: tl.constexpr = 0):
    """Group norm of tile n of U, gated ReLU, + the modulated tile; stored (or blended) in dst.

    CHILD_MEANS (level 0): a tile that is the ``slot[n]``-th of the J split parents also stores
    the next level's tokens, the means of its four quadrants (its children) as stored in dst, at
    ``child_tok[b, 4 slot + q]``: level 1's tile-mean kernel is not launched."""
    await_previous(PDL)  # under a dependent launch: wait for the kernel before
    n = tl.program_id(0).to(tl.int64)
    img, pix, valid = _tile_pixels(ids_ptr, n, C, H, W, K, S, SSP)
    p = tl.arange(0, SSP)
    u_tile = u_ptr + n * (S * S) * C
    # one pass over all C x s x s values, shifted by a sample of the tile so that
    # E[(u - pivot)^2] - E[u - pivot]^2 does not cancel
    pivot = tl.load(u_tile).to(tl.float32)
    acc = tl.zeros([BLOCK_C, SSP], dtype=tl.float32)
    acc_sq = tl.zeros([BLOCK_C, SSP], dtype=tl.float32)
    for c0 in range(0, C, BLOCK_C):
        offs_c = c0 + tl.arange(0, BLOCK_C)
        mask = (offs_c < C)[:, None] & valid[None, :]
        u = tl.load(u_tile + p[None, :] * C + offs_c[:, None], mask=mask, other=0.0)
        d = tl.where(mask, u.to(tl.float32) - pivot, 0.0)
        acc += d
        acc_sq += d * d
    mean_d = tl.sum(tl.sum(acc, axis=1), axis=0) / (C * S * S)
    var = tl.maximum(tl.sum(tl.sum(acc_sq, axis=1), axis=0) / (C * S * S) - mean_d * mean_d, 0.0)
    mean = pivot + mean_d
    rstd = 1.0 / tl.sqrt(var + EPS)
    # quadrant q = 2 * (lower half) + (right half): the children row-major, as the selection numbers them
    quad = (p // S >= S // 2).to(tl.int32) * 2 + (p % S >= S // 2).to(tl.int32)
    slot = -1
    if CHILD_MEANS:
        slot = tl.load(slot_ptr + n)
    for c0 in range(tl.program_id(1) * BLOCK_C, C, CSPLIT * BLOCK_C):
        offs_c = c0 + tl.arange(0, BLOCK_C)
        mask_c = offs_c < C
        mask = mask_c[:, None] & valid[None, :]
        u = tl.load(u_tile + p[None, :] * C + offs_c[:, None], mask=mask, other=0.0).to(tl.float32)
        nw = tl.load(nw_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32)
        nb = tl.load(nb_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32)
        normed = (u - mean) * rstd * nw[:, None] + nb[:, None]
        vs = tl.load(vs_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32)
        vb = tl.load(vb_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32)
        gs = tl.load(gs_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32)
        gsh = tl.load(gsh_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32)
        gated = (normed * vs[:, None] + vb[:, None]) * tl.maximum(normed * gs[:, None] + gsh[:, None], 0.0)
        offs = img + offs_c[:, None] * (H * W) + pix[None, :]
        raw = tl.load(src_ptr + offs, mask=mask, other=0.0)
        scale, shift = _scale_shift(gb_ptr, n, offs_c, mask_c, C)
        out = (_modulate(raw, scale, shift) + gated).to(raw.dtype)
        if BLEND:  # src is the level-0 result, the gate's base; out is its detail
            alpha = tl.load(alpha_ptr + (n // K) * H * W + pix, mask=valid, other=0.0).to(tl.float32)
            base = raw.to(tl.float32)
            out = (base + alpha[None, :] * (out.to(tl.float32) - base)).to(raw.dtype)
        tl.store(dst_ptr + offs, out, mask=mask)
        if CHILD_MEANS:  # noqa: SIM102 (compile time, then run time)
            if slot >= 0:  # fp32 sums of the stored values, rounded once, as the tile-mean kernel
                child_tok = child_tok_ptr + ((n // K) * 4 * J + 4 * slot) * C + offs_c
                stored = tl.where(mask, out.to(tl.float32), 0.0)
                for q in tl.static_range(4):
                    child_mean = tl.sum(tl.where((quad == q)[None, :], stored, 0.0), axis=1) / (S * S // 4)
                    tl.store(child_tok + q * C, child_mean.to(child_tok_ptr.dtype.element_ty), mask=mask_c)
