"""v1-blend: ``y = a * w + b * (1 - w)`` over a feature map, in the first API's terms.

Plugin API 1.0: ``work(case)`` counts the bytes of one call (in fp32, whatever the cell's dtype),
and the suite's sizes come from the profiles every workload shared (``PROFILES``), applied to
the fields a workload has: under ``--profile smoke`` this workload is 1 x 8 x 16 x 16.
"""

from __future__ import annotations

import attrs
import torch

from apex_core.interfaces import PROFILES, Workload
from apex_core.results import Tolerance, Work

# the first API's shared smoke sizes, which this workload's tests rely on
SMOKE_ELEMENTS = 1
for _field in ("batch", "channels", "height", "width"):
    SMOKE_ELEMENTS *= PROFILES["smoke"][_field]


@attrs.frozen(kw_only=True)
class BlendParams:
    batch: int = 4
    channels: int = 64
    height: int = 128
    width: int = 128


class BlendWorkload(Workload):
    """Blend two feature maps with a per-pixel weight."""

    name = "v1-blend"
    description = "y = a * w + b * (1 - w) (a first-API workload)"
    params_type = BlendParams
    case_names = ("default", "square")

    def make_inputs(self, case, device, dtype, seed):
        gen = torch.Generator().manual_seed(seed)
        p = case.params
        shape = (p.batch, p.channels, p.height, p.width)
        a = torch.rand(shape, generator=gen) * 2 - 1
        b = torch.rand(shape, generator=gen) * 2 - 1
        w = torch.rand(shape, generator=gen)
        return {"a": a.to(device, dtype), "b": b.to(device, dtype), "w": w.to(device, dtype)}

    def reference(self, case, inputs):
        a, b, w = inputs["a"], inputs["b"], inputs["w"]
        y = a * w + b * (1 - w)
        if case.name == "square":
            y = y * y
        return {"y": y}

    def work(self, case):
        p = case.params
        n = p.batch * p.channels * p.height * p.width
        return Work(bytes_moved=4 * 4 * n, flops=4 * n, units="elements", count=n)

    def tolerance(self, dtype_name):
        if dtype_name == "fp32":
            return Tolerance(1e-5, 1e-5)
        return super().tolerance(dtype_name)
