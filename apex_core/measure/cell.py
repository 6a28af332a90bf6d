"""Run one cell in the current process: prepare, check, measure, check again, derive.

The cell never raises: every failure becomes a ``CellResult`` with a status and
a one-line reason; the traceback travels in ``CellResult.log`` for the log file.
"""

from __future__ import annotations

import math
import time
import traceback
from typing import Any

import attrs
import torch

from apex_core import clocks
from apex_core.backend_options import configure
from apex_core.correctness import (
    DTYPES,
    changed_inputs,
    compare_outputs,
    output_problem,
    poison_,
    reference_dtype,
    upcast_inputs,
    write_inputs_,
)
from apex_core.errors import first_line
from apex_core.interfaces import Backend, CellSkipped, Inputs, Prepared, Workload
from apex_core.measure import host_load, integrity, process_state, replay_artifacts, spot_checks, timing_stream
from apex_core.measure.cpu_memory import RssPeak, earlier_garbage_kept
from apex_core.measure.cuda_timer import measure_cuda
from apex_core.measure.device_health import release_cached_blocks
from apex_core.measure.placements import Placement, input_bytes, make_placements, placements_to_add
from apex_core.measure.spot_checks import SpotChecks, SpotWrong
from apex_core.plugin_api import work_of
from apex_core.results import Accuracy, Case, CellResult, Derived, SkipKind, Status, Telemetry, Timing, Work
from apex_core.timing import TimingOptions, measure_cpu

# how measure_cuda reads peak memory: the caching allocator's peak over the timed region
CUDA_PEAK_METHOD = "cuda_max_memory_allocated"

# Seeds of the check runs, offset from the cell's seed so each check sees fresh data.
_CHECK_BEFORE_SEED_OFFSET = 1
_CHECK_AFTER_SEED_OFFSET = 2
_SPOT_SEED_OFFSET = 3  # the spot checks' fresh sets: 3, 4, 5


@attrs.frozen
class CellSpec:
    """Everything a worker needs to run one cell, by name (picklable)."""

    workload: str
    case: str
    backend: str
    dtype: str
    device: str
    params: dict[str, Any]
    seed: int
    timing: TimingOptions
    # the options of this cell's backend (Plan.backend_options[backend]), plain data
    backend_options: dict[str, Any] = attrs.field(factory=dict)


class _CellFailure(Exception):
    """Carries the status and reason of a failed stage out of the cell's steps."""

    def __init__(self, status: Status, reason: str, log: str = "",
                 skip_kind: SkipKind | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.log = log
        self.skip_kind = skip_kind


def is_device_poisoning(exc: BaseException) -> bool:
    """True for errors after which the CUDA context cannot be trusted (the worker must go)."""
    accelerator_error = getattr(torch, "AcceleratorError", None)
    if accelerator_error is not None and isinstance(exc, accelerator_error):
        return True
    text = str(exc)
    return "CUDA error" in text or "illegal memory access" in text or "device-side assert" in text


def _fail(stage: str, exc: BaseException) -> _CellFailure:
    status = Status.CRASHED if is_device_poisoning(exc) else Status.ERROR
    message = first_line(exc)
    reason = f"{type(exc).__name__} during {stage}: {message}".rstrip(": ")
    return _CellFailure(status, reason, traceback.format_exc())


def cell_torch_dtype(dtype_name: str) -> torch.dtype:
    """The torch dtype of a cell's dtype name; build_plan admits only ``DTYPES``, but an engine
    file's cells carry the model's own dtype name (fp64, int64...) and its inputs take the
    model's dtypes whatever is passed here."""
    return DTYPES.get(dtype_name, torch.float32)


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def cell_inputs(workload: Workload, case: Case, spec: CellSpec, seed: int) -> Inputs:
    """The cell's inputs from ``seed``, on its device in its dtype, validated."""
    made = workload.make_inputs(case, spec.device, cell_torch_dtype(spec.dtype), seed)
    workload.validate_inputs(case, made)
    return made


def refresh_inputs_(workload: Workload, case: Case, inputs: Inputs, spec: CellSpec, seed: int) -> None:
    """Copy fresh random values into the existing input tensors (addresses stay valid)."""
    write_inputs_(inputs, cell_inputs(workload, case, spec, seed))


def check(workload: Workload, case: Case, prepared: Prepared, inputs: Inputs, spec: CellSpec,
          seed: int, stage: str) -> Accuracy:
    """Run once on fresh inputs with poisoned outputs and compare with the reference."""
    refresh_inputs_(workload, case, inputs, spec, seed)
    if prepared.outputs:
        poison_(prepared.outputs)
    untouched = {k: v.clone() for k, v in inputs.items()}
    synchronize(spec.device)
    outputs = prepared.fn()
    synchronize(spec.device)
    tolerance = workload.tolerance(spec.dtype)
    wrong = output_problem(outputs, cell_torch_dtype(spec.dtype)) or changed_inputs(inputs, untouched)
    if wrong:
        return Accuracy(False, tolerance.atol, tolerance.rtol, tolerance.max_mismatch_ratio, (), stage, wrong)
    # Copy before the reference runs: a backend may hand back buffers it reuses.
    outputs = {k: v.detach().clone() for k, v in outputs.items()}
    ref_inputs = upcast_inputs(untouched, reference_dtype(spec.device))
    with torch.no_grad():
        reference = workload.reference(case, ref_inputs)
    return compare_outputs(outputs, reference, tolerance, stage)


def derive(work: Work, timing: Timing) -> Derived:
    """Rates from the p50; none (0) for a p50 of 0 ms, or one so small that a rate overflows."""
    seconds = timing.stats.p50 / 1e3
    rates = (work.count / seconds, work.bytes_moved / seconds / 1e9, work.flops / seconds / 1e12) \
        if seconds > 0 else (0.0, 0.0, 0.0)
    if not all(math.isfinite(rate) for rate in rates):  # a denormal p50: as good as 0 ms
        rates = (0.0, 0.0, 0.0)
    return Derived(work.units, *rates, bytes_moved=work.bytes_moved, flops=work.flops)


def _measure(prepared: Prepared, spec: CellSpec, placed: _Placed, spot: SpotChecks | None, spot_bytes: int
             ) -> tuple[Timing, float | None, str, Telemetry | None]:
    """Time the prepared callable (in turn with its other input placements' callables), ``spot``
    checking a few of its calls; the timing, peak memory in MB and how it was read, GPU telemetry."""
    if prepared.measure is not None:  # the backend times itself (an external process)
        return _relabel(prepared.measure(spec.timing), prepared), None, "", None
    if not spec.device.startswith("cuda"):
        with earlier_garbage_kept():
            rss = RssPeak()
            timing = measure_cpu(prepared.fn, spec.timing, spot=spot)
        return _relabel(timing, prepared), rss.peak_mb(), rss.method, None
    options = spec.timing if prepared.timer is None else attrs.evolve(spec.timing, timer=prepared.timer)
    timing, peak, telemetry = measure_cuda(prepared.fn, options, [p.prepared.fn for p in placed.more],
                                           placed.held_bytes + spot_bytes, spot)
    return _relabel(timing, prepared, placed.note), peak, CUDA_PEAK_METHOD, telemetry


@attrs.frozen
class _Placed:
    """A cell's input placements beyond the first, why there are fewer than asked ("" if not),
    and the device bytes they hold."""

    more: tuple[Placement, ...]
    note: str
    held_bytes: int


_ONE_PLACEMENT = _Placed((), "", 0)


def _more_placements(workload: Workload, backend: Backend, case: Case, prepared: Prepared, inputs: Inputs,
                     spec: CellSpec, checked: bool, record: dict[str, Any]) -> _Placed:
    """The cell's other input placements (CUDA, cold L2 only), each checked before it is timed.

    A warm-L2 cell keeps one: taking its samples in turn from several placements would
    leave each call's data out of the L2 the call before filled.
    """
    if not spec.device.startswith("cuda") or spec.timing.placements <= 1 or spec.timing.cache == "warm":
        return _ONE_PLACEMENT
    try:
        count, note = placements_to_add(spec.timing.placements, backend, prepared, inputs,
                                        torch.cuda.mem_get_info()[0])
        before = torch.cuda.memory_allocated()
        more, short = make_placements(count, workload, backend, case,
                                      lambda: cell_inputs(workload, case, spec, spec.seed),
                                      lambda size: _padding(size, spec.device))
        synchronize(spec.device)
    except Exception as exc:
        raise _fail("prepare (another input placement)", exc) from None
    held = torch.cuda.memory_allocated() - before
    if checked:
        for number, placement in enumerate(more, 2):
            _check_placement(workload, case, placement, spec, spec.seed + _CHECK_BEFORE_SEED_OFFSET,
                             "before-timing", number, record)
    return _Placed(tuple(more), note or short, held)


def _padding(size: int, device: str) -> torch.Tensor:
    """``size`` bytes held on ``device`` so the next allocations land elsewhere."""
    return torch.empty(size, dtype=torch.uint8, device=device)


def _check_placement(workload: Workload, case: Case, placement: Placement, spec: CellSpec, seed: int,
                     stage: str, number: int, record: dict[str, Any]) -> None:
    """Check one more placement as the first is checked; only a failure joins the cell's
    accuracy records (its message names the placement)."""
    where = f"{stage}, input placement {number}"
    try:
        accuracy = check(workload, case, placement.prepared, placement.inputs, spec, seed, stage)
    except Exception as exc:
        raise _fail(f"correctness check ({where})", exc) from None
    if not accuracy.passed:
        failed = attrs.evolve(accuracy, message=f"input placement {number}: {accuracy.message}")
        record["accuracy"] = (*record.get("accuracy", ()), failed)
        raise _CellFailure(Status.INCORRECT, f"wrong result {where}: {accuracy.message}")


def _relabel(timing: Timing, prepared: Prepared, note: str = "") -> Timing:
    """The timing under the backend's method name, with its note, the backend's and ``note``."""
    method = prepared.timing_method or timing.method
    note = "; ".join(n for n in (timing.note, prepared.timing_note, note) if n)
    return attrs.evolve(timing, method=method, note=note)


def _run_steps(workload: Workload, backend: Backend, case: Case, spec: CellSpec,
               record: dict[str, Any]) -> None:
    """The cell's stages in order; each failure raises _CellFailure with its stage named."""
    try:  # a worker process gets the run's options here, before the backend does anything
        failed, trace = configure(backend, spec.backend_options)
    except Exception as exc:
        raise _fail("configure", exc) from None
    if failed:
        raise _CellFailure(Status.ERROR, failed, trace)
    torch.manual_seed(spec.seed)
    try:
        inputs = cell_inputs(workload, case, spec, spec.seed)
    except CellSkipped as skip:  # a workload's own condition (a bench.yaml's skip block)
        raise _CellFailure(Status.SKIPPED, skip.reason, skip_kind=skip.kind) from None
    except Exception as exc:
        raise _fail("input generation", exc) from None
    record["input_memory_mb"] = input_bytes(inputs) / 2**20
    try:
        start = time.perf_counter()
        prepared = backend.prepare(workload, case, inputs)
        prepared.fn()  # first call: lazy compilation and autotuning count as build time
        synchronize(spec.device)
        record["build_time_s"] = time.perf_counter() - start
        record["metadata"] = dict(prepared.metadata)
    except CellSkipped as skip:
        raise _CellFailure(Status.SKIPPED, skip.reason, skip_kind=skip.kind) from None
    except Exception as exc:
        raise _fail("prepare", exc) from None
    record["findings"] = [*record.get("findings", ()), *integrity.stage_findings("prepare")]
    unchecked = _unchecked_reason(workload, case)
    record["unchecked"] = unchecked
    if not unchecked:
        _checked(workload, case, prepared, inputs, spec, spec.seed + _CHECK_BEFORE_SEED_OFFSET,
                 "before-timing", record)
    placed = _more_placements(workload, backend, case, prepared, inputs, spec, not unchecked, record)
    try:  # a workload without a reference, or a backend that times itself, has none
        spot, spot_bytes = (None, 0) if unchecked or prepared.measure is not None else spot_checks.for_cell(
            workload, case, spec.dtype, spec.device, spec.timing.min_iters,
            [inputs, *(p.inputs for p in placed.more)], lambda seed: cell_inputs(workload, case, spec, seed),
            spec.seed + _SPOT_SEED_OFFSET)
    except Exception as exc:
        raise _fail("spot-check setup (fresh inputs and their reference)", exc) from None
    try:
        window_start, load = clocks.monotonic_ns(), host_load.Window()
        timing, peak, peak_method, telemetry = _measure(prepared, spec, placed, spot, spot_bytes)
        window_ns = clocks.monotonic_ns() - window_start
        record["metadata"]["host_load"] = load.close()
        if spec.device.startswith("cuda") and prepared.measure is None \
                and (stream := timing_stream.chosen(torch.cuda.current_device())):
            record["metadata"]["timing_stream"] = stream.as_metadata()  # the stream its events ran on, and why
    except SpotWrong as wrong:
        raise _CellFailure(Status.INCORRECT, str(wrong)) from None
    except integrity.Suspect as caught:
        raise _CellFailure(Status.SUSPECT, integrity.suspect_reason([caught.reason], None)) from None
    except Exception as exc:
        raise _fail("timing", exc) from None
    record["timing"], record["peak_memory_mb"], record["telemetry"] = timing, peak, telemetry
    record["peak_memory_method"] = peak_method
    found, profiler_error = integrity.timing_findings(prepared.fn, spec.device, timing, window_ns, spot)
    record["findings"] += [*integrity.stage_findings("timing"), *found]
    if profiler_error:
        record["metadata"]["integrity_profiler"] = profiler_error
    if spot is not None and spot.unconfirmed:  # kept: a cheat the confirmation missed can be read back
        record["metadata"]["integrity_unconfirmed"] = list(spot.unconfirmed)
    try:
        work = prepared.work if prepared.work is not None else work_of(workload, case, spec.dtype)
    except Exception as exc:
        raise _fail("work count", exc) from None
    record["derived"] = derive(work, timing)
    if not unchecked:
        _checked(workload, case, prepared, inputs, spec, spec.seed + _CHECK_AFTER_SEED_OFFSET,
                 "after-timing", record)
        for number, placement in enumerate(placed.more, 2):
            _check_placement(workload, case, placement, spec, spec.seed + _CHECK_AFTER_SEED_OFFSET,
                             "after-timing", number, record)
    if prepared.report_metadata is not None:
        try:
            record["metadata"] = {**record["metadata"], **prepared.report_metadata()}
        except Exception as exc:
            raise _fail("metadata collection", exc) from None
    record["findings"] += integrity.stage_findings("the checks after timing")
    if record["findings"]:
        reason = integrity.suspect_reason(record["findings"], timing)
        record["metadata"] = {**record["metadata"], "integrity_findings": list(record["findings"]),
                              "integrity_p50_ms": timing.stats.p50}
        raise _CellFailure(Status.SUSPECT, reason)


def _unchecked_reason(workload: Workload, case: Case) -> str:
    """The workload's reason not to check ``case`` (no reference), or "" to check it."""
    try:
        return str(workload.unchecked_reason(case) or "")
    except Exception as exc:
        raise _fail("unchecked_reason", exc) from None


def _checked(workload: Workload, case: Case, prepared: Prepared, inputs: Inputs, spec: CellSpec,
             seed: int, stage: str, record: dict[str, Any]) -> None:
    try:
        accuracy = check(workload, case, prepared, inputs, spec, seed, stage)
    except Exception as exc:
        raise _fail(f"correctness check ({stage})", exc) from None
    record["accuracy"] = (*record.get("accuracy", ()), accuracy)
    if not accuracy.passed:
        raise _CellFailure(Status.INCORRECT, f"wrong result {stage}: {accuracy.message}")


def execute_cell(workload: Workload, backend: Backend, spec: CellSpec) -> CellResult:
    """Run one cell end to end and return its result; never raises for backend failures."""
    started = time.perf_counter()
    record: dict[str, Any] = {}
    status, reason, log = Status.OK, "", ""
    skip_kind: SkipKind | None = None
    release_cached_blocks(spec.device)  # where the cells before it left memory must not matter
    before = process_state.capture()
    # what changed the harness's functions between cells (a plugin's import) is put back first
    restored = {"harness_restored_before_cell": [c.describe() for c in integrity.guard().restore()]}
    record["findings"] = [f for f in [clocks.replaced_before_import()] if f and integrity.checks_on()]
    try:
        case = Case(spec.workload, spec.case, workload.params_type(**spec.params))
        _run_steps(workload, backend, case, spec, record)
    except _CellFailure as failure:
        status, reason, log, skip_kind = failure.status, failure.reason, failure.log, failure.skip_kind
    except Exception as exc:  # a bug outside the named stages still becomes a row
        setup_failure = _fail("cell setup", exc)
        status, reason, log = setup_failure.status, setup_failure.reason, setup_failure.log
    finally:
        # what the backend changed in the process must not reach the next cell
        leaks = process_state.describe(*process_state.restore(before))
        restored["harness_restored_after_cell"] = [c.describe() for c in integrity.guard().restore()]
        record["metadata"] = {**record.get("metadata", {}), **leaks, **{k: v for k, v in restored.items() if v}}
    if status != Status.OK:
        # Numbers from a cell that went wrong are not reported as speeds.
        record.pop("timing", None)
        record.pop("derived", None)
        record.pop("telemetry", None)
    return CellResult(
        workload=spec.workload,
        case=spec.case,
        backend=spec.backend,
        dtype=spec.dtype,
        device=spec.device,
        status=status,
        params=dict(spec.params),
        reason=reason,
        skip_kind=skip_kind,
        timing=record.get("timing"),
        derived=record.get("derived"),
        accuracy=record.get("accuracy", ()),
        build_time_s=record.get("build_time_s"),
        peak_memory_mb=record.get("peak_memory_mb"),
        peak_memory_method=record.get("peak_memory_method", ""),
        input_memory_mb=record.get("input_memory_mb"),
        metadata=record.get("metadata", {}),
        telemetry=record.get("telemetry"),
        wall_time_s=time.perf_counter() - started,
        log=log,
        unchecked=record.get("unchecked", "") if status == Status.OK else "",
        replay=replay_artifacts.artifact(workload, spec.case, spec.params, spec.dtype, spec.seed),
    )


# the harness's functions as they are now, before the registry loads any plugin
integrity.guard()
