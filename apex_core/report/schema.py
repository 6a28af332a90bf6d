"""The JSON Schema of a report (report.schema.json, shipped in the package) and its check."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import jsonschema


@cache
def report_schema() -> dict[str, Any]:
    """The JSON Schema every report validates against (shipped in the package)."""
    text = resources.files("apex_core.report").joinpath("report.schema.json").read_text("utf-8")
    return json.loads(text)


def validate_report(record: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` when a report record breaks the schema."""
    jsonschema.validate(record, report_schema())
