"""ff-infer: one end-to-end inference step of a two-level tile-refinement block.

Level 0 picks the best 2t-sized tiles by utility, refines them (a scan over the tile
tokens, an MLP modulation, depthwise / pointwise / norm / gated-ReLU refine with a
residual) and writes them back; level 1 splits the best refined parents into their four
t-sized children and repeats on the level-0 output; the fusion gate blends level 1 into
level 0. Every selection is a ``torch.topk`` on the device with counts fixed by the
parameters, so the step never synchronizes the host and can be captured in a CUDA graph.
docs/ff-infer.md gives the exact semantics, the work count and the tolerance measurement.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import ClassVar

import attrs
import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias

from apex_core.errors import InputValidationError
from apex_core.interfaces import ExportRecipe, Inputs, Outputs, Workload
from apex_core.results import Case, Tolerance, Work
from apex_core.workloads.common import (
    FP32_BYTES,
    SeededRandom,
    TileParams,
    check_shape,
    data_bytes,
    no_bf16_export,
    place,
    positive_int,
    suite_profiles,
)
from apex_core.workloads.fusiongate import fusion_gate
from apex_core.workloads.tilepack import tilepack
from apex_core.workloads.tilessm_scan import ssm_scan
from apex_core.workloads.tileunpack import tile_origins, tileunpack

# Costs in budget units, as Fractions so that the tile counts are exact rational arithmetic.
LEVEL0_TILE_COST = Fraction(4, 5)
SPLIT_COST = Fraction(1)
SCAN_MERGE = "avg"  # both scan directions weigh the same; "gated" would need a gate input
NORM_EPS = 1e-5
UTILITIES = ("util0", "split_util")

# Worst |out - ref| / (atol + rtol * |ref|) of the eager reference run in the dtype, against
# float64 on a CPU (16 seeds x 4 shapes) and float32 on an H200: fp16 0.45 / 0.42, bf16
# 0.41 / 0.44, fp32 0.03 / 0: above 2x margin for fresh inputs (docs/ff-infer.md).
TOLERANCES = {"fp16": (2e-2, 2e-2), "bf16": (2e-1, 5e-2), "fp32": (1e-4, 1e-4)}
TOLERANCE_REASON = (
    "end-to-end pipeline: two levels of about ten dependent ops, each rounding to the data "
    "dtype; refined tiles reach |x| ~ 20, and the residual sums cancel terms of that size, so "
    "small outputs carry an absolute error of a few ulps of the large terms; selection reads "
    "float32 utilities and cannot flip, so no mismatch is allowed"
)


@attrs.frozen(kw_only=True)
class FFInferParams(TileParams):
    """Shape and budgets of one ff-infer step; the defaults are the fixed profile."""

    budget_b1: int = positive_int(16)
    budget_b2: int = positive_int(8)
    budget_total: int = positive_int(32)
    hidden: int = positive_int(64)

    def __attrs_post_init__(self) -> None:
        step = 2 * self.tile_size
        if self.height % step or self.width % step:
            raise ValueError(
                f"height {self.height} and width {self.width} must be divisible by "
                f"2 * tile_size = {step} (level-0 tiles are 2 * tile_size wide)"
            )
        needed = LEVEL0_TILE_COST * self.level0_tiles + SPLIT_COST
        if self.budget_total < needed:
            raise ValueError(
                f"budget_total {self.budget_total} must cover level 0 ({self.level0_tiles} "
                f"tiles x {float(LEVEL0_TILE_COST)}) plus one split ({float(SPLIT_COST)}): "
                f"need budget_total >= {float(needed)}"
            )

    @property
    def level0_grid(self) -> tuple[int, int]:
        """Rows and columns of the level-0 grid (tile size 2t)."""
        return self.height // (2 * self.tile_size), self.width // (2 * self.tile_size)

    @property
    def level0_tiles(self) -> int:
        """k0: greedy at a uniform cost is top-k, capped by budget_b1, kmax and the grid."""
        rows, cols = self.level0_grid
        return min(math.floor(self.budget_b1 / LEVEL0_TILE_COST), self.kmax, rows * cols)

    @property
    def split_parents(self) -> int:
        """j: splits within budget_b2, among the k0 parents, and within what budget_total leaves."""
        left = self.budget_total - LEVEL0_TILE_COST * self.level0_tiles
        by_b2 = math.floor(self.budget_b2 / SPLIT_COST)
        return min(by_b2, self.level0_tiles, math.floor(left / SPLIT_COST))

    @property
    def level1_tiles(self) -> int:
        """Each split parent yields its four t-sized children."""
        return 4 * self.split_parents


def level_weight_shapes(channels: int, hidden: int) -> dict[str, tuple[int, ...]]:
    """Shapes of one level's weights, keyed without the ``l0_`` / ``l1_`` prefix."""
    c, h = channels, hidden
    vectors: tuple[str, ...] = ("decay", "input_gain", "output_gain", "state_bias")  # scan
    vectors += ("pw_bias", "norm_weight", "norm_bias")
    vectors += ("value_scale", "value_bias", "gate_scale", "gate_bias")  # the gated ReLU
    matrices = {"mlp_w1": (h, c), "mlp_b1": (h,), "mlp_w2": (2 * c, h), "mlp_b2": (2 * c,)}
    matrices.update({"dw_weight": (c, 1, 3, 3), "pw_weight": (c, c)})
    return {**{name: (c,) for name in vectors}, **matrices}


def _draw(rng: SeededRandom, name: str, shape: tuple[int, ...], p: FFInferParams) -> torch.Tensor:
    """One level weight, scaled so that activations stay O(1)."""
    if name == "decay":
        return rng.uniform(shape, 0.5, 0.95)  # short memory: the sequences are 4 to 32 tokens
    if name in ("input_gain", "output_gain", "norm_weight"):
        return rng.uniform(shape, 0.5, 1.5)
    if name in ("value_scale", "gate_scale"):
        # value * relu(gate) is quadratic in the normed tile: keep the residual a correction
        return rng.uniform(shape, 0.25, 0.75)
    scale = {
        "mlp_w1": p.channels**-0.5,
        "mlp_w2": 0.5 * p.hidden**-0.5,  # gamma, beta well inside tanh's linear range
        "dw_weight": 1 / 3,  # fan-in 9
        "pw_weight": p.channels**-0.5,
    }.get(name, 0.1)  # biases
    return scale * rng.normal(shape)


def _distinct_utilities(rng: SeededRandom, batch: int, n: int) -> torch.Tensor:
    """Scaled random permutations in (0, 1]: no ties, so top-k picks the same tiles everywhere."""
    perms = [torch.randperm(n, generator=rng.generator) for _ in range(batch)]
    return (torch.stack(perms) + 1.0) / n


def select_tiles(
    p: FFInferParams, util0: torch.Tensor, split_util: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Level-0 tile ids (2t grid) and level-1 tile ids (t grid), int32, with no host sync."""
    # never compare in half precision: rounding would create ties that top-k breaks anyhow
    work_dtype = torch.promote_types(util0.dtype, torch.float32)
    ids0 = torch.topk(util0.to(work_dtype), p.level0_tiles, dim=1).indices  # descending
    parent_util = torch.gather(split_util.to(work_dtype), 1, ids0)
    best = torch.topk(parent_util, p.split_parents, dim=1).indices
    parents = torch.gather(ids0, 1, best)  # [B, j], descending split utility
    cols0 = p.level0_grid[1]
    quad = torch.arange(4, device=parents.device)  # children row-major inside the parent
    rows = 2 * (parents // cols0)[..., None] + quad // 2
    cols = 2 * (parents % cols0)[..., None] + quad % 2
    ids1 = (rows * (2 * cols0) + cols).flatten(1)  # [B, 4j]
    return ids0.to(torch.int32), ids1.to(torch.int32)


def _token_mlp(tokens: torch.Tensor, w: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """gamma, beta [B, K, C] from a C -> hidden (ReLU) -> 2C MLP of each scanned token."""
    hidden = torch.relu(F.linear(tokens, w["mlp_w1"], w["mlp_b1"]))
    return F.linear(hidden, w["mlp_w2"], w["mlp_b2"]).chunk(2, dim=-1)


def _depthwise3x3(x: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """3x3 cross-correlation per channel of ``x [N, C, s, s]`` with zero padding at the border."""
    s = x.shape[-1]
    # accumulate in at least float32, as a convolution kernel does, then round once
    acc = torch.promote_types(x.dtype, torch.float32)
    padded = F.pad(x.to(acc), (1, 1, 1, 1))
    taps = kernel.to(acc).reshape(-1, 9)[:, :, None, None]  # [C, 9, 1, 1]
    out = torch.zeros_like(x, dtype=acc)
    # nine shifted products instead of F.conv2d: cuDNN may run fp32 convolutions in TF32
    # (allow_tf32 is on by default), which would degrade the fp32 reference on GPUs
    for tap in range(9):
        dy, dx = divmod(tap, 3)
        out = out + taps[:, tap] * padded[..., dy : dy + s, dx : dx + s]
    return out.to(x.dtype)


def refine_tiles(tiles: torch.Tensor, w: dict[str, torch.Tensor]) -> torch.Tensor:
    """Depthwise 3x3 -> pointwise mix -> per-tile norm -> gated ReLU, plus the input."""
    b, k, c, s, _ = tiles.shape
    x = tiles.reshape(b * k, c, s, s)
    # padding applies per tile: the border pixels never read a neighbouring tile
    depthwise = _depthwise3x3(x, w["dw_weight"])
    mixed = torch.einsum("oc,nchw->nohw", w["pw_weight"], depthwise)
    mixed = mixed + w["pw_bias"][:, None, None]
    # one group: statistics over the whole tile (C x s x s), then a per-channel affine
    normed = F.group_norm(mixed, 1, w["norm_weight"], w["norm_bias"], eps=NORM_EPS)
    value = normed * w["value_scale"][:, None, None] + w["value_bias"][:, None, None]
    gate = torch.relu(normed * w["gate_scale"][:, None, None] + w["gate_bias"][:, None, None])
    return (x + value * gate).reshape(b, k, c, s, s)


def refine_level(
    dense: torch.Tensor, ids: torch.Tensor, tile_size: int, w: dict[str, torch.Tensor]
) -> torch.Tensor:
    """Pack, scan the tile tokens, modulate, refine and override-unpack one level."""
    packed = tilepack(dense, ids, tile_size)  # [B, K, C, s, s]
    tokens = packed.mean(dim=(-2, -1))
    scanned, _ = ssm_scan(
        tokens,
        w["decay"],
        w["input_gain"],
        w["output_gain"],
        w["state_bias"],
        direction="bidirectional",
        merge=SCAN_MERGE,
    )
    gamma, beta = _token_mlp(scanned, w)
    modulated = (1 + torch.tanh(gamma))[..., None, None] * packed + beta[..., None, None]
    refined = refine_tiles(modulated, w)
    origins = tile_origins(ids, dense.shape[-1], tile_size)
    # equal levels: a tie would go to the later k, but the ids of one level are unique
    return tileunpack(dense, refined, origins, torch.zeros_like(ids), "override")


def level_weights(inputs: Inputs, prefix: str) -> dict[str, torch.Tensor]:
    """One level's weights from the inputs, with the ``l0_`` / ``l1_`` prefix dropped."""
    return {k[len(prefix) :]: v for k, v in inputs.items() if k.startswith(prefix)}


def _level_flops(p: FFInferParams, tiles: int, side: int) -> int:
    """FLOPs of one level's K tiles of side ``side``: per element, per token, the MLP."""
    c, h = p.channels, p.hidden
    # token mean 1, modulate 2, depthwise 18, pointwise 2C + 1, norm 8, gated ReLU 6,
    # residual 1 (the norm: mean 1, variance 3, normalize 2, affine 2)
    per_element = 2 * c + 37
    # bidirectional scan 2 x 6 + avg 2 (as tilessm-scan counts it), then 1 + tanh 2
    per_token_channel = 2 * 6 + 2 + 2
    mlp = (2 * c * h + h) + h + (2 * h * 2 * c + 2 * c)  # matmul + bias, ReLU, matmul + bias
    per_tile = c * side * side * per_element + c * per_token_channel + mlp
    return p.batch * tiles * per_tile


_MAPS = ("features", "boundary", "uncertainty")  # the full-resolution inputs


def _grid_capped(p: FFInferParams) -> bool:
    """True when the level-0 tile count is capped by the grid (it would change with the height)."""
    rows, cols = p.level0_grid
    return bool(rows * cols < min(math.floor(p.budget_b1 / LEVEL0_TILE_COST), p.kmax))


class FFInfer(Workload):
    """Two-level tile refinement: select, pack, scan, modulate, refine, unpack, fuse."""

    name: ClassVar[str] = "ff-infer"
    description: ClassVar[str] = (
        "end-to-end two-level tile refinement step (top-k select, scan, MLP, refine, fuse)"
    )
    params_type: ClassVar[type] = FFInferParams
    profiles = suite_profiles(FFInferParams)
    implementations = {
        "triton": "adapters.triton_ops:FF_INFER",
        "jax": "adapters.jax_workloads.ff_infer:build",
    }

    def export_recipe(self, case: Case, dtype_name: str) -> ExportRecipe:
        """The batch varies; the height too while the level-0 grid holds k0 tiles; no bf16 export."""
        if dtype_name == "bf16":
            return no_bf16_export("wb, wu, bias", also="ONNX Einsum (the refine step's channel mix) does not "
                                  "accept bfloat16, and ")
        axes: dict[str, dict[int, str]] = {name: {0: "batch"} for name in (*_MAPS, *UTILITIES)}
        fixed = ("the tile counts (k0, 4j) and the scan over them are fixed by the parameters; width "
                 "fixed: level-1 tile ids use the level-0 grid's column count")
        if _grid_capped(case.params):
            return ExportRecipe(axes, note=fixed + "; height fixed: k0 is capped by this level-0 grid and "
                                "would change with it")
        # k0 and j do not depend on the height then; the width is fixed because the level-1
        # tile ids are computed from the level-0 grid's column count, a parameter
        axes.update({name: {0: "batch", 2: "height"} for name in _MAPS})
        axes.update({name: {0: "batch", 1: "tiles0"} for name in UTILITIES})
        return ExportRecipe(axes, note=fixed + "; the height may change while the level-0 grid holds k0 tiles")

    def make_inputs(self, case: Case, device: str, dtype: torch.dtype, seed: int) -> Inputs:
        """Dense map, proxies, every weight (in ``dtype``) and float32 utilities, from ``seed``."""
        p: FFInferParams = case.params
        rng = SeededRandom(seed)
        b, c, h, w = p.batch, p.channels, p.height, p.width
        cpu = {
            "features": rng.normal((b, c, h, w)),
            # (0, 1]: proxies behave like probabilities and are never zero
            "boundary": 1 - rng.uniform((b, 1, h, w)),
            "uncertainty": 1 - rng.uniform((b, 1, h, w)),
        }
        for prefix in ("l0_", "l1_"):
            for name, shape in level_weight_shapes(c, p.hidden).items():
                cpu[prefix + name] = _draw(rng, name, shape, p)
        cpu["wb"] = rng.uniform((), 0.5, 1.5)
        cpu["wu"] = rng.uniform((), 0.5, 1.5)
        cpu["bias"] = rng.uniform((), -1.5, -0.5)
        n0 = math.prod(p.level0_grid)
        for name in UTILITIES:
            cpu[name] = _distinct_utilities(rng, b, n0)
        # utilities steer selection like an index input: float32 in every run, so that
        # every dtype and the float64 reference choose the same tiles
        data = [name for name in cpu if name not in UTILITIES]
        return place(cpu, device, dtype, data=data)

    def validate_inputs(self, case: Case, inputs: Inputs) -> None:
        """Check the shapes and that utilities are distinct within each frame."""
        p: FFInferParams = case.params
        b, c, h, w = p.batch, p.channels, p.height, p.width
        check_shape("features", inputs["features"], (b, c, h, w))
        for name in ("boundary", "uncertainty"):
            check_shape(name, inputs[name], (b, 1, h, w))
        for prefix in ("l0_", "l1_"):
            for name, shape in level_weight_shapes(c, p.hidden).items():
                check_shape(prefix + name, inputs[prefix + name], shape)
        for name in UTILITIES:
            check_shape(name, inputs[name], (b, math.prod(p.level0_grid)))
            ordered = inputs[name].sort(dim=1).values
            if bool((ordered[:, 1:] == ordered[:, :-1]).any()):
                raise InputValidationError(f"{name} has tied values within a frame")

    def reference(self, case: Case, inputs: Inputs) -> Outputs:
        """Level 0, level 1 on its output, then the fusion gate; outputs fused and alpha."""
        p: FFInferParams = case.params
        ids0, ids1 = select_tiles(p, inputs["util0"], inputs["split_util"])
        t = p.tile_size
        base = refine_level(inputs["features"], ids0, 2 * t, level_weights(inputs, "l0_"))
        detail = refine_level(base, ids1, t, level_weights(inputs, "l1_"))
        alpha, fused = fusion_gate(
            inputs["boundary"],
            inputs["uncertainty"],
            base,
            detail,
            inputs["wb"],
            inputs["wu"],
            inputs["bias"],
        )
        return {"fused": fused, "alpha": alpha}

    def work(self, case: Case, dtype_name: str) -> Work:
        """Minimal traffic (features in, fused and alpha out, side inputs) and the FLOPs."""
        p: FFInferParams = case.params
        b, c, pixels = p.batch, p.channels, p.height * p.width
        weights = 2 * sum(math.prod(s) for s in level_weight_shapes(c, p.hidden).values()) + 3
        # features and fused; boundary, uncertainty and alpha; every weight; utilities
        data = 2 * b * c * pixels + 3 * b * pixels + weights
        bytes_moved = data_bytes(dtype_name) * data + FP32_BYTES * len(UTILITIES) * b * math.prod(p.level0_grid)
        # fusion gate as fusiongate counts it: 7 per pixel (logit 4, sigmoid 3), 3 per element
        fusion = 7 * b * pixels + 3 * b * c * pixels
        flops = (
            _level_flops(p, p.level0_tiles, 2 * p.tile_size)
            + _level_flops(p, p.level1_tiles, p.tile_size)
            + fusion
        )
        return Work(bytes_moved=bytes_moved, flops=flops, units="frames", count=b)

    def tolerance(self, dtype_name: str) -> Tolerance:
        """Widened for the whole pipeline from a measurement (docs/ff-infer.md)."""
        if dtype_name not in TOLERANCES:
            return super().tolerance(dtype_name)
        atol, rtol = TOLERANCES[dtype_name]
        return Tolerance(atol, rtol, max_mismatch_ratio=0.0, reason=TOLERANCE_REASON)
