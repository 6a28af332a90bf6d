"""The engine shape sweep: one engine or ONNX file, timed across shape cases, one report cell per case.

``plan_sweep`` does every check first (file, runtime, device, each case against the model's
inputs), so a bad case is a ``UsageError`` before anything runs. ``run_sweep`` then times each
case with the core's timers and records a ``CellResult`` per case in the suite's report format.

A sweep has no reference: its cells carry no accuracy record (as cells that never reached a
check do) and say so in their metadata. Inputs are fresh random data per case, from a generator
seeded by the sweep's seed and the case name, so a case sees the same data in any order:
floating inputs standard normal, integer inputs uniform in ``[0, int_high)`` (default 2, which
is a valid index into any axis of two or more elements; raise it for index inputs that should
spread further), boolean inputs uniform.
"""

from __future__ import annotations

import hashlib
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from apex_core.engine.runtime import BoundModel, EngineModel
from apex_core.engine.shape_case import (
    Shape,
    ShapeCase,
    format_shape,
    key_safe,
    parse_shape_case,
    resolve_case,
)
from apex_core.engine.tensor_spec import TensorSpec
from apex_core.errors import UsageError, first_line
from apex_core.results import CellResult, Derived, Report, Status, Timing, Work
from apex_core.timing import TimingOptions

if TYPE_CHECKING:
    import torch

RUNTIMES = ("onnxruntime", "tensorrt")
SUFFIX_RUNTIMES: Mapping[str, str] = {".onnx": "onnxruntime", ".engine": "tensorrt", ".plan": "tensorrt"}
SUITE = "apex-bench-sweep"
PROFILE = "sweep"  # the config's profile: a sweep compares only with sweep baselines
DEFAULT_INT_HIGH = 2
NO_REFERENCE = "not checked: a sweep runs the engine alone and has no reference to compare with"
# Dtypes the report's config may list (report.schema.json); other cell dtypes leave the list empty.
REPORT_DTYPES = ("fp32", "fp16", "bf16")

# TensorSpec dtype name -> torch attribute; the first floating input's names the sweep's cells.
_TORCH_DTYPES: Mapping[str, str] = {
    "fp64": "float64", "fp32": "float32", "fp16": "float16", "bf16": "bfloat16",
    "fp8": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2",
    "int8": "int8", "uint8": "uint8", "int16": "int16", "int32": "int32", "int64": "int64", "bool": "bool",
}
_FLOATING = frozenset({"fp64", "fp32", "fp16", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2"})

CellCallback = Callable[[int, int, "SweepCase", CellResult | None], None]


def torch_dtype(name: str) -> torch.dtype:
    import torch

    return getattr(torch, _TORCH_DTYPES[name])


def is_floating(name: str) -> bool:
    return name in _FLOATING


def choose_runtime(engine: Path, runtime: str | None) -> str:
    """``runtime`` when given, else the one the file's suffix names."""
    if runtime is not None:
        if runtime not in RUNTIMES:
            raise UsageError(f"unknown runtime {runtime!r}; valid: {', '.join(RUNTIMES)}")
        return runtime
    found = SUFFIX_RUNTIMES.get(engine.suffix.lower())
    if found is None:
        raise UsageError(f"--engine {engine}: cannot tell the runtime from the suffix {engine.suffix!r} "
                         f"(known: {', '.join(SUFFIX_RUNTIMES)}); pass --runtime {'|'.join(RUNTIMES)}")
    return found


def runtime_reason(runtime: str, device: str) -> str:
    """Empty when ``runtime`` can run on ``device`` here, else why not."""
    if runtime == "tensorrt":
        from adapters.tensorrt_common import tensorrt_reason

        return tensorrt_reason(device)
    from adapters.lazy_import import cuda_reason, try_import

    reason = try_import("onnxruntime", "pip install onnxruntime")[1]
    return reason or (cuda_reason() if device == "cuda" else "")


def load_model(engine: Path, runtime: str, device: str) -> EngineModel:
    """Load ``engine`` with ``runtime``; a file the runtime cannot read is a usage error."""
    try:
        if runtime == "tensorrt":
            from adapters.tensorrt_common import load_engine_model

            loaded: EngineModel = load_engine_model(engine, device=device)
        else:
            from apex_core.engine.ort_runtime import load_onnx_model

            loaded = load_onnx_model(engine, device=device)
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(f"--engine {engine}: {runtime} cannot load it: {_one_line(exc)}") from None
    return loaded


def _one_line(exc: BaseException) -> str:
    text = first_line(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def file_sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def case_seed(seed: int, case_name: str) -> int:
    """The seed of one case's inputs: fixed by the sweep's seed and the case name, not the case order."""
    return int.from_bytes(hashlib.sha256(f"{seed}/{case_name}".encode()).digest()[:7], "little")


@attrs.frozen
class SweepCase:
    """One validated case: what was asked and the concrete shape of every model input."""

    case: ShapeCase
    input_shapes: dict[str, Shape]
    seed: int


@attrs.frozen
class SweepPlan:
    """A validated sweep: the loaded model and every case resolved against its inputs."""

    engine: Path
    engine_sha256: str
    name: str
    runtime: str
    device: str
    dtype: str
    model: EngineModel = attrs.field(eq=False, repr=False)
    cases: tuple[SweepCase, ...]
    seed: int
    timing: TimingOptions
    int_high: int

    def config(self) -> dict[str, Any]:
        """The report's ``config``: the settings that make two sweeps comparable."""
        return {
            "backends": [self.runtime],
            "workloads": [self.name],
            "device": self.device,
            "dtypes": [self.dtype] if self.dtype in REPORT_DTYPES else [],
            "profile": PROFILE,
            "seed": self.seed,
            "timing": attrs.asdict(self.timing),
            "engine": {"path": str(self.engine), "sha256": self.engine_sha256, "runtime": self.runtime},
            "shape_cases": [c.case.text for c in self.cases],
            "int_high": self.int_high,
        }


def _check_name(name: str) -> str:
    if not name or key_safe(name) != name:
        raise UsageError(f"--name {name!r}: must be non-empty, without '/' or spaces (it is part of "
                         "every metric name)")
    return name


def _check_dtypes(inputs: Sequence[TensorSpec]) -> None:
    for spec in inputs:
        if spec.dtype not in _TORCH_DTYPES:
            raise UsageError(f"input {spec.name!r}: the sweep cannot generate dtype {spec.dtype!r} "
                             f"(valid: {', '.join(_TORCH_DTYPES)})")


def cell_dtype(model: EngineModel) -> str:
    """The dtype a sweep's cells are filed under: the first floating input's, else the first floating
    output's, else the first tensor's."""
    for spec in (*model.inputs, *model.outputs):
        if is_floating(spec.dtype):
            return spec.dtype
    specs = (*model.inputs, *model.outputs)
    return specs[0].dtype if specs else "none"


def _resolve_all(cases: Sequence[ShapeCase], inputs: Sequence[TensorSpec], seed: int) -> tuple[SweepCase, ...]:
    resolved = []
    names: dict[str, str] = {}
    for case in cases:
        if case.name in names:
            raise UsageError(f"shape cases {names[case.name]!r} and {case.text!r} share the name "
                             f"{case.name!r}; give one a label (label:name=...)")
        names[case.name] = case.text
        resolved.append(SweepCase(case, resolve_case(case, inputs), case_seed(seed, case.name)))
    return tuple(resolved)


def plan_sweep(engine: str | Path, cases: Sequence[str | ShapeCase], *, runtime: str | None = None,
               device: str | None = None, name: str | None = None, seed: int = 0,
               timing: TimingOptions | None = None, int_high: int = DEFAULT_INT_HIGH) -> SweepPlan:
    """Check everything a sweep needs and load the model; raises ``UsageError`` before anything runs.

    ``device`` defaults to cuda for TensorRT and cpu for ONNX Runtime; ``name`` (the report's
    workload) to the file's stem.
    """
    parsed = [c if isinstance(c, ShapeCase) else parse_shape_case(c) for c in cases]
    if not parsed:
        raise UsageError("no shape case given; pass --shape-case name=AxBxC at least once")
    if int_high < 1:
        raise UsageError(f"--int-high must be >= 1, got {int_high}")
    engine = Path(engine)
    if not engine.is_file():
        raise UsageError(f"--engine {engine}: file not found" if not engine.exists()
                         else f"--engine {engine}: not a file")
    runtime = choose_runtime(engine, runtime)
    device = device or ("cuda" if runtime == "tensorrt" else "cpu")
    reason = runtime_reason(runtime, device)
    if reason:
        raise UsageError(f"runtime {runtime} cannot run here: {reason}")
    timing = timing or TimingOptions()
    if timing.graph and device != "cuda":
        raise UsageError("--graph needs --device cuda (CUDA graphs do not exist on the CPU)")
    name = _check_name(name if name is not None else key_safe(engine.stem))
    model = load_model(engine, runtime, device)
    _check_dtypes(model.inputs)
    resolved = _resolve_all(parsed, model.inputs, seed)
    return SweepPlan(engine=engine, engine_sha256=file_sha256(engine), name=name, runtime=runtime,
                     device=device, dtype=cell_dtype(model), model=model, cases=resolved, seed=seed,
                     timing=timing, int_high=int_high)


def make_feeds(inputs: Sequence[TensorSpec], shapes: Mapping[str, Shape], device: str, seed: int,
               int_high: int = DEFAULT_INT_HIGH) -> dict[str, torch.Tensor]:
    """Fresh random tensors for every input (made on the CPU from ``seed``, then moved to ``device``)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    feeds = {}
    for spec in inputs:
        shape, dtype = shapes[spec.name], torch_dtype(spec.dtype)
        if dtype.is_floating_point:
            values = torch.randn(shape, generator=generator, dtype=torch.float32).to(dtype)
        elif dtype == torch.bool:
            values = torch.randint(0, 2, shape, generator=generator).bool()
        else:  # capped so a narrow integer type never wraps to negative values
            high = min(int_high, torch.iinfo(dtype).max + 1)
            values = torch.randint(0, high, shape, generator=generator, dtype=torch.int64).to(dtype)
        feeds[spec.name] = values.to(device)
    return feeds


class _StageError(Exception):
    """A case's stage failed; carries the status and the one-line reason."""

    def __init__(self, stage: str, exc: BaseException) -> None:
        from apex_core.cell import is_device_poisoning

        self.status = Status.CRASHED if is_device_poisoning(exc) else Status.ERROR
        message = first_line(exc)
        detail = f": {message}" if message else ""
        self.reason = f"{type(exc).__name__} during {stage}{detail}"
        self.log = traceback.format_exc()
        super().__init__(self.reason)


def measure(fn: Callable[[], Any], device: str, options: TimingOptions) -> tuple[Timing, float | None]:
    """Time ``fn`` with the core's timer for ``device``; returns the timing and peak device MB (cuda)."""
    from apex_core.cuda_timer import measure_cuda
    from apex_core.timing import measure_cpu

    if device != "cuda":
        return measure_cpu(fn, options), None
    timing, peak, _telemetry = measure_cuda(fn, options)
    return timing, peak


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def _tensor_meta(specs: Sequence[TensorSpec], shapes: Mapping[str, Shape]) -> dict[str, Any]:
    """Per tensor: the resolved shape, the dtype, and whether the model leaves its shape open."""
    by_name = {s.name: s for s in specs}
    return {name: {"shape": list(shape), "dtype": by_name[name].dtype if name in by_name else None,
                   "dynamic": by_name[name].is_dynamic if name in by_name else None}
            for name, shape in shapes.items()}


def _work(feeds: Mapping[str, torch.Tensor], outputs: Mapping[str, torch.Tensor]) -> Work:
    """The least a call can move: every input read once, every output written once; rate in output elements."""
    moved = sum(t.numel() * t.element_size() for t in (*feeds.values(), *outputs.values()))
    return Work(bytes_moved=moved, flops=0, units="elements", count=sum(t.numel() for t in outputs.values()))


def _run_stages(plan: SweepPlan, case: SweepCase, record: dict[str, Any]) -> None:
    from apex_core.cell import derive
    from apex_core.report.manifest import tensors_sha256

    try:
        feeds = make_feeds(plan.model.inputs, case.input_shapes, plan.device, case.seed, plan.int_high)
    except Exception as exc:
        raise _StageError("input generation", exc) from None
    record["input_memory_mb"] = sum(t.numel() * t.element_size() for t in feeds.values()) / 2**20
    record["metadata"]["inputs_sha256"] = tensors_sha256(feeds, {})
    try:
        start = time.perf_counter()
        bound: BoundModel = plan.model.bind(feeds)
        record["metadata"]["outputs"] = _tensor_meta(plan.model.outputs, bound.output_shapes)
        outputs = bound.fn()  # the first call: lazy allocation and tactic selection count as build time
        _sync(plan.device)
        record["build_time_s"] = time.perf_counter() - start
    except Exception as exc:
        raise _StageError("bind and first call", exc) from None
    try:
        timing, peak = measure(bound.fn, plan.device, plan.timing)
    except Exception as exc:
        raise _StageError("timing", exc) from None
    record["timing"], record["peak_memory_mb"] = timing, peak
    record["derived"] = derive(_work(feeds, outputs), timing)


def run_case(plan: SweepPlan, case: SweepCase) -> CellResult:
    """Run one case; never raises for a failure of the model (it becomes an ``error`` cell)."""
    started = time.perf_counter()
    record: dict[str, Any] = {"metadata": {
        "shape_case": case.case.text, "engine": str(plan.engine), "engine_sha256": plan.engine_sha256,
        "runtime": plan.runtime, "seed": case.seed, "correctness": NO_REFERENCE,
        "inputs": _tensor_meta(plan.model.inputs, case.input_shapes)}}
    status, reason, log = Status.OK, "", ""
    try:
        _run_stages(plan, case, record)
    except _StageError as failure:
        status, reason, log = failure.status, failure.reason, failure.log
    timing: Timing | None = record.get("timing") if status == Status.OK else None
    derived: Derived | None = record.get("derived") if status == Status.OK else None
    return CellResult(
        workload=plan.name, case=case.case.name, backend=plan.runtime, dtype=plan.dtype,
        device=plan.device, status=status, params={k: list(v) for k, v in case.input_shapes.items()},
        reason=reason, timing=timing, derived=derived, accuracy=(), build_time_s=record.get("build_time_s"),
        peak_memory_mb=record.get("peak_memory_mb"), input_memory_mb=record.get("input_memory_mb"),
        metadata=record["metadata"], wall_time_s=time.perf_counter() - started, log=log)


def empty_report(plan: SweepPlan, environment: dict[str, Any] | None = None) -> Report:
    """The report before any case ran (status ``running``)."""
    from apex_core.environment import capture_environment
    from apex_core.report.autotune import summarize_autotune
    from apex_core.runner import utc_now

    return Report(suite=SUITE, timestamp_utc=utc_now(),
                  environment=environment or capture_environment(plan.device), config=plan.config(),
                  status="running", cells=(), triton_autotune=summarize_autotune(()))


def run_sweep(plan: SweepPlan, *, environment: dict[str, Any] | None = None,
              on_cell: CellCallback | None = None) -> Report:
    """Run every case in order and return the finished report (no files written)."""
    report = empty_report(plan, environment)
    cells: list[CellResult] = []
    total = len(plan.cases)
    for index, case in enumerate(plan.cases):
        if on_cell is not None:
            on_cell(index, total, case, None)
        cells.append(run_case(plan, case))
        if on_cell is not None:
            on_cell(index, total, case, cells[-1])
    return attrs.evolve(report, status="complete", cells=tuple(cells))


def replay_record(config: Mapping[str, Any], cells: Sequence[CellResult]) -> dict[str, Any]:
    """The report's ``replay`` block over the sweep's own inputs (there are no reference outputs)."""
    from apex_core.report.manifest import (
        HASH_FORMAT,
        artifact_key,
        canonical_json,
        config_sha256,
        hash_platform,
        manifest_sha256,
        sha256_text,
    )

    hashes = {artifact_key(c.workload, c.case, c.dtype): c.metadata.get("inputs_sha256") for c in cells}
    config_hash = config_sha256(config)
    artifact_hash = sha256_text(canonical_json(hashes))
    seed = int(config.get("seed", 0))
    return {"seed": seed, "config_sha256": config_hash, "artifact_hashes": hashes,
            "artifact_sha256": artifact_hash,
            "manifest_sha256": manifest_sha256(seed, config_hash, artifact_hash),
            "hash_format": HASH_FORMAT, "inputs_only": sorted(hashes), "platform": hash_platform()}


def sweep_record(report: Report) -> dict[str, Any]:
    """The JSON report of a sweep: the suite's format, with the replay block over the sweep's inputs."""
    from apex_core.report.records import report_record

    return {**report_record(report), "replay": replay_record(report.config, report.cells)}


def _shapes_text(tensors: Mapping[str, Any]) -> str:
    """The tensors whose shape the model leaves open; fixed ones are only counted."""
    shown = [f"{name} {format_shape(t['shape'])} {t['dtype']}" for name, t in tensors.items()
             if t.get("dynamic") is not False]
    fixed = len(tensors) - len(shown)
    return ", ".join(shown + ([f"{fixed} fixed"] if fixed else [])) or "–"


def sweep_markdown(report: Report) -> str:
    """The suite's Markdown summary plus the resolved shapes of every case."""
    from apex_core.report.markdown import render_markdown

    lines = ["", "## Shapes", "", "Tensors with open dimensions at their resolved shapes; the JSON report "
             "lists every tensor.", "", "| case | inputs | outputs |", "| --- | --- | --- |"]
    for cell in report.cells:
        texts = [_shapes_text(cell.metadata.get(group, {})) for group in ("inputs", "outputs")]
        row = [text.replace("|", "\\|").replace("\n", " ") for text in (cell.case, *texts)]
        lines.append("| " + " | ".join(row) + " |")
    engine = report.config.get("engine", {})
    lines += ["", f"Engine `{engine.get('path')}` (sha256 {engine.get('sha256')}), runtime "
              f"{engine.get('runtime')}. Correctness {NO_REFERENCE}."]
    return render_markdown(report) + "\n".join(lines) + "\n"

