"""Argument parsing for ``apex-bench``: one-line errors, exit code 2."""

from __future__ import annotations

import argparse
import os

from apex_core.cli.history_args import add_history_args
from apex_core.cli.model_args import add_model_args
from apex_core.cli.scale_args import add_scale_args
from apex_core.cli.subcommands import SUBCOMMANDS
from apex_core.cli.values import (
    OneLineParser,
    fraction,
    non_negative_int,
    positive_int,
    positive_seconds,
    seconds,
    seed,
)
from apex_core.correctness import DTYPES
from apex_core.measure.clock_lock import clock_request
from apex_core.running.probing import DEFAULT_PROBE_TIMEOUT_S
from apex_core.shared_library import is_bare_library_name, resolve_library
from apex_core.timing import DEFAULT_PLACEMENTS, FLOOR_SAMPLING

EXIT_CODES = f"""\
exit codes:
  0  every requested cell ran (ok or skipped with a reason) and any gate passed
  1  a cell was incorrect, suspect, errored, crashed or timed out, or a gate failed, or (--strict)
     a cell was flagged faster than physics
  2  usage error (unknown name, bad value, unwritable output, missing device)
  3  internal error of apex-bench (one line on stderr names the file with its traceback)
  130 / 143  interrupted by Ctrl-C / SIGTERM (the report on disk is valid, status interrupted)

subcommands: {', '.join(SUBCOMMANDS)} (apex-bench SUBCOMMAND --help)
"""


def plugin_library(text: str) -> str:
    """--trt-plugin-lib: an absolute path, or a bare name for the dynamic loader's search.

    Resolved here, against the folder apex-bench was started in, so a worker that runs
    elsewhere loads the same file; a path (with a slash) must exist.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a shared library path or name, got ''")
    resolved = resolve_library(text)
    if is_bare_library_name(resolved):
        return resolved
    if not os.path.exists(resolved):
        raise argparse.ArgumentTypeError(
            f"no such file: {text!r} (a path must name an existing file; a bare name such as "
            "libapexx_plugins.so is searched by the dynamic loader)")
    if not os.path.isfile(resolved):
        raise argparse.ArgumentTypeError(f"{text!r} is not a file")
    return resolved


def _comma_list(text: str) -> list[str]:
    items = [item.strip() for item in text.split(",")]
    if not any(items):
        raise argparse.ArgumentTypeError("empty list: name at least one")
    if not all(items):
        raise argparse.ArgumentTypeError(f"empty name in {text!r}")
    return items


def _dtype_list(text: str) -> list[str]:
    items = _comma_list(text)
    for item in items:
        if item not in DTYPES:
            raise argparse.ArgumentTypeError(f"unknown dtype {item!r}; valid: {', '.join(DTYPES)}")
    return items


def _clock_request(text: str) -> str:
    try:
        return clock_request(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_sampling_args(parser: argparse.ArgumentParser, unit: str) -> argparse._ArgumentGroup:
    """The sampling flags shared by the suite and the sweep; returns the group for more."""
    tim = parser.add_argument_group("timing")
    tim.add_argument("--warmup", type=non_negative_int, default=10, help="warm-up calls (default 10)")
    tim.add_argument("--iters", type=positive_int, default=10,
                     help=f"minimum samples per {unit} (default 10)")
    tim.add_argument("--fixed-iters", type=positive_int, metavar="N",
                     help=f"fair-comparison mode: exactly N warm-up calls and N timed samples per {unit}, "
                     "no time limit or noise rule (replaces --warmup, --iters, --min-time, --max-time, "
                     "--noise)")
    tim.add_argument("--min-time", type=seconds, default=0.5, help="minimum seconds of samples (0.5)")
    tim.add_argument("--max-time", type=positive_seconds, default=3.0,
                     help="seconds after which sampling stops (3.0)")
    tim.add_argument("--noise", type=fraction, default=0.005,
                     help="stop once std/mean is under this (0.005 = 0.5%%)")
    tim.add_argument("--cache", choices=("cold", "warm"), default="cold",
                     help="flush the L2 before each CUDA sample (cold, default) or not (warm)")
    tim.add_argument("--graph", action="store_true", help="time CUDA-graph replays (cuda only)")
    tim.add_argument("--timer", choices=("event", "kernel"), default="event",
                     help="CUDA timer: events on a stream held until each sample is queued (event, "
                          "default), or the profiler's kernel time per call, on every stream (kernel)")
    tim.add_argument("--no-hold", dest="hold", action="store_false",
                     help="event timer without the stream hold, so host launch gaps count (for comparison)")
    tim.add_argument("--raw-times", dest="subtract_floor", action="store_false",
                     help="keep the timer's own cost in CUDA samples (by default each sample is net of the "
                          "same method's time for one empty kernel, which the report records)")
    tim.add_argument("--floor-sampling", choices=FLOOR_SAMPLING, default="rounds",
                     help="how that empty kernel is sampled: eight short rounds after the cell (rounds, "
                          "default), a batch after each of the cell's batches, across its sampling time "
                          "(interleaved), or the cell's rounds averaged with those of every earlier cell of "
                          "its worker process (pooled)")
    tim.add_argument("--placements", type=positive_int, default=DEFAULT_PLACEMENTS, metavar="N",
                     help="CUDA cells of backends that can prepare again (triton, torch-reference, "
                          "torch-compile): make the inputs N times at other device addresses and take the "
                          "samples from each in turn, since a kernel's time depends on where its data lies "
                          f"(default {DEFAULT_PLACEMENTS}; 1: one placement, as a single process sees)")
    tim.add_argument("--retune", action="store_true",
                     help="autotune every Triton kernel and shape in this run instead of starting from "
                          "the configurations shipped for this GPU model (alias of --backend-opt "
                          "triton.retune=true)")
    tim.add_argument("--no-energy", dest="energy", action="store_false",
                     help="skip the 0.5 s window of back-to-back calls that measures each CUDA cell's J/call")
    return tim


def add_gate_args(parser: argparse.ArgumentParser, what: str, unit: str) -> None:
    """The regression-gate flags shared by the suite and the sweep."""
    gate = parser.add_argument_group(
        "regression gate", f"after the {what}, check the report against a baseline (as 'apex-bench "
        f"compare' does); the baseline is validated before any {unit} runs")
    gate.add_argument("--compare", action="store_true", help="gate the finished report (needs --baseline)")
    gate.add_argument("--baseline", metavar="FILE", help="baseline JSON file")
    gate.add_argument("--allow-missing", action="store_true",
                      help="baseline metrics absent from the report do not fail the gate")
    gate.add_argument("--force", action="store_true", help="compare even across differing environments "
                      "(the summary is marked forced)")
    gate.add_argument("--summary", metavar="OUT", help="compare summary JSON "
                      "(default: next to the report, *.compare.json)")
    gate.add_argument("--trend-output", metavar="OUT", help="trend JSON (default *.trend.json)")
    gate.add_argument("--compare-md", metavar="OUT", help="compare Markdown table (default *.compare.md)")


def build_run_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="apex-bench",
        description="Run workloads x backends, check every result against the workload's "
        "reference, time it, and write a JSON report and a Markdown summary.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sel = parser.add_argument_group("selection")
    sel.add_argument("--backends", type=_comma_list, help="comma list of backends or the aliases "
                     "backends declare (trt = tensorrt-engine,tensorrt-plugin; all); default: all")
    sel.add_argument("--workloads", type=_comma_list, help="comma list of workloads, "
                     "workload:case, or all; default: all")
    sel.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda when available")
    sel.add_argument("--dtype", type=_dtype_list, help="one or a comma list of fp16, bf16, fp32; "
                     "default fp16 on cuda, fp32 on cpu")
    sel.add_argument("--profile", default="fixed", help="parameter profile: fixed, or one the selected "
                     "workloads define (built-ins: smoke, large); a workload without it runs with its "
                     "defaults and the report says so (default: fixed)")
    sel.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a workload parameter (repeatable)")
    sel.add_argument("--seed", type=seed, default=0, help="seed of the generated inputs (default 0)")
    tim = add_sampling_args(parser, "cell")
    tim.add_argument("--timeout", type=positive_seconds, default=600.0,
                     help="seconds one cell may take, build included (default 600)")
    tim.add_argument("--probe-timeout", type=positive_seconds, default=DEFAULT_PROBE_TIMEOUT_S,
                     help="seconds one backend's probe may take before its cells (and its --list row) "
                     f"become timeouts (default {DEFAULT_PROBE_TIMEOUT_S:g})")
    tim.add_argument("--lock-clocks", type=_clock_request, metavar="base|max|MHZ",
                     help="lock the SM clock of every GPU the run uses (base: the clock the card sustains "
                     "within its power limit, as nvbench's --lgc base; max: its highest; or MHz) and the "
                     "memory clock at its highest where the driver allows, reset when the run ends; needs "
                     "root: where the driver refuses, one line says why and the run goes on unlocked "
                     "(docs/timing.md#locked-clocks)")
    sel.add_argument("--backend-opt", dest="backend_opts", action="append", default=[],
                     metavar="NAME.KEY=VALUE", help="an option of one backend, as the backend declares it "
                     "(repeatable; --list shows each backend's options)")
    ext = parser.add_argument_group(
        "configured plugins", "external-command backends (ext:NAME) and bench.yaml workloads; see "
        "docs/external.md and docs/discover.md")
    ext.add_argument("--config", "--external-config", dest="config", metavar="PATH",
                     help="apex-bench config file (TOML: [external.NAME] commands, discover = [...]); "
                     "default: $APEX_BENCH_CONFIG, else apex-bench.toml in the current folder if present")
    ext.add_argument("--discover", action="append", default=[], metavar="DIR",
                     help="load the workloads declared by bench.yaml files under DIR (repeatable; needs "
                     "the 'discover' extra: pip install 'apex-bench[discover]')")
    trt = parser.add_argument_group(
        "tensorrt", "aliases of the tensorrt-engine and tensorrt-plugin backends' options "
        "(--backend-opt tensorrt-engine.engine_path=... ; see docs/tensorrt.md)")
    trt.add_argument("--trt-engine-path", metavar="PATH",
                     help="serialized TensorRT engine (.engine/.plan) for the workload named with "
                     "--workloads (default ff-infer); other workloads are skipped by tensorrt-engine")
    trt.add_argument("--trt-build", action="store_true",
                     help="build each tensorrt-engine cell's engine from the workload's ONNX export "
                     "(precision from --dtype)")
    trt.add_argument("--trt-plugin-lib", action="append", default=[], metavar="PATH",
                     type=plugin_library,
                     help="shared library registering the apexx TensorRT plugins: a file (relative "
                     "to the current folder) or a bare name the dynamic loader searches for "
                     "(repeatable; default: the os.pathsep-separated list in APEXX_TRT_PLUGIN_LIB)")
    add_model_args(parser)
    out = parser.add_argument_group("output")
    out.add_argument("--output-json", help="JSON report path (default artifacts/apex-bench.json)")
    out.add_argument("--output-md", help="Markdown summary path (default artifacts/apex-bench.md)")
    out.add_argument("--output-csv", metavar="PATH", help="also write the cells as CSV, one row each")
    out.add_argument("--output-roofline", metavar="PATH", help="also write each cell's rates against the "
                     "copy bandwidth the run measured, as a Markdown table (docs/report.md)")
    out.add_argument("--log-file", help="log with tracebacks (default: next to the JSON report)")
    out.add_argument("--html", metavar="OUT", help="also write the self-contained HTML report when the run "
                     "ends, linked from the Markdown summary (docs/report.md)")
    out.add_argument("--list", action="store_true", help="list backends and workloads with their "
                     "availability, then exit")
    out.add_argument("--quiet", action="store_true", help="print only the final summary line")
    out.add_argument("--strict", action="store_true", help="exit 1 when a cell is flagged faster than "
                     "physics (its minimal bytes over the device memory's peak bandwidth)")
    out.add_argument("--inline", action="store_true", help="run cells in this process (no crash "
                     "isolation; for debugging)")
    add_scale_args(parser)
    add_gate_args(parser, "run", "cell")
    add_history_args(parser)
    return parser
