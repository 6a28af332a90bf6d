"""Triton tileunpack: packed tiles into a copy of the base map, override or blend, by priority.

``tileunpack(base, packed, origins, levels, mode)`` writes ``packed [B, K, C, t, t]`` at
``origins [B, K, 2]`` (top-left y, x) into a copy of ``base [B, C, H, W]``. Priority:
higher ``levels [B, K]`` wins, ties go to the later k. ``override``: every covered pixel
takes the winning tile's value. ``blend``: tiles applied in ascending priority, ``out =
(1 - alpha) * out + alpha * P``. Each output element is written exactly once; no atomics,
no host synchronisation.

Three paths, each in its own module, chosen when the launch is bound:

- ``aligned`` (``aligned=True``: origins on the tile grid, K <= ALIGNED_MAX_K): band
  kernels, one program per band of tile slots; from RUNS_MIN_K on a prepass sorts each
  image's tiles into per-slot runs once. One or two launches.
- ``winner_map`` (any origins, override, OVERLAP_RUNS_MIN_K <= K <= MAX_KC): band lists,
  a per-pixel winner map, a streaming copy. Three launches.
- ``walk`` (everything else): each program walks the tiles touching its pixels in
  ascending priority. One launch.
"""

from __future__ import annotations

import torch

from apex_kernels._utils import Launcher, check_tensors, output_buffer
from apex_kernels.tileunpack import aligned, walk, winner_map

MODES = ("override", "blend")


def _alpha_tensor(alpha: float | torch.Tensor | None, mode: str, base: torch.Tensor) -> torch.Tensor:
    """Blend weight as a 0-dim tensor on base's device (read by the kernel, never synced)."""
    if mode == "override":
        return base  # a pointer the override kernels never receive
    if alpha is None:
        raise ValueError("tileunpack: mode 'blend' needs alpha")
    if isinstance(alpha, torch.Tensor):
        if alpha.dim() != 0 or alpha.device != base.device:
            raise ValueError(f"tileunpack: alpha must be a 0-dim tensor on {base.device}")
        return alpha
    return torch.tensor(float(alpha), dtype=torch.float32, device=base.device)


def _check(base: torch.Tensor, packed: torch.Tensor, origins: torch.Tensor,
           levels: torch.Tensor, mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"tileunpack: unknown mode {mode!r}; choose from {', '.join(MODES)}")
    if base.dim() != 4 or packed.dim() != 5:
        raise ValueError(f"tileunpack: base must be [B, C, H, W] and packed [B, K, C, t, t], "
                         f"got {list(base.shape)} and {list(packed.shape)}")
    b, c, h, w = base.shape
    k, t = packed.shape[1], packed.shape[-1]
    check_tensors("tileunpack", {"base": base, "packed": packed, "origins": origins,
                                 "levels": levels},
                  {"packed": (b, k, c, t, t), "origins": (b, k, 2), "levels": (b, k)})
    if packed.dtype != base.dtype:
        raise ValueError(f"tileunpack: packed is {packed.dtype}, base is {base.dtype}")
    if origins.dtype != torch.int32 or levels.dtype != torch.int32:
        raise ValueError("tileunpack: origins and levels must be int32")
    if t > h or t > w:
        raise ValueError(f"tileunpack: tiles of {t} do not fit a {h} x {w} map")


def tileunpack_launcher(base: torch.Tensor, packed: torch.Tensor, origins: torch.Tensor,
                        levels: torch.Tensor, mode: str = "override",
                        alpha: float | torch.Tensor | None = None, *, aligned_origins: bool = False,
                        out: torch.Tensor | None = None) -> Launcher:
    """Bind tileunpack to its tensors; each call of the result unpacks their current contents.

    ``origins`` and ``levels`` are int32; origins must keep every tile inside the map.
    ``aligned_origins=True`` promises origins on the tile grid (multiples of t) and levels
    in ``[0, 2**31)``, which the faster band kernels need; it is not checked on the
    device. ``alpha`` (blend only) is a float or a 0-dim tensor on the device. ``out``
    like ``base``.
    """
    _check(base, packed, origins, levels, mode)
    h, w = base.shape[-2:]
    if aligned_origins and (h % packed.shape[-1] or w % packed.shape[-1]):
        raise ValueError(f"tileunpack: aligned origins need a tile size that divides {h} x {w}")
    alpha_arg = _alpha_tensor(alpha, mode, base)
    result = output_buffer(out, "out", base, tuple(base.shape))
    k, t = packed.shape[1], packed.shape[-1]
    if not aligned_origins and mode == "override" and winner_map.fits_winner_map(k, t, walk.MAX_KC):
        return winner_map.winner_map_launcher(base, packed, origins, levels, result)
    if not aligned_origins or k > aligned.ALIGNED_MAX_K:
        return walk.walk_launcher(mode, base, packed, origins, levels, alpha_arg, result)
    return aligned.aligned_launcher(mode, base, packed, origins, levels, alpha_arg, result)


def tileunpack(base: torch.Tensor, packed: torch.Tensor, origins: torch.Tensor,
               levels: torch.Tensor, mode: str = "override",
               alpha: float | torch.Tensor | None = None, *, aligned_origins: bool = False,
               out: torch.Tensor | None = None) -> torch.Tensor:
    """Unpack ``packed`` into a copy of ``base`` by priority (see the module doc)."""
    return tileunpack_launcher(base, packed, origins, levels, mode, alpha,
                               aligned_origins=aligned_origins, out=out)()["out"]
