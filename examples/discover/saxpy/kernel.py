"""saxpy: the computation under test and its torch reference (see bench.yaml beside this file)."""

import torch


def saxpy(x: torch.Tensor, y: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """The implementation being benchmarked: one fused multiply-add per element, in the inputs' dtype."""
    return torch.addcmul(y, x, a.to(x.dtype))


def saxpy_reference(x: torch.Tensor, y: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """The semantics: out = a * x + y."""
    return a.to(x.dtype) * x + y
