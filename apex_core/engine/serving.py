"""What a backend needs to serve engine workloads (an engine or ONNX file swept over shape cases).

A backend that runs model files mixes in ``EngineBackend``: it names the file formats it
reads and loads one into an ``EngineModel``. ``apex-bench sweep`` asks it once, in the
calling process, for the model's inputs (to check every shape case before anything runs);
the cells themselves go through the normal runner, where ``supports`` accepts the engine
workload's cells of a format the backend reads and ``prepare`` returns ``prepare_engine``'s
callable. The ``onnxruntime`` and ``tensorrt-engine`` backends serve them; a third-party
backend does it the same way.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from apex_core.engine.runtime import EngineModel
from apex_core.engine.tensor_spec import TensorSpec
from apex_core.interfaces import Inputs, Prepared
from apex_core.results import Case, Support, Work

if TYPE_CHECKING:
    import torch

    from apex_core.engine.workload import EngineParams


class EngineBackend(abc.ABC):
    """Mixed into a ``Backend`` that runs model files of ``engine_formats`` (``onnx``, ``tensorrt``)."""

    engine_formats: frozenset[str] = frozenset()

    @abc.abstractmethod
    def load_engine(self, path: str, device: str) -> EngineModel:
        """Load ``path`` on ``device``; raise ``UsageError`` saying why it cannot be read."""

    def engine_support(self, params: EngineParams) -> Support:
        """Whether this backend reads the engine workload's file format."""
        if params.engine_format in self.engine_formats:
            return Support.yes()
        name = getattr(self, "name", type(self).__name__)
        return Support.no(f"{name} runs {', '.join(sorted(self.engine_formats))} files; "
                          f"{params.engine} is a {params.engine_format} file")


def tensor_meta(specs: Sequence[TensorSpec], shapes: Mapping[str, tuple[int, ...]]) -> dict[str, Any]:
    """Per tensor: the resolved shape, the dtype, and whether the model leaves its shape open."""
    by_name = {s.name: s for s in specs}
    return {name: {"shape": list(shape), "dtype": by_name[name].dtype if name in by_name else None,
                   "dynamic": by_name[name].is_dynamic if name in by_name else None}
            for name, shape in shapes.items()}


def io_work(inputs: Mapping[str, torch.Tensor], outputs: Mapping[str, torch.Tensor]) -> Work:
    """The least a call can move: every input read once, every output written once; rate in output elements.

    ``flops`` is 0: an engine file does not say how much arithmetic it does.
    """
    moved = sum(t.numel() * t.element_size() for t in (*inputs.values(), *outputs.values()))
    return Work(bytes_moved=moved, flops=0, units="elements", count=sum(t.numel() for t in outputs.values()))


def prepare_engine(model: EngineModel, case: Case, inputs: Inputs, **metadata: Any) -> Prepared:
    """Bind ``inputs`` to ``model`` (ONNX Runtime runs it once here to learn the output shapes).

    The metadata say which file and case ran and every tensor's resolved shape; the work
    counts the inputs and outputs the call really moves.
    """
    params: EngineParams = case.params
    bound = model.bind(inputs)
    outputs = bound.outputs if bound.outputs is not None else bound.fn()
    return Prepared(
        bound.fn,
        outputs=bound.outputs,
        metadata={"shape_case": params.shape_case, "engine": params.engine,
                  "engine_sha256": params.engine_sha256, "runtime": model.runtime,
                  "inputs": tensor_meta(model.inputs, bound.input_shapes),
                  "outputs": tensor_meta(model.outputs, bound.output_shapes),
                  **({"reference_model": params.reference_model} if params.reference_model else {}),
                  **metadata},
        work=io_work(inputs, outputs),
    )
