"""The engine shape sweep as a plan: one engine or ONNX file, one ``engine`` workload case per shape case.

``plan_sweep`` does every check first (file, runtime, backend, device, each case against the
model's inputs), so a bad case is a ``UsageError`` before anything runs; the model is loaded
here once, by the backend that will run it, only to read its inputs. The result holds an
ordinary ``Plan`` whose cells are ``engine`` workload cases (``apex_core.engine.workload``)
on the runtime's backend, and ``run_sweep`` runs it with the normal runner: every case in a
worker process, so an engine that crashes or hangs becomes a ``crashed`` or ``timeout`` cell
and the next case runs.

The cells are filed under the sweep's name (the file's stem or ``--name``) rather than the
registry name ``engine``, so metric names read ``model/b2/onnxruntime/fp32/p50_ms``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from apex_core.backend_options import configure
from apex_core.engine.reference_model import check_reference
from apex_core.engine.runtime import EngineModel, require_file
from apex_core.engine.serving import EngineBackend
from apex_core.engine.shape_case import ShapeCase, key_safe, parse_shape_case, resolve_case
from apex_core.engine.tensor_spec import TensorSpec
from apex_core.engine.workload import DEFAULT_INT_HIGH, FEEDABLE_DTYPES, EngineParams, EngineWorkload
from apex_core.errors import UsageError, first_line
from apex_core.measure.environment import capture_environment
from apex_core.plan import Plan, PlannedCell
from apex_core.registry import Registry
from apex_core.results import Case, CellResult, Report
from apex_core.running.autotune import summarize_autotune
from apex_core.running.runner import run_plan, utc_now
from apex_core.running.sharding import CellCallback
from apex_core.timing import TimingOptions

# runtime -> (the file format, the backend that runs it by default)
RUNTIMES: Mapping[str, tuple[str, str]] = {"onnxruntime": ("onnx", "onnxruntime"),
                                           "tensorrt": ("tensorrt", "tensorrt-engine")}
SUFFIX_RUNTIMES: Mapping[str, str] = {".onnx": "onnxruntime", ".engine": "tensorrt", ".plan": "tensorrt"}
SUITE = "apex-bench-sweep"
PROFILE = "sweep"  # the config's profile: a sweep compares only with sweep baselines
ENGINE_WORKLOAD = EngineWorkload.name
_FLOATING = frozenset({"fp64", "fp32", "fp16", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2"})
# Dtypes the report's config may list (report.schema.json); other cell dtypes leave the list empty.
REPORT_DTYPES = ("fp32", "fp16", "bf16")


def choose_runtime(engine: Path, runtime: str | None, flag: str = "--engine") -> str:
    """``runtime`` when given, else the one the file's suffix names (``flag`` names the path's flag)."""
    if runtime is not None:
        if runtime not in RUNTIMES:
            raise UsageError(f"unknown runtime {runtime!r}; valid: {', '.join(RUNTIMES)}")
        return runtime
    found = SUFFIX_RUNTIMES.get(engine.suffix.lower())
    if found is None:
        raise UsageError(f"{flag} {engine}: cannot tell the runtime from the suffix {engine.suffix!r} "
                         f"(known: {', '.join(SUFFIX_RUNTIMES)}); pass --runtime {'|'.join(RUNTIMES)}")
    return found


def file_sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def cell_dtype(model: EngineModel) -> str:
    """The dtype a sweep's cells are filed under: the first floating input's, else the first floating
    output's, else the first tensor's."""
    specs = (*model.inputs, *model.outputs)
    for spec in specs:
        if spec.dtype in _FLOATING:
            return spec.dtype
    return specs[0].dtype if specs else "none"


@attrs.frozen
class SweepPlan:
    """A validated sweep: the plan to run and what the report says about the file."""

    plan: Plan
    registry: Registry = attrs.field(eq=False, repr=False)
    name: str  # the workload name the cells are filed under
    engine: Path
    engine_sha256: str
    runtime: str
    shape_cases: tuple[ShapeCase, ...]

    @property
    def device(self) -> str:
        return self.plan.device

    @property
    def cases(self) -> tuple[Case, ...]:
        return tuple(dict.fromkeys(cell.case for cell in self.plan.cells))


def _check_name(name: str) -> str:
    if not name or key_safe(name) != name:
        raise UsageError(f"--name {name!r}: must be non-empty, without '/' or spaces (it is part of "
                         "every metric name)")
    return name


def _check_dtypes(inputs: Sequence[TensorSpec]) -> None:
    for spec in inputs:
        if spec.dtype not in FEEDABLE_DTYPES:
            raise UsageError(f"input {spec.name!r}: the sweep cannot generate dtype {spec.dtype!r} "
                             f"(valid: {', '.join(FEEDABLE_DTYPES)})")


def _one_line(exc: BaseException) -> str:
    text = first_line(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _loading_backend(registry: Registry, names: Sequence[str], engine_format: str, runtime: str,
                     device: str, options: Mapping[str, Mapping[str, Any]]) -> Any:
    """The first selected backend that reads ``engine_format`` and can run here (it loads the model)."""
    reasons = []
    for name in names:
        row = registry.broken_row("backend", name)
        if row is not None:
            raise UsageError(f"backend plugin {name!r} failed to load: {row.reason}")
        backend = registry.backends[name]
        if not isinstance(backend, EngineBackend) or engine_format not in backend.engine_formats:
            reasons.append(f"{name} does not run {engine_format} files")
            continue
        failed, _trace = configure(backend, options.get(name, {}))
        if failed:
            reasons.append(f"{name}: {failed}")
            continue
        availability = backend.probe(device) if device in backend.devices else None
        if availability is not None and availability.ok:
            return backend
        why = availability.reason if availability is not None else f"it does not run on {device}"
        reasons.append(f"runtime {runtime} cannot run here: {why}" if len(names) == 1 else f"{name}: {why}")
    raise UsageError("; ".join(reasons) if len(names) == 1 else
                     f"no selected backend can load the {engine_format} file here ({'; '.join(reasons)})")


def load_model(backend: Any, engine: Path, runtime: str, device: str, flag: str = "--engine") -> EngineModel:
    """Load ``engine`` with the backend; a file the runtime cannot read is a usage error."""
    try:
        loaded: EngineModel = backend.load_engine(str(engine), device)
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(f"{flag} {engine}: {runtime} cannot load it: {_one_line(exc)}") from None
    return loaded


def _resolve_all(cases: Sequence[ShapeCase], inputs: Sequence[TensorSpec], base: EngineParams,
                 flag: str | None = None) -> list[EngineParams]:
    resolved = []
    names: dict[str, str] = {}
    for case in cases:
        if case.name in names:
            raise UsageError(f"shape cases {names[case.name]!r} and {case.text!r} share the name "
                             f"{case.name!r}; give one a label (label:name=...)")
        names[case.name] = case.text
        shapes = resolve_case(case, inputs, flag=flag)
        specs = tuple((spec.name, spec.dtype, shapes[spec.name]) for spec in inputs)
        resolved.append(attrs.evolve(base, shape_case=case.text, inputs=specs))
    return resolved


def _reference_config(path: str | Path | None, model: EngineModel, resolved: Sequence[EngineParams],
                      dtype: str) -> dict[str, Any]:
    """The report's ``reference_model`` entry (path and hash) once the reference fits every case."""
    if not path:
        return {}
    check_reference(path, model, [{n: shape for n, _d, shape in p.inputs} for p in resolved], dtype)
    return {"reference_model": {"path": str(path), "sha256": file_sha256(Path(path))}}


def plan_sweep(engine: str | Path, cases: Sequence[str | ShapeCase], *, runtime: str | None = None,
               device: str | None = None, name: str | None = None, seed: int = 0,
               timing: TimingOptions | None = None, int_high: int = DEFAULT_INT_HIGH,
               timeout_s: float = 600.0, backends: Sequence[str] | None = None,
               registry: Registry | None = None, reference_model: str | Path | None = None,
               backend_options: Mapping[str, Mapping[str, Any]] | None = None,
               flag: str = "--engine", shape_flag: str | None = None) -> SweepPlan:
    """Check everything a sweep needs and build its plan; raises ``UsageError`` before anything runs.

    ``device`` defaults to cuda for TensorRT and cpu for ONNX Runtime; ``name`` (the report's
    workload) to the file's stem; ``backends`` to the runtime's own (``onnxruntime`` or
    ``tensorrt-engine``): any backend that serves engine files may be named. With
    ``reference_model`` (an ONNX file) every cell is checked against it. ``flag`` names the
    option that gave the file in errors, ``shape_flag`` the one that gave the shapes
    (``--input-shape``) when they did not come as shape cases.
    """
    parsed = [c if isinstance(c, ShapeCase) else parse_shape_case(c) for c in cases]
    if not parsed:
        raise UsageError("no shape case given; pass --shape-case name=AxBxC at least once")
    if int_high < 1:
        raise UsageError(f"--int-high must be >= 1, got {int_high}")
    if timeout_s <= 0:
        raise UsageError(f"timeout must be positive, got {timeout_s}")
    engine = Path(engine)
    require_file(engine, f"{flag} {engine}")
    runtime = choose_runtime(engine, runtime, flag)
    engine_format, default_backend = RUNTIMES[runtime]
    device = device or ("cuda" if runtime == "tensorrt" else "cpu")
    if device not in ("cpu", "cuda"):
        raise UsageError(f"unknown device {device!r}; valid devices: cpu, cuda")
    timing = timing or TimingOptions()
    if timing.graph and device != "cuda":
        raise UsageError("--graph needs --device cuda (CUDA graphs do not exist on the CPU)")
    name = _check_name(name if name is not None else key_safe(engine.stem))
    registry = registry or Registry.discover()
    backend_names = registry.select_backends(list(backends or [default_backend]))
    options = {name: dict(opts) for name, opts in (backend_options or {}).items()}
    model = load_model(_loading_backend(registry, backend_names, engine_format, runtime, device, options),
                       engine, runtime, device, flag)
    _check_dtypes(model.inputs)
    sha256 = file_sha256(engine)
    base = EngineParams(engine=str(engine), engine_format=engine_format, engine_sha256=sha256,
                        int_high=int_high, reference_model=str(reference_model or ""))
    workload = registry.workloads.get(ENGINE_WORKLOAD) or EngineWorkload()
    dtype = cell_dtype(model)
    resolved = _resolve_all(parsed, model.inputs, base, shape_flag)
    reference = _reference_config(reference_model, model, resolved, dtype)
    cells = tuple(PlannedCell(case, backend, dtype, device) for params in resolved
                  for case in workload.cases(params) for backend in backend_names)
    extra = {"workloads": [name],
             "dtypes": [dtype] if dtype in REPORT_DTYPES else [],
             "engine": {"path": str(engine), "sha256": sha256, "runtime": runtime, "format": engine_format},
             "shape_cases": [c.text for c in parsed], "int_high": int_high, **reference}
    plan = Plan(cells=cells, backends=tuple(backend_names), workloads=(ENGINE_WORKLOAD,), broken_workloads=(),
                device=device, dtypes=(dtype,), profile=PROFILE, overrides={}, seed=seed, timing=timing,
                timeout_s=timeout_s, backend_options=options, extra_config=extra)
    return SweepPlan(plan=plan, registry=registry, name=name, engine=engine, engine_sha256=sha256,
                     runtime=runtime, shape_cases=tuple(parsed))


def filed(sweep: SweepPlan, cell: CellResult) -> CellResult:
    """A cell of the ``engine`` workload filed under the sweep's name."""
    return attrs.evolve(cell, workload=sweep.name) if cell.workload == ENGINE_WORKLOAD else cell


def empty_report(sweep: SweepPlan, environment: dict[str, Any] | None = None) -> Report:
    """The report before any case ran (status ``running``)."""
    return Report(suite=SUITE, timestamp_utc=utc_now(),
                  environment=environment or capture_environment(sweep.device), config=sweep.plan.config(),
                  status="running", cells=(), plugins=sweep.registry.broken,
                  deprecations=sweep.registry.deprecations,
                  triton_autotune=summarize_autotune(()))


def filed_callback(sweep: SweepPlan, on_cell: CellCallback) -> CellCallback:
    """``on_cell`` fed each planned cell and result filed under the sweep's name, not ``engine``."""

    def callback(index: int, total: int, cell: PlannedCell, result: CellResult | None) -> None:
        named = attrs.evolve(cell, case=attrs.evolve(cell.case, workload=sweep.name))
        on_cell(index, total, named, None if result is None else filed(sweep, result))

    return callback


def run_sweep(sweep: SweepPlan, *, isolation: str = "process", environment: dict[str, Any] | None = None,
              on_cell: CellCallback | None = None) -> Report:
    """Run every case through the normal runner and return the finished report (no files written).

    ``on_cell`` sees each result already filed under the sweep's name.
    """
    report = run_plan(sweep.plan, sweep.registry, isolation=isolation, suite=SUITE, environment=environment,
                      on_cell=filed_callback(sweep, on_cell) if on_cell is not None else None)
    return attrs.evolve(report, cells=tuple(filed(sweep, c) for c in report.cells))
