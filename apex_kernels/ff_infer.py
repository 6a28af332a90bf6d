"""Triton ff-infer: the two-level tile-refinement step from small Triton kernels plus cuBLAS.

One call is 18 launches with no host synchronisation, so it can be captured in a CUDA
graph: a selection kernel (both levels' tile ids, the top-k as pairwise ranks), the
fusion gate run first on (features, features), which writes alpha and a fused map equal
to features, then per level a tile-mean kernel, the tilessm-scan kernel, the token MLP
on cuBLAS (linear, ReLU, linear), a modulate + depthwise 3x3 kernel, the pointwise mix
on cuBLAS (one GEMM, bias fused) and a group-norm + gated-ReLU + residual kernel that
writes the refined tiles straight into the fused map. Level 0 overrides its tiles;
level 1 blends its tiles in with alpha (``fused = base + alpha * (detail - base)``),
which is the whole fusion gate there, since outside the level-1 tiles detail equals
base. No dense map is copied and nothing but ``fused`` and ``alpha`` is written at map
size. docs/kernels-ff-infer.md has the design and the measurements.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias
import triton
import triton.language as tl

from apex_core.correctness import DTYPES
from apex_core.results import Case
from apex_core.workloads.ff_infer import NORM_EPS, SCAN_MERGE, FFInfer, level_weights
from apex_core.workloads.fusiongate import FusionGateParams
from apex_core.workloads.tilessm_scan import TileSSMScanParams
from apex_kernels import fusiongate, tilessm_scan
from apex_kernels.tuning import TRACKER, autotune_configs, pin_config

SUPPORTED_DTYPES = ("fp32", "fp16", "bf16")
# A program holds one tile's pixels for BLOCK_C channels: 32 x 32 pixels (t = 16) at most.
MAX_TILE_PIXELS = 1024
SELECT_BLOCK = 64  # utilities compared per step: [64, 64] pairs
_INT32_LIMIT = 2**31  # offsets inside one image are int32; tile and batch offsets int64


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


@triton.jit
def _ranked_ahead(v_i, i, v_j, j, valid_j):
    # how many j come before each i in a descending top-k (ties: the lower index first)
    ahead = (v_j[None, :] > v_i[:, None]) | ((v_j[None, :] == v_i[:, None]) & (j[None, :] < i[:, None]))
    return tl.sum((ahead & valid_j[None, :]).to(tl.int32), axis=1)


@triton.jit
def _select_kernel(util_ptr, split_ptr, ids0_ptr, ids1_ptr, N0, K0, J, COLS0, BLOCK: tl.constexpr):
    """One frame: ids0 = top-K0 of util0; ids1 = the children of the top-J parents by split_util."""
    b = tl.program_id(0).to(tl.int64)
    util = util_ptr + b * N0
    split = split_ptr + b * N0
    ids0 = ids0_ptr + b * K0
    ids1 = ids1_ptr + b * 4 * J
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
    quad = tl.arange(0, 4)
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
        # children row-major inside the parent, on the grid of half the tile size
        rows = 2 * (parent // COLS0)[:, None] + quad[None, :] // 2
        cols = 2 * (parent % COLS0)[:, None] + quad[None, :] % 2
        tl.store(ids1 + 4 * rank[:, None] + quad[None, :], rows * (2 * COLS0) + cols,
                 mask=((k < K0) & (rank < J))[:, None])


@triton.jit
def _tile_pixels(ids_ptr, n, C, H, W, K, S: tl.constexpr, SSP: tl.constexpr):
    """Image offset of tile n's frame, its pixels' in-image offsets and their mask."""
    tile = tl.load(ids_ptr + n)
    per_row = W // S
    p = tl.arange(0, SSP)
    pix = ((tile // per_row) * S + p // S) * W + (tile % per_row) * S + p % S
    return (n // K) * C * H * W, pix, p < S * S


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
                      S: tl.constexpr, SSP: tl.constexpr, BLOCK_C: tl.constexpr):
    """tokens[n, c] = mean of tile n of src over its s x s pixels (fp32 sum)."""
    n = tl.program_id(0).to(tl.int64)
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    img, pix, valid = _tile_pixels(ids_ptr, n, C, H, W, K, S, SSP)
    mask = (offs_c < C)[:, None] & valid[None, :]
    x = tl.load(src_ptr + img + offs_c[:, None] * (H * W) + pix[None, :], mask=mask, other=0.0)
    mean = tl.sum(x.to(tl.float32), axis=1) / (S * S)
    tl.store(tok_ptr + n * C + offs_c, mean.to(tok_ptr.dtype.element_ty), mask=offs_c < C)


@triton.autotune(configs=autotune_configs(DW_CONFIGS), key=["C", "K", "S"])
@triton.jit
def _modulate_dw_kernel(src_ptr, ids_ptr, gb_ptr, dw_ptr, d_ptr, C, H, W, K,
                        S: tl.constexpr, SSP: tl.constexpr, BLOCK_C: tl.constexpr):
    """D[n, p, c] = depthwise 3x3 of the modulated tile n, zero-padded at the tile border."""
    n = tl.program_id(0).to(tl.int64)
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_c = offs_c < C
    img, pix, valid = _tile_pixels(ids_ptr, n, C, H, W, K, S, SSP)
    scale, shift = _scale_shift(gb_ptr, n, offs_c, mask_c, C)
    p = tl.arange(0, SSP)
    acc = tl.zeros([BLOCK_C, SSP], dtype=tl.float32)
    for tap in tl.static_range(9):
        dy = tap // 3 - 1
        dx = tap % 3 - 1
        inside = valid & (p // S + dy >= 0) & (p // S + dy < S) & (p % S + dx >= 0) & (p % S + dx < S)
        mask = mask_c[:, None] & inside[None, :]
        offs = img + offs_c[:, None] * (H * W) + (pix + dy * W + dx)[None, :]
        raw = tl.load(src_ptr + offs, mask=mask, other=0.0)
        # the padding is zeros of the modulated tile, not modulated zeros
        tap_val = tl.where(mask, _modulate(raw, scale, shift), 0.0)
        w = tl.load(dw_ptr + offs_c * 9 + tap, mask=mask_c, other=0.0).to(tl.float32)
        acc += w[:, None] * tap_val
    # pixel-major [N * s * s, C]: the pointwise mix is then one GEMM with its bias fused
    out = d_ptr + (n * (S * S) + p[None, :]) * C + offs_c[:, None]
    tl.store(out, acc.to(d_ptr.dtype.element_ty), mask=mask_c[:, None] & valid[None, :])


@triton.autotune(configs=autotune_configs(NORM_CONFIGS), key=["C", "K", "S", "BLEND"],
                 restore_value=["dst_ptr"])  # level 1 updates dst in place: undo tuning runs
@triton.jit
def _norm_gate_kernel(src_ptr, ids_ptr, gb_ptr, u_ptr, nw_ptr, nb_ptr, vs_ptr, vb_ptr, gs_ptr,
                      gsh_ptr, alpha_ptr, dst_ptr, C, H, W, K, EPS,
                      S: tl.constexpr, SSP: tl.constexpr, BLEND: tl.constexpr,
                      BLOCK_C: tl.constexpr, CSPLIT: tl.constexpr):
    """Group norm of tile n of U, gated ReLU, + the modulated tile; stored (or blended) in dst."""
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


def supports(case: Case, dtype_name: str) -> str | None:
    """A reason this fast path cannot run ``case`` in ``dtype_name``, or None when it can."""
    if dtype_name not in SUPPORTED_DTYPES:
        return f"ff-infer Triton path supports {', '.join(SUPPORTED_DTYPES)}, not {dtype_name}"
    p = case.params
    if (2 * p.tile_size) ** 2 > MAX_TILE_PIXELS:
        return f"ff-infer Triton path needs (2 * tile_size)^2 <= {MAX_TILE_PIXELS} pixels per tile"
    if p.channels * p.height * p.width >= _INT32_LIMIT:
        return "ff-infer Triton path needs C*H*W < 2**31 (int32 offsets within one image)"
    for sub_case, module in _sub_cases(p):
        reason = module.supports(sub_case, dtype_name)
        if reason:
            return reason
    return None


def _scan_case(p: Any, steps: int) -> Case:
    """The tilessm-scan case of a level with ``steps`` tiles."""
    return Case("tilessm-scan", "bidirectional", TileSSMScanParams(
        batch=p.batch, channels=p.channels, steps=steps, merge=SCAN_MERGE))


def _gate_case(p: Any) -> Case:
    """The fusiongate case over the whole map."""
    return Case("fusiongate", "default", FusionGateParams(
        batch=p.batch, channels=p.channels, height=p.height, width=p.width))


def _sub_cases(p: Any) -> list[tuple[Case, Any]]:
    """The tilessm-scan case of each level and the fusiongate case this path runs."""
    return [(_scan_case(p, p.level0_tiles), tilessm_scan),
            (_scan_case(p, p.level1_tiles), tilessm_scan), (_gate_case(p), fusiongate)]


def _pinned(kernel: Any, configs: list[triton.Config], index: int | None) -> tuple[Any, dict]:
    """The autotuned kernel, or its bare jit function with config ``index`` (mod the list)."""
    return pin_config(kernel, None if index is None else configs[index % len(configs)])


def _level(case: Case, inputs: dict[str, torch.Tensor], prefix: str, src: torch.Tensor,
           dst: torch.Tensor, ids: torch.Tensor, side: int, alpha: torch.Tensor | None,
           config_index: int | None) -> tuple[Callable[[], None], dict[str, Any]]:
    """One level's launches: tile means, scan, MLP, modulate + depthwise, mix, norm into dst."""
    w = level_weights(inputs, prefix)
    b, c, h, width = src.shape
    k = ids.shape[1]
    n, pixels = b * k, side * side
    tokens = torch.empty((b, k, c), dtype=src.dtype, device=src.device)
    depthwise = torch.empty((n * pixels, c), dtype=src.dtype, device=src.device)
    scan_inputs = {"tokens": tokens, **{name: w[name] for name in
                                        ("decay", "input_gain", "output_gain", "state_bias")},
                   # merge "avg" never reads the gate; no initial state means zeros
                   "gate": torch.zeros(c, dtype=torch.float32, device=src.device),
                   "init_state": torch.zeros((b, c), dtype=torch.float32, device=src.device)}
    # The one-launch walk even above 256 tiles: this path was checked and timed on the GPU
    # with it at the large profile (320 and 512 tiles); the scan's split path was not.
    scan_fn, scan_outputs, scan_meta = tilessm_scan.make_launcher(_scan_case(case.params, k),
                                                                  scan_inputs, segment_steps=0)
    scanned = scan_outputs["y"].view(n, c)
    mean_kernel, mean_pin = _pinned(_tile_mean_kernel, MEAN_CONFIGS, config_index)
    dw_kernel, dw_pin = _pinned(_modulate_dw_kernel, DW_CONFIGS, config_index)
    norm_kernel, norm_pin = _pinned(_norm_gate_kernel, NORM_CONFIGS, config_index)
    tile = {"S": side, "SSP": triton.next_power_of_2(pixels)}
    bucket = f"B{b}_K{k}_C{c}_S{side}_{str(src.dtype).removeprefix('torch.')}"
    blend = {"BLEND": alpha is not None}
    norm_args = [w[name] for name in ("norm_weight", "norm_bias", "value_scale", "value_bias",
                                      "gate_scale", "gate_bias")]

    def channel_grid(meta: dict[str, Any]) -> tuple[int, int]:
        return (n, triton.cdiv(c, meta["BLOCK_C"]))

    def norm_grid(meta: dict[str, Any]) -> tuple[int, int]:
        return (n, meta["CSPLIT"])

    def run() -> None:
        TRACKER.launch("ff-infer", mean_kernel, channel_grid, bucket, src, ids, tokens,
                       c, h, width, k, heuristic_config=mean_pin or None, **tile, **mean_pin)
        scan_fn()
        hidden = F.linear(scanned, w["mlp_w1"], w["mlp_b1"]).relu_()
        gamma_beta = F.linear(hidden, w["mlp_w2"], w["mlp_b2"])  # [n, 2C]: gamma, then beta
        TRACKER.launch("ff-infer", dw_kernel, channel_grid, bucket, src, ids, gamma_beta,
                       w["dw_weight"], depthwise, c, h, width, k,
                       heuristic_config=dw_pin or None, **tile, **dw_pin)
        mixed = F.linear(depthwise, w["pw_weight"], w["pw_bias"])
        TRACKER.launch("ff-infer", norm_kernel, norm_grid, bucket, src, ids, gamma_beta, mixed,
                       *norm_args, dst if alpha is None else alpha, dst, c, h, width, k,
                       NORM_EPS, heuristic_config=norm_pin or None, **tile, **blend, **norm_pin)

    return run, {"tiles": k, "side": side, "scan": scan_meta}


def _check_inputs(case: Case, inputs: dict[str, torch.Tensor]) -> None:
    """Shapes, ties, dtypes and layout, checked once here so that ``fn()`` never validates."""
    FFInfer().validate_inputs(case, inputs)  # syncs the host once, here, never per call
    dtype = inputs["features"].dtype
    for name, tensor in inputs.items():
        if name not in ("util0", "split_util") and tensor.dtype != dtype:
            raise ValueError(f"{name} is {tensor.dtype}; every data input must be {dtype}")
        if not tensor.is_contiguous():
            # a contiguous copy would not see the runner's in-place refreshes
            raise ValueError(f"{name} must be contiguous")
    if dtype not in DTYPES.values():
        raise ValueError(f"features dtype {dtype} is not one of {', '.join(DTYPES)}")


def make_launcher(case: Case, inputs: dict[str, torch.Tensor], *,
                  config_index: int | None = None) -> tuple[Any, dict, dict]:
    """Return ``(fn, outputs, metadata)``; ``fn()`` runs one ff-infer step on the current inputs.

    ``config_index`` pins config ``i`` (mod each list) of this module's three autotuned
    kernels instead of autotuning; tests use it to run every config.
    """
    _check_inputs(case, inputs)
    p = case.params
    features = inputs["features"]
    dev, b = features.device, p.batch
    ids0 = torch.empty((b, p.level0_tiles), dtype=torch.int32, device=dev)
    ids1 = torch.empty((b, p.level1_tiles), dtype=torch.int32, device=dev)
    # the gate first, on (features, features): alpha, and fused = features exactly
    gate_inputs = {name: inputs[name] for name in ("boundary", "uncertainty", "wb", "wu", "bias")}
    gate_fn, outputs, gate_meta = fusiongate.make_launcher(
        _gate_case(p), {**gate_inputs, "base": features, "detail": features})
    fused, alpha = outputs["fused"], outputs["alpha"]
    level0, meta0 = _level(case, inputs, "l0_", features, fused, ids0, 2 * p.tile_size, None,
                           config_index)
    # level 1 reads the level-0 result from fused and blends its tiles into it in place
    level1, meta1 = _level(case, inputs, "l1_", fused, fused, ids1, p.tile_size, alpha,
                           config_index)
    n0 = inputs["util0"].shape[1]
    select_args = (inputs["util0"], inputs["split_util"], ids0, ids1, n0, p.level0_tiles,
                   p.split_parents, p.level0_grid[1])
    select_meta = {"BLOCK": SELECT_BLOCK, "num_warps": 4}
    bucket = f"B{b}_N{n0}_K{p.level0_tiles}_J{p.split_parents}"

    def fn() -> dict[str, torch.Tensor]:
        TRACKER.launch("ff-infer", _select_kernel, (b,), bucket, *select_args,
                       heuristic_config=select_meta, **select_meta)
        gate_fn()
        level0()
        level1()
        return {"fused": fused, "alpha": alpha}

    metadata = {"kernel": "ff_infer_fast_path", "launches_per_call": 18, "triton_launches": 10,
                "levels": [meta0, meta1], "fusiongate": gate_meta,
                "config_index": config_index}
    return fn, {"fused": fused, "alpha": alpha}, metadata
