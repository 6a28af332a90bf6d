"""The default command: plan, run every cell in a worker, write the reports after each cell."""

from __future__ import annotations

import contextlib
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import attrs

from apex_core.api import check_device, default_device, default_dtypes
from apex_core.backend_options import merge_options, parse_backend_opts
from apex_core.cli.compare_command import gate_from_run_args, precheck_environment, run_gate
from apex_core.cli.config_flags import configured_variables
from apex_core.cli.history_args import check_history_target, record_run
from apex_core.cli.listing import list_plugins
from apex_core.cli.log_file import configure_logging, library_output_to
from apex_core.cli.model_args import model_path
from apex_core.cli.progress import Progress
from apex_core.cli.scale_args import resolve_scale
from apex_core.cli.signals import handle_stop_signals, interrupted_exit_code
from apex_core.engine.input_shape import FLAG, with_input_shapes
from apex_core.engine.sweep import SUITE as SWEEP_SUITE
from apex_core.engine.sweep import SweepPlan, choose_runtime, filed_callback, plan_sweep
from apex_core.engine.sweep_report import SWEEP_FORMATS
from apex_core.errors import UsageError, one_line, printable
from apex_core.files import check_distinct, prepare_output
from apex_core.measure.clock_lock import ClockVerdict, locked_clocks
from apex_core.measure.environment import capture_environment
from apex_core.measure.kernel_timer import profiler_unavailable_reason
from apex_core.plan import Plan, PlannedCell, build_plan
from apex_core.plugin_api import deprecation_lines
from apex_core.registry import Registry
from apex_core.report.flags import strict_failures
from apex_core.report.writer import ReportWriter, optional_output
from apex_core.results import FAILING_STATUSES, CellResult, DeviceInfo, DeviceUse, Report
from apex_core.running.autotune import summarize_autotune
from apex_core.running.env_vars import overlaid_environ
from apex_core.running.runner import run_plan, utc_now
from apex_core.timing import TimingOptions

DEFAULT_DIR = Path("artifacts")
DEFAULT_JSON = DEFAULT_DIR / "apex-bench.json"
DEFAULT_MD = DEFAULT_DIR / "apex-bench.md"


def output_paths(args: Any, default_json: Path = DEFAULT_JSON,
                 default_md: Path = DEFAULT_MD) -> tuple[Path, Path, Path]:
    """Resolve output paths; a missing folder is made, given or default (as ``artifacts/`` is)."""
    for text, flag in ((args.output_json, "--output-json"), (args.output_md, "--output-md"),
                       (args.log_file, "--log-file")):
        if text is not None and not str(text).strip():
            raise UsageError(f"{flag}: empty path")
    json_path = Path(args.output_json) if args.output_json is not None else default_json
    md_path = Path(args.output_md) if args.output_md is not None else default_md
    log_path = Path(args.log_file) if args.log_file is not None else json_path.with_suffix(".log")
    paths = {"--output-json": json_path, "--output-md": md_path, "--log-file": log_path}
    for flag, path in paths.items():
        prepare_output(path, flag)
    check_distinct(paths)
    return json_path, md_path, log_path


def timing_options(args: Any, device: str) -> TimingOptions:
    if args.graph and device != "cuda":
        raise UsageError("--graph needs --device cuda (CUDA graphs do not exist on the CPU)")
    if args.timer == "kernel":
        why = (profiler_unavailable_reason() if device == "cuda"
               else "it times device kernels; use --device cuda")
        if why:
            raise UsageError(f"--timer kernel cannot run here: {why}")
    try:
        return TimingOptions(warmup=args.warmup, min_iters=args.iters, min_time_s=args.min_time,
                             max_time_s=args.max_time, noise_target=args.noise, cache=args.cache,
                             graph=args.graph, timer=args.timer, hold=args.hold,
                             subtract_floor=args.subtract_floor, floor_sampling=args.floor_sampling,
                             energy=args.energy, placements=args.placements, fixed_iters=args.fixed_iters)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def backend_options_from_args(args: Any, registry: Registry | None = None) -> dict[str, dict[str, Any]]:
    """The run flags meant for particular backends, keyed by backend name (only those given):
    ``--backend-opt`` checked against each backend's declared options, and the aliases ``--retune``
    and ``--trt-*``."""
    declared = parse_backend_opts(getattr(args, "backend_opts", []) or [], registry.backends) \
        if registry is not None else {}
    options: dict[str, dict[str, Any]] = {}
    if getattr(args, "retune", False):
        options["triton"] = {"retune": True}
    if args.trt_engine_path and args.trt_build:
        raise UsageError("--trt-engine-path and --trt-build exclude each other: give a serialized "
                         "engine or build one from the ONNX export, not both")
    engine: dict[str, Any] = {}
    if args.trt_engine_path:
        engine["engine_path"] = args.trt_engine_path
    if args.trt_engine_path and args.workloads:  # without --workloads, the backend's default (ff-infer)
        names = list(dict.fromkeys(s.partition(":")[0].strip() for s in args.workloads))
        if len(names) != 1 or names[0] == "all":
            raise UsageError("--trt-engine-path serves one workload; name only that one with --workloads "
                             f"(got {', '.join(names)})")
        engine["engine_workload"] = names[0]
    if args.trt_build:
        engine["build"] = True
    if engine:
        options["tensorrt-engine"] = engine
    if args.trt_plugin_lib:
        options["tensorrt-plugin"] = {"plugin_libs": list(args.trt_plugin_lib)}
    return merge_options(options, declared)


class _IncrementalReport:
    """Keeps the finished cells and rewrites the report files after each one (a run's and a sweep's)."""

    def __init__(self, base: Report, writer: ReportWriter, progress: Progress) -> None:
        self.base, self.writer, self.progress = base, writer, progress
        self.cells: dict[int, CellResult] = {}  # by plan index: sharded cells finish out of order
        self.writer.write(base)

    def __call__(self, index: int, total: int, cell: PlannedCell, result: CellResult | None) -> None:
        if result is not None:
            self.cells[index] = result
            self.write("running")
        self.progress(index, total, cell, result)

    def write(self, status: str, devices: tuple[DeviceUse, ...] = ()) -> Report:
        cells = tuple(self.cells[index] for index in sorted(self.cells))
        report = attrs.evolve(self.base, status=status, cells=cells, devices=devices,
                              triton_autotune=summarize_autotune(cells))
        self.writer.write(report)
        return report


def run_command(args: Any) -> int:
    """Execute the run described by parsed ``args``; returns the exit code."""
    # the config file and --discover folders shape the registry here and in every worker
    with overlaid_environ(configured_variables(args)):
        return _run(args)


def _model_plan(args: Any, path: str, flag: str) -> SweepPlan:
    """A model file run as it is: one case of the ``engine`` workload from ``--input-shape``."""
    registry = Registry.discover()
    runtime = args.runtime or ("tensorrt" if flag == "--trt-engine-path" else None)
    runtime = choose_runtime(Path(path), runtime, flag)
    device = args.device or ("cuda" if runtime == "tensorrt" else "cpu")
    options = parse_backend_opts(args.backend_opts or [], registry.backends)
    return plan_sweep(path, with_input_shapes([], args.input_shapes), runtime=runtime, device=device,
                      seed=args.seed, timing=timing_options(args, device), int_high=args.int_high,
                      timeout_s=args.timeout, backends=args.backends, registry=registry,
                      reference_model=args.reference_model, backend_options=options, flag=flag,
                      shape_flag=FLAG)


def _run(args: Any) -> int:
    model = model_path(args)
    if model is not None:
        sweep = _model_plan(args, *model)
        return _execute(args, sweep.plan, sweep.registry, sweep.device, sweep)
    registry = Registry.discover()
    if not args.list and not args.quiet:
        announce_plugin_problems(registry)
    device = args.device or default_device()
    if args.executor != "ray":  # a Ray driver needs no GPU of its own; the cluster is checked instead
        check_device(device)
    if args.list:
        list_plugins(registry, device, backend_options_from_args(args, registry), inline=args.inline,
                     probe_timeout_s=args.probe_timeout)
        return 0
    timing = timing_options(args, device)
    plan = build_plan(registry, workloads=args.workloads, backends=args.backends, device=device,
                      dtypes=tuple(args.dtype or default_dtypes(device)), profile=args.profile,
                      overrides=args.overrides, seed=args.seed, timing=timing,
                      timeout_s=args.timeout, backend_options=backend_options_from_args(args, registry))
    return _execute(args, plan, registry, device)


def check_lock_clocks(args: Any, device: str) -> None:
    """--lock-clocks where it can never work is a usage error; where the driver refuses, a note."""
    if args.lock_clocks is None:
        return
    if args.executor == "ray":
        raise UsageError("--lock-clocks and --executor ray exclude each other: the cells run on the cluster's "
                         "GPUs; lock them on each node (nvidia-smi -lgc)")
    if device != "cuda" and args.devices is None:
        raise UsageError(f"--lock-clocks locks GPU clocks: it needs --device cuda (got --device {device})")


def clock_lock(args: Any, cards: tuple[DeviceInfo, ...] | None,
               ) -> contextlib.AbstractContextManager[ClockVerdict | None]:
    """The clocks locked for the run's cards (those of --devices, else CUDA device 0), or nothing."""
    if args.lock_clocks is None:
        return contextlib.nullcontext()
    return locked_clocks(args.lock_clocks, [card.uuid for card in cards or ()], warn=_print_error)


def _print_error(line: str) -> None:
    print(f"apex-bench: error: {printable(line)}", file=sys.stderr, flush=True)


def announce_plugin_problems(registry: Registry) -> None:
    """One line per plugin that failed to load and per deprecated form a plugin uses, before any cell."""
    for row in registry.broken:
        print(f"apex-bench: {row.group} {row.name!r} cannot run: {printable(one_line(row.reason))}",
              file=sys.stderr, flush=True)
    for line in deprecation_lines(registry.deprecations):
        print(f"apex-bench: deprecated: {line}", file=sys.stderr, flush=True)


def _execute(args: Any, plan: Plan, registry: Registry, device: str, model: SweepPlan | None = None) -> int:
    """Run ``plan``, writing the reports after every cell; then the summary, --strict, history and gate."""
    json_path, md_path, log_path = output_paths(args)
    html_path = optional_output(args.html, "--html", json_path, md_path, log_path)  # when the run ends
    csv_path = optional_output(args.output_csv, "--output-csv", json_path, md_path, log_path, html_path)
    roofline_path = optional_output(args.output_roofline, "--output-roofline", json_path, md_path, log_path,
                                    html_path, csv_path)
    check_history_target(args)
    gate = gate_from_run_args(args, json_path)
    check_lock_clocks(args, device)
    scale = resolve_scale(args, device)
    if scale.build_workers:  # the report's config says how many builders ran
        plan = attrs.evolve(plan, extra_config={**plan.extra_config, "build_workers": scale.build_workers})
    try:
        # the device's facts are measured by run_plan while its processes start
        env = {**capture_environment(device, measure_device=False), **scale.environment()}
        if gate is not None:
            precheck_environment(gate, env, plan.config())
        configure_logging(log_path)
        handle_stop_signals()
        with library_output_to(log_path), Progress(quiet=args.quiet) as progress, \
                clock_lock(args, scale.devices) as clocks:
            if clocks is not None:  # in the report from its first write: a killed run leaves them locked
                env["clock_lock"] = clocks.record()
                if not clocks.locked and not args.quiet:
                    print(f"apex-bench: clocks not locked: {printable(clocks.why_not)}; the run goes on at the "
                          "driver's clocks", file=sys.stderr, flush=True)
            files = {"json": json_path, "markdown": md_path, "html": html_path, "csv": csv_path,
                     "roofline": roofline_path}
            writer = ReportWriter(files) if model is None else ReportWriter(files, SWEEP_FORMATS)
            # a model's run is a sweep of one case: its report and baselines are the sweep's
            base = Report(suite="apex-bench" if model is None else SWEEP_SUITE, timestamp_utc=utc_now(),
                          environment=env, config=plan.config(), status="running", cells=(),
                          plugins=registry.broken, deprecations=registry.deprecations,
                          triton_autotune=summarize_autotune(()))
            recorder = _IncrementalReport(base, writer, progress)
            try:
                report = run_plan(plan, registry, isolation="inline" if args.inline else "process",
                                  environment=env, probe_timeout_s=args.probe_timeout,
                                  # a model's cells reach the recorder filed under the model's name
                                  on_cell=recorder if model is None else filed_callback(model, recorder),
                                  devices=scale.devices, worker_env=scale.caches.env, executor=scale.executor,
                                  # under Ray the executor submits the warm tasks itself
                                  build_workers=scale.build_workers if scale.executor is None else 0,
                                  measure_device_facts=scale.executor is None)
            except KeyboardInterrupt as stop:
                recorder.write("interrupted")
                print(f"interrupted: partial report in {json_path} ({len(recorder.cells)} of "
                      f"{len(plan.cells)} cells)", flush=True)
                record_run(args, json_path)  # kept with its status; compare --against uses complete runs only
                return interrupted_exit_code(stop)
    finally:
        scale.close()
    report = recorder.write(report.status, report.devices)
    code = _summarize(report, recorder.writer, (json_path, md_path, log_path))
    if args.strict:
        failures = strict_failures(list(report.cells), report.environment, report.config)
        for line in failures:
            print(f"apex-bench: --strict: {line}", flush=True)
        if failures:
            code = 1
    code = max(code, record_run(args, json_path))
    return code if gate is None else max(code, run_gate(gate, json_path, quiet=args.quiet))


def _summarize(report: Report, writer: ReportWriter, paths: tuple[Path, Path, Path], prog: str = "apex-bench",
               noun: str = "cell") -> int:
    """The closing lines of a run or a sweep; 1 when a cell failed or a report file could not be rewritten."""
    json_path, md_path, log_path = paths
    counts = Counter(str(cell.status) for cell in report.cells)
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no cells"
    print(f"{prog}: {summary}; report {json_path}, summary {md_path}", flush=True)
    failing = sum(cell.status in FAILING_STATUSES for cell in report.cells)
    if failing:
        print(f"{prog}: {failing} {noun}(s) failed; details in {log_path}", flush=True)
    if writer.failure:
        # the files hold the last report written whole; the cells after it are lost to them
        print(f"apex-bench: error: {writer.failure}; the report on disk stops at the last successful write",
              file=sys.stderr, flush=True)
    return 1 if failing or writer.failure else 0
