"""Programmatic dependent launch: the flag and the kernel's wait never come apart."""

import inspect

import pytest
import torch

from adapters import triton_ops
from apex_core.workloads.ff_infer import FFInfer
from apex_kernels._dependent import chain, dependent, dependent_launches_run_on
from apex_kernels._utils import KernelLaunch


def test_a_dependent_launch_sets_the_launch_flag_and_the_kernel_s_wait_together() -> None:
    workload = FFInfer()
    case = workload.cases(workload.make_params("smoke", {}))[0]
    launcher = triton_ops.FF_INFER.bind(workload, case, workload.make_inputs(case, "cpu", torch.float32, 0))
    # every launch is one ff-infer starts dependently on a GPU that can: each kernel must take
    # PDL, or it would read before the kernel ahead of it has written
    for launch in launcher.launches:
        started = dependent(launch)
        assert started.meta["launch_pdl"] is True and started.meta["PDL"] == 1
        body = launch.kernel
        while hasattr(body, "fn"):  # the autotuner, then the jit (or interpreted) function
            body = body.fn
        assert "PDL" in inspect.signature(body).parameters, launch.kernel_name
        assert {k: v for k, v in started.meta.items() if k not in ("PDL", "launch_pdl")} == launch.meta


@pytest.mark.interpreter
def test_no_dependent_launches_on_the_cpu_or_in_the_interpreter() -> None:
    assert not dependent_launches_run_on(torch.device("cpu"))
    workload = FFInfer()
    case = workload.cases(workload.make_params("smoke", {}))[0]
    launcher = triton_ops.FF_INFER.bind(workload, case, workload.make_inputs(case, "cpu", torch.float32, 0))
    assert all("launch_pdl" not in launch.meta for launch in launcher.launches)
    assert launcher.metadata["dependent_launch"] is False


def test_a_chain_issues_its_first_call_plainly_and_every_later_one_dependently() -> None:
    # the first call is when an autotuner meets its key: its configurations must be timed as they
    # run alone, not with their repeats' launches overlapped
    issued: list[object] = []

    class Kernel:  # records how each launch was started
        def __getitem__(self, grid):
            return lambda *args, **meta: issued.append(meta.get("launch_pdl", False))

    launch = KernelLaunch("op", Kernel(), (1,), (), {}, "bucket")
    steps = [launch, lambda: issued.append("cublas"), launch]
    run = chain(steps, pdl=True)
    for _ in range(3):
        run()
    assert issued == [False, "cublas", False] + [True, "cublas", True] * 2
    issued.clear()
    plain = chain(steps, pdl=False)
    plain()
    plain()
    assert issued == [False, "cublas", False] * 2
