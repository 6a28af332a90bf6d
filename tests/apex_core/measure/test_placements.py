"""A cell's inputs at several device addresses: who gets them, how they are made and checked.

The timing itself is CUDA's (the fake-clock test in test_cuda_timer.py takes samples from
several placements in turn); here the placements are made on the CPU with the CUDA memory
queries stood in for.
"""

import attrs
import pytest
import torch

from apex_core.interfaces import Prepared
from apex_core.measure import cell
from apex_core.measure.cell import CellSpec, _CellFailure, _more_placements
from apex_core.measure.placements import (
    MEMORY_SHARE,
    input_bytes,
    make_placements,
    padding_bytes,
    placements_to_add,
)
from apex_core.report.markdown import _placements_text
from apex_core.results import Case, CellResult, Status, Timing
from apex_core.stats import summarize
from apex_core.timing import MAX_PLACEMENTS, TimingOptions
from tests.apex_core.fakes import Axpy, AxpyParams, Eager


class Reprepares(Eager):
    """Prepares as often as asked; ``wrong_from`` makes every callable from that prepare on wrong."""

    name = "reprepares"
    reprepares = True

    def __init__(self, wrong_from: int | None = None) -> None:
        self.prepared = []
        self.wrong_from = wrong_from

    def prepare(self, workload, case, inputs):
        self.prepared.append(inputs)
        wrong = self.wrong_from is not None and len(self.prepared) >= self.wrong_from

        def run():
            y = workload.reference(case, inputs)["y"]
            return {"y": y + 1 if wrong else y}

        return Prepared(run)


class CudaAxpy(Axpy):
    """Axpy whose inputs stay on the CPU whatever device the cell names."""

    def make_inputs(self, case, device, dtype, seed):
        return super().make_inputs(case, "cpu", dtype, seed)


def cuda_spec(placements=4):
    options = TimingOptions(warmup=1, min_iters=2, min_time_s=0.0, max_time_s=0.1, placements=placements)
    return CellSpec("axpy", "small", "reprepares", "fp32", "cuda", {"n": 64}, seed=3, timing=options)


@pytest.fixture
def fake_cuda_memory(monkeypatch):
    """Plenty of free device memory, and padding that lives on the CPU."""
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (80 * 2**30, 80 * 2**30))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a: 0)
    monkeypatch.setattr(cell, "_padding", lambda size, device: torch.empty(size, dtype=torch.uint8))
    monkeypatch.setattr(cell, "synchronize", lambda device: None)


def first_placement(workload, backend, spec):
    case = Case("axpy", "small", AxpyParams(n=64))
    inputs = workload.make_inputs(case, spec.device, torch.float32, spec.seed)
    return case, inputs, backend.prepare(workload, case, inputs)


def test_placements_to_add_follow_the_backend_the_request_and_the_memory():
    inputs = {"x": torch.empty(2**20, dtype=torch.uint8)}
    eager, again = Eager(), Reprepares()
    prepared = Prepared(lambda: {})
    assert placements_to_add(4, again, prepared, inputs, None) == (3, "")
    assert placements_to_add(1, again, prepared, inputs, None) == (0, "")
    assert placements_to_add(4, eager, prepared, inputs, None) == (0, "")  # prepares once
    self_timed = Prepared(lambda: {}, measure=lambda options: None)
    assert placements_to_add(4, again, self_timed, inputs, None) == (0, "")
    each = input_bytes(inputs) + padding_bytes(3)
    # room for one more placement only: two of four, and the note says why
    count, note = placements_to_add(4, again, prepared, inputs, int(each * 1.5 / MEMORY_SHARE))
    assert count == 1 and note.startswith("2 input placements of 4") and "device memory free" in note
    count, note = placements_to_add(4, again, prepared, inputs, int(each * 0.5 / MEMORY_SHARE))
    assert count == 0 and note.startswith("1 input placement of 4")


def test_every_placement_pads_by_another_amount():
    sizes = [padding_bytes(i) for i in range(1, MAX_PLACEMENTS)]
    assert len(set(sizes)) == len(sizes) and len({s % 2**21 for s in sizes}) == len(sizes)


def test_make_placements_makes_new_inputs_prepares_on_them_and_runs_each_once():
    backend, workload = Reprepares(), Axpy()
    case = Case("axpy", "small", AxpyParams(n=64))
    calls, pads = [], []

    def new_inputs():
        made = workload.make_inputs(case, "cpu", torch.float32, 3)
        calls.append(made)
        return made

    placements, note = make_placements(3, workload, backend, case, new_inputs,
                                       lambda size: pads.append(size) or size)
    assert note == "" and [p.inputs for p in placements] == calls == backend.prepared
    assert pads == [padding_bytes(1), padding_bytes(2), padding_bytes(3)]
    assert [p.padding for p in placements] == pads
    # the same values (the cell's seed) in new tensors
    assert all(torch.equal(p.inputs["x"], calls[0]["x"]) for p in placements)
    assert len({p.inputs["x"].data_ptr() for p in placements}) == 3


def test_make_placements_keeps_those_made_when_the_device_runs_out_of_memory():
    backend, workload = Reprepares(), Axpy()
    case = Case("axpy", "small", AxpyParams(n=64))

    def padding(size):
        if size == padding_bytes(3):
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 24.01 MiB")
        return size

    placements, note = make_placements(3, workload, backend, case,
                                       lambda: workload.make_inputs(case, "cpu", torch.float32, 3), padding)
    assert len(placements) == 2 and note == "3 input placements of 4: the device ran out of memory making more"


def test_a_cuda_cell_gets_its_placements_each_checked(fake_cuda_memory, monkeypatch):
    workload, backend, spec = CudaAxpy(), Reprepares(), cuda_spec(placements=3)
    case, inputs, prepared = first_placement(workload, backend, spec)
    checked = []
    real_check = cell.check
    monkeypatch.setattr(cell, "check", lambda *args: checked.append(args[3]) or real_check(*args))
    record = {}
    placed = _more_placements(workload, backend, case, prepared, inputs, spec, True, record)
    assert len(placed.more) == 2 and placed.note == "" and len(backend.prepared) == 3
    assert checked == [p.inputs for p in placed.more]  # each placement's own inputs, before timing
    assert record == {}  # passing checks of the other placements add no records
    checked.clear()
    _more_placements(workload, backend, case, prepared, inputs, spec, False, record)  # unchecked workload
    assert checked == []


def test_a_placement_that_computes_wrong_fails_the_cell_naming_it(fake_cuda_memory):
    workload, backend, spec = CudaAxpy(), Reprepares(wrong_from=3), cuda_spec(placements=4)
    case, inputs, prepared = first_placement(workload, backend, spec)
    record = {}
    with pytest.raises(_CellFailure) as failure:
        _more_placements(workload, backend, case, prepared, inputs, spec, True, record)
    assert failure.value.status == Status.INCORRECT
    assert failure.value.reason.startswith("wrong result before-timing, input placement 3:")
    [accuracy] = record["accuracy"]  # the failing check is kept with the cell
    assert not accuracy.passed and accuracy.stage == "before-timing"
    assert accuracy.message.startswith("input placement 3: ")


def test_a_warm_cache_cell_keeps_one_placement(fake_cuda_memory):
    workload, backend = CudaAxpy(), Reprepares()
    warm = attrs.evolve(cuda_spec(), timing=attrs.evolve(cuda_spec().timing, cache="warm"))
    case, inputs, prepared = first_placement(workload, backend, warm)
    assert _more_placements(workload, backend, case, prepared, inputs, warm, True, {}).more == ()


def test_no_placements_on_the_cpu_for_one_or_for_a_backend_that_prepares_once(fake_cuda_memory):
    workload = CudaAxpy()
    case, inputs, prepared = first_placement(workload, Reprepares(), cuda_spec())
    cpu = CellSpec("axpy", "small", "reprepares", "fp32", "cpu", {"n": 64}, seed=3, timing=cuda_spec().timing)
    assert _more_placements(workload, Reprepares(), case, prepared, inputs, cpu, True, {}).more == ()
    assert _more_placements(workload, Reprepares(), case, prepared, inputs, cuda_spec(1), True, {}).more == ()
    assert _more_placements(workload, Eager(), case, prepared, inputs, cuda_spec(), True, {}).more == ()


@pytest.mark.parametrize("count", [0, MAX_PLACEMENTS + 1, True])
def test_placements_out_of_range_are_refused(count):
    with pytest.raises(ValueError, match="placements must be 1 to"):
        TimingOptions(placements=count)


def result(backend, placements):
    timing = Timing("cuda_event_held", "cold", (0.001,), summarize([0.001]), "noise", placements=placements)
    return CellResult(workload="w", case="c", backend=backend, dtype="fp16", device="cuda", status=Status.OK,
                      timing=timing)


def test_the_summary_names_the_backends_timed_over_several_placements():
    text = _placements_text([result("triton", 4), result("triton", 2), result("torch-compile", 1)])
    assert "(triton 2-4; the others one)" in text
    assert _placements_text([result("torch-compile", 1)]) == ""
    assert "(triton 4)" in _placements_text([result("triton", 4)])  # no others to speak of
