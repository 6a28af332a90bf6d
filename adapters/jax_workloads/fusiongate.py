"""fusiongate in ``jax.numpy`` (apex_core/workloads/fusiongate.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import Array

from adapters.jax_workloads.tiles import compute_dtype


def sanitize(proxy: Array) -> Array:
    """NaN -> 0, +inf -> 1, -inf -> 0, as the reference's ``_sanitize``."""
    return jnp.nan_to_num(proxy, nan=0.0, posinf=1.0, neginf=0.0)


def fusion_gate(boundary: Array, uncertainty: Array, base: Array, detail: Array,
                wb: Array, wu: Array, bias: Array) -> tuple[Array, Array]:
    """``alpha = sigmoid(softplus(wb)*b + softplus(wu)*u + bias)``, ``fused = base + alpha*(detail-base)``.

    The gate is computed in at least float32 and rounded to the data dtype once; both
    results take the dtype of ``base``.
    """
    wide = compute_dtype(base.dtype)
    logits = (jax.nn.softplus(wb.astype(wide)) * sanitize(boundary).astype(wide)
              + jax.nn.softplus(wu.astype(wide)) * sanitize(uncertainty).astype(wide))
    alpha = jax.nn.sigmoid(logits + bias.astype(wide)).astype(base.dtype)
    fused = base.astype(wide) + alpha.astype(wide) * (detail.astype(wide) - base.astype(wide))
    return alpha, fused.astype(base.dtype)


def build(case: Any) -> Callable[[dict[str, Array]], dict[str, Array]]:
    names = ("boundary", "uncertainty", "base", "detail", "wb", "wu", "bias")

    def fn(inputs: dict[str, Array]) -> dict[str, Array]:
        alpha, fused = fusion_gate(*(inputs[n] for n in names))
        return {"alpha": alpha, "fused": fused}

    return fn
