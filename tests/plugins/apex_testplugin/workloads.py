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

    def work(self, case):
        p = case.params
        n = p.channels * p.height * p.width
        return Work(bytes_moved=2 * 2 * n, flops=2 * n, units="elements", count=n)
