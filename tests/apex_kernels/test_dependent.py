"""Programmatic dependent launch: the flag and the kernel's wait never come apart."""

import pytest
import torch

from adapters import triton_ops
from apex_core.workloads.ff_infer import FFInfer
from apex_kernels._dependent import dependent, dependent_launches_run_on


def test_a_dependent_launch_sets_the_launch_flag_and_the_kernel_s_wait_together() -> None:
    workload = FFInfer()
    case = workload.cases(workload.make_params("smoke", {}))[0]
    launcher = triton_ops.FF_INFER.bind(workload, case, workload.make_inputs(case, "cpu", torch.float32, 0))
    # every launch after the first (the selection, which follows the flush) is one ff-infer would
    # start dependently on a GPU that can: each kernel must take PDL, or it would read early
    for launch in launcher.launches[1:]:
        started = dependent(launch)
        assert started.meta["launch_pdl"] is True and started.meta["PDL"] == 1
        jit = getattr(launch.kernel, "fn", launch.kernel)
        assert "PDL" in jit.arg_names, launch.kernel_name
        assert {k: v for k, v in started.meta.items() if k not in ("PDL", "launch_pdl")} == launch.meta


@pytest.mark.interpreter
def test_no_dependent_launches_on_the_cpu_or_in_the_interpreter() -> None:
    assert not dependent_launches_run_on(torch.device("cpu"))
    workload = FFInfer()
    case = workload.cases(workload.make_params("smoke", {}))[0]
    launcher = triton_ops.FF_INFER.bind(workload, case, workload.make_inputs(case, "cpu", torch.float32, 0))
    assert all("launch_pdl" not in launch.meta for launch in launcher.launches)
