"""ff-infer in ``jax.numpy`` (apex_core/workloads/ff_infer.py, docs/ff-infer.md).

Selection is ``lax.top_k`` with counts fixed by the parameters, as the reference's
``torch.topk``; matrix products run at ``Precision.HIGHEST`` so a GPU does not drop fp32
inputs to TF32 (the fp32 tolerance is 1e-4).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import Array, lax

from adapters.jax_workloads.fusiongate import fusion_gate
from adapters.jax_workloads.tiles import compute_dtype, tile_origins, tile_pixel_index, tilepack
from adapters.jax_workloads.tilessm_scan import ssm_scan
from apex_core.workloads.ff_infer import NORM_EPS, SCAN_MERGE

HIGHEST = lax.Precision.HIGHEST


def select_tiles(p: Any, util0: Array, split_util: Array) -> tuple[Array, Array]:
    """Level-0 tile ids (2t grid) and level-1 tile ids (t grid), as the reference's ``select_tiles``."""
    work = jnp.promote_types(util0.dtype, jnp.float32)
    ids0 = lax.top_k(util0.astype(work), p.level0_tiles)[1]  # descending
    parent_util = jnp.take_along_axis(split_util.astype(work), ids0, axis=1)
    best = lax.top_k(parent_util, p.split_parents)[1]
    parents = jnp.take_along_axis(ids0, best, axis=1)  # [B, j], descending split utility
    cols0 = p.level0_grid[1]
    quad = jnp.arange(4)  # children row-major inside the parent
    rows = 2 * (parents // cols0)[..., None] + quad // 2
    cols = 2 * (parents % cols0)[..., None] + quad % 2
    ids1 = (rows * (2 * cols0) + cols).reshape(parents.shape[0], -1)  # [B, 4j]
    return ids0.astype(jnp.int32), ids1.astype(jnp.int32)


def _linear(x: Array, weight: Array, bias: Array) -> Array:
    return jnp.matmul(x, weight.T, precision=HIGHEST) + bias


def _depthwise3x3(x: Array, kernel: Array) -> Array:
    """3x3 cross-correlation per channel of ``x [N, C, s, s]``, zero padding, float32 accumulation."""
    s = x.shape[-1]
    acc = compute_dtype(x.dtype)
    padded = jnp.pad(x.astype(acc), ((0, 0), (0, 0), (1, 1), (1, 1)))
    taps = kernel.astype(acc).reshape(-1, 9)[:, :, None, None]  # [C, 9, 1, 1]
    out = jnp.zeros(x.shape, acc)
    for tap in range(9):  # nine shifted products, in the reference's order
        dy, dx = divmod(tap, 3)
        out = out + taps[:, tap] * padded[..., dy : dy + s, dx : dx + s]
    return out.astype(x.dtype)


def _group_norm_one(x: Array, weight: Array, bias: Array) -> Array:
    """``F.group_norm(x, 1, ...)``: statistics over (C, s, s) per tile in float32, per-channel affine."""
    wide = x.astype(compute_dtype(x.dtype))
    mean = wide.mean(axis=(1, 2, 3), keepdims=True)
    var = ((wide - mean) ** 2).mean(axis=(1, 2, 3), keepdims=True)
    normed = ((wide - mean) / jnp.sqrt(var + NORM_EPS)).astype(x.dtype)
    return normed * weight[:, None, None] + bias[:, None, None]


def refine_tiles(tiles: Array, w: dict[str, Array]) -> Array:
    """Depthwise 3x3 -> pointwise mix -> per-tile norm -> gated ReLU, plus the input."""
    b, k, c, s, _ = tiles.shape
    x = tiles.reshape(b * k, c, s, s)
    depthwise = _depthwise3x3(x, w["dw_weight"])
    mixed = jnp.einsum("oc,nchw->nohw", w["pw_weight"], depthwise, precision=HIGHEST)
    mixed = mixed + w["pw_bias"][:, None, None]
    normed = _group_norm_one(mixed, w["norm_weight"], w["norm_bias"])
    value = normed * w["value_scale"][:, None, None] + w["value_bias"][:, None, None]
    gate = jax.nn.relu(normed * w["gate_scale"][:, None, None] + w["gate_bias"][:, None, None])
    return (x + value * gate).reshape(b, k, c, s, s)


def refine_level(dense: Array, ids: Array, tile_size: int, w: dict[str, Array]) -> Array:
    """Pack, scan the tile tokens, modulate, refine and write one level back."""
    packed = tilepack(dense, ids, tile_size)  # [B, K, C, s, s]
    tokens = packed.mean(axis=(-2, -1))
    scanned, _ = ssm_scan(tokens, w["decay"], w["input_gain"], w["output_gain"], w["state_bias"],
                          None, "bidirectional", SCAN_MERGE, None, 1e4)
    hidden = jax.nn.relu(_linear(scanned, w["mlp_w1"], w["mlp_b1"]))
    gamma, beta = jnp.split(_linear(hidden, w["mlp_w2"], w["mlp_b2"]), 2, axis=-1)
    modulated = (1 + jnp.tanh(gamma))[..., None, None] * packed + beta[..., None, None]
    refined = refine_tiles(modulated, w)
    # the ids of one level are unique and aligned, so the reference's override unpack (all
    # levels equal) writes each pixel from its one tile: a plain scatter
    index = tile_pixel_index(tile_origins(ids, dense.shape[-1], tile_size), dense.shape[1], tile_size)
    return dense.at[index].set(refined.astype(dense.dtype))


def _level(inputs: dict[str, Array], prefix: str) -> dict[str, Array]:
    return {k[len(prefix):]: v for k, v in inputs.items() if k.startswith(prefix)}


def build(case: Any) -> Callable[[dict[str, Array]], dict[str, Array]]:
    p = case.params

    def fn(inputs: dict[str, Array]) -> dict[str, Array]:
        ids0, ids1 = select_tiles(p, inputs["util0"], inputs["split_util"])
        base = refine_level(inputs["features"], ids0, 2 * p.tile_size, _level(inputs, "l0_"))
        detail = refine_level(base, ids1, p.tile_size, _level(inputs, "l1_"))
        alpha, fused = fusion_gate(inputs["boundary"], inputs["uncertainty"], base, detail,
                                   inputs["wb"], inputs["wu"], inputs["bias"])
        return {"fused": fused, "alpha": alpha}

    return fn
