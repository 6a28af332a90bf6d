"""Baselines and the regression gate: load, compare with a fixed rule, judge the samples, emit."""

from apex_core.baseline.compare import compare
from apex_core.baseline.emit import emit_baseline
from apex_core.baseline.errors import EnvironmentMismatchError, InputFileError
from apex_core.baseline.io import load_baseline, load_report, write_baseline
from apex_core.baseline.model import Baseline, Check, CompareSummary, MetricLimit, Verdict

__all__ = [
    "Baseline",
    "Check",
    "CompareSummary",
    "EnvironmentMismatchError",
    "InputFileError",
    "MetricLimit",
    "Verdict",
    "compare",
    "emit_baseline",
    "load_baseline",
    "load_report",
    "write_baseline",
]
