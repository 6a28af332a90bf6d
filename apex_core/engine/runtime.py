"""What the sweep and the engine backends need from a runtime (ONNX Runtime, TensorRT).

A runtime loads a model file into an ``EngineModel``; ``bind`` fixes every input's
shape from the tensors given, allocates the outputs once and returns a
``BoundModel`` whose ``fn`` runs the model on those tensors (reading them anew on
every call, so the runner can refresh inputs in place between checks).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import attrs

from apex_core.engine.tensor_spec import TensorSpec
from apex_core.errors import UsageError

if TYPE_CHECKING:
    import torch


def require_file(path: Path, where: str) -> None:
    """A usage error unless ``path`` is an existing file; ``where`` opens the message (flag and path)."""
    if not path.is_file():
        raise UsageError(f"{where}: file not found" if not path.exists() else f"{where}: not a file")


@attrs.frozen
class BoundModel:
    """A model bound to concrete input tensors: the callable to time and the resolved shapes."""

    fn: Callable[[], dict[str, torch.Tensor]]
    input_shapes: dict[str, tuple[int, ...]]
    output_shapes: dict[str, tuple[int, ...]]
    outputs: dict[str, torch.Tensor] | None = None  # buffers ``fn`` writes into, if preallocated


class EngineModel(Protocol):
    """A loaded engine or ONNX model with named inputs and outputs."""

    # read-only properties, so frozen attrs classes satisfy the protocol
    @property
    def runtime(self) -> str:
        """``"onnxruntime"`` or ``"tensorrt"``."""
        ...

    @property
    def inputs(self) -> tuple[TensorSpec, ...]: ...

    @property
    def outputs(self) -> tuple[TensorSpec, ...]: ...

    def bind(self, feeds: Mapping[str, torch.Tensor]) -> BoundModel:
        """Resolve shapes for ``feeds`` (every input by name) and return the callable to time."""
        ...
