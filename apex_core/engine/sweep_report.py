"""A sweep's Markdown summary: the suite's, plus the engine and resolved shapes (its JSON is the suite's)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apex_core.engine.shape_case import format_shape
from apex_core.engine.workload import NO_REFERENCE
from apex_core.report.formats import FORMATS, markdown_format
from apex_core.report.markdown import render_markdown
from apex_core.results import Report


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


# a sweep's report: the suite's formats, with its own Markdown summary
SWEEP_FORMATS = {**FORMATS, "markdown": markdown_format(sweep_markdown)}
