"""``apex-bench export-onnx``: write each selected workload case as an ONNX file, plus a manifest."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch

from apex_core.cli.values import OneLineParser
from apex_core.correctness import DTYPES
from apex_core.engine.onnx_export import OPSET, ExportedModel, ExportError, export_workload, exportable_in
from apex_core.errors import UsageError, one_line
from apex_core.files import atomic_write_text, check_writable
from apex_core.interfaces import Workload
from apex_core.measure.environment import package_version
from apex_core.params import parse_overrides
from apex_core.plan import check_profile, params_for
from apex_core.registry import Registry
from apex_core.results import Case

MANIFEST = "manifest.json"
MANIFEST_SCHEMA_VERSION = 1
_EXIT_CODES = """\
exit codes:
  0  every exportable case was written (the others are listed in the manifest with the reason)
  1  an exportable case failed to export or to pass the ONNX checker
  2  usage error (unknown name, bad value, unwritable output folder)
"""


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="apex-bench export-onnx",
        description="Export each selected workload case's torch reference to ONNX (one file per case, "
        "named WORKLOAD-CASE-DTYPE.onnx) and write manifest.json with every file's input and output "
        "names, shapes, dtypes, dynamic axes and sha256; cases that cannot be exported are listed "
        "there with the reason. See docs/onnx.md.",
        epilog=_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--workloads", default="all", help="comma list of workloads, workload:case, or all "
                        "(default: all)")
    parser.add_argument("--output-dir", required=True, metavar="DIR", help="folder for the .onnx files and "
                        "manifest.json (created if missing)")
    parser.add_argument("--profile", default="fixed", help="parameter profile: fixed, or one the selected "
                        "workloads define; a workload without it exports with its defaults (default: fixed)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a workload parameter (repeatable)")
    parser.add_argument("--dtype", choices=tuple(DTYPES), default="fp32",
                        help="dtype of the data inputs (default: fp32)")
    parser.add_argument("--case", dest="cases", action="append", default=[], metavar="NAME",
                        help="export only cases of this name (repeatable; default: every case)")
    return parser


def select_cases(registry: Registry, selection: str, profile: str, overrides: list[str],
                 case_names: list[str]) -> list[tuple[Workload, Case]]:
    """Resolve workload names, ``workload:case`` selectors, ``--case`` and ``--set`` into cases."""
    selectors = [item.strip().partition(":") for item in selection.split(",") if item.strip()]
    names = registry.select_workloads([name.strip() for name, _, _ in selectors] or None)
    wanted: dict[str, set[str]] = {}
    for name, _, case in selectors:
        if case.strip():
            wanted.setdefault(name.strip(), set()).add(case.strip())
    for name in names:
        row = registry.broken_row("workload", name)
        if row is not None:
            raise UsageError(f"workload plugin {name!r} failed to load: {row.reason}")
    live = [registry.workloads[n] for n in names]
    typed = parse_overrides(overrides, live)
    check_profile(profile, live)
    selected: list[tuple[Workload, Case]] = []
    for workload in live:
        cases = workload.cases(params_for(workload, profile, typed)[0])
        known = [c.name for c in cases]
        for name in sorted(wanted.get(workload.name, set())):
            if name not in known:
                raise UsageError(f"unknown case {name!r} of {workload.name}; valid cases: {', '.join(known)}")
        keep = wanted.get(workload.name) or set(known)
        chosen = [c for c in cases if c.name in keep and (not case_names or c.name in case_names)]
        selected += [(workload, c) for c in chosen]
    if case_names and not selected:
        raise UsageError(f"--case {', '.join(case_names)}: no selected workload has such a case")
    return selected


def _tensor_records(names: tuple[str, ...], shapes: tuple[tuple[int, ...], ...], dtypes: tuple[str, ...],
                    axes: dict[str, dict[int, str]]) -> list[dict[str, Any]]:
    return [
        {"name": n, "dtype": d, "shape": list(s),
         "dynamic_axes": {str(axis): label for axis, label in sorted(axes.get(n, {}).items())}}
        for n, s, d in zip(names, shapes, dtypes, strict=True)
    ]


def model_record(exported: ExportedModel, output_dir: Path) -> dict[str, Any]:
    """The manifest entry of one exported file."""
    return {
        "file": exported.path.relative_to(output_dir).as_posix(),
        "workload": exported.workload,
        "case": exported.case,
        "dtype": exported.dtype,
        "params": exported.params,
        "opset": exported.opset,
        "sha256": exported.sha256,
        "inputs": _tensor_records(exported.input_names, exported.input_shapes, exported.input_dtypes,
                                  exported.dynamic_axes),
        "outputs": _tensor_records(exported.output_names, exported.output_shapes, exported.output_dtypes, {}),
        "unused_inputs": list(exported.unused_inputs),
        "note": exported.note,
    }


def manifest_header(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "apex_bench_version": package_version("apex-bench"),
        "torch_version": torch.__version__,
        "onnx_version": package_version("onnx"),
        "exporter": "torch.onnx.export (TorchScript tracer, dynamo=False)",
        "opset": OPSET,
        "profile": args.profile,
        "overrides": list(args.overrides),
        "dtype": args.dtype,
    }


def main(argv: list[str]) -> int:
    """Export the selection; 0 when every exportable case was written, 1 when one failed."""
    args = build_parser().parse_args(argv)
    output_dir = Path(args.output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise UsageError(f"--output-dir {output_dir}: exists and is not a folder")
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--output-dir {output_dir}: cannot create it ({exc.strerror})") from None
    check_writable(output_dir / MANIFEST, "--output-dir")
    selected = select_cases(Registry.discover(), args.workloads, args.profile, args.overrides, args.cases)
    models: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    failed = 0
    for workload, case in selected:
        ok, reason = exportable_in(workload, case, args.dtype)
        if not ok:
            skipped.append({"workload": workload.name, "case": case.name, "reason": reason})
            print(f"{case.id}: not exported: {reason}")
            continue
        path = output_dir / f"{workload.name}-{case.name}-{args.dtype}.onnx"
        try:
            exported = export_workload(workload, case, args.dtype, path)
        except Exception as exc:  # one case's failure (exporter, file system) must not end the rest
            reason = one_line(str(exc) if isinstance(exc, ExportError) else f"{type(exc).__name__}: {exc}")
            failed += 1
            skipped.append({"workload": workload.name, "case": case.name, "reason": reason, "error": True})
            print(f"{case.id}: export failed: {reason}", file=sys.stderr)
            continue
        models.append(model_record(exported, output_dir))
        dynamic = dict.fromkeys(label for axes in exported.dynamic_axes.values() for label in axes.values())
        print(f"{case.id}: wrote {path} (dynamic: {', '.join(dynamic) or 'none'})")
    # workloads that lack the profile were exported with their defaults: the manifest says which
    fallbacks = sorted({w.name for w, _case in selected if args.profile not in w.profile_names()})
    for name in fallbacks:
        print(f"{name}: no {args.profile} profile, exported with its defaults")
    manifest = {**manifest_header(args), **({"profile_fallbacks": fallbacks} if fallbacks else {}),
                "models": models, "not_exported": skipped}
    atomic_write_text(output_dir / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    print(f"apex-bench export-onnx: {len(models)} exported, {len(skipped) - failed} not exportable, "
          f"{failed} failed; manifest {output_dir / MANIFEST}")
    return 1 if failed else 0
