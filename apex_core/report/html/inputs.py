"""Read what an HTML report is made of: run reports, a history, a baseline and a compare summary.

Each problem with an input is one ``UsageError`` line naming the file (exit 2): a report of
another schema version, a truncated or malformed JSON, a history that holds no run of the
report's environment. Nothing is rendered before every input has been read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from apex_core.baseline.errors import InputFileError
from apex_core.baseline.io import load_baseline, read_json, validate_against
from apex_core.baseline.model import Baseline
from apex_core.errors import UsageError
from apex_core.history import HistoryError, HistoryStore, RunSummary, SeriesPoint, environment_identity
from apex_core.report.records import SCHEMA_VERSION
from apex_core.report.schema import report_schema

# the trend plots follow this many runs of each cell at most
TREND_RUNS = 200


@attrs.frozen
class RunInput:
    """One run's JSON report, named ``doc`` (run0, run1, ...) in the numbers' sources."""

    doc: str
    label: str  # the file it came from, or "history run N"
    record: Mapping[str, Any]


@attrs.frozen
class HistoryInput:
    """The part of a history that shares the subject run's environment."""

    path: str
    environment_id: str
    runs: tuple[RunSummary, ...]  # newest first
    series: tuple[SeriesPoint, ...]  # p50_ms of every ok cell, oldest run first
    subject_run_id: int | None  # the history's run of the subject report, when it holds it


@attrs.frozen
class ReportInputs:
    """Everything one HTML report shows; the subject is the last run given."""

    runs: tuple[RunInput, ...]
    history: HistoryInput | None = None
    baseline: Baseline | None = None
    gate: Mapping[str, Any] | None = None
    gate_label: str = ""
    peak_tflops: float | None = None

    @property
    def subject(self) -> RunInput:
        return self.runs[-1]


def check_report_record(path: Path | str, record: Any) -> Mapping[str, Any]:
    """Refuse what is not a report of the schema this code reads (one line naming the file)."""
    if not isinstance(record, dict):
        raise InputFileError(path, None, f"a report is a JSON object, got {type(record).__name__}")
    version = record.get("schema_version")
    if version != SCHEMA_VERSION:
        reads = f"this apex-bench reads reports of schema version {SCHEMA_VERSION} only"
        raise InputFileError(path, "schema_version", f"is {version!r}: {reads}")
    validate_against(path, record, report_schema())
    return record


def read_run(path: Path | str, doc: str) -> RunInput:
    """A run report from a file: JSON, schema version 1, valid against the shipped schema."""
    return RunInput(doc=doc, label=str(path), record=check_report_record(path, read_json(path)))


def read_compare_summary(path: Path | str) -> Mapping[str, Any]:
    """A compare summary (``apex-bench compare --summary``): an object with a list of checks."""
    record = read_json(path)
    if not isinstance(record, dict) or not isinstance(record.get("checks"), list):
        raise InputFileError(path, "checks", "missing: not a compare summary (apex-bench compare --summary)")
    for index, check in enumerate(record["checks"]):
        if not isinstance(check, dict) or not all(isinstance(check.get(k), str) for k in ("metric", "status")):
            raise InputFileError(path, f"checks[{index}]", "lacks a metric name or a status")
    return record


def _environment_words(key: Mapping[str, Any]) -> str:
    words = [str(key.get(name)) for name in ("hardware", "device", "profile") if key.get(name)]
    methods = key.get("timing_methods") or []
    return ", ".join(words + ([f"timed by {'/'.join(methods)}"] if methods else []))


def read_history(
    path: Path | str, subject: Mapping[str, Any] | None, timeout_s: float
) -> tuple[HistoryInput, Mapping[str, Any]]:
    """The history's runs of the subject's environment; with no subject, its latest run is the subject.

    Raises ``HistoryError`` when the file holds no run at all, or none of the subject's environment.
    """
    with HistoryStore.open(path, create=False, timeout_s=timeout_s) as store:
        if subject is None:
            newest = store.runs(limit=1)
            if not newest:
                raise HistoryError(path, "holds no runs yet: give a RUN.json too")
            subject = store.run(newest[0].run_id).report
        key, environment_id = environment_identity(subject)
        runs = store.runs(environment_key=environment_id)
        if not runs:
            others = sorted({f"{r.environment_id} ({_environment_words(r.environment_key)})"
                             for r in store.runs(limit=5)})
            raise HistoryError(path, f"holds no run of the report's environment {environment_id} "
                               f"({_environment_words(key)}); it holds {'; '.join(others) or 'no runs at all'}")
        series = store.series("p50_ms", environment_key=environment_id, limit=TREND_RUNS)
        subject_run = next((r.run_id for r in runs if r.timestamp_utc == subject.get("timestamp_utc")), None)
        return HistoryInput(
            path=str(path), environment_id=environment_id, runs=runs, series=series, subject_run_id=subject_run
        ), subject


def gather(
    run_paths: Sequence[Path | str],
    history: Path | str | None = None,
    baseline: Path | str | None = None,
    summary: Path | str | None = None,
    peak_tflops: float | None = None,
    timeout_s: float = 10.0,
) -> ReportInputs:
    """Read every input of one report; the subject is the last run (the history's latest without one)."""
    if not run_paths and history is None:
        raise UsageError("nothing to report: give RUN.json files or --history")
    runs = [read_run(path, f"run{index}") for index, path in enumerate(run_paths)]
    history_input = None
    if history is not None:
        subject = runs[-1].record if runs else None
        history_input, record = read_history(history, subject, timeout_s)
        if not runs:
            label = f"{history} (latest run)"
            runs.append(RunInput(doc="run0", label=label, record=check_report_record(label, dict(record))))
    return ReportInputs(
        runs=tuple(runs),
        history=history_input,
        baseline=load_baseline(baseline) if baseline is not None else None,
        gate=read_compare_summary(summary) if summary is not None else None,
        gate_label=str(summary or ""),
        peak_tflops=peak_tflops,
    )
