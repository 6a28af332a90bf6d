"""Triton fusiongate: sanitize proxies, gate, and blend detail into base in one pass over memory.

Each program owns ``BLOCK_P`` consecutive pixels (contiguous along W) of one image and
``BLOCK_C * C_ITERS`` channels. It loads the two proxies once, computes alpha in
float32, stores alpha (only the first channel group does), then walks its channels
in ``[BLOCK_C, BLOCK_P]`` tiles reading base and detail and writing fused. DRAM sees
each input byte once and each output byte once: proxies + base + detail + alpha +
fused, the minimum ``FusionGate.work`` counts. Other channel groups of the same
pixels re-read the proxies, which then come from L2.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from apex_kernels._dependent import await_previous, await_previous_at_end
from apex_kernels._utils import (
    KernelLaunch,
    Launcher,
    autotune_configs,
    check_tensors,
    config_dict,
    dtype_name,
    output_buffer,
    pin_config,
    sequential,
)

_INT32_LIMIT = 2**31  # offsets inside one image are int32; the batch offset is int64
_GRID_LIMIT = 65535  # CUDA limit of grid dimensions 1 and 2


def _config(block_p: int, block_c: int, c_iters: int, warps: int, *,
            evict_first: bool = True) -> triton.Config:
    meta: dict[str, int | str] = {"BLOCK_P": block_p, "BLOCK_C": block_c, "C_ITERS": c_iters}
    # the kernel's default is the hint, so configs (and shipped picks) made before it stay as they were
    if not evict_first:
        meta["LOAD_EVICTION"] = ""  # tl.load's own default: no hint
    return triton.Config(meta, num_warps=warps)


# Small programs win at the fixed profile (HW = 16384, C = 128): 128 pixels x 8 channels
# with 2 warps makes 2048 programs, enough loads in flight on 132 SMs to hide DRAM
# latency (H100, cold L2, graph replay: 10.8 us, against 11.1-22.5 us for programs of
# 4k-32k elements). At 4 x 128 x 512 x 512 every config measured within 5 % of the best,
# 98 % of a same-size copy. Every shape here leaves room for 16-byte vectors along W.
# The first config is also the one the interpreter runs.
# Whether base and detail load with evict_first is tuned as well: at the large profile on an H200
# (8 x 256 x 512 x 512) configs without the hint read 742.8 us against 783.0 us with it, within
# 0.4 % of torch.compile's kernel (739.8 us; Inductor loads them without a hint), while at the fixed
# profile the hint's config read 1.4-2.4 % faster in three of three pairs of processes
# (docs/perf.md, 2026-11-28, "fusiongate's eviction hint"; the mixed set below not measured yet).
CONFIGS = [
    _config(128, 8, 1, 2),
    _config(256, 8, 1, 4),
    _config(128, 16, 1, 4),
    _config(128, 16, 2, 4),
    _config(256, 16, 2, 8),
    _config(256, 8, 4, 4),
    _config(512, 8, 4, 8),
    _config(64, 16, 1, 2),
    _config(128, 8, 1, 2, evict_first=False),
    _config(256, 8, 1, 4, evict_first=False),
    _config(128, 16, 1, 4, evict_first=False),
    _config(256, 16, 2, 8, evict_first=False),
]
# the narrowest channel group (8 channels) must keep grid dimension 1 within its limit
_MAX_CHANNELS = _GRID_LIMIT * min(c.kwargs["BLOCK_C"] * c.kwargs["C_ITERS"] for c in CONFIGS)


@triton.jit
def _sanitize(p):
    # NaN -> 0, +inf -> 1, -inf -> 0 (the reference's nan_to_num), then float32
    p = p.to(tl.float32)
    p = tl.where(p != p, 0.0, p)
    p = tl.where(p == float("inf"), 1.0, p)
    return tl.where(p == float("-inf"), 0.0, p)


@triton.jit
def _softplus(w):
    # log(1 + e^w) written so that e^w never overflows; torch's threshold 20 agrees
    # with this to within float32 rounding
    return tl.maximum(w, 0.0) + tl.log(1.0 + tl.exp(-tl.abs(w)))


@triton.autotune(configs=autotune_configs(CONFIGS), key=["HW", "C"])
@triton.jit
def _fusiongate_kernel(
    boundary_ptr, uncertainty_ptr, base_ptr, detail_ptr, wb_ptr, wu_ptr, bias_ptr,
    alpha_ptr, fused_ptr, C, HW,
    BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr, C_ITERS: tl.constexpr,
    LOAD_EVICTION: tl.constexpr = "evict_first", PDL: tl.constexpr = 0,
):
    await_previous(PDL)  # under a dependent launch: wait for the kernel before (PDL 2: start at once)
    pid_p = tl.program_id(0)
    pid_c = tl.program_id(1)
    pid_b = tl.program_id(2).to(tl.int64)  # B * C * HW may pass 2**31
    offs_p = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
    mask_p = offs_p < HW

    # scalars are read from device memory on every launch: no host sync, graph-safe
    ws = _softplus(tl.load(wb_ptr).to(tl.float32))
    wu = _softplus(tl.load(wu_ptr).to(tl.float32))
    bias = tl.load(bias_ptr).to(tl.float32)
    bnd = _sanitize(tl.load(boundary_ptr + pid_b * HW + offs_p, mask=mask_p, other=0.0))
    unc = _sanitize(tl.load(uncertainty_ptr + pid_b * HW + offs_p, mask=mask_p, other=0.0))
    logits = ws * bnd + wu * unc + bias
    alpha = 1.0 / (1.0 + tl.exp(-logits))
    # every channel group computes alpha (cheap, proxies hit L2) but only group 0 writes it
    if pid_c == 0:
        tl.store(alpha_ptr + pid_b * HW + offs_p, alpha.to(alpha_ptr.dtype.element_ty),
                 mask=mask_p)

    img = pid_b * C * HW
    alpha_row = alpha[None, :]
    for i in tl.static_range(C_ITERS):
        offs_c = (pid_c * C_ITERS + i) * BLOCK_C + tl.arange(0, BLOCK_C)
        offs = offs_c[:, None] * HW + offs_p[None, :]
        mask = (offs_c < C)[:, None] & mask_p[None, :]
        base = tl.load(base_ptr + img + offs, mask=mask, other=0.0,
                       eviction_policy=LOAD_EVICTION).to(tl.float32)
        detail = tl.load(detail_ptr + img + offs, mask=mask, other=0.0,
                         eviction_policy=LOAD_EVICTION).to(tl.float32)
        fused = base + alpha_row * (detail - base)
        tl.store(fused_ptr + img + offs, fused.to(fused_ptr.dtype.element_ty), mask=mask)
    await_previous_at_end(PDL)  # started at once (PDL 2): end after the kernel before it


def shape_reason(batch: int, channels: int, height: int, width: int) -> str | None:
    """Why this kernel cannot run a ``[B, C, H, W]`` map, or None when it can."""
    if channels * height * width >= _INT32_LIMIT:
        return "fusiongate kernel needs C*H*W < 2**31 (int32 offsets within one image)"
    if batch > _GRID_LIMIT:
        return f"fusiongate kernel needs batch <= {_GRID_LIMIT} (grid dimension 2)"
    if channels > _MAX_CHANNELS:
        return f"fusiongate kernel needs channels <= {_MAX_CHANNELS} (grid dimension 1)"
    return None


def fusiongate_launcher(boundary: torch.Tensor, uncertainty: torch.Tensor, base: torch.Tensor,
                        detail: torch.Tensor, wb: torch.Tensor, wu: torch.Tensor,
                        bias: torch.Tensor, *, alpha_out: torch.Tensor | None = None,
                        fused_out: torch.Tensor | None = None,
                        config: triton.Config | None = None) -> Launcher:
    """Bind the fusion gate to its tensors; each call of the result gates their current contents.

    ``boundary``, ``uncertainty`` ``[B, 1, H, W]``; ``base``, ``detail`` ``[B, C, H, W]`` of
    one dtype; ``wb``, ``wu``, ``bias`` 0-dim tensors on the device (read by the kernel, so
    a call never synchronises the host). ``config`` pins one of ``CONFIGS`` instead of
    autotuning (tests use it to run each). Outputs ``alpha`` and ``fused``.
    """
    if base.dim() != 4:
        raise ValueError(f"fusiongate: base must be [B, C, H, W], got shape {list(base.shape)}")
    b, c, h, w = base.shape
    tensors = {"boundary": boundary, "uncertainty": uncertainty, "base": base, "detail": detail,
               "wb": wb, "wu": wu, "bias": bias}
    check_tensors("fusiongate", tensors,
                  {"boundary": (b, 1, h, w), "uncertainty": (b, 1, h, w), "detail": (b, c, h, w),
                   "wb": (), "wu": (), "bias": ()})
    if detail.dtype != base.dtype:
        raise ValueError(f"fusiongate: detail is {dtype_name(detail.dtype)}, "
                         f"base is {dtype_name(base.dtype)}")
    reason = shape_reason(b, c, h, w)
    if reason:
        raise ValueError(f"fusiongate: shape {[b, c, h, w]}: {reason}")
    alpha = output_buffer(alpha_out, "alpha_out", base, (b, 1, h, w))
    fused = output_buffer(fused_out, "fused_out", base, (b, c, h, w))
    outputs = {"alpha": alpha, "fused": fused}
    hw = h * w

    def grid(meta: dict[str, Any]) -> tuple[int, int, int]:
        # covers every pixel and channel for whichever config the autotuner picks
        return (triton.cdiv(hw, meta["BLOCK_P"]),
                triton.cdiv(c, meta["BLOCK_C"] * meta["C_ITERS"]), b)

    kernel, pinned = pin_config(_fusiongate_kernel, config)
    launch = KernelLaunch("fusiongate", kernel, grid,
                          (boundary, uncertainty, base, detail, wb, wu, bias, alpha, fused, c, hw),
                          pinned, f"B{b}_C{c}_HW{hw}_{dtype_name(base.dtype)}", pinned or None)
    metadata = {"kernel": "fusiongate_single_pass", "autotune_key": ["HW", "C"],
                "configs": 1 if pinned else len(autotune_configs(CONFIGS)),
                "pinned": config_dict(config) if config is not None else {}}
    return Launcher(sequential([launch], outputs), outputs, (launch,), metadata)


def fusiongate(boundary: torch.Tensor, uncertainty: torch.Tensor, base: torch.Tensor,
               detail: torch.Tensor, wb: torch.Tensor, wu: torch.Tensor,
               bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(alpha, fused)``: ``alpha = sigmoid(softplus(wb)*boundary + softplus(wu)*uncertainty
    + bias)`` on sanitized proxies, ``fused = base + alpha * (detail - base)``."""
    outputs = fusiongate_launcher(boundary, uncertainty, base, detail, wb, wu, bias)()
    return outputs["alpha"], outputs["fused"]
