"""``--reference-model PATH``: an ONNX model whose outputs an engine file's outputs are checked against.

The reference runs under ONNX Runtime on the CPU, on the cell's own inputs cast to the
reference's declared dtypes (an fp32 export takes fp32, whatever the timed model takes),
and must have the same input and output names as the model it checks. A model and its
reference are both files, so a check needs no user code imported into the workers, and
the usual reference of an fp16 ONNX model or a TensorRT engine is the fp32 ONNX file it
was built from.

``check_reference`` runs in the calling process before any cell (one ``UsageError`` line
per problem); ``reference_outputs`` runs in the worker, from the path in the case's
parameters, loading each reference once per process.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apex_core.engine.ort_runtime import OrtModel, load_onnx_model, torch_dtype
from apex_core.engine.runtime import EngineModel, require_file
from apex_core.engine.shape_case import Shape, ShapeCase, resolve_case
from apex_core.errors import UsageError

if TYPE_CHECKING:
    import torch

FLAG = "--reference-model"
# cell dtypes whose outputs can be checked: floating ones have the suite's tolerances, the
# others are compared exactly; fp64 and fp8 outputs are refused by the output-form check
CHECKED_DTYPES = ("fp32", "fp16", "bf16", "int8", "uint8", "int16", "int32", "int64", "bool")


def _names(specs: Sequence[Any]) -> str:
    return ", ".join(spec.name for spec in specs) or "none"


@functools.cache  # one OrtModel per path and process
def _load(path: str) -> OrtModel:
    return load_onnx_model(path, device="cpu")


def check_reference(path: str | Path, model: EngineModel, cases: Sequence[Mapping[str, Shape]],
                    cell_dtype: str) -> None:
    """Raise ``UsageError`` unless the reference can check ``model`` at every case's resolved shapes."""
    reference = Path(path)
    where = f"{FLAG} {reference}"
    require_file(reference, where)
    if reference.suffix.lower() != ".onnx":
        raise UsageError(f"{where}: expected an ONNX model (.onnx), run under onnxruntime on the CPU")
    if cell_dtype not in CHECKED_DTYPES:
        raise UsageError(f"{where}: a {cell_dtype} model cannot be checked (checked: "
                         f"{', '.join(CHECKED_DTYPES)})")
    try:
        loaded = _load(str(reference))
    except UsageError as exc:
        raise UsageError(f"{where}: {exc}") from None
    for kind, verb in (("inputs", "takes"), ("outputs", "returns")):
        theirs, ours = getattr(loaded, kind), getattr(model, kind)
        if {s.name for s in theirs} != {s.name for s in ours}:
            raise UsageError(f"{where}: its {kind} ({_names(theirs)}) are not the model's ({_names(ours)}); "
                             f"a reference {verb} the same named {kind}")
    for shapes in cases:
        # the reference must accept every case the model runs: its fixed dims, its ranks
        resolve_case(ShapeCase(tuple(shapes.items())), loaded.inputs, flag=where)


def reference_outputs(path: str, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The reference's outputs for ``inputs`` (moved to the CPU, cast to the reference's dtypes)."""
    reference = _load(path)
    feeds = {spec.name: inputs[spec.name].detach().to("cpu", torch_dtype(spec.dtype)).contiguous()
             for spec in reference.inputs}
    outputs = reference.bind(feeds).fn()
    return {name: tensor.clone() for name, tensor in outputs.items()}
