"""Call a bound kernel several times on fresh inputs with poisoned outputs; check every call.

This is the check the runner makes, repeated: an autotuned grid that covers the output
for one configuration only, or a launcher that reads stale inputs, fails on a later call.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import torch

from apex_core.correctness import DTYPES, compare_outputs, poison_, upcast_inputs
from apex_core.interfaces import Workload
from apex_core.results import Case
from tests.conftest import KERNEL_DEVICE

Mutate = Callable[[dict[str, torch.Tensor]], None]
DEVICE = KERNEL_DEVICE  # "cuda": the kernels compiled and run on a GPU (tests/conftest.py)


def check_repeated_calls(workload: Workload, case: Case, dtype_name: str, bind: Callable,
                         *, calls: int = 3, build_seed: int = 0, first_seed: int = 100,
                         mutate: Mutate | None = None, outputs_in_data_dtype: bool = False,
                         **options: Any) -> dict:
    """Bind the case (``bind(workload, case, inputs, **options)``, as the triton backend
    does), run it ``calls`` times and compare each result; returns the launcher's metadata."""
    dtype = DTYPES[dtype_name]
    inputs = workload.make_inputs(case, DEVICE, dtype, seed=build_seed)
    launcher = bind(workload, case, inputs, **options)
    fn, outputs, metadata = launcher.run, launcher.outputs, launcher.metadata
    json.dumps(metadata)  # the backend stores it in the report
    buffers = {name: t.data_ptr() for name, t in outputs.items()}
    for call in range(calls):
        fresh = workload.make_inputs(case, DEVICE, dtype, seed=first_seed + call)
        if mutate is not None:
            mutate(fresh)
        workload.validate_inputs(case, fresh)
        for name, tensor in fresh.items():
            inputs[name].copy_(tensor)  # in place, as the runner refreshes them
        poison_(outputs)
        got = fn()
        reference = workload.reference(case, upcast_inputs(inputs, torch.float64))
        assert set(got) == set(reference) == set(outputs)
        assert all(got[name] is outputs[name] for name in outputs), "outputs must be the buffers"
        assert {name: t.data_ptr() for name, t in got.items()} == buffers
        if outputs_in_data_dtype:
            assert all(t.dtype == dtype for t in got.values())
        accuracy = compare_outputs(got, reference, workload.tolerance(dtype_name), f"call {call}")
        assert accuracy.passed, f"{case.id} {dtype_name} call {call}: {accuracy.message}"
    return metadata
