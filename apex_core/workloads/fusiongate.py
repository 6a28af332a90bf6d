"""fusiongate: blend a detail map into a base map through a gate computed from two proxies."""

from __future__ import annotations

import attrs
import torch
import torch.nn.functional as F

from apex_core.interfaces import ExportRecipe, Inputs, Outputs, Workload
from apex_core.results import Case, Tolerance, Work
from apex_core.workloads.common import (
    FP32_BYTES,
    NCHW_AXES,
    SeededRandom,
    check_fraction,
    check_shape,
    data_bytes,
    no_bf16_export,
    place,
    positive_int,
    suite_profiles,
    widened_tolerance,
)

# About 10 machine epsilons: base + alpha * (detail - base) cancels, and evaluated op by op
# in fp16/bf16 (as the torch-reference backend does) the error is about 1.5 eps * |detail -
# base| at worst; measured max over 200 seeds at the fixed profile: 4.56 eps (fp16), 4.75
# eps (bf16). fp32 (4.67 eps = 5.6e-7 measured) fits the default 1e-6.
_ATOL = {"fp16": 1e-2, "bf16": 8e-2}
_REASON = (
    "fused = base + alpha*(detail-base) cancels in fp16/bf16: up to 4.8 eps measured over "
    "200 seeds, 1.5 eps*|detail-base| analytic; atol set to about 10 eps"
)


def _sanitize(proxy: torch.Tensor) -> torch.Tensor:
    """NaN -> 0, +inf -> 1, -inf -> 0: a broken proxy must neither open nor poison the gate."""
    return torch.nan_to_num(proxy, nan=0.0, posinf=1.0, neginf=0.0)


def fusion_gate(
    boundary: torch.Tensor,
    uncertainty: torch.Tensor,
    base: torch.Tensor,
    detail: torch.Tensor,
    wb: torch.Tensor,
    wu: torch.Tensor,
    bias: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gate ``alpha [B,1,H,W]`` and ``fused = base + alpha * (detail - base)`` ``[B,C,H,W]``.

    ``alpha = sigmoid(softplus(wb) * boundary + softplus(wu) * uncertainty + bias)`` on
    sanitized proxies; ``wb``, ``wu``, ``bias`` are scalars (0-d tensors). Both results
    take the dtype of ``base``.
    """
    logits = F.softplus(wb) * _sanitize(boundary) + F.softplus(wu) * _sanitize(uncertainty)
    alpha = torch.sigmoid(logits + bias).to(base.dtype)
    fused = base + alpha * (detail - base)
    return alpha, fused.to(base.dtype)


@attrs.frozen(kw_only=True)
class FusionGateParams:
    """Parameters of fusiongate; the defaults are the fixed profile."""

    batch: int = positive_int(1)
    channels: int = positive_int(128)
    height: int = positive_int(128)
    width: int = positive_int(128)
    nonfinite_fraction: float = 0.01

    def __attrs_post_init__(self) -> None:
        check_fraction("nonfinite_fraction", self.nonfinite_fraction)


class FusionGate(Workload):
    """Sanitize two proxies, gate, and blend detail into base."""

    name = "fusiongate"
    description = "sigmoid gate from two sanitized proxies blends a detail map into a base map"
    params_type = FusionGateParams
    profiles = suite_profiles(FusionGateParams)
    implementations = {
        "triton": "adapters.triton_ops:FUSIONGATE",
        "jax": "adapters.jax_workloads.fusiongate:build",
    }

    def export_recipe(self, case: Case, dtype_name: str) -> ExportRecipe:
        """Every map over batch and image size; no bf16 export (its float32 scalars)."""
        if dtype_name == "bf16":
            return no_bf16_export("wb, wu, bias")
        return ExportRecipe({name: NCHW_AXES for name in ("boundary", "uncertainty", "base", "detail")})

    def make_inputs(self, case: Case, device: str, dtype: torch.dtype, seed: int) -> Inputs:
        """Proxies in [0, 1) with NaN/+Inf/-Inf injected, normal maps, scalar weights."""
        p: FusionGateParams = case.params
        rng = SeededRandom(seed)
        proxy_shape = (p.batch, 1, p.height, p.width)
        map_shape = (p.batch, p.channels, p.height, p.width)
        cpu = {
            "boundary": rng.inject_nonfinite(rng.uniform(proxy_shape), p.nonfinite_fraction),
            "uncertainty": rng.inject_nonfinite(rng.uniform(proxy_shape), p.nonfinite_fraction),
            "base": rng.normal(map_shape),
            "detail": rng.normal(map_shape),
            "wb": rng.uniform((), -2.0, 2.0),
            "wu": rng.uniform((), -2.0, 2.0),
            "bias": rng.uniform((), -1.0, 1.0),
        }
        return place(cpu, device, dtype, data=("boundary", "uncertainty", "base", "detail"))

    def reference(self, case: Case, inputs: Inputs) -> Outputs:
        """Gate and blend (see :func:`fusion_gate`)."""
        names = ("boundary", "uncertainty", "base", "detail", "wb", "wu", "bias")
        alpha, fused = fusion_gate(*(inputs[n] for n in names))
        return {"alpha": alpha, "fused": fused}

    def work(self, case: Case, dtype_name: str) -> Work:
        """Bytes: proxies, maps and scalars read once, alpha and fused written once.

        FLOPs: per pixel 2 mul + 2 add for the logit and 3 for the sigmoid (exp, add,
        divide); per element 3 (sub, mul, add). Sanitizing selects and the two scalar
        softplus evaluations are not counted.
        """
        p: FusionGateParams = case.params
        pixels = p.batch * p.height * p.width
        elements = pixels * p.channels
        # read boundary, uncertainty, base, detail; write alpha, fused
        bytes_moved = (3 * pixels + 3 * elements) * data_bytes(dtype_name) + 3 * FP32_BYTES
        flops = 7 * pixels + 3 * elements
        return Work(bytes_moved=bytes_moved, flops=flops, units="elements", count=elements)

    def tolerance(self, dtype_name: str) -> Tolerance:
        """Defaults, with atol about 10 eps in fp16/bf16 for the cancellation in ``fused``."""
        return widened_tolerance(dtype_name, _ATOL, _REASON)

    def validate_inputs(self, case: Case, inputs: Inputs) -> None:
        """Check shapes (every value of the proxies is legal: non-finite ones are sanitized)."""
        p: FusionGateParams = case.params
        for name in ("boundary", "uncertainty"):
            check_shape(name, inputs[name], (p.batch, 1, p.height, p.width))
        for name in ("base", "detail"):
            check_shape(name, inputs[name], (p.batch, p.channels, p.height, p.width))
        for name in ("wb", "wu", "bias"):
            check_shape(name, inputs[name], ())
