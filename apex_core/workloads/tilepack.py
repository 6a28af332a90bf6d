"""tilepack: gather the selected t x t tiles of a feature map into a packed tensor."""

from __future__ import annotations

import attrs
import torch

from apex_core.interfaces import ExportRecipe, Inputs, Outputs, Workload
from apex_core.results import Case, Work
from apex_core.workloads.common import (
    INDEX_BYTES,
    NCHW_AXES,
    TILE_AXES,
    SeededRandom,
    TileParams,
    check_int_range,
    check_shape,
    data_bytes,
    num_tiles,
    place,
    suite_profiles,
    tile_origins,
    tile_pixel_index,
)


def tilepack(features: torch.Tensor, idx: torch.Tensor, tile_size: int) -> torch.Tensor:
    """Pack tiles: ``P[b, k, c, dy, dx] = F[b, c, y0 + dy, x0 + dx]`` for tile ``idx[b, k]``.

    ``features`` is ``[B, C, H, W]``, ``idx`` is ``[B, K]`` integer tile ids in the
    row-major grid (order kept, duplicates allowed); the result is ``[B, K, C, t, t]``.
    """
    channels, width = features.shape[1], features.shape[3]
    origins = tile_origins(idx, width, tile_size)
    # one advanced-indexing gather: reads only the selected tiles, no copy of the map
    return features[tile_pixel_index(origins, channels, tile_size)]


@attrs.frozen(kw_only=True)
class TilePackParams(TileParams):
    """Parameters of tilepack; the defaults are the fixed profile."""


class TilePack(Workload):
    """Gather K tiles per image into ``packed [B, K, C, t, t]``."""

    name = "tilepack"
    description = "gather K selected t x t tiles of an NCHW map into [B,K,C,t,t] (duplicates allowed)"
    params_type = TilePackParams
    profiles = suite_profiles(TilePackParams)
    implementations = {
        "triton": "adapters.triton_ops:TILEPACK",
        "jax": "adapters.jax_workloads.tilepack:build",
        "tensorrt-plugin": "adapters.tensorrt_plugin:TILEPACK",
    }

    def export_recipe(self, case: Case, dtype_name: str) -> ExportRecipe:
        """The map and the tile count may change size."""
        return ExportRecipe({"features": NCHW_AXES, "idx": TILE_AXES})

    def make_inputs(self, case: Case, device: str, dtype: torch.dtype, seed: int) -> Inputs:
        """Normal features and tile ids drawn with replacement from the grid."""
        p: TilePackParams = case.params
        rng = SeededRandom(seed)
        nt = num_tiles(p.height, p.width, p.tile_size)
        cpu = {
            "features": rng.normal((p.batch, p.channels, p.height, p.width)),
            "idx": rng.integers((p.batch, p.kmax), 0, nt),
        }
        return place(cpu, device, dtype, data=("features",))

    def reference(self, case: Case, inputs: Inputs) -> Outputs:
        """Pack the selected tiles (see :func:`tilepack`)."""
        return {"packed": tilepack(inputs["features"], inputs["idx"], case.params.tile_size)}

    def work(self, case: Case, dtype_name: str) -> Work:
        """Bytes: the K tiles read and written once, plus the ids; no FLOPs."""
        p: TilePackParams = case.params
        tile_elems = p.batch * p.kmax * p.channels * p.tile_size**2
        bytes_moved = 2 * tile_elems * data_bytes(dtype_name) + p.batch * p.kmax * INDEX_BYTES
        return Work(bytes_moved=bytes_moved, flops=0, units="tiles", count=p.batch * p.kmax)

    def validate_inputs(self, case: Case, inputs: Inputs) -> None:
        """Check shapes and that every tile id lies in the grid."""
        p: TilePackParams = case.params
        check_shape("features", inputs["features"], (p.batch, p.channels, p.height, p.width))
        check_shape("idx", inputs["idx"], (p.batch, p.kmax))
        check_int_range("idx", inputs["idx"], 0, num_tiles(p.height, p.width, p.tile_size))
