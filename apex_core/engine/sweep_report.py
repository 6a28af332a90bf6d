"""A sweep's JSON report and Markdown summary: the suite's formats, plus the engine and resolved shapes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apex_core.engine.shape_case import format_shape
from apex_core.results import Report
from apex_core.workloads.engine_file import NO_REFERENCE, EngineWorkload


def sweep_record(report: Report) -> dict[str, Any]:
    """The JSON report of a sweep: the suite's format, with the replay block over the sweep's inputs.

    The cells are filed under the sweep's name, which no installed workload has: the replay
    block is computed with the engine workload under that name (its inputs come from the
    cells' parameters; there are no reference outputs to fingerprint).
    """
    from apex_core.report.manifest import replay_block
    from apex_core.report.records import report_record

    workloads = {name: EngineWorkload() for name in report.config.get("workloads", [])}
    return {**report_record(report), "replay": replay_block(report.config, report.cells, workloads)}


def _shapes_text(tensors: Mapping[str, Any]) -> str:
    """The tensors whose shape the model leaves open; fixed ones are only counted."""
    shown = [f"{name} {format_shape(t['shape'])} {t['dtype']}" for name, t in tensors.items()
             if t.get("dynamic") is not False]
    fixed = len(tensors) - len(shown)
    return ", ".join(shown + ([f"{fixed} fixed"] if fixed else [])) or "–"


def _params_inputs(params: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs as the case's parameters resolve them (for a cell that never got to bind them)."""
    return {name: {"shape": list(shape), "dtype": dtype} for name, dtype, shape in params.get("inputs", ())}


def sweep_markdown(report: Report) -> str:
    """The suite's Markdown summary plus the resolved shapes of every case."""
    from apex_core.report.markdown import render_markdown

    lines = ["", "## Shapes", "", "Tensors with open dimensions at their resolved shapes; the JSON report "
             "lists every tensor.", "", "| case | backend | inputs | outputs |", "| --- | --- | --- | --- |"]
    for cell in report.cells:
        inputs = cell.metadata.get("inputs") or _params_inputs(cell.params)
        texts = [_shapes_text(inputs), _shapes_text(cell.metadata.get("outputs", {}))]
        row = [text.replace("|", "\\|").replace("\n", " ") for text in (cell.case, cell.backend, *texts)]
        lines.append("| " + " | ".join(row) + " |")
    engine = report.config.get("engine", {})
    reference = report.config.get("reference_model")
    checked = (f"Correctness checked against the reference model `{reference.get('path')}` (sha256 "
               f"{reference.get('sha256')}), run by ONNX Runtime on the CPU." if reference
               else f"Correctness {NO_REFERENCE}.")
    lines += ["", f"Engine `{engine.get('path')}` (sha256 {engine.get('sha256')}), runtime "
              f"{engine.get('runtime')}. {checked}"]
    return render_markdown(report) + "\n".join(lines) + "\n"
