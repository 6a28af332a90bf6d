"""A third-party workload: y = x * scale + shift, elementwise."""

from __future__ import annotations

import attrs
import torch

from apex_core.interfaces import Workload
from apex_core.results import Work


@attrs.frozen(kw_only=True)
class ScaleParams:
    """Parameters of test-scale."""

    channels: int = 16
    height: int = 32
    width: int = 32


class ScaleWorkload(Workload):
    """Elementwise scale and shift, small enough for any machine."""

    name = "test-scale"
    description = "elementwise x * scale + shift (third-party test workload)"
    params_type = ScaleParams

    def make_inputs(self, case, device, dtype, seed):
        gen = torch.Generator().manual_seed(seed)
        p = case.params
        x = torch.rand((p.channels, p.height, p.width), generator=gen) * 2 - 1
        scale = torch.rand((), generator=gen) + 0.5
        return {"x": x.to(device, dtype), "scale": scale.to(device, dtype)}

    def reference(self, case, inputs):
        return {"y": inputs["x"] * inputs["scale"] + 1.0}

    def work(self, case, dtype_name):
        p = case.params
        n = p.channels * p.height * p.width
        return Work(bytes_moved=2 * 2 * n, flops=2 * n, units="elements", count=n)


@attrs.frozen(kw_only=True)
class SpinParams:
    """Parameters of test-spin: how many SM clock cycles the one kernel spins."""

    cycles: int = attrs.field(default=2000, validator=attrs.validators.ge(0))
    elements: int = attrs.field(default=256, validator=attrs.validators.ge(1))


class SpinWorkload(Workload):
    """One kernel of known length on CUDA (``torch.cuda._sleep``): a ruler for the timers.

    The kernel spins on the SM's cycle counter until ``cycles`` have passed, so its time
    is cycles / SM clock plus the launch; the output is the input itself, so a call is
    exactly one kernel. On the CPU nothing spins.
    """

    name = "test-spin"
    description = "one spin kernel of a known number of SM cycles (timer self-check)"
    params_type = SpinParams

    def make_inputs(self, case, device, dtype, seed):
        gen = torch.Generator().manual_seed(seed)
        x = torch.rand(case.params.elements, generator=gen) + 0.5
        return {"x": x.to(device, dtype)}

    def reference(self, case, inputs):
        x = inputs["x"]
        if x.is_cuda:  # 0 cycles still launches the kernel: the timers' floor
            torch.cuda._sleep(case.params.cycles)
        return {"x": x}

    def work(self, case, dtype_name):
        return Work(bytes_moved=0, flops=0, units="elements", count=case.params.elements)
