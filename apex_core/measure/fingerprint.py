"""Output fingerprints: a few numbers per tensor that survive another CPU's last bits.

Floating-point results of BLAS and vectorised math differ in their last bits between
CPUs (an Intel host's MKL path against an AMD one's), so reference outputs are never
hashed bit for bit. A floating tensor is summarised instead by its dtype, shape, counts
of NaN/+inf/-inf, its L1 norm and ``PROJECTIONS`` dot products with fixed random
weights in [-1, 1]; two fingerprints match when every number agrees within
``RTOL`` of the L1 norm. Rounding noise moves a projection by about 1e-16 of the norm;
a changed seed, parameter or formula moves it by far more than 1e-9 of it. Integer and
boolean tensors have no rounding, so they keep an exact sha256 (docs/replay.md).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any

import torch

PROJECTIONS = 4
# the weights are drawn with torch.rand in float64, which is the same on every CPU kernel level
PROJECTION_SEED = 20261126
# relative to the L1 norm: 1e7 times the drift measured across BLAS paths, far below a real change
RTOL = 1e-9


def _weights(numel: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(PROJECTION_SEED)
    return torch.rand(PROJECTIONS, numel, dtype=torch.float64, generator=generator) * 2 - 1


def tensor_fingerprint(tensor: torch.Tensor) -> dict[str, Any]:
    """The fingerprint of one tensor: exact for integers and booleans, summarised for floats."""
    cpu = tensor.detach().to("cpu").contiguous()
    head: dict[str, Any] = {"dtype": str(cpu.dtype).removeprefix("torch."), "shape": list(cpu.shape)}
    if not (cpu.is_floating_point() or cpu.is_complex()):
        data = cpu.numpy().tobytes() if cpu.numel() else b""
        return {**head, "sha256": hashlib.sha256(data).hexdigest()}
    values = torch.view_as_real(cpu) if cpu.is_complex() else cpu
    values = values.to(torch.float64).reshape(-1)
    finite = torch.isfinite(values)
    counts = [int(torch.isnan(values).sum()), int((values == math.inf).sum()),
              int((values == -math.inf).sum())]
    values = torch.where(finite, values, torch.zeros_like(values))
    projections = _weights(values.numel()) @ values
    return {**head, "nonfinite": counts, "l1": float(values.abs().sum()),
            "projections": [float(p) for p in projections]}


def tensors_fingerprint(tensors: Mapping[str, torch.Tensor]) -> dict[str, dict[str, Any]]:
    """``{name: fingerprint}`` of every tensor, sorted by name."""
    return {name: tensor_fingerprint(tensors[name]) for name in sorted(tensors)}


def _close(stored: float, fresh: float, scale: float, rtol: float) -> bool:
    return abs(stored - fresh) <= rtol * scale


def fingerprint_differences(stored: Mapping[str, Any], fresh: Mapping[str, Any],
                            rtol: float = RTOL) -> list[str]:
    """What differs between two tensor fingerprints, one phrase each (empty: they match)."""
    problems = [f"{part} {stored.get(part)} != {fresh.get(part)}"
                for part in ("dtype", "shape", "sha256", "nonfinite") if stored.get(part) != fresh.get(part)]
    if problems or "sha256" in fresh:
        return problems
    scale = max(abs(stored["l1"]), abs(fresh["l1"]))
    pairs = [("l1", stored["l1"], fresh["l1"])] + [
        (f"projection {i}", a, b) for i, (a, b) in enumerate(zip(stored["projections"],
                                                                   fresh["projections"], strict=True))]
    for label, a, b in pairs:
        if not _close(a, b, scale, rtol):
            problems.append(f"{label} {a!r} != {b!r} (relative to L1 {abs(a - b) / scale:.2e} > {rtol:.0e})")
    return problems


def fingerprints_differences(stored: Mapping[str, Mapping[str, Any]], fresh: Mapping[str, Mapping[str, Any]],
                             rtol: float = RTOL) -> list[str]:
    """What differs between two ``{name: fingerprint}`` maps, one line per tensor."""
    problems = [f"{name}: missing now" for name in sorted(set(stored) - set(fresh))]
    problems += [f"{name}: new output" for name in sorted(set(fresh) - set(stored))]
    for name in sorted(set(stored) & set(fresh)):
        found = fingerprint_differences(stored[name], fresh[name], rtol)
        if found:
            problems.append(f"{name}: " + "; ".join(found))
    return problems
