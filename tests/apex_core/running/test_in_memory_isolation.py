"""Registry.from_objects with process isolation: the objects are pickled to the worker, or refused."""

from __future__ import annotations

import pytest

from apex_core.api import run
from apex_core.errors import UsageError
from apex_core.registry import Registry
from apex_core.results import Status
from apex_core.timing import TimingOptions
from tests.apex_core.fakes import Axpy, Eager

QUICK = TimingOptions(warmup=1, min_iters=3, min_time_s=0.0, max_time_s=0.2)


class Scaled(Eager):
    """A module-level backend with state set at construction: the worker must see the same state."""

    name = "scaled"

    def __init__(self, label: str) -> None:
        self.label = label

    def prepare(self, workload, case, inputs):
        prepared = super().prepare(workload, case, inputs)
        prepared.metadata["label"] = self.label
        return prepared


def test_in_memory_objects_run_in_the_worker_with_their_state():
    report = run(["axpy"], ["scaled", "eager"], device="cpu", timing=QUICK, isolation="process",
                 registry=Registry.from_objects([Scaled("made in the caller"), Eager()], [Axpy()]))
    assert report.cells and {c.status for c in report.cells} == {Status.OK}, [c.reason for c in report.cells]
    assert {c.metadata.get("label") for c in report.cells if c.backend == "scaled"} == {"made in the caller"}


def test_an_object_that_cannot_reach_the_worker_is_a_usage_error_before_any_cell():
    class Local(Eager):  # defined in a function: pickle cannot name its class
        name = "local"

    calls = []
    with pytest.raises(UsageError, match="define the class at module level"):
        run(["axpy"], ["local"], device="cpu", timing=QUICK, isolation="process",
            registry=Registry.from_objects([Local()], [Axpy()]), on_cell=lambda *a: calls.append(a))
    assert calls == []
    inline = run(["axpy"], ["local"], device="cpu", timing=QUICK, isolation="inline",
                 registry=Registry.from_objects([Local()], [Axpy()]))
    assert {c.status for c in inline.cells} == {Status.OK}
