"""engine: an engine or ONNX file timed at one shape case, a workload like any other.

``apex-bench sweep`` turns a file and its shape cases into a plan of these cases (one per
shape case, resolved against the model's inputs in the calling process), so a sweep runs
in the worker pool with the suite's timeouts, recorder and gate. The parameters carry
everything a worker needs as plain data: the file, its format and hash, and every model
input's name, dtype and resolved shape.

Without a reference the cells are timed but never checked (``unchecked_reason``), and
their report says so; with ``reference_model`` (an ONNX file, ``--reference-model``) every
cell is checked against that model's outputs under ONNX Runtime on the CPU
(``apex_core.engine.reference_model``), with the suite's tolerances for the cell's dtype.

Inputs are fresh random data from a generator seeded by the run's seed and the case name,
so a case sees the same data in any order: floating inputs standard normal, integer inputs
uniform in ``[0, int_high)`` (default 2, a valid index into any axis of two or more
elements), boolean inputs uniform.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from typing import Any

import attrs
import torch

from apex_core.engine.ort_runtime import TORCH_DTYPES, torch_dtype
from apex_core.engine.reference_model import reference_outputs
from apex_core.engine.shape_case import parse_shape_case
from apex_core.interfaces import DEFAULT_TOLERANCES, Inputs, Outputs, Workload
from apex_core.results import Case, Tolerance, Work

ENGINE_FORMATS = ("onnx", "tensorrt")
DEFAULT_INT_HIGH = 2
NO_REFERENCE = "not checked: an engine file runs alone and has no reference to compare with"
FEEDABLE_DTYPES = tuple(TORCH_DTYPES)

InputSpec = tuple[str, str, tuple[int, ...]]  # (name, dtype name, resolved shape)


def _input_specs(value: Iterable[Any]) -> tuple[InputSpec, ...]:
    """(name, dtype, shape) triples; lists from a report or a worker's spec become tuples."""
    specs = []
    for item in value:
        name, dtype, shape = item
        if dtype not in FEEDABLE_DTYPES:
            raise ValueError(f"input {name!r}: dtype {dtype!r} cannot be generated (valid: "
                             f"{', '.join(FEEDABLE_DTYPES)})")
        specs.append((str(name), str(dtype), tuple(int(d) for d in shape)))
    return tuple(specs)


def _check_format(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if value and value not in ENGINE_FORMATS:
        raise ValueError(f"engine_format {value!r} is not one of {', '.join(ENGINE_FORMATS)}")


@attrs.frozen(kw_only=True)
class EngineParams:
    """One shape case of one engine file; the defaults (no file) give no case at all."""

    engine: str = ""  # path of the engine or ONNX file
    engine_format: str = attrs.field(default="", validator=_check_format)  # "onnx" or "tensorrt"
    engine_sha256: str = ""
    shape_case: str = ""  # the case as given, canonical text (docs/sweep.md)
    inputs: tuple[InputSpec, ...] = attrs.field(default=(), converter=_input_specs)
    int_high: int = attrs.field(default=DEFAULT_INT_HIGH, validator=attrs.validators.ge(1))
    reference_model: str = ""  # an ONNX file whose outputs the cell is checked against; "" none


def case_name(params: EngineParams) -> str:
    """The case's name in the report: the shape case's label, else its canonical text."""
    return parse_shape_case(params.shape_case).name if params.shape_case else "default"


def case_seed(seed: int, name: str) -> int:
    """The seed of one case's inputs: fixed by the run's seed and the case name, not the case order."""
    return int.from_bytes(hashlib.sha256(f"{seed}/{name}".encode()).digest()[:7], "little")


def random_feeds(inputs: Iterable[InputSpec], device: str, seed: int,
                 int_high: int = DEFAULT_INT_HIGH) -> dict[str, torch.Tensor]:
    """Fresh random tensors for every input (made on the CPU from ``seed``, then moved to ``device``)."""
    generator = torch.Generator().manual_seed(seed)
    feeds = {}
    for name, dtype_name, shape in inputs:
        dtype = torch_dtype(dtype_name)
        if dtype.is_floating_point:
            values = torch.randn(shape, generator=generator, dtype=torch.float32).to(dtype)
        elif dtype == torch.bool:
            values = torch.randint(0, 2, shape, generator=generator).bool()
        else:  # capped so a narrow integer type never wraps to negative values
            high = min(int_high, torch.iinfo(dtype).max + 1)
            values = torch.randint(0, high, shape, generator=generator, dtype=torch.int64).to(dtype)
        feeds[name] = values.to(device)
    return feeds


class EngineWorkload(Workload):
    """An engine or ONNX file at one shape case; served by backends that read its format."""

    name = "engine"
    description = "an engine or ONNX file timed across shape cases (apex-bench sweep; no reference)"
    params_type = EngineParams

    def cases(self, params: EngineParams) -> list[Case]:
        """The one shape case the parameters describe; none when no file is given."""
        if not params.engine or not params.inputs:
            return []
        return [Case(self.name, case_name(params), params)]

    def make_inputs(self, case: Case, device: str, dtype: torch.dtype, seed: int) -> Inputs:
        """Random inputs in the model's own dtypes (``dtype`` is ignored: the file fixes them)."""
        p: EngineParams = case.params
        return random_feeds(p.inputs, device, case_seed(seed, case.name), p.int_high)

    def reference(self, case: Case, inputs: Inputs) -> Outputs:
        """The reference model's outputs (``reference_model``); without one there is none."""
        p: EngineParams = case.params
        if not p.reference_model:
            raise NotImplementedError(NO_REFERENCE)
        return reference_outputs(p.reference_model, inputs)

    def unchecked_reason(self, case: Case) -> str:
        return "" if case.params.reference_model else NO_REFERENCE

    def tolerance(self, dtype_name: str) -> Tolerance:
        """The suite's tolerances for floating dtypes; integer and boolean outputs must match exactly."""
        if dtype_name in DEFAULT_TOLERANCES:
            return super().tolerance(dtype_name)
        return Tolerance(0.0, 0.0, reason="integer and boolean outputs are compared exactly")

    def work(self, case: Case, dtype_name: str) -> Work:
        """The inputs read once (the backend adds the outputs, which only running the file tells)."""
        p: EngineParams = case.params
        moved = sum(torch_dtype(dtype).itemsize * math.prod(shape) for _name, dtype, shape in p.inputs)
        return Work(bytes_moved=moved, flops=0, units="elements",
                    count=sum(math.prod(shape) for _name, _dtype, shape in p.inputs))
