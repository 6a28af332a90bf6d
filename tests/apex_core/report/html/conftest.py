"""Fixtures of the HTML report: two real fixed-profile H100 runs, a run with every status, a history.

``report-h100-fixed.json.xz`` and ``report-h100-fixed-graph.json.xz`` are the reports of
``apex-bench --device cuda --profile fixed --backends triton,torch-reference,torch-compile``
(the second with ``--graph``) on an NVIDIA H100 80GB HBM3, driver 580.159.04, torch
2.11.0+cu130, triton 3.6.0, 2026-11-27: 30 ok cells each, up to 5,000 samples a cell.
"""

from __future__ import annotations

import copy
import json
import lzma
import math
from pathlib import Path
from typing import Any

import pytest

from apex_core.cli.main import main as cli_main
from apex_core.report.schema import validate_report
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures"
HISTORY_RUNS = 12
STEP_AT = 6  # from this history run on, triton's tilepack is 25 % slower
STEP_CELL = ("tilepack", "default", "triton")


def load_fixture(name: str) -> dict[str, Any]:
    with lzma.open(FIXTURES / name, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def write_json(path: Path, record: Any) -> Path:
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


def scaled_cell(cell: dict[str, Any], factor: float) -> dict[str, Any]:
    """The cell as if every call took ``factor`` times as long."""
    out = copy.deepcopy(cell)
    if cell["stats"] is None:
        return out
    out["samples_ms"] = [s * factor for s in cell["samples_ms"]]
    out["stats"] = {k: (v * factor if k.endswith("_ms") else v) for k, v in cell["stats"].items()}
    for rate in ("gbps", "tflops", "tiles_per_s", "tokens_per_s", "elements_per_s", "frames_per_s"):
        if isinstance(cell.get(rate), (int, float)):
            out[rate] = cell[rate] / factor
    return out


def with_every_status(report: dict[str, Any]) -> dict[str, Any]:
    """The run plus one cell of each status that has no time, as the runner records them."""
    out = copy.deepcopy(report)
    template = {
        k: v
        for k, v in report["benchmarks"][9].items()
        if k in ("workload", "case", "params", "dtype", "device", "accuracy", "metadata")
    }
    extra = [
        ("tensorrt-plugin", "skipped", "unavailable", "tensorrt not installed (pip install tensorrt)"),
        ("onnxruntime", "incorrect", None, "output 'packed': 12 of 1048576 elements mismatch (max abs 0.5)"),
        ("external", "error", None, "RuntimeError: the command exited 1 <script>alert(1)</script>"),
        ("crashy", "crashed", None, "worker died with signal 11 (SIGSEGV)"),
        ("hangy", "timeout", None, "no result within 600 s"),
    ]
    for backend, status, kind, reason in extra:
        cell = {
            **template,
            "name": f"tilepack/default/{backend}/fp16/cuda",
            "backend": backend,
            "status": status,
            "skip_kind": kind,
            "reason": reason,
            "timing_method": None,
            "stats": None,
            "samples_ms": [],
            "build_time_s": None,
            "peak_memory_mb": None,
            "input_memory_mb": None,
            "wall_time_s": 1.0,
        }
        out["benchmarks"].append(cell)
    counts: dict[str, int] = {}
    for cell in out["benchmarks"]:
        counts[cell["status"]] = counts.get(cell["status"], 0) + 1
    out["summary"] = {"cells": len(out["benchmarks"]), **dict(sorted(counts.items()))}
    validate_report(out)
    return out


@pytest.fixture(autouse=True)
def default_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's default history ($APEX_BENCH_HISTORY), absent until the test writes it: no test
    reads the user's history, nor one another test of this process recorded into."""
    path = tmp_path / "default-history" / "history.sqlite"
    monkeypatch.setenv("APEX_BENCH_HISTORY", str(path))
    return path


@pytest.fixture(scope="session")
def h100_events() -> dict[str, Any]:
    return load_fixture("report-h100-fixed.json.xz")


@pytest.fixture(scope="session")
def h100_graph() -> dict[str, Any]:
    return load_fixture("report-h100-fixed-graph.json.xz")


@pytest.fixture(scope="session")
def report_files(
    tmp_path_factory: pytest.TempPathFactory, h100_events: dict[str, Any], h100_graph: dict[str, Any]
) -> dict[str, Path]:
    """The fixture runs as files: events, graph, and events with a cell of every status."""
    folder = tmp_path_factory.mktemp("runs")
    return {
        "events": write_json(folder / "h100-events.json", h100_events),
        "graph": write_json(folder / "h100-graph.json", h100_graph),
        "mixed": write_json(folder / "h100-mixed.json", with_every_status(h100_events)),
    }


def history_reports(subject: dict[str, Any]) -> list[dict[str, Any]]:
    """Twelve runs of the subject's environment; the last is the subject itself (its samples kept)."""
    reports = []
    for i in range(HISTORY_RUNS):
        run = copy.deepcopy(subject) if i == HISTORY_RUNS - 1 else {**subject, "benchmarks": []}
        if i < HISTORY_RUNS - 1:
            for index, cell in enumerate(subject["benchmarks"]):
                wobble = 1.0 + 0.01 * math.sin(1.7 * i + index)
                step = (
                    1.25
                    if tuple(cell[k] for k in ("workload", "case", "backend")) == STEP_CELL and i >= STEP_AT
                    else 1.0
                )
                scaled = scaled_cell(cell, wobble * step)
                scaled["samples_ms"] = scaled["samples_ms"][:50]  # the history indexes stats; keep it small
                run["benchmarks"].append(scaled)
            run["timestamp_utc"] = f"2026-11-{i + 1:02d}T00:00:00Z"
        run["environment"] = {**subject["environment"], "git": {"commit": f"{i + 1:02x}" * 20, "dirty": False}}
        reports.append(run)
    return reports


@pytest.fixture(scope="session")
def history_file(tmp_path_factory: pytest.TempPathFactory, report_files: dict[str, Path]) -> Path:
    """A history of twelve runs of the mixed run's environment, the last one the mixed run, tagged."""
    from apex_core.history import HistoryStore

    subject = json.loads(report_files["mixed"].read_text())
    path = tmp_path_factory.mktemp("history") / "history.sqlite"
    with HistoryStore.open(path) as store:
        for i, report in enumerate(history_reports(subject)):
            tags = ["nightly"] + (["v1.2"] if i == HISTORY_RUNS - 1 else [])
            store.record(report, tags=tags, branch="main")
    return path


@pytest.fixture(scope="session")
def gate_files(tmp_path_factory: pytest.TempPathFactory, report_files: dict[str, Path]) -> dict[str, Path]:
    """A baseline emitted from the events run and the compare summary of the mixed run against it."""
    folder = tmp_path_factory.mktemp("gate")
    baseline, summary = folder / "baseline.json", folder / "compare.json"
    assert cli_main(["baseline", "emit", "--from", str(report_files["events"]), "--output", str(baseline)]) == 0
    code = cli_main(
        [
            "compare",
            "--baseline",
            str(baseline),
            "--current",
            str(report_files["mixed"]),
            "--summary",
            str(summary),
            "--trend-output",
            str(folder / "trend.json"),
            "--markdown",
            str(folder / "compare.md"),
        ]
    )
    assert code in (0, 1)
    return {"baseline": baseline, "summary": summary}


@pytest.fixture(scope="session")
def full_report(
    tmp_path_factory: pytest.TempPathFactory,
    report_files: dict[str, Path],
    history_file: Path,
    gate_files: dict[str, Path],
) -> dict[str, Any]:
    """The report with every view: A (graph run) vs B (the mixed run), the history, baseline and gate."""
    out = tmp_path_factory.mktemp("html") / "report.html"
    argv = [
        "report",
        str(report_files["graph"]),
        str(report_files["mixed"]),
        "--history",
        str(history_file),
        "--baseline",
        str(gate_files["baseline"]),
        "--summary",
        str(gate_files["summary"]),
        "--peak-tflops",
        "989",
        "--html",
        str(out),
    ]
    assert cli_main(argv) == 0
    docs = {
        "run0": json.loads(report_files["graph"].read_text()),
        "run1": json.loads(report_files["mixed"].read_text()),
        "gate": json.loads(gate_files["summary"].read_text()),
        "baseline": json.loads(gate_files["baseline"].read_text()),
    }
    return {
        "path": out,
        "html": out.read_text(encoding="utf-8"),
        "docs": docs,
        "history": history_file,
        "args": {"peak_tflops": 989.0},
    }
