"""A ruler for the regression gate: spin kernels of ~10 and ~100 us that an environment variable slows.

``APEX_TEST_SPIN_SLOWDOWN=1.10`` makes every spin 10 % longer, a planted regression of a
known size in a build that is otherwise the same: the gate's detection rate is measured
with it (docs/baselines.md), its false-positive rate with the variable unset.
"""

from __future__ import annotations

import math
import os

import attrs
import torch

from apex_core.interfaces import Workload
from apex_core.results import Work

SLOWDOWN_VARIABLE = "APEX_TEST_SPIN_SLOWDOWN"
# SM cycles of each case: ~10 and ~100 us at the 1980 MHz of an H100 or H200 under load
CASE_CYCLES = {"10us": 19_800, "100us": 198_000}


def slowdown() -> float:
    """The planted factor on every spin (1.0 when the variable is unset)."""
    text = os.environ.get(SLOWDOWN_VARIABLE, "1")
    try:
        factor = float(text)
    except ValueError:
        factor = math.nan
    if not (math.isfinite(factor) and factor > 0):
        raise ValueError(f"{SLOWDOWN_VARIABLE} must be a finite number > 0, got {text!r}")
    return factor


@attrs.frozen(kw_only=True)
class SpinPairParams:
    """Parameters of test-spin-pair: the size of the (untouched) tensor passed through."""

    elements: int = attrs.field(default=256, validator=attrs.validators.ge(1))


class SpinPairWorkload(Workload):
    """One ``torch.cuda._sleep`` kernel per call, ~10 us in case 10us and ~100 us in case 100us."""

    name = "test-spin-pair"
    description = "spin kernels of ~10 and ~100 us, slowed by APEX_TEST_SPIN_SLOWDOWN (gate check)"
    params_type = SpinPairParams
    case_names = tuple(CASE_CYCLES)

    def make_inputs(self, case, device, dtype, seed):
        gen = torch.Generator().manual_seed(seed)
        x = torch.rand(case.params.elements, generator=gen) + 0.5
        return {"x": x.to(device, dtype)}

    def reference(self, case, inputs):
        x = inputs["x"]
        cycles = round(CASE_CYCLES[case.name] * slowdown())  # read on every device: a bad value fails anywhere
        if x.is_cuda:
            torch.cuda._sleep(cycles)
        return {"x": x}

    def work(self, case, dtype_name):
        return Work(bytes_moved=0, flops=0, units="elements", count=case.params.elements)
