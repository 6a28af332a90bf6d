"""tilessm-scan in ``jax.numpy`` (apex_core/workloads/tilessm_scan.py): a ``lax.scan`` per direction."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
from jax import Array, lax

from apex_core.workloads.tilessm_scan import DECAY_MAX, DECAY_MIN


def _scan_one(x: Array, d: Array, gain: Array, bias: Array, s0: Array) -> tuple[Array, Array]:
    """Forward recurrence over dim 1 of ``x [B, K, C]``; the states ``[B, K, C]`` and the last one."""
    drive = (1 - d) * (gain * x + bias)  # everything that does not depend on s_{t-1}

    def step(s: Array, drive_t: Array) -> tuple[Array, Array]:
        s = d * s + drive_t
        return s, s

    last, states = lax.scan(step, s0, jnp.swapaxes(drive, 0, 1))
    return jnp.swapaxes(states, 0, 1), last


def _merge(y_f: Array, y_b: Array, merge: str, gate: Array | None) -> Array:
    if merge == "sum":
        return y_f + y_b
    if merge == "avg":
        return (y_f + y_b) / 2
    if gate is None:
        raise ValueError("merge 'gated' needs a gate")
    g = gate.astype(y_f.dtype)
    return g * y_f + (1 - g) * y_b


def ssm_scan(tokens: Array, decay: Array, input_gain: Array, output_gain: Array, state_bias: Array,
             init_state: Array | None, direction: str, merge: str, gate: Array | None,
             clamp: float) -> tuple[Array, tuple[Array, ...]]:
    """``y [B, K, C]`` (tokens' dtype) and the final float32 state(s), as the reference's ``ssm_scan``."""
    state_dtype = jnp.promote_types(tokens.dtype, jnp.float32)
    x = jnp.clip(jnp.nan_to_num(tokens.astype(state_dtype), nan=0.0), -clamp, clamp)
    d, gain, out_gain, bias = (v.astype(state_dtype) for v in (decay, input_gain, output_gain, state_bias))
    d = jnp.clip(d, DECAY_MIN, DECAY_MAX)
    b, _, c = tokens.shape
    s0 = jnp.zeros((b, c), state_dtype)
    if init_state is not None:
        s0 = jnp.broadcast_to(init_state.astype(state_dtype), (b, c))
    ys, finals = [], []
    if direction in ("forward", "bidirectional"):
        states, last = _scan_one(x, d, gain, bias, s0)
        ys.append(out_gain * states)
        finals.append(last)
    if direction in ("backward", "bidirectional"):
        states, last = _scan_one(jnp.flip(x, 1), d, gain, bias, s0)
        ys.append(out_gain * jnp.flip(states, 1))
        finals.append(last)
    y = ys[0] if len(ys) == 1 else _merge(ys[0], ys[1], merge, gate)
    return y.astype(tokens.dtype), tuple(finals)


def build(case: Any) -> Callable[[dict[str, Array]], dict[str, Array]]:
    p = case.params
    direction = case.name

    def fn(inputs: dict[str, Array]) -> dict[str, Array]:
        y, finals = ssm_scan(inputs["tokens"], inputs["decay"], inputs["input_gain"], inputs["output_gain"],
                             inputs["state_bias"], inputs["init_state"], direction, p.merge, inputs["gate"],
                             p.clamp)
        if direction == "bidirectional":
            return {"y": y, "state_fwd": finals[0], "state_bwd": finals[1]}
        return {"y": y, "state": finals[0]}

    return fn
