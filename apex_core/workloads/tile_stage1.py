"""tile-stage1: pack -> gated pointwise op -> unpack on unique tiles, fused."""

from __future__ import annotations

import attrs
import torch

from apex_core.interfaces import ExportRecipe, Inputs, Outputs, Workload
from apex_core.results import Case, Tolerance, Work
from apex_core.workloads.common import (
    IMAGE_AXES,
    INDEX_BYTES,
    SeededRandom,
    TileParams,
    check_int_range,
    check_shape,
    check_unique_rows,
    data_bytes,
    num_tiles,
    place,
    suite_profiles,
    tile_origins,
    tile_pixel_index,
    widened_tolerance,
)

# bf16 only: x*vs + vb is rounded before the gate (up to about 9) multiplies it, so near a
# cancellation the error is a half-ulp of |x*vs| times the gate; measured max over 200 seeds
# at the fixed profile: 0.36 eps = 2.8e-3 beyond rtol, over the default 2e-3. fp16 (0.30
# eps = 2.9e-4) and fp32 (0.19 eps) fit their defaults.
_ATOL = {"bf16": 8e-3}
_REASON = (
    "bf16 rounding of x*vs+vb is amplified by the gate: up to 2.8e-3 measured over 200 "
    "seeds; atol set to 1 eps (8e-3)"
)


def tile_stage1(
    x: torch.Tensor,
    idx: torch.Tensor,
    vs: torch.Tensor,
    vb: torch.Tensor,
    gs: torch.Tensor,
    gb: torch.Tensor,
    tile_size: int,
) -> torch.Tensor:
    """On the tiles in ``idx`` ``out = (x*vs + vb) * max(x*gs + gb, 0)``; elsewhere ``out = x``.

    ``x`` is ``[B, C, H, W]``; ``idx [B, K]`` holds tile ids unique within each row
    (with repeats the write order would be undefined); ``vs``, ``vb``, ``gs``, ``gb``
    are per-channel ``[C]``.
    """
    channels, width = x.shape[1], x.shape[3]
    index = tile_pixel_index(tile_origins(idx, width, tile_size), channels, tile_size)
    tiles = x[index]  # [B, K, C, t, t]
    shape = (1, 1, channels, 1, 1)
    value = tiles * vs.view(shape) + vb.view(shape)
    gate = (tiles * gs.view(shape) + gb.view(shape)).clamp_min(0)
    out = x.clone()
    out[index] = (value * gate).to(x.dtype)
    return out


@attrs.frozen(kw_only=True)
class TileStage1Params(TileParams):
    """Parameters of tile-stage1; the defaults are the fixed profile (K = min(kmax, tiles))."""

    @property
    def k(self) -> int:
        """Tiles selected per image: kmax, capped by the grid since ids are unique."""
        return min(self.kmax, num_tiles(self.height, self.width, self.tile_size))


class TileStage1(Workload):
    """Gated pointwise op applied in place-of-copy on K unique tiles per image."""

    name = "tile-stage1"
    description = "fused pack, gated pointwise (x*vs+vb)*relu(x*gs+gb), unpack on K unique tiles"
    params_type = TileStage1Params
    profiles = suite_profiles(TileStage1Params)
    implementations = {
        "triton": "adapters.triton_ops:TILE_STAGE1",
        "jax": "adapters.jax_workloads.tile_stage1:build",
    }

    def export_recipe(self, case: Case, dtype_name: str) -> ExportRecipe:
        """Writes through index_put: only the image varies."""
        return ExportRecipe({"x": IMAGE_AXES})

    def make_inputs(self, case: Case, device: str, dtype: torch.dtype, seed: int) -> Inputs:
        """Normal map, unique tile ids per row, per-channel scales and shifts."""
        p: TileStage1Params = case.params
        rng = SeededRandom(seed)
        c = p.channels
        cpu = {
            "x": rng.normal((p.batch, c, p.height, p.width)),
            "idx": rng.unique_integers(p.batch, p.k, num_tiles(p.height, p.width, p.tile_size)),
            "vs": rng.uniform((c,), 0.5, 1.5),
            "vb": rng.uniform((c,), -0.5, 0.5),
            "gs": rng.uniform((c,), 0.5, 1.5),
            "gb": rng.uniform((c,), -0.5, 0.5),
        }
        return place(cpu, device, dtype, data=("x", "vs", "vb", "gs", "gb"))

    def reference(self, case: Case, inputs: Inputs) -> Outputs:
        """Apply the op on the selected tiles (see :func:`tile_stage1`)."""
        x, idx = inputs["x"], inputs["idx"]
        vs, vb, gs, gb = (inputs[n] for n in ("vs", "vb", "gs", "gb"))
        return {"out": tile_stage1(x, idx, vs, vb, gs, gb, case.params.tile_size)}

    def work(self, case: Case, dtype_name: str) -> Work:
        """Bytes: x read and out written in full (out-of-place), ids and parameters once.

        FLOPs: 5 per tile element (2 mul + 2 add for the two affine maps, 1 mul for
        the product); the max is a select and not counted.
        """
        p: TileStage1Params = case.params
        map_elems = p.batch * p.channels * p.height * p.width
        element = data_bytes(dtype_name)
        bytes_moved = 2 * map_elems * element + p.batch * p.k * INDEX_BYTES + 4 * p.channels * element
        flops = 5 * p.batch * p.k * p.channels * p.tile_size**2
        return Work(bytes_moved=bytes_moved, flops=flops, units="tiles", count=p.batch * p.k)

    def tolerance(self, dtype_name: str) -> Tolerance:
        """Defaults, with atol 1 eps in bf16 for the rounding the gate amplifies."""
        return widened_tolerance(dtype_name, _ATOL, _REASON)

    def validate_inputs(self, case: Case, inputs: Inputs) -> None:
        """Check shapes, tile ids in the grid, and no repeated id within a row."""
        p: TileStage1Params = case.params
        check_shape("x", inputs["x"], (p.batch, p.channels, p.height, p.width))
        check_shape("idx", inputs["idx"], (p.batch, p.k))
        for name in ("vs", "vb", "gs", "gb"):
            check_shape(name, inputs[name], (p.channels,))
        check_int_range("idx", inputs["idx"], 0, num_tiles(p.height, p.width, p.tile_size))
        check_unique_rows("idx", inputs["idx"])
