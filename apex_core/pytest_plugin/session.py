"""A test run's timed calls: each measured as a cell, gated, and written as one report at the end."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import filelock
import torch

from apex_core.correctness import DTYPES, compare_outputs, output_problem, reference_dtype, upcast_inputs
from apex_core.errors import ApexBenchError
from apex_core.history.paths import git_revision
from apex_core.history.store import HistoryStore
from apex_core.measure import replay_artifacts
from apex_core.measure.cell import CellSpec, execute_cell
from apex_core.measure.environment import capture_environment
from apex_core.pytest_plugin.call_cell import (
    Call,
    CallBackend,
    CallWorkload,
    as_outputs,
    device_of,
    dtype_name,
    tolerance,
)
from apex_core.pytest_plugin.gate import CellGate
from apex_core.report.records import report_record
from apex_core.report.writer import ReportWriter
from apex_core.results import Case, CellResult, Report, Status
from apex_core.running.autotune import summarize_autotune
from apex_core.running.runner import utc_now
from apex_core.timing import TimingOptions

SUITE = "pytest"
# A test run has no profile or dtype selection of its own: these stand in the report's config, the
# same in every run of a suite, so that any two of its runs compare.
PROFILE = "pytest"


@attrs.frozen
class CallSite:
    """Which call of a test a cell is: the test, the function, and the how-many-th call of it."""

    nodeid: str
    function: str
    number: int
    reference: Callable[..., Any] | None = None
    atol: float | None = None
    rtol: float | None = None

    @property
    def workload(self) -> str:
        """The test id as a workload name; a report's names hold no ``/`` (they key the replay block)."""
        return self.nodeid.replace("/", ".")

    @property
    def case(self) -> str:
        return "default" if self.number == 1 else f"call{self.number}"


@contextlib.contextmanager
def timing_on(device: torch.device) -> Iterator[None]:
    """Hold ``device`` for one cell: one timing at a time on it across processes (pytest-xdist
    workers), with the device current for the cell's timers."""
    name = "cpu"
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        # the card's own id: workers that see it under different indices still share its lock
        name = f"cuda-{getattr(torch.cuda.get_device_properties(index), 'uuid', index)}"
    with filelock.FileLock(Path(tempfile.gettempdir()) / f"apex-bench-timing-{name}.lock"):
        if device.type == "cuda":
            with torch.cuda.device(device):
                yield
        else:
            yield


class Session:
    """The cells a test process measured, and what the controller writes once the tests end."""

    def __init__(self, timing: TimingOptions, disabled: bool = False, gate: CellGate | None = None) -> None:
        self.timing = timing
        self.disabled = disabled
        self.gate = gate
        self.cells: list[CellResult] = []
        self.environment: dict[str, Any] | None = None
        self.started = utc_now()
        self.notes: list[str] = []  # what the end of the run could not write, for the summary
        self.failed_writes = False

    def measure(self, site: CallSite, fn: Callable[..., Any], args: tuple[Any, ...],
                kwargs: Mapping[str, Any]) -> tuple[Any, list[str]]:
        """Call ``fn`` (its exceptions reach the test as they are), then time and check it as a cell;
        returns its output and why the test fails (nothing when it passes)."""
        __tracebackhide__ = True  # a failure shows the test's frames and fn's, not the harness's
        output = fn(*args, **kwargs)
        call = Call(fn, args, dict(kwargs))
        try:
            dtype = dtype_name(call.inputs)
        except ValueError as exc:
            return output, [str(exc)]
        device, outputs = device_of(call.inputs), as_outputs(output)
        workload = CallWorkload(site.workload, site.case, call, site.reference,
                                tolerance(dtype, site.atol, site.rtol), outputs)
        backend = CallBackend(site.function, call)
        if self.disabled:
            return output, _checked_once(workload, outputs, dtype, device)
        spec = CellSpec(workload=site.workload, case=site.case, backend=site.function, dtype=dtype,
                        device=device.type, params={}, seed=0, timing=self.timing)
        if self.environment is None:
            self.environment = capture_environment(device.type, measure_device=False)
        with timing_on(device):
            cell = execute_cell(workload, backend, spec)
        replay_artifacts.clear_cache()  # it holds the workload, and with it the test's tensors
        self.cells.append(cell)
        if cell.status != Status.OK:
            return output, [f"apex_bench: {site.function} in {site.nodeid} is {cell.status}: {cell.reason}"]
        if self.gate is None:
            return output, []
        return output, self.gate.failures(cell, self.report((cell,), "complete"))

    def add(self, environment: dict[str, Any] | None, cells: Sequence[CellResult]) -> None:
        """A worker's cells (pytest-xdist), joining the controller's."""
        self.environment = self.environment or environment
        self.cells.extend(cells)

    def report(self, cells: Sequence[CellResult], status: str) -> Report:
        environment = self.environment or capture_environment("cpu", measure_device=False)
        config = {"backends": sorted({c.backend for c in cells}),
                  "workloads": sorted({c.workload for c in cells}),
                  "device": environment["device"], "dtypes": list(DTYPES), "profile": PROFILE,
                  "overrides": {}, "seed": 0, "timing": attrs.asdict(self.timing), "backend_options": {}}
        return Report(suite=SUITE, timestamp_utc=self.started, environment=environment, config=config,
                      status=status, cells=tuple(cells), triton_autotune=summarize_autotune(tuple(cells)))

    def finish(self, json_path: Path | None, history_path: Path | None, interrupted: bool) -> None:
        """Write the run's report and record it in the history, as asked; failures become notes."""
        if json_path is None and history_path is None:
            return
        cells = sorted(self.cells, key=lambda c: (c.workload, c.case, c.backend, c.dtype))
        report = self.report(cells, "interrupted" if interrupted else "complete")
        if json_path is not None:
            writer = ReportWriter({"json": json_path})
            writer.write(report)
            self._note(writer.failure or f"report {json_path}", failed=bool(writer.failure))
        if history_path is None:
            return
        if not cells:
            self._note(f"history {history_path}: no timed call to record")
            return
        revision = git_revision()
        try:
            with HistoryStore.open(history_path) as history:
                run_id = history.record(report_record(report), commit=revision.commit, branch=revision.branch)
            self._note(f"recorded as run {run_id} in {history_path}")
        except ApexBenchError as exc:
            self._note(str(exc), failed=True)

    def _note(self, text: str, failed: bool = False) -> None:
        self.notes.append(f"error: {text}" if failed else text)
        self.failed_writes = self.failed_writes or failed

    def summary_lines(self) -> list[str]:
        """One line per timed call, then what was written where."""
        rows = [(f"{c.workload}{'' if c.case == 'default' else ' ' + c.case}", c.backend, c.dtype, c.device,
                 _p50(c) if c.status == Status.OK else str(c.status)) for c in self.cells]
        widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(HEADER)]
        table = [" ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
                 for row in ([HEADER] if rows else []) + rows]
        return table + self.notes


HEADER = ("test", "function", "dtype", "device", "p50")


def _p50(cell: CellResult) -> str:
    assert cell.timing is not None
    ms = cell.timing.stats.p50
    return f"{ms * 1e3:.3g} us" if ms < 1 else f"{ms:.4g} ms"


def _checked_once(workload: CallWorkload, outputs: Any, dtype: str, device: torch.device) -> list[str]:
    """``--apex-bench-disable``: the test's one call compared with the reference, nothing timed."""
    case = Case(workload.name, workload.case_names[0], workload.params_type())
    if workload.unchecked_reason(case):
        return []
    problem = output_problem(outputs, DTYPES[dtype])
    if problem:
        return [f"apex_bench: {problem}"]
    inputs = workload.make_inputs(case, device.type, DTYPES[dtype], 0)
    with torch.no_grad():
        reference = workload.reference(case, upcast_inputs(inputs, reference_dtype(device.type)))
    accuracy = compare_outputs(outputs, reference, workload.tolerance(dtype), "check")
    return [] if accuracy.passed else [f"apex_bench: wrong result: {accuracy.message}"]
