"""Triton ff-infer: the two-level tile-refinement step from small Triton kernels (and cuBLAS).

One call is 12 launches with no host synchronisation at the fixed profile (13 where a frame has
more than 64 level-0 tiles), so it can be captured in a CUDA graph: level 0's tile means, which
also select both levels' tiles (the top-k as pairwise ranks; a selection kernel of its own first
for larger frames), then per level the tilessm-scan kernel, the token MLP in one kernel (both GEMMs,
biases and ReLU), a modulate + depthwise 3x3 kernel, the pointwise mix (one GEMM, bias fused:
a Triton kernel where the call launches dependently, cuBLAS elsewhere) and a group-norm +
gated-ReLU + residual kernel that writes the refined tiles straight into the fused map; the
fusion gate runs on (features, features) after level 0's MLP, which writes alpha and a fused
map equal to features before level 0's norm writes into it; that norm kernel also writes level
1's tokens (the means of the split tiles' quadrants). Level 0 overrides its tiles;
level 1 blends its tiles in with alpha (``fused = base + alpha * (detail - base)``),
which is the whole fusion gate there, since outside the level-1 tiles detail equals
base. No dense map is copied and nothing but ``fused`` and ``alpha`` is written at map
size. docs/kernels-ff-infer.md has the design and the measurements.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
import triton

from apex_kernels import fusiongate, tilessm_scan
from apex_kernels._dependent import dependent, dependent_launches_run_on
from apex_kernels._utils import (
    KernelLaunch,
    Launcher,
    Step,
    check_dtype,
    check_tensors,
    dtype_name,
    interpreting,
    pin_config,
    sequential,
)
from apex_kernels.ff_infer.kernels import (
    DW_CONFIGS,
    MEAN_CONFIGS,
    MIX_CONFIGS,
    MLP_CONFIGS,
    NORM_CONFIGS,
    _modulate_dw_kernel,
    _modulate_dw_vec_kernel,
    _norm_gate_kernel,
    _pointwise_mix_kernel,
    _select_tile_mean_kernel,
    _tile_mean_kernel,
    _token_mlp_kernel,
)
from apex_kernels.ff_infer.selection import SELECT_BLOCK, _select_kernel

# A program holds one tile's pixels for BLOCK_C channels: 32 x 32 pixels (t = 16) at most.
MAX_TILE_PIXELS = 1024
SCAN_MERGE = "avg"  # the default merge of the bidirectional tile-token scan
NORM_EPS = 1e-5  # the default epsilon of the per-tile group norm
_INT32_LIMIT = 2**31  # offsets inside one image are int32; tile and batch offsets int64
MIXES = ("triton", "cublas")  # who runs the pointwise mix
# the depthwise kernel: 4 pixels a load (tile sides that are multiples of 4), or a pixel a load
DEPTHWISES = ("vec", "taps")
VEC_MAX_SIDE = 8  # the largest tile side that gets the vector depthwise kernel by default

def shape_reason(channels: int, height: int, width: int, tile_size: int, level0_tiles: int,
                 level1_tiles: int) -> str | None:
    """Why this fast path cannot run these sizes, or None when it can."""
    if (2 * tile_size) ** 2 > MAX_TILE_PIXELS:
        return f"ff-infer Triton path needs (2 * tile_size)^2 <= {MAX_TILE_PIXELS} pixels per tile"
    if channels * height * width >= _INT32_LIMIT:
        return "ff-infer Triton path needs C*H*W < 2**31 (int32 offsets within one image)"
    for steps in (level0_tiles, level1_tiles):
        reason = tilessm_scan.shape_reason(steps, channels)
        if reason:
            return reason
    return fusiongate.shape_reason(1, channels, height, width)


def dependent_launch_reason(features: torch.Tensor, device: torch.device) -> str | None:
    """Why this call's kernels launch plainly, or None when they launch dependently.

    On an H200, dependent launch took 28-29 % off the call at the fixed profile, a 4 MiB map, and
    cost 2.7-5.5 % at the large one, 1 GiB (docs/perf.md 2026-11-28). Where the map and the fused
    map fit in the L2 together, the kernels are microseconds long and the gaps between them a large
    share of the call; beyond it they are long. The L2 is the line drawn between the two measured
    sizes: where the cost turns into a gain is not measured, nor is any of it on an H100."""
    if not dependent_launches_run_on(device):
        return "needs CUDA at compute capability 9.0 or later, not the interpreter"
    pair = 2 * features.numel() * features.element_size()
    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    if pair > l2:
        return (f"the map and the fused map ({pair / 2**20:.0f} MiB) do not fit in the L2 ({l2 / 2**20:.0f} "
                "MiB), where the kernels are long: dependent launch read slower at a 1 GiB map")
    return None


def level_weight_shapes(channels: int, hidden: int) -> dict[str, tuple[int, ...]]:
    """Shapes of one level's weights: the scan's vectors, the token MLP, the refine step."""
    c, h = channels, hidden
    vectors = ("decay", "input_gain", "output_gain", "state_bias", "pw_bias", "norm_weight",
               "norm_bias", "value_scale", "value_bias", "gate_scale", "gate_bias")
    matrices = {"mlp_w1": (h, c), "mlp_b1": (h,), "mlp_w2": (2 * c, h), "mlp_b2": (2 * c,),
                "dw_weight": (c, 1, 3, 3), "pw_weight": (c, c)}
    return {**{name: (c,) for name in vectors}, **matrices}


def _pinned(kernel: Any, configs: list[triton.Config], index: int | None) -> tuple[Any, dict]:
    """The autotuned kernel, or its bare jit function with config ``index`` (mod the list)."""
    return pin_config(kernel, None if index is None else configs[index % len(configs)])


def _level(src: torch.Tensor, dst: torch.Tensor, ids: torch.Tensor, side: int,
           w: Mapping[str, torch.Tensor], alpha: torch.Tensor | None, merge: str,
           norm_eps: float, config_index: int | None, mix_on: str, depthwise_on: str | None,
           tokens: torch.Tensor, slots: torch.Tensor, select: tuple | None = None,
           after_mlp: Sequence[Step] = (), children: torch.Tensor | None = None
           ) -> tuple[list[Step], dict[str, Any]]:
    """One level's steps in order: tile means, scan, MLP, ``after_mlp``, modulate + depthwise, mix,
    norm into dst.

    ``select`` (util0, split_util, ids1, N0, J, COLS0): level 0 of a frame small enough to be ranked
    in registers, whose tile-mean kernel also selects both levels' tiles and writes ``ids``, ``ids1``
    and ``slots``. ``children`` (level 0): the next level's tokens, which this level's norm kernel
    writes (the means of its split tiles' quadrants); level 1 then launches no tile means of its own.
    ``slots`` (level 0: written; level 1: unused) is each level-0 tile's place among the split parents.
    ``depthwise_on``: ``"vec"`` or ``"taps"``, or None for ``"vec"`` where the side is 4 or 8 and
    the width a multiple of 16.
    """
    b, c, h, width = src.shape
    k = ids.shape[1]
    n, pixels = b * k, side * side
    depthwise = torch.empty((n * pixels, c), dtype=src.dtype, device=src.device)
    # The one-launch walk even above 256 tiles: this path was checked and timed on the GPU
    # with it at the large profile (320 and 512 tiles); the scan's split path was not.
    # merge "gated" would need a gate; no initial state means zeros.
    scan = tilessm_scan.tilessm_scan_launcher(
        tokens, w["decay"], w["input_gain"], w["output_gain"], w["state_bias"],
        direction="bidirectional", merge=merge, segment_steps=0)
    scanned = scan.outputs["y"].view(n, c)
    tile = {"S": side, "SSP": triton.next_power_of_2(pixels)}
    bucket = f"B{b}_K{k}_C{c}_S{side}_{dtype_name(src.dtype)}"
    norm_args = [w[name] for name in ("norm_weight", "norm_bias", "value_scale", "value_bias",
                                      "gate_scale", "gate_bias")]

    def channel_grid(meta: dict[str, Any]) -> tuple[int, int]:
        return (n, triton.cdiv(c, meta["BLOCK_C"]))

    def norm_grid(meta: dict[str, Any]) -> tuple[int, int]:
        return (n, meta["CSPLIT"])

    def bound(kernel: Any, configs: list[triton.Config], grid: Any, args: tuple,
              meta: dict[str, Any], shape: dict[str, int] = tile) -> KernelLaunch:
        kernel, pinned = _pinned(kernel, configs, config_index)
        return KernelLaunch("ff-infer", kernel, grid, args, {**shape, **meta, **pinned}, bucket,
                            pinned or None)

    # the MLP and the mix write into buffers allocated once, so every launch is bound once
    gamma_beta = torch.empty((n, 2 * c), dtype=src.dtype, device=src.device)  # gamma, then beta
    mixed = torch.empty((n * pixels, c), dtype=src.dtype, device=src.device)
    hid = w["mlp_w1"].shape[0]
    ieee = src.dtype == torch.float32 or (interpreting() and src.dtype == torch.bfloat16)
    mlp = bound(_token_mlp_kernel, MLP_CONFIGS, lambda meta: (triton.cdiv(n, meta["BLOCK_N"]),),
                (scanned, w["mlp_w1"], w["mlp_b1"], w["mlp_w2"], w["mlp_b2"], gamma_beta, n, c, hid),
                {"HP": max(16, triton.next_power_of_2(hid)), "IEEE": ieee}, shape={})
    means: list[Step] = []
    if select is not None:
        util0, split_util, ids1, n0, j, cols0 = select
        means = [bound(_select_tile_mean_kernel, MEAN_CONFIGS, channel_grid,
                       (src, util0, split_util, ids, ids1, slots, tokens, c, h, width, k, n0, j, cols0),
                       {"BLOCK": SELECT_BLOCK})]
    elif alpha is None:  # level 0 (level 1's tokens come from level 0's norm kernel)
        means = [bound(_tile_mean_kernel, MEAN_CONFIGS, channel_grid, (src, ids, tokens, c, h, width, k), {})]
    # the vector loads are 8-byte aligned only where Triton's specialization proves W a multiple of
    # 16 (elsewhere they split into scalars and spill); above VEC_MAX_SIDE the taps kernel read
    # faster (docs/kernels-ff-infer.md, "_modulate_dw_vec_kernel")
    vec_fits = side % 4 == 0 and side <= VEC_MAX_SIDE and width % 16 == 0
    dw_kind = depthwise_on or ("vec" if vec_fits else "taps")
    dw_args = (src, ids, gamma_beta, w["dw_weight"], depthwise, c, h, width, k)
    if dw_kind == "vec":  # groups of 4 pixels of a row, SGP of them (a power of two)
        dw = bound(_modulate_dw_vec_kernel, DW_CONFIGS, channel_grid, dw_args, {},
                   shape={"S": side, "SGP": triton.next_power_of_2(pixels // 4)})
    else:
        dw = bound(_modulate_dw_kernel, DW_CONFIGS, channel_grid, dw_args, {})
    child_tokens = dst if children is None else children  # unread without CHILD_MEANS
    norm = bound(_norm_gate_kernel, NORM_CONFIGS, norm_grid,
                 (src, ids, gamma_beta, mixed, *norm_args, dst if alpha is None else alpha, dst, slots,
                  child_tokens, c, h, width, k, child_tokens.shape[1] // 4, norm_eps),
                 {"BLEND": alpha is not None, "CHILD_MEANS": children is not None})
    rows = n * pixels
    pw, pw_bias = w["pw_weight"], w["pw_bias"]

    def cublas_mix() -> None:
        # addmm is what F.linear runs for 2-D inputs with a bias: the same cuBLAS GEMM
        torch.addmm(pw_bias, depthwise, pw.t(), out=mixed)

    mix: Step = cublas_mix if mix_on == "cublas" else bound(
        _pointwise_mix_kernel, MIX_CONFIGS,
        lambda meta: (triton.cdiv(rows, meta["BLOCK_M"]), triton.cdiv(c, meta["BLOCK_O"])),
        (depthwise, pw, pw_bias, mixed, rows, c), {"IEEE": ieee}, shape={})
    steps: list[Step] = [*means, *scan.launches, mlp, *after_mlp, dw, mix, norm]
    return steps, {"tiles": k, "side": side, "depthwise": dw_kind, "scan": scan.metadata}


def _check_choice(option: str, value: str | None, choices: tuple[str, ...]) -> None:
    if value not in (None, *choices):
        raise ValueError(f"ff-infer: {option} {value!r} is not one of {', '.join(map(repr, choices))}")


def _check_inputs(features: torch.Tensor, tensors: dict[str, torch.Tensor],
                  levels: tuple[Mapping[str, torch.Tensor], ...], util_shape: tuple[int, int],
                  tile_size: int) -> None:
    """Shapes, dtypes and layout, checked once here so that a call never validates."""
    if features.dim() != 4:
        raise ValueError(f"ff-infer: features must be [B, C, H, W], got {list(features.shape)}")
    b, c, h, w = features.shape
    if h % (2 * tile_size) or w % (2 * tile_size):
        raise ValueError(f"ff-infer: 2 * tile_size = {2 * tile_size} must divide {h} x {w}")
    check_dtype("ff-infer", "features", features)
    shapes: dict[str, tuple[int, ...]] = {"boundary": (b, 1, h, w), "uncertainty": (b, 1, h, w),
                                          "util0": util_shape, "split_util": util_shape,
                                          "wb": (), "wu": (), "bias": ()}
    everything = dict(tensors)
    for level, weights in enumerate(levels):
        hidden = weights["mlp_w1"].shape[0]
        for name, shape in level_weight_shapes(c, hidden).items():
            everything[f"l{level}_{name}"] = weights[name]
            shapes[f"l{level}_{name}"] = shape
    check_tensors("ff-infer", everything, shapes)
    for name, tensor in everything.items():
        if name not in ("util0", "split_util") and tensor.dtype != features.dtype:
            raise ValueError(f"{name} is {tensor.dtype}; every data input must be {features.dtype}")


def ff_infer_launcher(features: torch.Tensor, boundary: torch.Tensor, uncertainty: torch.Tensor,
                      util0: torch.Tensor, split_util: torch.Tensor,
                      level_weights: tuple[Mapping[str, torch.Tensor], Mapping[str, torch.Tensor]],
                      wb: torch.Tensor, wu: torch.Tensor, bias: torch.Tensor, *, tile_size: int,
                      level0_tiles: int, split_parents: int, scan_merge: str = SCAN_MERGE,
                      norm_eps: float = NORM_EPS, config_index: int | None = None,
                      mix: str | None = None, depthwise: str | None = None) -> Launcher:
    """Bind one ff-infer step to its tensors; each call runs it on their current contents.

    ``features [B, C, H, W]``; proxies ``[B, 1, H, W]``; float32 utilities ``util0`` and
    ``split_util`` over the level-0 grid (tile size 2t), ``[B, H/2t * W/2t]``, ties broken
    by the lower index; ``level_weights`` the two levels' weights keyed as
    ``level_weight_shapes`` names them; gate scalars ``wb``, ``wu``, ``bias`` 0-dim. Level 0
    refines the top ``level0_tiles`` tiles, level 1 the four children of the best
    ``split_parents`` of them. Outputs ``fused`` and ``alpha``. ``config_index`` pins
    config ``i`` (mod each list) of this module's seven autotuned kernels. ``mix`` names who runs
    the pointwise mix, ``"triton"`` or ``"cublas"``; None: Triton where the call launches dependently
    (a cuBLAS launch would break the chain), cuBLAS elsewhere, where it read faster. ``depthwise``
    names the modulate + depthwise kernel of both levels, ``"vec"`` (4 pixels a load; tile sides
    that are multiples of 4) or ``"taps"`` (a pixel a load); None: ``"vec"`` at each level whose side
    is 4 or 8 where the map's width is a multiple of 16, ``"taps"`` elsewhere. The
    metadata's ``depthwise`` lists the two choices.
    """
    _check_choice("mix", mix, MIXES)
    _check_choice("depthwise", depthwise, DEPTHWISES)
    if depthwise == "vec" and tile_size % 4:
        raise ValueError(f"ff-infer: depthwise 'vec' needs tile sides that are multiples of 4, "
                         f"got {2 * tile_size} and {tile_size}")
    n0 = (features.shape[2] // (2 * tile_size)) * (features.shape[3] // (2 * tile_size))
    b = features.shape[0]
    _check_inputs(features, {"boundary": boundary, "uncertainty": uncertainty, "util0": util0,
                             "split_util": split_util, "wb": wb, "wu": wu, "bias": bias},
                  level_weights, (b, n0), tile_size)
    if not 0 < split_parents <= level0_tiles <= n0:
        raise ValueError(f"ff-infer: need 0 < split_parents {split_parents} <= level0_tiles "
                         f"{level0_tiles} <= {n0} level-0 tiles")
    dev = features.device
    # every Triton launch follows a kernel of this call (the first, one of the call before): each
    # may launch while the one before it ends, where the device can and the kernels are short
    pdl_reason = dependent_launch_reason(features, dev)
    pdl = pdl_reason is None
    # at the fixed profile, under dependent launch, the Triton mix took the cell from 57.7 to 54.1 us;
    # at the large one (plain launches) it read 4017 against cuBLAS's 3908 us (H200, docs/perf.md)
    mix_on = mix or ("triton" if pdl else "cublas")
    ids0 = torch.empty((b, level0_tiles), dtype=torch.int32, device=dev)
    ids1 = torch.empty((b, 4 * split_parents), dtype=torch.int32, device=dev)
    slots = torch.empty((b, level0_tiles), dtype=torch.int32, device=dev)  # each parent's place among the split
    c = features.shape[1]
    tokens0 = torch.empty((b, level0_tiles, c), dtype=features.dtype, device=dev)
    tokens1 = torch.empty((b, 4 * split_parents, c), dtype=features.dtype, device=dev)
    # the gate on (features, features): alpha, and fused = features exactly. Level 0 reads only
    # features until its norm writes its tiles into fused, so the gate runs among level 0's steps,
    # after the token MLP: under dependent launch it starts at once, beside the MLP's one or two
    # programs, and ends after it
    gate = fusiongate.fusiongate_launcher(boundary, uncertainty, features, features, wb, wu, bias)
    fused, alpha = gate.outputs["fused"], gate.outputs["alpha"]
    cols0 = features.shape[3] // (2 * tile_size)
    # a frame of at most SELECT_BLOCK tiles is ranked inside level 0's tile means: one launch fewer
    fold = n0 <= SELECT_BLOCK
    # level 0's norm kernel writes level 1's tokens, the means of its split tiles' quadrants as it
    # stores them: level 1's tile means are not launched
    steps0, meta0 = _level(features, fused, ids0, 2 * tile_size, level_weights[0], None, scan_merge,
                           norm_eps, config_index, mix_on, depthwise, tokens0, slots,
                           (util0, split_util, ids1, n0, split_parents, cols0) if fold else None,
                           after_mlp=gate.launches, children=tokens1)
    # level 1 reads the level-0 result from fused and blends its tiles into it in place
    steps1, meta1 = _level(fused, fused, ids1, tile_size, level_weights[1], alpha, scan_merge, norm_eps,
                           config_index, mix_on, depthwise, tokens1, slots)
    steps: list[Step] = [*steps0, *steps1]
    if not fold:  # a frame too large to rank in registers: the selection kernel first
        select_meta = {"BLOCK": SELECT_BLOCK, "num_warps": 4}
        steps.insert(0, KernelLaunch("ff-infer", _select_kernel, (b,),
                                     (util0, split_util, ids0, ids1, slots, n0, level0_tiles, split_parents,
                                      cols0), select_meta, f"B{b}_N{n0}_K{level0_tiles}_J{split_parents}",
                                     select_meta))
    if pdl:
        at_once = {id(launch) for launch in gate.launches}
        steps = [dependent(s, at_once=id(s) in at_once) if isinstance(s, KernelLaunch) else s
                 for s in steps]
    outputs = {"fused": fused, "alpha": alpha}
    launches = tuple(s for s in steps if isinstance(s, KernelLaunch))
    metadata = {"kernel": "ff_infer_fast_path", "launches_per_call": len(steps),
                "triton_launches": len(launches), "levels": [meta0, meta1],
                "fusiongate": gate.metadata, "config_index": config_index, "mix": mix_on,
                "depthwise": [meta0["depthwise"], meta1["depthwise"]],
                "selection": "in level 0's tile means" if fold else "_select_kernel",
                "level1_means": "in level 0's norm kernel",
                "dependent_launch": pdl, **({"dependent_launch_off": pdl_reason} if pdl_reason else {})}
    return Launcher(sequential(steps, outputs), outputs, launches, metadata)


def ff_infer(features: torch.Tensor, boundary: torch.Tensor, uncertainty: torch.Tensor,
             util0: torch.Tensor, split_util: torch.Tensor,
             level_weights: tuple[Mapping[str, torch.Tensor], Mapping[str, torch.Tensor]],
             wb: torch.Tensor, wu: torch.Tensor, bias: torch.Tensor, *, tile_size: int,
             level0_tiles: int, split_parents: int, scan_merge: str = SCAN_MERGE,
             norm_eps: float = NORM_EPS) -> tuple[torch.Tensor, torch.Tensor]:
    """``(fused, alpha)`` of one two-level tile-refinement step (see the module doc)."""
    outputs = ff_infer_launcher(features, boundary, uncertainty, util0, split_util, level_weights,
                                wb, wu, bias, tile_size=tile_size, level0_tiles=level0_tiles,
                                split_parents=split_parents, scan_merge=scan_merge,
                                norm_eps=norm_eps)()
    return outputs["fused"], outputs["alpha"]
