"""One cell, run inline: every outcome lands with the right status and reason."""

import pytest

from apex_core.measure.cell import CellSpec, execute_cell
from apex_core.plan import build_plan
from apex_core.registry import Registry
from apex_core.results import SkipKind, Status
from apex_core.running.runner import run_plan
from apex_core.timing import TimingOptions
from tests.apex_core.fakes import Axpy, Eager, Flaky, Picky, Preallocated, Raising, Unavailable

FAST = TimingOptions(warmup=2, min_iters=5, min_time_s=0.0, max_time_s=0.2)


def spec(backend="eager", dtype="fp32"):
    return CellSpec("axpy", "small", backend, dtype, "cpu", {"n": 64, "height": 8, "tile_size": 4},
                    seed=3, timing=FAST)


def test_ok_cell_has_timing_accuracy_and_derived_rates():
    result = execute_cell(Axpy(), Eager(), spec())
    assert result.status == Status.OK, result.reason
    assert result.timing.stats.n >= 5 and result.timing.method == "cpu_perf_counter"
    assert [a.stage for a in result.accuracy] == ["before-timing", "after-timing"]
    assert all(a.passed for a in result.accuracy)
    assert result.derived.units == "elements" and result.derived.units_per_s > 0
    assert result.build_time_s >= 0 and result.input_memory_mb > 0


def test_half_precision_cell_passes_with_fp16_tolerance():
    assert execute_cell(Axpy(), Eager(), spec(dtype="fp16")).status == Status.OK


def test_raise_in_prepare_is_an_error_with_type_and_message():
    result = execute_cell(Axpy(), Raising("prepare"), spec("raising"))
    assert result.status == Status.ERROR
    assert result.reason == "RuntimeError during prepare: compiler exploded"
    assert "Traceback" in result.log and result.timing is None


def test_raise_in_timed_call_is_an_error():
    result = execute_cell(Axpy(), Raising("call"), spec("raising"))
    assert result.status == Status.ERROR
    assert result.reason.startswith("ValueError during prepare: bad launch")


def test_unwritten_output_is_caught_by_poisoning():
    assert execute_cell(Axpy(), Preallocated(), spec("prealloc")).status == Status.OK
    result = execute_cell(Axpy(), Preallocated(skip=True), spec("prealloc"))
    assert result.status == Status.INCORRECT
    assert "non-finite" in result.reason and result.timing is None


def test_wrong_after_warmup_is_caught_inside_the_timing_loop():
    result = execute_cell(Axpy(), Flaky(), spec("flaky"))
    assert result.status == Status.INCORRECT
    # the first timed call is spot-checked on fresh inputs, before the check after timing
    assert "wrong result in the timed call on fresh input set 1 of 3" in result.reason
    assert result.timing is None  # a wrong answer is never reported as a speed


def test_run_plan_records_skips_with_reasons():
    registry = Registry.from_objects([Eager(), Unavailable(), Picky()], [Axpy()])
    plan = build_plan(registry, backends=["eager", "unavail", "picky"], timing=FAST)
    report = run_plan(plan, registry, isolation="inline", environment={"device": "cpu"})
    by = {(c.case, c.backend): c for c in report.cells}
    assert by[("small", "eager")].status == Status.OK
    assert by[("small", "unavail")].skip_kind == SkipKind.UNAVAILABLE
    assert by[("small", "unavail")].reason == "libfoo missing"
    assert by[("large", "picky")].skip_kind == SkipKind.UNSUPPORTED
    assert by[("small", "picky")].status == Status.OK
    assert report.status == "complete" and len(report.cells) == 6


def test_isolation_must_be_known():
    registry = Registry.from_objects([Eager()], [Axpy()])
    with pytest.raises(ValueError):
        run_plan(build_plan(registry), registry, isolation="thread", environment={})


@pytest.mark.parametrize(("how", "dtype", "fragment"), [
    ("mutate", "fp32", "the call changed its input 'x'"),
    ("float64", "fp16", "output 'y' is float64, the cell is float16"),
    ("float64", "fp32", "output 'y' is float64, the cell is float32"),
    ("not_tensor", "fp32", "output 'y' is list, expected a torch.Tensor"),
    ("not_mapping", "fp32", "the call returned Tensor, expected a dict of output tensors"),
])
def test_answers_wrong_in_form_are_incorrect_with_the_reason(how, dtype, fragment):
    from tests.apex_core.fakes import Cheating

    result = execute_cell(Axpy(), Cheating(how), spec("cheat", dtype=dtype))
    assert result.status == Status.INCORRECT, result.reason
    assert fragment in result.reason and result.timing is None


def test_a_float32_state_in_a_half_precision_cell_is_allowed():
    import torch

    from apex_core.correctness import output_problem

    half = {"y": torch.zeros(2, dtype=torch.float16), "state": torch.zeros(2)}
    assert output_problem(half, torch.float16) == ""
    assert "bfloat16" in output_problem({"y": torch.zeros(2, dtype=torch.bfloat16)}, torch.float16)


@pytest.mark.parametrize(("how", "named"), [
    ("dtype", "torch default dtype"), ("threads", "torch thread count"),
    ("deterministic", "torch deterministic mode"), ("grad", "torch grad mode"),
    ("cwd", "working directory"), ("environ", "environment variables"), ("rlimit", "address-space limit"),
])
def test_process_state_a_backend_changes_is_restored_and_named(tmp_path, how, named):
    import os

    import torch

    from apex_core.measure import process_state
    from tests.apex_core.fakes import StateChanging

    before = process_state.capture()
    result = execute_cell(Axpy(), StateChanging(how, str(tmp_path)), spec("state"))
    after = process_state.capture()
    assert result.status == Status.OK, result.reason
    # (torch's own setters may touch environment variables too: those are restored as well)
    assert named in result.metadata["process_state_restored"]
    fields = ("default_dtype", "threads", "deterministic", "grad_enabled", "cwd", "rlimit_as", "environ")
    assert [getattr(after, f) for f in fields] == [getattr(before, f) for f in fields]
    assert "APEX_LEAKED" not in os.environ and torch.get_default_dtype() == torch.float32
    # the next cell in the same process sees none of it
    assert "process_state_restored" not in execute_cell(Axpy(), Eager(), spec()).metadata


def test_metadata_that_cannot_cross_to_the_run_makes_an_error_naming_the_key():
    from apex_core.results import CellResult
    from apex_core.running.workers import sendable

    fine = CellResult("w", "c", "b", "fp32", "cpu", Status.OK, metadata={"config": {"BLOCK": 64}})
    assert sendable(fine) is fine
    bad = CellResult("w", "c", "b", "fp32", "cpu", Status.OK, metadata={"config": 1, "handle": lambda: None})
    result = sendable(bad)
    assert result.status == Status.ERROR and "'handle'" in result.reason and "plain data" in result.reason
    assert result.metadata == {"config": 1}


def test_a_library_call_prints_no_traceback_of_a_failed_cell():
    # in a child process: pytest's own log capture would hide Python's last-resort handler
    import subprocess
    import sys

    from tests.conftest import ROOT

    code = ("import apex_core; from apex_core.registry import Registry;"
            "from apex_core.timing import TimingOptions; from tests.apex_core.fakes import Axpy, Raising;"
            "r = apex_core.run(['axpy'], ['raising'], device='cpu', isolation='inline',"
            " timing=TimingOptions(warmup=1, min_iters=2, min_time_s=0, max_time_s=0.1),"
            " registry=Registry.from_objects([Raising('call')], [Axpy()]));"
            "print(r.cells[0].status)")
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert child.returncode == 0 and child.stdout.strip() == "error", child.stderr
    assert "Traceback" not in child.stderr and child.stderr.strip() == ""
