"""The built-in workloads' Triton implementations: which ``apex_kernels`` function serves each,
and how a ``Case`` maps to its arguments.

Each workload names its ``TritonOp`` in ``Workload.implementations["triton"]`` (the triton
backend finds it there, as it finds a third-party workload's). The kernels know tensors and
sizes only; a binding reads the workload's parameters and constants (``apex_core.workloads``)
and passes them as arguments. Kernel modules are imported only when a cell is checked or
prepared, so importing this module never imports triton.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import attrs

from apex_core.correctness import DTYPES
from apex_core.interfaces import Inputs, Workload
from apex_core.results import Case
from apex_core.workloads.ff_infer import NORM_EPS, SCAN_MERGE, level_weights
from apex_core.workloads.tilessm_scan import DECAY_MAX, DECAY_MIN
from apex_kernels._utils import SUPPORTED_DTYPES

Bind = Callable[..., Any]  # (workload, case, inputs, **options) -> apex_kernels Launcher
Limits = Callable[[Case], "str | None"]


@attrs.frozen
class TritonOp:
    """One workload's kernel: its module, how to bind a case, and what it cannot run."""

    module: str
    bind: Bind
    limits: Limits = lambda case: None
    cases: tuple[str, ...] | None = None  # None: every case of the workload

    def supports(self, case: Case, dtype_name: str) -> str | None:
        """Why the kernel cannot run ``case`` in ``dtype_name``, or None when it can."""
        if self.cases is not None and case.name not in self.cases:
            return f"the {case.workload} Triton kernel has no case {case.name!r} ({', '.join(self.cases)})"

        names = [name for name, dtype in DTYPES.items() if dtype in SUPPORTED_DTYPES]
        if dtype_name not in names:
            return (f"the {case.workload} Triton kernel supports {', '.join(names)}, not {dtype_name}"
                    " (loads and stores are typed by the input; fp8 has no arithmetic path here)")
        return self.limits(case)


def _kernels(name: str) -> Any:
    return importlib.import_module(f"apex_kernels.{name}")


def _tilepack(workload: Workload, case: Case, inputs: Inputs) -> Any:
    return _kernels("tilepack").tilepack_launcher(inputs["features"], inputs["idx"],
                                                 case.params.tile_size)


def _tileunpack(workload: Workload, case: Case, inputs: Inputs) -> Any:
    # override and blend origins are on the tile grid (the workload checks it when inputs
    # are made), so whole tile slots can be handled per program; overlap overrides
    mode = "blend" if case.name == "blend" else "override"
    return _kernels("tileunpack").tileunpack_launcher(
        inputs["base"], inputs["packed"], inputs["origins"], inputs["levels"], mode,
        inputs["alpha"], aligned_origins=case.name != "overlap")


def _tile_stage1(workload: Workload, case: Case, inputs: Inputs) -> Any:
    x, idx, vs, vb, gs, gb = (inputs[n] for n in ("x", "idx", "vs", "vb", "gs", "gb"))
    return _kernels("tile_stage1").tile_stage1_launcher(x, idx, vs, vb, gs, gb,
                                                       case.params.tile_size)


def _fusiongate(workload: Workload, case: Case, inputs: Inputs, **options: Any) -> Any:
    names = ("boundary", "uncertainty", "base", "detail", "wb", "wu", "bias")
    return _kernels("fusiongate").fusiongate_launcher(*(inputs[n] for n in names), **options)


def _fusiongate_limits(case: Case) -> str | None:
    p = case.params
    return _kernels("fusiongate").shape_reason(p.batch, p.channels, p.height, p.width)


def _tilessm_scan(workload: Workload, case: Case, inputs: Inputs, **options: Any) -> Any:
    p = case.params
    names = ("tokens", "decay", "input_gain", "output_gain", "state_bias")
    return _kernels("tilessm_scan").tilessm_scan_launcher(
        *(inputs[n] for n in names), direction=case.name, merge=p.merge, gate=inputs["gate"],
        init_state=inputs["init_state"], clamp=float(p.clamp),
        decay_bounds=(DECAY_MIN, DECAY_MAX), **options)


def _tilessm_scan_limits(case: Case) -> str | None:
    return _kernels("tilessm_scan").shape_reason(case.params.steps, case.params.channels,
                                                 case.params.clamp)


def _ff_infer(workload: Workload, case: Case, inputs: Inputs, **options: Any) -> Any:
    workload.validate_inputs(case, inputs)  # syncs the host once, here, never per call
    p = case.params
    names = ("features", "boundary", "uncertainty", "util0", "split_util")
    levels = (level_weights(inputs, "l0_"), level_weights(inputs, "l1_"))
    return _kernels("ff_infer").ff_infer_launcher(
        *(inputs[n] for n in names), levels, inputs["wb"], inputs["wu"], inputs["bias"],
        tile_size=p.tile_size, level0_tiles=p.level0_tiles, split_parents=p.split_parents,
        scan_merge=SCAN_MERGE, norm_eps=NORM_EPS, **options)


def _ff_infer_limits(case: Case) -> str | None:
    p = case.params
    return _kernels("ff_infer").shape_reason(p.channels, p.height, p.width, p.tile_size, p.level0_tiles,
                                             p.level1_tiles) or _fusiongate_limits(case)


# each named by its workload's Workload.implementations["triton"]
TILEPACK = TritonOp("tilepack", _tilepack)
TILEUNPACK = TritonOp("tileunpack", _tileunpack, cases=("override", "blend", "overlap"))
TILE_STAGE1 = TritonOp("tile_stage1", _tile_stage1)
FUSIONGATE = TritonOp("fusiongate", _fusiongate, _fusiongate_limits)
TILESSM_SCAN = TritonOp("tilessm_scan", _tilessm_scan, _tilessm_scan_limits,
                        cases=("forward", "backward", "bidirectional"))
FF_INFER = TritonOp("ff_infer", _ff_infer, _ff_infer_limits)
