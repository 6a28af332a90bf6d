"""torch-compile prepares again for another input placement without compiling again."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.utils import counters

from adapters.torch_compile import TorchCompileBackend
from tests.apex_core.fakes import Axpy

# torch 2.13's compile path calls a deprecated torch.jit API of its own, not this project's
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")

WORKLOAD = Axpy()
CASE = WORKLOAD.cases(WORKLOAD.make_params("fixed", {}))[0]


@pytest.fixture
def backend() -> TorchCompileBackend:
    backend = TorchCompileBackend()
    availability = backend.probe("cpu")
    if not availability.ok:
        pytest.skip(availability.reason)
    yield backend
    torch._dynamo.reset()


def graphs() -> int:
    return counters["stats"]["unique_graphs"]


def test_the_same_cell_on_inputs_made_again_reuses_its_compile(backend: TorchCompileBackend) -> None:
    first_inputs = WORKLOAD.make_inputs(CASE, "cpu", torch.float32, seed=3)
    first = backend.prepare(WORKLOAD, CASE, first_inputs)
    first.fn()
    compiled = graphs()
    again = WORKLOAD.make_inputs(CASE, "cpu", torch.float32, seed=3)  # another placement: same values
    again["x"].mul_(2)  # told apart by their results
    second = backend.prepare(WORKLOAD, CASE, again)
    assert torch.equal(second.fn()["y"], WORKLOAD.reference(CASE, again)["y"])
    assert torch.equal(first.fn()["y"], WORKLOAD.reference(CASE, first_inputs)["y"])  # still valid
    assert graphs() == compiled  # nothing traced or compiled again


def test_another_cell_or_other_inputs_compile_anew(backend: TorchCompileBackend) -> None:
    inputs = WORKLOAD.make_inputs(CASE, "cpu", torch.float32, seed=3)
    backend.prepare(WORKLOAD, CASE, inputs).fn()
    compiled = graphs()
    double = WORKLOAD.make_inputs(CASE, "cpu", torch.float64, seed=3)  # another cell's dtype
    assert torch.equal(backend.prepare(WORKLOAD, CASE, double).fn()["y"], WORKLOAD.reference(CASE, double)["y"])
    assert graphs() == compiled + 1
    other_case = WORKLOAD.cases(WORKLOAD.make_params("fixed", {}))[1]
    backend.prepare(WORKLOAD, other_case, WORKLOAD.make_inputs(other_case, "cpu", torch.float32, seed=3)).fn()
    assert graphs() == compiled + 2


def test_it_is_timed_over_several_placements() -> None:
    assert TorchCompileBackend.reprepares
