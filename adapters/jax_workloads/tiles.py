"""The tile grid in ``jax.numpy``: origins, pixel indices, pack and the override unpack."""

from __future__ import annotations

import jax.numpy as jnp
from jax import Array


def tile_origins(idx: Array, width: int, tile_size: int) -> Array:
    """Origins ``[..., 2]`` (y, x) of the row-major tile ids in ``idx``."""
    per_row = width // tile_size
    return jnp.stack((idx // per_row * tile_size, idx % per_row * tile_size), axis=-1)


def tile_pixel_index(origins: Array, channels: int, tile_size: int) -> tuple[Array, Array, Array, Array]:
    """Index arrays (batch, channel, row, col) that broadcast to ``[B, K, C, t, t]``.

    As ``apex_core.workloads.common.tile_pixel_index``: indexing an NCHW array with them
    reads every pixel of every tile whose top-left corner is in ``origins [B, K, 2]``.
    """
    offsets = jnp.arange(tile_size)
    rows = (origins[..., 0, None] + offsets)[:, :, None, :, None]
    cols = (origins[..., 1, None] + offsets)[:, :, None, None, :]
    batch = jnp.arange(origins.shape[0])[:, None, None, None, None]
    chan = jnp.arange(channels)[None, None, :, None, None]
    return batch, chan, rows, cols


def tilepack(features: Array, idx: Array, tile_size: int) -> Array:
    """``P[b, k, c, dy, dx] = F[b, c, y0 + dy, x0 + dx]`` for tile ``idx[b, k]`` (one gather)."""
    channels, width = features.shape[1], features.shape[3]
    origins = tile_origins(idx, width, tile_size)
    return features[tile_pixel_index(origins, channels, tile_size)]


def priority(levels: Array) -> Array:
    """Priority key ``level * K + k``: higher level wins, ties go to the later k."""
    k = levels.shape[1]
    return levels.astype(jnp.int32) * k + jnp.arange(k, dtype=jnp.int32)


def override_unpack(base: Array, packed: Array, origins: Array, levels: Array) -> Array:
    """Every covered pixel of a copy of ``base`` takes its highest-priority tile's value.

    The per-pixel winner is a scatter-max of the priority keys, as in the torch reference,
    so overlapping and duplicated tiles resolve the same way; -1 marks uncovered pixels.
    """
    b, c, h, w = base.shape
    k, t = packed.shape[1], packed.shape[-1]
    _, _, rows, cols = tile_pixel_index(origins, 1, t)
    pixels = (rows * w + cols).reshape(b, k * t * t)
    keys = jnp.broadcast_to(priority(levels)[:, :, None, None, None], (b, k, 1, t, t)).reshape(b, -1)
    winner = jnp.full((b, h * w), -1, dtype=jnp.int32).at[jnp.arange(b)[:, None], pixels].max(keys)
    win_k = jnp.maximum(winner, 0) % k
    flat = jnp.arange(h * w)
    # clipping keeps uncovered pixels' (unused) reads in bounds
    dy = jnp.clip(flat // w - jnp.take_along_axis(origins[..., 0], win_k, axis=1), 0, t - 1)
    dx = jnp.clip(flat % w - jnp.take_along_axis(origins[..., 1], win_k, axis=1), 0, t - 1)
    bi = jnp.arange(b)[:, None, None]
    ci = jnp.arange(c)[None, :, None]
    values = packed[bi, win_k[:, None], ci, dy[:, None], dx[:, None]]  # [B, C, H*W]
    out = jnp.where((winner >= 0)[:, None], values, base.reshape(b, c, h * w))
    return out.reshape(b, c, h, w)


def compute_dtype(dtype: jnp.dtype) -> jnp.dtype:
    """At least float32: elementwise math is done there and rounded once, as a fused kernel does."""
    return jnp.promote_types(dtype, jnp.float32)
