"""A third-party workload that uses every workload hook: its own profiles, an ONNX export recipe,
its own throughput unit and dtype-aware work counts.

``test-affine``: ``y[r, c] = x[r, c] * scale[c] + shift[c]`` over ``rows`` samples of ``cols``
features. Its field names are its own (no ``channels`` or ``height``), so the suite's sizes
cannot reach it; ``--profile smoke`` takes its own smoke profile.
"""

from __future__ import annotations

import attrs
import torch

from apex_core.interfaces import ExportRecipe, Workload
from apex_core.results import Work

_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}


@attrs.frozen(kw_only=True)
class AffineParams:
    """Parameters of test-affine; the defaults are its fixed profile."""

    rows: int = attrs.field(default=256, validator=attrs.validators.ge(1))
    cols: int = attrs.field(default=64, validator=attrs.validators.ge(1))


class AffineWorkload(Workload):
    """Per-feature scale and shift of a batch of samples."""

    name = "test-affine"
    description = "per-feature x * scale + shift over rows of samples (third-party, exports to ONNX)"
    params_type = AffineParams
    profiles = {"smoke": {"rows": 6, "cols": 5}, "large": {"rows": 65536, "cols": 1024}}

    def make_inputs(self, case, device, dtype, seed):
        gen = torch.Generator().manual_seed(seed)
        p = case.params
        x = torch.rand((p.rows, p.cols), generator=gen) * 2 - 1
        scale = torch.rand((p.cols,), generator=gen) + 0.5
        shift = torch.rand((p.cols,), generator=gen) - 0.5
        return {name: t.to(device, dtype) for name, t in (("x", x), ("scale", scale), ("shift", shift))}

    def reference(self, case, inputs):
        return {"y": inputs["x"] * inputs["scale"] + inputs["shift"]}

    def work(self, case, dtype_name):
        p = case.params
        elements = p.rows * p.cols
        bytes_moved = (2 * elements + 2 * p.cols) * _BYTES[dtype_name]  # x, y; scale, shift
        return Work(bytes_moved=bytes_moved, flops=2 * elements, units="samples", count=p.rows)

    def export_recipe(self, case, dtype_name):
        # the trace holds no loop over rows, so the sample count may vary in the exported graph
        return ExportRecipe({"x": {0: "rows"}}, note="cols fixed: scale and shift have one value per column")
