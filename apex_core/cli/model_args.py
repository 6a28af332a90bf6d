"""The flags that run a model file as it is: ``--input-shape`` and ``--reference-model`` (sweep and run),
``--model`` and its companions (run only), and the checks that keep them apart from workload flags.

A model given by path becomes cases of the ``engine`` workload, as in ``apex-bench sweep``
(``apex_core.engine.sweep.plan_sweep``): the main run with ``--model m.onnx --input-shape
x=2x3`` is a sweep of one case, written in the suite's report format.
"""

from __future__ import annotations

import argparse
from typing import Any

from apex_core.cli.values import positive_int
from apex_core.engine.input_shape import ALIAS, FLAG, InputShape, parse_input_shape
from apex_core.engine.sweep import RUNTIMES
from apex_core.engine.workload import DEFAULT_INT_HIGH
from apex_core.errors import UsageError
from apex_core.interfaces import FIXED_PROFILE


def input_shape(text: str) -> InputShape:
    """argparse type of ``--input-shape``: a malformed value is the flag's one-line error."""
    try:
        return parse_input_shape(text, where=repr(text))
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_shape_args(group: argparse._ArgumentGroup) -> None:
    """``--input-shape`` (alias ``--trt-input-shape``) and ``--reference-model``."""
    group.add_argument(FLAG, ALIAS, dest="input_shapes", action="append", default=[], type=input_shape,
                       metavar="NAME=AxBxC", help="the shape of one model input, filling its open "
                       "(dynamic) dimensions; fixed ones must match (repeatable)")
    group.add_argument("--reference-model", metavar="PATH", help="an ONNX model with the same input and "
                       "output names, run by onnxruntime on the CPU; each cell's outputs are checked "
                       "against it (without it the cells are timed and reported unchecked)")


def add_model_args(parser: argparse.ArgumentParser) -> None:
    """The main run's model group: a model file run through the engine workload."""
    group = parser.add_argument_group(
        "model file", "run one ONNX model or serialized TensorRT engine as it is, whatever its input names "
        "(one cell per backend; see docs/sweep.md#a-model-as-it-is)")
    group.add_argument("--model", metavar="PATH", help="the model: .onnx under onnxruntime, .engine/.plan "
                       "under tensorrt-engine (--trt-engine-path PATH with --input-shape does the same)")
    group.add_argument("--runtime", choices=tuple(RUNTIMES), help="the model's runtime (default: from the "
                       "suffix)")
    group.add_argument("--int-high", type=positive_int, default=DEFAULT_INT_HIGH,
                       help=f"integer inputs are uniform in [0, N) (default {DEFAULT_INT_HIGH})")
    add_shape_args(group)


def model_path(args: Any) -> tuple[str, str] | None:
    """``(path, flag)`` of the model the main run times as it is, or None for a workload run.

    ``--trt-engine-path`` with ``--input-shape`` or ``--reference-model`` is such a model too: an
    engine whose inputs are not a workload's. Flags that only a workload run or only a model
    run reads are refused.
    """
    path, flag = args.model, "--model"
    if path and args.trt_engine_path:
        raise UsageError("--model and --trt-engine-path both name a model; give one")
    if not path and args.trt_engine_path and (args.input_shapes or args.reference_model):
        path, flag = args.trt_engine_path, "--trt-engine-path"
    if not path:
        for given, name in ((args.input_shapes, FLAG), (args.reference_model, "--reference-model"),
                            (args.runtime, "--runtime")):
            if given:
                raise UsageError(f"{name} needs a model: pass --model PATH (an ONNX model or a serialized "
                                 "engine)")
        return None
    for given, name in ((args.workloads, "--workloads"), (args.dtype, "--dtype"), (args.overrides, "--set"),
                        (args.profile != FIXED_PROFILE, "--profile"), (args.trt_build, "--trt-build"),
                        (args.trt_plugin_lib, "--trt-plugin-lib"), (args.list, "--list")):
        if given:
            raise UsageError(f"{name} does not apply to {flag}: the model's own inputs, dtypes and shapes "
                             f"are run (set open dimensions with {FLAG})")
    return path, flag
