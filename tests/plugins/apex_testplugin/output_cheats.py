"""Backends that cheat on their outputs, and a workload loose enough to let some of them pass.

Each answers every workload from the workload's own reference, then spoils the answer the
way a published reward hack does: computing an fp32 cell in fp16 and casting back, or
returning all zeros, NaN or one constant, which a loose element-wise tolerance lets through.
apex-bench must report every cell of theirs ``incorrect`` with words that name the problem
(``apex_core.correctness.degenerate_output``). Device-generic torch: cpu and cuda alike.
"""

from __future__ import annotations

import attrs
import torch

from apex_core.interfaces import Prepared, Workload
from apex_core.results import Tolerance, Work
from apex_testplugin.backends import WorkingBackend


class PrecisionCheatBackend(WorkingBackend):
    """Computes an fp32 cell in fp16 (inputs rounded, the math in half) and casts the outputs back."""

    name = "cheat-precision"
    description = "cheat: computes fp32 cells in fp16 and casts the outputs back to fp32"

    def prepare(self, workload, case, inputs):
        def run():
            low = {k: v.half() if v.dtype == torch.float32 else v for k, v in inputs.items()}
            outputs = workload.reference(case, low)
            return {k: v.to(torch.float32) if v.dtype == torch.float16 else v for k, v in outputs.items()}

        return Prepared(run)


class _SpoiledBackend(WorkingBackend):
    """Computes the answer once (so it has the shapes and dtypes), then returns ``spoil`` of it."""

    def spoil(self, output: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def prepare(self, workload, case, inputs):
        def run():
            outputs = workload.reference(case, inputs)
            return {k: self.spoil(v) if v.is_floating_point() else v for k, v in outputs.items()}

        return Prepared(run)


class ZerosCheatBackend(_SpoiledBackend):
    """Returns all zeros: the output of a kernel that never ran."""

    name = "cheat-zeros"
    description = "cheat: returns all-zero outputs"

    def spoil(self, output):
        return torch.zeros_like(output)


class NanCheatBackend(_SpoiledBackend):
    """Returns NaN everywhere: what an unwritten torch.empty buffer often holds."""

    name = "cheat-nan"
    description = "cheat: returns NaN outputs"

    def spoil(self, output):
        return torch.full_like(output, float("nan"))


class ConstantCheatBackend(_SpoiledBackend):
    """Returns the reference's mean everywhere: closer than zeros, yet no computed answer."""

    name = "cheat-constant"
    description = "cheat: returns the outputs' mean value everywhere"

    def spoil(self, output):
        return torch.full_like(output, float(output.float().mean()))


@attrs.frozen(kw_only=True)
class LooseParams:
    """Parameters of test-loose-check."""

    elements: int = attrs.field(default=4096, validator=attrs.validators.ge(2))


class LooseCheckWorkload(Workload):
    """y = 2 x + 1 over values in [0, 2), with a tolerance a hundred times wider than the values.

    A workload may widen its tolerance (a stochastic kernel, an approximation); here it is so
    wide that zeros, NaN-free constants and noise all pass the element-wise bound.
    """

    name = "test-loose-check"
    description = "y = 2x + 1 with a very loose tolerance (atol 100): output cheats pass the bound"
    params_type = LooseParams
    profiles = {"smoke": {"elements": 4096}}

    def make_inputs(self, case, device, dtype, seed):
        gen = torch.Generator().manual_seed(seed)
        return {"x": torch.rand(case.params.elements, generator=gen).to(device, dtype)}

    def reference(self, case, inputs):
        return {"y": inputs["x"] * 2 + 1}

    def tolerance(self, dtype_name):
        return Tolerance(100.0, 1.0, reason="deliberately loose: shows the checks that hold whatever the bound")

    def work(self, case, dtype_name):
        n = case.params.elements
        element_bytes = 4 if dtype_name == "fp32" else 2
        return Work(bytes_moved=2 * n * element_bytes, flops=2 * n, units="elements", count=n)
