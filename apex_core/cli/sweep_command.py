"""``apex-bench sweep``: time one engine or ONNX file across shape cases, one report cell per case.

Everything is checked before the first case runs (cases, file, runtime, device, outputs,
baseline, every case against the model); a problem is one line and exit code 2. The sweep is
an ordinary plan of ``engine`` workload cases run by the normal runner: each case runs in a
worker process under ``--timeout``, so a case whose engine crashes or hangs is recorded as
``crashed`` or ``timeout`` and the next case runs. The report is rewritten after every case,
in the suite's format, so ``compare`` and ``baseline emit`` read it unchanged; ``--compare``
gates it exactly as a suite run is gated.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.table import Table

from apex_core.cli.args import _comma_list, add_gate_args, add_sampling_args
from apex_core.cli.compare_command import gate_from_run_args, precheck_environment, run_gate
from apex_core.cli.log_file import configure_logging, library_output_to
from apex_core.cli.model_args import add_shape_args
from apex_core.cli.progress import Progress
from apex_core.cli.run_command import (
    _IncrementalReport,
    _summarize,
    output_paths,
    timing_options,
)
from apex_core.cli.signals import handle_stop_signals, interrupted_exit_code
from apex_core.cli.values import OneLineParser, positive_int, positive_seconds, seed
from apex_core.engine.input_shape import FLAG, with_input_shapes
from apex_core.engine.shape_case import parse_shape_case
from apex_core.engine.sweep import (
    RUNTIMES,
    SUFFIX_RUNTIMES,
    empty_report,
    plan_sweep,
    run_sweep,
)
from apex_core.engine.sweep_report import SWEEP_FORMATS
from apex_core.engine.workload import DEFAULT_INT_HIGH
from apex_core.errors import UsageError
from apex_core.report.writer import ReportWriter, optional_output
from apex_core.results import Report, Status

DEFAULT_JSON = Path("artifacts") / "apex-bench-sweep.json"
DEFAULT_MD = Path("artifacts") / "apex-bench-sweep.md"

EXIT_CODES = """\
shape cases:
  [label:]name=AxBxC[;name=AxB...]   e.g. x=1x3x128x128, small:a=1x3x64x64;b=1024x2
  Fixed inputs may be left out, and so may inputs whose open dimensions are all named
  (ONNX dim_param) and given by another input of the case. --input-shape NAME=AxBxC
  entries join every case; without --shape-case they are the one case. See docs/sweep.md.

exit codes:
  0  every case ran and any gate passed
  1  a case failed (error, crashed or timeout), or the gate failed
  2  usage error (malformed case, engine file not found, unknown suffix, runtime not
     available, a case the engine does not accept), reported before any case runs
"""


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="apex-bench sweep",
        description="Time one engine (.engine/.plan under TensorRT, .onnx under ONNX Runtime) across "
        "shape cases; one report cell per case, in the suite's JSON and Markdown formats. Without "
        "--reference-model a sweep has no reference, so results are not checked for correctness.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sel = parser.add_argument_group("engine")
    sel.add_argument("--engine", required=True, metavar="PATH", help="engine or ONNX file")
    sel.add_argument("--shape-case", dest="cases", action="append", default=[], metavar="CASE",
                     help="one shape case (repeatable; one cell each)")
    add_shape_args(sel)
    sel.add_argument("--runtime", choices=tuple(RUNTIMES), help="default: from the suffix "
                     f"({', '.join(f'{s} {r}' for s, r in SUFFIX_RUNTIMES.items())})")
    sel.add_argument("--backends", type=_comma_list, metavar="LIST",
                     help="backends that run the file, any that serve engine files (default: the "
                     "runtime's: onnxruntime, or tensorrt-engine for tensorrt)")
    sel.add_argument("--device", choices=("cpu", "cuda"),
                     help="default: cuda for tensorrt, cpu for onnxruntime")
    sel.add_argument("--name", help="the report's workload name (default: the file's stem)")
    sel.add_argument("--seed", type=seed, default=0, help="seed of the random inputs (default 0)")
    sel.add_argument("--int-high", type=positive_int, default=DEFAULT_INT_HIGH,
                     help=f"integer inputs are uniform in [0, N) (default {DEFAULT_INT_HIGH})")
    tim = add_sampling_args(parser, "case")
    tim.add_argument("--timeout", type=positive_seconds, default=600.0,
                     help="seconds one case may take, load and build included (default 600); a case "
                     "past it is recorded as timeout and the next case runs")
    out = parser.add_argument_group("output")
    out.add_argument("--output-json", help=f"JSON report path (default {DEFAULT_JSON})")
    out.add_argument("--output-md", help=f"Markdown summary path (default {DEFAULT_MD})")
    out.add_argument("--output-csv", metavar="PATH", help="also write the cases as CSV, one row each")
    out.add_argument("--log-file", help="tracebacks of failed cases (default: next to the JSON report)")
    out.add_argument("--quiet", action="store_true", help="print only the final summary line")
    add_gate_args(parser, "sweep", "case")
    return parser


def print_table(report: Report, out: TextIO) -> None:
    """One row per case: status, p50 / p95 / samples, and the case as given."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("case", "status", "p50 ms", "p95 ms", "samples", "shape case"):
        table.add_column(column, justify="right" if column.endswith(("ms", "samples")) else "left")
    for cell in report.cells:
        stats = cell.timing.stats if cell.timing is not None else None
        numbers = (f"{stats.p50:.4g}", f"{stats.p95:.4g}", str(stats.n)) if stats else ("–", "–", "–")
        status = str(cell.status) if cell.status == Status.OK else f"{cell.status}: {cell.reason}"
        table.add_row(cell.case, status, *numbers, str(cell.params.get("shape_case", "")),
                      style=None if cell.status == Status.OK else "red")
    Console(file=out, width=None if out.isatty() else 200, soft_wrap=False).print(table)


def main(argv: list[str]) -> int:
    """``apex-bench sweep ...``; returns 0, or 1 when a case or the gate failed (usage errors raise: exit 2)."""
    args = build_parser().parse_args(argv)
    if not args.cases and not args.input_shapes:
        raise UsageError(f"no shapes given; pass --shape-case CASE (repeatable) or {FLAG} NAME=AxBxC")
    # malformed cases fail before any file is read; --input-shape entries join every case
    cases = with_input_shapes([parse_shape_case(text) for text in args.cases], args.input_shapes)
    timing = timing_options(args, args.device or "cuda")
    sweep = plan_sweep(args.engine, cases, runtime=args.runtime, device=args.device, name=args.name,
                       seed=args.seed, timing=timing, int_high=args.int_high, timeout_s=args.timeout,
                       backends=args.backends, reference_model=args.reference_model,
                       shape_flag=None if args.cases else FLAG)
    paths = output_paths(args, DEFAULT_JSON, DEFAULT_MD)
    csv_path = optional_output(args.output_csv, "--output-csv", *paths)
    gate = gate_from_run_args(args, paths[0])
    base = empty_report(sweep)
    if gate is not None:
        precheck_environment(gate, base.environment, base.config)
    configure_logging(paths[2])
    handle_stop_signals()
    with library_output_to(paths[2]), Progress(quiet=args.quiet) as progress:
        writer = ReportWriter({"json": paths[0], "markdown": paths[1], "csv": csv_path}, SWEEP_FORMATS)
        recorder = _IncrementalReport(base, writer, progress)
        try:
            run_sweep(sweep, environment=base.environment, on_cell=recorder)
        except KeyboardInterrupt as stop:
            recorder.write("interrupted")
            print(f"interrupted: partial report in {paths[0]}", flush=True)
            return interrupted_exit_code(stop)
    report = recorder.write("complete")
    if not args.quiet:
        print_table(report, sys.stdout)
    code = _summarize(report, writer, paths, "apex-bench sweep", "case")
    return code if gate is None else max(code, run_gate(gate, paths[0], quiet=args.quiet))
