"""One call made inside a test, as a cell: its tensors are the workload's inputs, its function the backend.

The cell then runs through ``measure.cell.execute_cell`` like any cell of a run, so a test gets
the CLI's timing contract and checks: the first call counted as build time, the reference
compared before and after timing on poisoned outputs, the spot checks while sampling, the
integrity findings. Where a run's workload makes fresh random inputs from a seed, a test's call
has only the tensors it was given: every "fresh" input is a copy of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import torch

from apex_core.correctness import DTYPES
from apex_core.interfaces import DEFAULT_TOLERANCES, Backend, Inputs, Outputs, Prepared, Workload
from apex_core.results import Availability, Case, Tolerance, Work

# Where a call's positional and keyword tensors sit among the cell's inputs.
ARG, KWARG = "arg", "kwarg"
NO_REFERENCE = "no reference given to apex_bench(...)"


@attrs.frozen
class NoParams:
    """A test's call has no parameters of its own: its shapes are the tensors it was given."""


def as_outputs(value: Any) -> Outputs:
    """A function's result in the cell's form: a tensor is ``out``, a sequence ``out0, out1, ...``."""
    if isinstance(value, torch.Tensor):
        return {"out": value}
    if isinstance(value, Mapping):
        return {str(name): tensor for name, tensor in value.items()}
    if isinstance(value, (tuple, list)):
        return {f"out{index}": tensor for index, tensor in enumerate(value)}
    return value  # the cell's check says what is wrong with it


def _tensors(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    found = {f"{ARG}{i}": v for i, v in enumerate(args) if isinstance(v, torch.Tensor)}
    return found | {f"{KWARG}.{k}": v for k, v in kwargs.items() if isinstance(v, torch.Tensor)}


def dtype_name(tensors: Mapping[str, torch.Tensor]) -> str:
    """The cell's dtype: that of the call's first floating tensor (fp32 when it has none).

    Raises ValueError for a floating dtype outside fp32, fp16 and bf16, which a cell's check
    refuses as outputs (a float64 result does not time the precision a kernel ships in).
    """
    names = {dtype: name for name, dtype in DTYPES.items()}
    floating = [t.dtype for t in tensors.values() if t.is_floating_point()]
    if not floating:
        return "fp32"
    if floating[0] not in names:
        raise ValueError(f"apex_bench times calls in {', '.join(DTYPES)}; this call's first floating "
                         f"tensor is {str(floating[0]).removeprefix('torch.')}")
    return names[floating[0]]


def device_of(tensors: Mapping[str, torch.Tensor]) -> torch.device:
    """Where the call runs: the device of its first CUDA tensor, else the CPU."""
    return next((t.device for t in tensors.values() if t.device.type == "cuda"), torch.device("cpu"))


@attrs.frozen
class Call:
    """A function and the arguments a test gave it, with the inputs split out of the arguments."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]

    @property
    def inputs(self) -> dict[str, torch.Tensor]:
        return _tensors(self.args, self.kwargs)

    def bound(self, fn: Callable[..., Any], inputs: Inputs) -> Callable[[], Any]:
        """``fn`` called on the arguments with each tensor replaced by the cell's input of its place."""
        args = tuple(inputs.get(f"{ARG}{i}", v) for i, v in enumerate(self.args))
        kwargs = {k: inputs.get(f"{KWARG}.{k}", v) for k, v in self.kwargs.items()}
        return lambda: fn(*args, **kwargs)


class CallWorkload(Workload):
    """The test's call as a workload: its own tensors, its reference, the bytes it reads and writes."""

    description = "a call timed by the apex_bench pytest fixture"
    params_type = NoParams

    def __init__(self, name: str, case: str, call: Call, reference: Callable[..., Any] | None,
                 tolerance: Tolerance | None, output: Outputs) -> None:
        # one object per call, named after its test (a plugin's workload names its class instead)
        self.name = name  # type: ignore[misc]
        self.case_names = (case,)  # type: ignore[misc]
        self.call = call
        self.given_reference = reference
        self.given_tolerance = tolerance
        # what one call must read and write at the least: its input tensors and its outputs
        moved = [*call.inputs.values(), *(output.values() if isinstance(output, Mapping) else ())]
        self.bytes_moved = sum(t.numel() * t.element_size() for t in moved if isinstance(t, torch.Tensor))

    def make_inputs(self, case: Case, device: str, dtype: torch.dtype, seed: int) -> Inputs:
        # the test's tensors, copied (the checks write "fresh" values into the copies in place);
        # on the CPU when asked there (the replay hash), else where the test put them
        return {name: tensor.detach().to("cpu" if device == "cpu" else tensor.device, copy=True)
                for name, tensor in self.call.inputs.items()}

    def reference(self, case: Case, inputs: Inputs) -> Outputs:
        assert self.given_reference is not None  # unchecked_reason keeps the cell from asking otherwise
        return as_outputs(self.call.bound(self.given_reference, inputs)())

    def work(self, case: Case, dtype_name: str) -> Work:
        return Work(bytes_moved=self.bytes_moved, flops=0, units="calls", count=1)

    def unchecked_reason(self, case: Case) -> str:
        return "" if self.given_reference is not None else NO_REFERENCE

    def tolerance(self, dtype_name: str) -> Tolerance:
        return self.given_tolerance or Tolerance(*DEFAULT_TOLERANCES[dtype_name])


class CallBackend(Backend):
    """The test's function, called on the cell's inputs in place of the test's tensors."""

    description = "a function timed by the apex_bench pytest fixture"

    def __init__(self, name: str, call: Call) -> None:
        self.name = name  # type: ignore[misc]  # one object per function, named after it
        self.call = call

    def probe(self, device: str) -> Availability:
        return Availability.yes()

    def prepare(self, workload: Workload, case: Case, inputs: Inputs) -> Prepared:
        run = self.call.bound(self.call.fn, inputs)
        return Prepared(lambda: as_outputs(run()))


def tolerance(dtype: str, atol: float | None, rtol: float | None) -> Tolerance | None:
    """The tolerance a test asked for, the dtype's default filling the bound it left out."""
    if atol is None and rtol is None:
        return None
    default_atol, default_rtol = DEFAULT_TOLERANCES[dtype]
    return Tolerance(default_atol if atol is None else atol, default_rtol if rtol is None else rtol,
                     reason="given to apex_bench(...)")


def function_name(fn: Callable[..., Any]) -> str:
    """A function's name for its column: ``my_kernel``; a partial's function's; a callable's class."""
    inner = getattr(fn, "func", fn)  # functools.partial
    return str(getattr(inner, "__name__", type(inner).__name__))
