"""tileunpack in ``jax.numpy`` (apex_core/workloads/tileunpack.py): override, blend, overlap."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
from jax import Array, lax

from adapters.jax_workloads.tiles import compute_dtype, override_unpack, priority, tile_pixel_index


def blend_unpack(base: Array, packed: Array, origins: Array, levels: Array, alpha: Array) -> Array:
    """Tiles applied in ascending priority: ``out = (1 - alpha) * out + alpha * P[k]``.

    Overlapping tiles compose, so the K steps are sequential (``fori_loop``: one traced
    step, not K unrolled copies); each step is vectorized over the batch and the tile.
    """
    b, c = base.shape[:2]
    k, t = packed.shape[1], packed.shape[-1]
    order = jnp.argsort(priority(levels), axis=1)
    bi, ci, rows, cols = tile_pixel_index(origins, c, t)
    batch = jnp.arange(b)
    wide = compute_dtype(base.dtype)
    weight = alpha.astype(wide)

    def step(i: Array, out: Array) -> Array:
        kk = order[:, i]
        index = (bi[:, 0], ci[:, 0], rows[batch, kk], cols[batch, kk])  # -> [B, C, t, t]
        mixed = (1 - weight) * out[index].astype(wide) + weight * packed[batch, kk].astype(wide)
        return out.at[index].set(mixed.astype(out.dtype))

    return lax.fori_loop(0, k, step, base)


def build(case: Any) -> Callable[[dict[str, Array]], dict[str, Array]]:
    blend = case.name == "blend"  # overlap uses override semantics, as the reference does

    def fn(inputs: dict[str, Array]) -> dict[str, Array]:
        args = (inputs["base"], inputs["packed"], inputs["origins"], inputs["levels"])
        return {"out": blend_unpack(*args, inputs["alpha"]) if blend else override_unpack(*args)}

    return fn
