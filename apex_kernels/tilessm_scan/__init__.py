"""Triton tilessm-scan: the per-channel linear recurrence as a parallel scan, fp32 state.

Per (b, c): ``x = clamp(nan_to_num(x), -clamp, clamp)``, ``d = clamp(decay, decay_min,
decay_max)``, ``s_t = d * s_{t-1} + (1 - d) * (input_gain * x_t + state_bias)``, ``y_t =
output_gain * s_t``. Directions forward, backward (flip, scan, flip) and bidirectional
with merge ``sum``, ``avg`` or ``gated`` (``g * y_f + (1 - g) * y_b``).

Two paths, chosen by K (``segment_steps`` overrides the choice):

- ``chunked``: one program per (batch row, channel block) walks K in chunks of at most
  ``MAX_BLOCK_K`` steps; one launch.
- ``segmented``: above ``MAX_BLOCK_K`` steps, K is split into segments of
  ``SEGMENT_STEPS`` steps, one program each; three launches.
"""

from __future__ import annotations

import torch
import triton

from apex_kernels._utils import Launcher, check_tensors, config_dict, dtype_name, sequential
from apex_kernels.tilessm_scan import chunked, segmented

DIRECTIONS = {"forward": 0, "backward": 1, "bidirectional": 2}
MERGES = {"sum": 0, "avg": 1, "gated": 2}
# Defaults of the recurrence: the decay bounds as float32 values, and the token clamp.
DECAY_MIN = float(torch.tensor(1e-6, dtype=torch.float32))
DECAY_MAX = float(torch.tensor(1.0 - 1e-6, dtype=torch.float32))
CLAMP = 1e4
_INT32_LIMIT = 2**31
_GRID_LIMIT = 65535
_FP32_MAX = 3.4028234663852886e38  # CLAMP travels as a float32 kernel argument


def shape_reason(steps: int, channels: int, clamp: float = CLAMP) -> str | None:
    """Why this kernel cannot scan ``[B, steps, channels]`` with ``clamp``, or None when it can."""
    if steps * channels >= _INT32_LIMIT:
        return "tilessm-scan kernel needs K*C < 2**31 (int32 offsets within one sequence)"
    if channels > _GRID_LIMIT:  # grid dimension 1 holds at least one program per channel
        return f"tilessm-scan kernel needs channels <= {_GRID_LIMIT}"
    if clamp > _FP32_MAX:
        return f"tilessm-scan kernel needs clamp <= {_FP32_MAX:.4g} (a float32 argument)"
    return None


def segment_steps_for(steps: int) -> int:
    """Segment length of the split path for K = ``steps``, or 0 for the one-program walk."""
    return segmented.SEGMENT_STEPS if steps > chunked.MAX_BLOCK_K else 0


def _check_segment_steps(segment_steps: int) -> None:
    if segment_steps and (segment_steps < segmented.SCAN_GROUP
                          or segment_steps & (segment_steps - 1)):
        raise ValueError(f"segment_steps must be 0 or a power of two >= "
                         f"{segmented.SCAN_GROUP}, not {segment_steps}")


def tilessm_scan_launcher(tokens: torch.Tensor, decay: torch.Tensor, input_gain: torch.Tensor,
                          output_gain: torch.Tensor, state_bias: torch.Tensor, *,
                          direction: str = "forward", merge: str = "sum",
                          gate: torch.Tensor | None = None,
                          init_state: torch.Tensor | None = None, clamp: float = CLAMP,
                          decay_bounds: tuple[float, float] = (DECAY_MIN, DECAY_MAX),
                          config: triton.Config | None = None,
                          segment_steps: int | None = None) -> Launcher:
    """Bind the scan to its tensors; each call of the result scans their current contents.

    ``tokens [B, K, C]`` (fp32, fp16 or bf16); ``decay``, ``input_gain``, ``output_gain``,
    ``state_bias`` and ``gate`` (merge ``gated`` only) ``[C]``; ``init_state [B, C]``
    (zeros when None). Outputs ``y`` like tokens and the float32 final state: ``state``,
    or ``state_fwd`` and ``state_bwd`` when bidirectional. ``config`` pins one
    configuration (of ``chunked.CONFIGS``, or ``segmented.SPLIT_CONFIGS`` on the split
    path) instead of autotuning. ``segment_steps``: 0 walks K in one program per channel
    block, a power of two of at least ``SCAN_GROUP`` splits K into segments of that many
    steps, None chooses by K.
    """
    if direction not in DIRECTIONS or merge not in MERGES:
        raise ValueError(f"tilessm-scan: direction {direction!r} / merge {merge!r}; choose from "
                         f"{', '.join(DIRECTIONS)} / {', '.join(MERGES)}")
    if tokens.dim() != 3:
        raise ValueError(f"tokens must be [B, K, C], got shape {list(tokens.shape)}")
    b, k, c = tokens.shape
    if gate is None:
        if merge == "gated" and direction == "bidirectional":
            raise ValueError("tilessm-scan: merge 'gated' needs a gate")
        gate = output_gain  # a pointer the kernels never read without the gated merge
    if init_state is None:
        init_state = torch.zeros((b, c), dtype=torch.float32, device=tokens.device)
    params = (decay, input_gain, output_gain, state_bias, gate)
    names = ("decay", "input_gain", "output_gain", "state_bias", "gate")
    check_tensors("tilessm-scan", {"tokens": tokens, "init_state": init_state,
                                   **dict(zip(names, params, strict=True))},
                  {"init_state": (b, c), **{name: (c,) for name in names}})
    reason = shape_reason(k, c, clamp)
    if reason:
        raise ValueError(f"shape {[b, k, c]}, clamp {clamp}: {reason}")
    if segment_steps is None:
        segment_steps = segment_steps_for(k)
    _check_segment_steps(segment_steps)
    y = torch.empty_like(tokens)
    # the reference's state dtype: float32 for every supported token dtype
    state_dtype = torch.promote_types(tokens.dtype, torch.float32)
    state_f = torch.empty((b, c), dtype=state_dtype, device=tokens.device)
    if direction == "bidirectional":
        state_b = torch.empty((b, c), dtype=state_dtype, device=tokens.device)
        outputs = {"y": y, "state_fwd": state_f, "state_bwd": state_b}
    else:
        outputs = {"y": y, "state": state_f}
    bucket = f"B{b}_K{k}_C{c}_{direction}_{merge}_{dtype_name(tokens.dtype)}"
    codes = (DIRECTIONS[direction], MERGES[merge], float(clamp), decay_bounds, bucket)
    if segment_steps:
        launches, metadata = segmented.segmented_launches(tokens, params, init_state, outputs,
                                                          *codes, segment_steps, config)
    else:
        launches, metadata = chunked.chunked_launches(tokens, params, init_state, outputs,
                                                      *codes, config)
    metadata = {**metadata, "direction": direction, "merge": merge,
                "pinned": config_dict(config) if config is not None else {}}
    return Launcher(sequential(launches, outputs), outputs, tuple(launches), metadata)


def tilessm_scan(tokens: torch.Tensor, decay: torch.Tensor, input_gain: torch.Tensor,
                 output_gain: torch.Tensor, state_bias: torch.Tensor, *,
                 direction: str = "forward", merge: str = "sum",
                 gate: torch.Tensor | None = None, init_state: torch.Tensor | None = None,
                 clamp: float = CLAMP) -> tuple[torch.Tensor, ...]:
    """``(y, state)``, or ``(y, state_fwd, state_bwd)`` when bidirectional (module doc)."""
    outputs = tilessm_scan_launcher(tokens, decay, input_gain, output_gain, state_bias,
                                    direction=direction, merge=merge, gate=gate,
                                    init_state=init_state, clamp=clamp)()
    return tuple(outputs.values())
