"""Every number in the HTML report equals the number in the JSON (or history) it came from."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from apex_core.history import HistoryStore, change_points
from apex_core.report.html.numbers import pointer
from tests.apex_core.report.html.conftest import HISTORY_RUNS, STEP_AT, STEP_CELL
from tests.apex_core.report.html.sources import Evaluator, NumberCollector, change_markers, check_numbers


def checked(full_report: dict[str, Any]) -> NumberCollector:
    """The report's numbers, each checked against the inputs."""
    with HistoryStore.open(full_report["history"], create=False) as store:
        return check_numbers(full_report["html"], Evaluator(full_report["docs"], store, full_report["args"]))


def test_every_number_equals_its_source(full_report: dict[str, Any]) -> None:
    numbers = checked(full_report)
    sources = {entry["attrs"]["data-src"] for entry in numbers.found}
    subject = full_report["docs"]["run1"]
    # every timed cell's p50, p95 and samples count is shown, and every untimed cell has no number
    for index, cell in enumerate(subject["benchmarks"]):
        for stat in ("p50_ms", "p95_ms", "n"):
            shown = pointer("run1", "benchmarks", index, "stats", stat) in sources
            assert shown == (cell["status"] == "ok"), (cell["name"], stat)
    assert pointer("run1", "summary", "cells") in sources
    assert pointer("run1", "environment", "device_facts", "copy_gbps") in sources
    assert len(numbers.found) > 500


def test_speedups_are_the_references_p50_over_the_backends(full_report: dict[str, Any]) -> None:
    subject = full_report["docs"]["run1"]["benchmarks"]
    speedups = [
        e
        for e in checked(full_report).found
        if e["attrs"]["data-src"].startswith("div(run1#/benchmarks/")
        and e["attrs"]["data-src"].endswith("/stats/p50_ms)")
    ]
    # one per non-reference timed cell in the bars and one in each table: 20 cells
    assert len({e["attrs"]["data-src"] for e in speedups}) == 20
    tilessm = next(i for i, c in enumerate(subject) if c["name"] == "tilessm-scan/forward/triton/fp16/cuda")
    reference = next(
        i for i, c in enumerate(subject) if c["name"] == "tilessm-scan/forward/torch-reference/fp16/cuda"
    )
    expected = f"div(run1#/benchmarks/{reference}/stats/p50_ms,run1#/benchmarks/{tilessm}/stats/p50_ms)"
    assert expected in {e["attrs"]["data-src"] for e in speedups}


def test_history_points_and_change_points_match_the_history(full_report: dict[str, Any]) -> None:
    numbers = checked(full_report)
    with HistoryStore.open(full_report["history"], create=False) as store:
        series = store.series("p50_ms")
    shown = [e for e in numbers.found if e["attrs"]["data-src"].startswith("hist#")]
    assert len(shown) == len(series) == HISTORY_RUNS * 30
    by_cell: dict[str, list[float]] = defaultdict(list)
    for point in series:
        by_cell[f"{point.workload}/{point.case}/{point.backend}/{point.dtype}/{point.device}"].append(
            point.value
        )
    markers = change_markers(numbers)
    expected = [
        {"cell": cell, "index": c.index, "before": c.before, "after": c.after}
        for cell, values in by_cell.items()
        for c in change_points(values)
    ]
    assert sorted(markers, key=str) == sorted(expected, key=str)
    step_cell = "/".join(STEP_CELL) + "/fp16/cuda"
    assert [m["index"] for m in markers if m["cell"] == step_cell] == [STEP_AT]


def test_gate_verdicts_and_a_vs_b_verdicts_are_the_gates(full_report: dict[str, Any]) -> None:
    numbers = checked(full_report)
    gate = full_report["docs"]["gate"]
    sources = {e["attrs"]["data-src"] for e in numbers.found}
    for index, check in enumerate(gate["checks"]):
        if check.get("current_ms") is not None:
            assert pointer("gate", "checks", index, "current_ms") in sources
    judged = [m for m in numbers.marked if m.get("data-judge")]
    assert len(judged) == 30  # every cell timed in both runs has a verdict, checked in check_numbers
    assert {m["data-verdict"] for m in judged} <= {"faster", "slower", "same", "inconclusive"}
