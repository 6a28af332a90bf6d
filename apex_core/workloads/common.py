"""Helpers shared by the built-in workloads: parameter checks, the tile grid, inputs, index checks."""

from __future__ import annotations

import concurrent.futures
import math
import os
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import attrs
import torch

from apex_core.errors import InputValidationError
from apex_core.interfaces import DEFAULT_TOLERANCES, ExportRecipe
from apex_core.results import Tolerance

INDEX_BYTES = 4  # int32 indices, origins, levels
FP32_BYTES = 4  # per-channel parameters, scalars and states that are always float32
_DATA_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}


def data_bytes(dtype_name: str) -> int:
    """Bytes per data element in a cell of ``dtype_name`` (work() counts the cell's own dtype)."""
    try:
        return _DATA_BYTES[dtype_name]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype_name!r}; valid: {', '.join(_DATA_BYTES)}") from None


# --- profiles ---------------------------------------------------------------------------

# The built-in workloads share their sizes, so a profile means one problem size across the
# suite; each declares its profiles through ``suite_profiles`` (Workload.profiles), the hook
# a third-party workload uses for its own.
_SUITE_SIZES: Mapping[str, Mapping[str, Any]] = {
    "smoke": {
        "batch": 1, "channels": 8, "height": 16, "width": 16, "tile_size": 4, "kmax": 6, "steps": 16,
        "budget_b1": 4, "budget_b2": 2, "budget_total": 6,
    },
    # Sizes that fill an H100/H200 for the memory-bound tile ops (hundreds of MB per call).
    # steps stays at the fixed value (256), the size docs/perf.md's large-profile rows
    # were taken at (larger scans are swept there with --set steps=).
    "large": {
        "batch": 8, "channels": 256, "height": 512, "width": 512, "tile_size": 8, "kmax": 1024,
        "budget_b1": 256, "budget_b2": 128, "budget_total": 512,
    },
}


def suite_profiles(params_type: type) -> dict[str, dict[str, Any]]:
    """The suite's ``smoke`` and ``large`` sizes for the fields ``params_type`` has."""
    fields = {f.name for f in attrs.fields(params_type)}
    return {name: {k: v for k, v in sizes.items() if k in fields} for name, sizes in _SUITE_SIZES.items()}


# --- ONNX export ------------------------------------------------------------------------

NCHW_AXES = {0: "batch", 2: "height", 3: "width"}  # an NCHW map swept over batch and image size
TILE_AXES = {0: "batch", 1: "K"}  # per-tile tensors [B, K, ...]
# Writes through index_put (tile-stage1) export as ScatterND whose
# update shape the exporter bakes in as [K, C, t, t] per batch row: only the image may vary.
IMAGE_AXES = {2: "height", 3: "width"}


def no_bf16_export(scalars: str, also: str = "") -> ExportRecipe:
    """The refusal of a bf16 export with float32 scalar inputs (tests check it against a real export)."""
    return ExportRecipe.refused(f"no bf16 ONNX export: {also}the TorchScript ONNX exporter cannot combine bf16 "
                                f"tensors with the float32 scalar input(s) {scalars} ('ScalarType "
                                "ComplexDouble is an unexpected tensor scalar type')")


# --- parameters -------------------------------------------------------------------------


def _check_positive_int(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    # bool is an int subclass; "--set kmax=true" must not pass as 1
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{attribute.name} must be a positive integer, got {value!r}")


def positive_int(default: int) -> Any:
    """An attrs field holding a positive int, validated on construction."""
    return attrs.field(default=default, validator=_check_positive_int)


@attrs.frozen(kw_only=True)
class TileParams:
    """K of the t x t tiles of an NCHW map (tile workloads); the defaults are the fixed profile."""

    batch: int = positive_int(1)
    channels: int = positive_int(128)
    height: int = positive_int(128)
    width: int = positive_int(128)
    tile_size: int = positive_int(8)
    kmax: int = positive_int(32)

    def __attrs_post_init__(self) -> None:
        for side, value in (("height", self.height), ("width", self.width)):
            if value % self.tile_size:
                raise ValueError(f"{side} {value} is not divisible by tile_size {self.tile_size}")


def check_fraction(name: str, value: float) -> None:
    """Raise ``ValueError`` unless ``value`` is a real number in [0, 1) (NaN is not)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} {value!r} is not in [0, 1)")


def check_choice(name: str, value: Any, choices: Collection[str]) -> None:
    """Raise ``ValueError`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} {value!r} is not one of {', '.join(map(repr, choices))}")


def widened_tolerance(dtype_name: str, atols: Mapping[str, float], reason: str) -> Tolerance:
    """The default tolerance, with ``atol`` raised for the dtypes in ``atols`` (with the reason)."""
    atol, rtol = DEFAULT_TOLERANCES[dtype_name]
    if dtype_name not in atols:
        return Tolerance(atol, rtol)
    return Tolerance(atols[dtype_name], rtol, reason=reason)


# --- the tile grid ----------------------------------------------------------------------


def num_tiles(height: int, width: int, tile_size: int) -> int:
    """Number of tiles in the row-major (H/t) x (W/t) grid."""
    return (height // tile_size) * (width // tile_size)


def tile_origins(idx: torch.Tensor, width: int, tile_size: int) -> torch.Tensor:
    """Origins ``[..., 2]`` (y, x) of the tile ids in ``idx``, in the dtype of ``idx``."""
    per_row = width // tile_size
    return torch.stack((idx // per_row * tile_size, idx % per_row * tile_size), dim=-1)


def tile_pixel_index(
    origins: torch.Tensor, channels: int, tile_size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Index tensors (batch, channel, row, col) that broadcast to ``[B, K, C, t, t]``.

    Indexing an NCHW tensor with them reads every pixel of every tile whose top-left
    corner is in ``origins [B, K, 2]``; assigning through them writes the tiles back.
    """
    device = origins.device
    origins = origins.long()
    offsets = torch.arange(tile_size, device=device)
    rows = (origins[..., 0, None] + offsets)[:, :, None, :, None]
    cols = (origins[..., 1, None] + offsets)[:, :, None, None, :]
    batch = torch.arange(origins.shape[0], device=device)[:, None, None, None, None]
    chan = torch.arange(channels, device=device)[None, None, :, None, None]
    return batch, chan, rows, cols


# --- seeded inputs ----------------------------------------------------------------------


# A float draw of at least this many values is filled in chunks on several threads: one thread
# draws ~120 M values/s, so the large profile's 0.5 G-value maps took 4 s each, and a cell draws
# its inputs a dozen times (checks, placements, spot checks). Smaller draws (every fixed and
# smoke profile) keep the single-stream values they always had.
PARALLEL_DRAW_VALUES = 1 << 24
_DRAW_CHUNK = 1 << 22  # values per chunk: the chunking, not the thread count, fixes the values


class SeededRandom:
    """Draws reproducible CPU tensors from one seed; ``place`` moves them to the device.

    Drawing on the CPU makes the same seed give the same data on every device.
    Floating draws are float32, integer draws int32.
    """

    def __init__(self, seed: int) -> None:
        self.generator = torch.Generator().manual_seed(seed)

    def uniform(self, shape: Sequence[int], low: float = 0.0, high: float = 1.0) -> torch.Tensor:
        """Uniform float32 values in [low, high)."""
        return self._float_draw(tuple(shape), "uniform_") * (high - low) + low

    def normal(self, shape: Sequence[int]) -> torch.Tensor:
        """Standard normal float32 values."""
        return self._float_draw(tuple(shape), "normal_")

    def _float_draw(self, shape: tuple[int, ...], fill: str) -> torch.Tensor:
        values = torch.empty(shape)
        if values.numel() < PARALLEL_DRAW_VALUES:
            return getattr(values, fill)(generator=self.generator)
        # one seed per chunk from this generator, so the values depend on the seed alone
        flat = values.view(-1)
        chunks = flat.split(_DRAW_CHUNK)
        seeds = torch.randint(0, 2**62, (len(chunks),), generator=self.generator).tolist()

        def fill_chunk(chunk: torch.Tensor, seed: int) -> None:
            getattr(chunk, fill)(generator=torch.Generator().manual_seed(seed))

        # torch releases the GIL while it fills, so threads draw in parallel
        with concurrent.futures.ThreadPoolExecutor(min(len(chunks), os.cpu_count() or 1, 16)) as pool:
            list(pool.map(fill_chunk, chunks, seeds))
        return values

    def integers(self, shape: Sequence[int], low: int, high: int) -> torch.Tensor:
        """Uniform int32 values in [low, high), drawn with replacement."""
        return torch.randint(low, high, tuple(shape), generator=self.generator, dtype=torch.int32)

    def unique_integers(self, rows: int, count: int, high: int) -> torch.Tensor:
        """``[rows, count]`` int32 values from [0, high), distinct within each row."""
        if count > high:
            raise ValueError(f"cannot draw {count} distinct values from [0, {high})")
        keys = torch.rand((rows, high), generator=self.generator)
        return keys.argsort(dim=1)[:, :count].to(torch.int32)

    def inject_nonfinite(self, values: torch.Tensor, fraction: float) -> torch.Tensor:
        """A copy of ``values`` with NaN, +Inf and -Inf (in turn) at ``fraction`` of positions.

        At least one of each kind is placed when ``fraction > 0`` and there is room, so
        small smoke inputs still exercise the sanitizing paths.
        """
        out = values.clone()
        numel = out.numel()
        count = min(numel, max(3, math.ceil(fraction * numel))) if fraction > 0 else 0
        if count == 0:
            return out
        positions = torch.randperm(numel, generator=self.generator)[:count]
        specials = torch.tensor([math.nan, math.inf, -math.inf], dtype=out.dtype)
        out.view(-1)[positions] = specials[torch.arange(count) % 3]
        return out


def place(
    inputs: Mapping[str, torch.Tensor],
    device: str | torch.device,
    dtype: torch.dtype,
    data: Collection[str],
) -> dict[str, torch.Tensor]:
    """Move CPU inputs to ``device``: names in ``data`` take ``dtype``, the rest keep theirs."""
    return {
        name: t.to(device=device, dtype=dtype if name in data else t.dtype).contiguous()
        for name, t in inputs.items()
    }


# --- input validation (untimed) ---------------------------------------------------------


def _first_position(mask: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(i) for i in mask.nonzero()[0])


def check_shape(name: str, tensor: torch.Tensor, shape: Sequence[int]) -> None:
    """Raise ``InputValidationError`` unless ``tensor`` has exactly ``shape``."""
    if tuple(tensor.shape) != tuple(shape):
        raise InputValidationError(f"{name} has shape {list(tensor.shape)}, expected {list(shape)}")


def check_int_range(name: str, values: torch.Tensor, low: int, high: int) -> None:
    """Raise ``InputValidationError`` unless every value lies in [low, high)."""
    if values.is_floating_point() or values.is_complex():
        raise InputValidationError(f"{name} must be an integer tensor, got {values.dtype}")
    bad = (values < low) | (values >= high)
    if bool(bad.any()):
        pos = _first_position(bad)
        raise InputValidationError(
            f"{name} value {int(values[pos])} at {list(pos)} is out of range [{low}, {high})"
        )


def check_real_range(name: str, values: torch.Tensor, low: float, high: float) -> None:
    """Raise ``InputValidationError`` unless every value is finite and in [low, high]."""
    bad = ~((values >= low) & (values <= high))  # NaN compares false, so it is caught too
    if bool(bad.any()):
        pos = _first_position(bad) if values.dim() else ()
        where = f" at {list(pos)}" if pos else ""
        raise InputValidationError(f"{name} value {float(values[pos])}{where} is out of range [{low}, {high}]")


def check_unique_rows(name: str, values: torch.Tensor) -> None:
    """Raise ``InputValidationError`` if a row of the 2-D ``values`` repeats an entry."""
    ordered, _ = values.sort(dim=1)
    repeats = ordered[:, 1:] == ordered[:, :-1]
    if bool(repeats.any()):
        row, col = _first_position(repeats)
        raise InputValidationError(
            f"{name} repeats value {int(ordered[row, col])} in row {row}; indices must be unique"
        )
