"""Programmatic dependent launch: the flag and the kernel's wait never come apart."""

import inspect
from dataclasses import replace

import pytest
import torch

from adapters import triton_ops
from apex_core.workloads.ff_infer import FFInfer
from apex_kernels import ff_infer
from apex_kernels._dependent import dependent, dependent_launches_run_on
from apex_kernels._utils import KernelLaunch, sequential


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


def test_the_gate_starts_at_once_among_level_0_s_steps_and_waits_before_it_ends(monkeypatch) -> None:
    # bound as on a GPU that launches dependently (binding launches nothing)
    monkeypatch.setattr(ff_infer, "dependent_launch_reason", lambda *_: None)
    workload = FFInfer()
    case = workload.cases(workload.make_params("smoke", {}))[0]
    launcher = triton_ops.FF_INFER.bind(workload, case, workload.make_inputs(case, "cpu", torch.float32, 0))
    names = [launch.kernel_name for launch in launcher.launches]
    # the smoke frame is ranked inside level 0's tile means: no selection kernel first
    level0 = ["_select_tile_mean_kernel", "_ssm_scan_kernel", "_token_mlp_kernel", "_fusiongate_kernel",
              "_modulate_dw_vec_kernel", "_pointwise_mix_kernel", "_norm_gate_kernel"]
    assert names[:7] == level0
    assert "_fusiongate_kernel" not in names[7:]
    for launch in launcher.launches:
        at_once = launch.kernel_name == "_fusiongate_kernel"
        assert launch.meta["PDL"] == (2 if at_once else 1), launch.kernel_name
        body = launch.kernel
        while hasattr(body, "fn"):
            body = body.fn
        # started at once, it must end after the kernel before it, or the next one could run first
        assert ("await_previous_at_end(PDL)" in inspect.getsource(body)) or not at_once


@pytest.mark.interpreter
def test_no_dependent_launches_on_the_cpu_or_in_the_interpreter() -> None:
    assert not dependent_launches_run_on(torch.device("cpu"))
    workload = FFInfer()
    case = workload.cases(workload.make_params("smoke", {}))[0]
    launcher = triton_ops.FF_INFER.bind(workload, case, workload.make_inputs(case, "cpu", torch.float32, 0))
    assert all("launch_pdl" not in launch.meta for launch in launcher.launches)
    assert launcher.metadata["dependent_launch"] is False


def test_a_call_issues_its_steps_in_order_each_as_it_was_bound() -> None:
    issued: list[object] = []

    class Kernel:  # records how each launch was started
        def __getitem__(self, grid):
            return lambda *args, **meta: issued.append((args, meta.get("launch_pdl", False)))

    plain = KernelLaunch("op", Kernel(), (1,), (1,), {}, "bucket")
    outputs: dict = {}
    run = sequential([plain, lambda: issued.append("cublas"), dependent(replace(plain, args=(2,)))], outputs)
    assert run() is outputs
    run()
    assert issued == [((1,), False), "cublas", ((2,), True)] * 2


@pytest.mark.parametrize(("shape", "dependent_launch"), [
    ((1, 128, 128, 128), True),  # the fixed profile: 4 MiB, measured 28-29 % less time so (H200)
    ((8, 256, 512, 512), False),  # the large one: 1 GiB, measured 2.7-5.5 % slower so
])
def test_ff_infer_launches_dependently_only_where_its_maps_fit_in_the_l2(monkeypatch, shape,
                                                                         dependent_launch) -> None:
    class H200:
        L2_cache_size = 60 * 2**20

    monkeypatch.setattr(ff_infer, "dependent_launches_run_on", lambda device: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: H200())
    features = torch.empty(shape, dtype=torch.float16, device="meta")
    reason = ff_infer.dependent_launch_reason(features, torch.device("cuda"))
    assert (reason is None) == dependent_launch
    if reason:
        assert "(2048 MiB) do not fit in the L2 (60 MiB)" in reason
