"""How an engine's or ONNX model's named inputs and outputs are described.

Shared by the ONNX Runtime and TensorRT runtimes, the shape-case checks and the
sweep report, so each runtime turns its own metadata into these values once.
"""

from __future__ import annotations

import attrs

# A dimension the model leaves open (ONNX symbolic or unknown dim, TensorRT -1).
DYNAMIC = -1


@attrs.frozen
class ProfileRange:
    """The shapes an optimization profile accepts for one input (TensorRT min/opt/max)."""

    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]

    def contains(self, shape: tuple[int, ...]) -> bool:
        return len(shape) == len(self.min) and all(
            lo <= d <= hi for lo, d, hi in zip(self.min, shape, self.max, strict=True)
        )


@attrs.frozen
class TensorSpec:
    """One named input or output: dtype name (fp16, bf16, fp32, int32, int64, ...) and shape.

    ``shape`` holds ``DYNAMIC`` for open dimensions; ``dim_names`` holds the symbolic
    names where the model gives them (ONNX ``dim_param``), else ``None`` per dim.
    """

    name: str
    is_input: bool
    dtype: str
    shape: tuple[int, ...]
    dim_names: tuple[str | None, ...] = ()
    profile: ProfileRange | None = None

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_dynamic(self) -> bool:
        return any(d == DYNAMIC for d in self.shape)
