"""The apex_bench fixture in a test suite (docs/pytest.md).

    pytest examples/pytest -p no:cacheprovider --apex-bench-json kernels.json
    pytest examples/pytest -n 2 --apex-bench-compare kernels.json

Each call is timed as apex-bench times a cell (on the device its tensors live on) and checked
against its reference before and after timing; the test fails when the result is wrong, or,
with --apex-bench-compare, when it got slower than the baseline.
"""

import pytest
import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def gelu_reference(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.erf(x / 2.0**0.5))


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """The tanh approximation: faster, and within fp16's tolerance of the exact form."""
    return torch.nn.functional.gelu(x, approximate="tanh")


@pytest.mark.parametrize("n", [4096, 65536])
def test_gelu(apex_bench, n):
    dtype = torch.float16 if DEVICE == "cuda" else torch.float32
    x = torch.randn(n, device=DEVICE, dtype=dtype)
    out = apex_bench(gelu_tanh, x, reference=gelu_reference, atol=1e-3, rtol=1e-3)
    assert out.shape == x.shape


def test_scaled_add(apex_bench):
    a, b = torch.randn(2, 1 << 16, device=DEVICE)
    apex_bench(torch.add, a, b, alpha=0.5, reference=lambda a, b, alpha: a + alpha * b)
