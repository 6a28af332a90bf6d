"""Read what an HTML report is made of: run reports, a history, a baseline and a compare summary.

Each problem with an input is one ``UsageError`` line naming the file (exit 2): a report of
another schema version, a truncated or malformed JSON, a history that holds no run of the
report's environment. Nothing is rendered before every input has been read.

The history is the one given, else the default one (``default_history_path()``, which
``$APEX_BENCH_HISTORY`` names) when that file exists; ``--run SPEC`` picks the subject from it.
A default history that holds no run of the subject's environment is no error: the page says so.
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
from apex_core.history import (
    DEFAULT_HISTORY_PATH,
    HISTORY_ENV_VAR,
    HistoryError,
    HistoryStore,
    RunSummary,
    SeriesPoint,
    default_history_path,
    environment_identity,
)
from apex_core.report.records import SCHEMA_VERSION
from apex_core.report.schema import report_schema

# the trend plots follow this many runs of each cell at most
TREND_RUNS = 200
# where the default history is (apex_core.history.default_history_path)
DEFAULT_HISTORY_WORDS = f"${HISTORY_ENV_VAR}, else {DEFAULT_HISTORY_PATH}"


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
    default: bool = False  # found at the default path, not named with --history


@attrs.frozen
class ReportInputs:
    """Everything one HTML report shows; the subject is the last run given."""

    runs: tuple[RunInput, ...]
    history: HistoryInput | None = None
    baseline: Baseline | None = None
    gate: Mapping[str, Any] | None = None
    gate_label: str = ""
    peak_tflops: float | None = None
    history_note: str = ""  # why no history is shown, where one was looked for

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


def _subject_from_history(store: HistoryStore, spec: str | None) -> tuple[int, Mapping[str, Any]]:
    """The run ``--run SPEC`` names (its newest match), else the history's latest run."""
    if spec is not None:
        try:
            run_id = store.resolve(spec)[0].run_id
        except HistoryError as exc:
            raise HistoryError(store.path, f"--run {spec}: {exc.problem}") from None
    else:
        newest = store.runs(limit=1)
        if not newest:
            raise HistoryError(store.path, "holds no runs yet: give a RUN.json too")
        run_id = newest[0].run_id
    return run_id, store.run(run_id).report


def read_history(
    path: Path | str,
    subject: Mapping[str, Any] | None,
    timeout_s: float,
    spec: str | None = None,
    default: bool = False,
) -> tuple[HistoryInput | None, Mapping[str, Any], int | None, str]:
    """The history's runs of the subject's environment, the subject (with no ``subject``: the run
    ``spec`` names, else the latest run), its run id there, and why no history is shown (or "").

    Raises ``HistoryError`` when the file holds no run at all, ``spec`` names none, or the file,
    given with --history, holds no run of the subject's environment.
    """
    with HistoryStore.open(path, create=False, timeout_s=timeout_s) as store:
        chosen = None
        if subject is None:
            chosen, subject = _subject_from_history(store, spec)
        key, environment_id = environment_identity(subject)
        runs = store.runs(environment_key=environment_id)
        if not runs:
            others = sorted({f"{r.environment_id} ({_environment_words(r.environment_key)})"
                             for r in store.runs(limit=5)})
            holds = (f"holds no run of the report's environment {environment_id} ({_environment_words(key)}); "
                     f"it holds {'; '.join(others) or 'no runs at all'}")
            if default:
                return None, subject, None, f"The default history {path} ({DEFAULT_HISTORY_WORDS}) {holds}."
            raise HistoryError(path, holds)
        series = store.series("p50_ms", environment_key=environment_id, limit=TREND_RUNS)
        if chosen is None:
            chosen = next((r.run_id for r in runs if r.timestamp_utc == subject.get("timestamp_utc")), None)
        found = HistoryInput(path=str(path), environment_id=environment_id, runs=runs, series=series,
                             subject_run_id=chosen, default=default)
        return found, subject, chosen, ""


def _history_to_read(history: Path | str | None, default_history: bool) -> tuple[Path | str | None, str]:
    """The history to read (given, else the default one where that file exists), and where a default
    was looked for in vain ("" where none was)."""
    if history is not None or not default_history:
        return history, ""
    where = default_history_path()
    return (where, "") if where.is_file() else (None, str(where))


def gather(
    run_paths: Sequence[Path | str],
    history: Path | str | None = None,
    baseline: Path | str | None = None,
    summary: Path | str | None = None,
    peak_tflops: float | None = None,
    timeout_s: float = 10.0,
    run_spec: str | None = None,
    default_history: bool = False,
) -> ReportInputs:
    """Read every input of one report. The subject is the run ``run_spec`` names in the history, else
    the last run given, else the history's latest; ``default_history`` reads the default history
    when none is given and that file exists."""
    where, missing = _history_to_read(history, default_history)
    looked = f" (no default history at {missing}: {DEFAULT_HISTORY_WORDS})" if missing else ""
    if where is None and run_spec is not None:
        raise UsageError(f"--run {run_spec} picks a run from a history: give --history DB{looked}"
                         if default_history else f"--run {run_spec} reads the history: drop --no-history")
    if not run_paths and where is None:
        raise UsageError(f"nothing to report: give RUN.json files or --history DB{looked}")
    note = f"No history: none given with --history, and none at the default {missing}." if missing else ""
    runs = [read_run(path, f"run{index}") for index, path in enumerate(run_paths)]
    history_input = None
    if where is not None:
        from_history = run_spec is not None or not runs
        subject = None if from_history else runs[-1].record
        history_input, record, run_id, note = read_history(where, subject, timeout_s, run_spec,
                                                           default=history is None)
        if from_history:
            label = f"{where} run #{run_id} " + (f"(--run {run_spec})" if run_spec else "(latest run)")
            doc = f"run{len(runs)}"
            runs.append(RunInput(doc=doc, label=label, record=check_report_record(label, dict(record))))
    return ReportInputs(
        runs=tuple(runs),
        history=history_input,
        baseline=load_baseline(baseline) if baseline is not None else None,
        gate=read_compare_summary(summary) if summary is not None else None,
        gate_label=str(summary or ""),
        peak_tflops=peak_tflops,
        history_note=note,
    )
