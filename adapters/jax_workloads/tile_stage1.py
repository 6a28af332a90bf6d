"""tile-stage1 in ``jax.numpy`` (apex_core/workloads/tile_stage1.py): gather, gated op, scatter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
from jax import Array

from adapters.jax_workloads.tiles import compute_dtype, tile_origins, tile_pixel_index


def tile_stage1(x: Array, idx: Array, vs: Array, vb: Array, gs: Array, gb: Array, tile_size: int) -> Array:
    """On the tiles in ``idx`` ``out = (x*vs + vb) * max(x*gs + gb, 0)``; elsewhere ``out = x``.

    The ids are unique within a row (the workload checks it), so the scatter has one
    writer per pixel. The op runs in at least float32 and is rounded once.
    """
    channels, width = x.shape[1], x.shape[3]
    index = tile_pixel_index(tile_origins(idx, width, tile_size), channels, tile_size)
    wide = compute_dtype(x.dtype)
    tiles = x[index].astype(wide)  # [B, K, C, t, t]
    shape = (1, 1, channels, 1, 1)
    value = tiles * vs.astype(wide).reshape(shape) + vb.astype(wide).reshape(shape)
    gate = jnp.maximum(tiles * gs.astype(wide).reshape(shape) + gb.astype(wide).reshape(shape), 0)
    return x.at[index].set((value * gate).astype(x.dtype))


def build(case: Any) -> Callable[[dict[str, Array]], dict[str, Array]]:
    tile_size = case.params.tile_size

    def fn(inputs: dict[str, Array]) -> dict[str, Array]:
        vs, vb, gs, gb = (inputs[n] for n in ("vs", "vb", "gs", "gb"))
        return {"out": tile_stage1(inputs["x"], inputs["idx"], vs, vb, gs, gb, tile_size)}

    return fn
