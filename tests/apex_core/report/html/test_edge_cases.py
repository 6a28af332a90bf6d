"""Reports the GPU fixtures do not cover: CPU runs, flat or single samples, the interpreter, no cells."""

from __future__ import annotations

from typing import Any

from apex_core.report.html import ReportInputs, RunInput, render_html
from tests.apex_core.history.conftest import make_report, ok_cell, skipped_cell
from tests.apex_core.report.html.sources import Evaluator, check_numbers


def odd_cells() -> list[dict[str, Any]]:
    flat = ok_cell("fusiongate", "torch-reference", 0.5, spread=0.0)  # every sample equal
    single = ok_cell("fusiongate", "triton", 0.5)
    single["samples_ms"] = single["samples_ms"][:1]
    interpreted = ok_cell("fusiongate", "torch-compile", 5.0)
    interpreted["timing_method"] = "triton_interpreter"
    no_rates = ok_cell("tilessm-scan", "torch-reference", 0.5)
    no_rates.update(gbps=0.0, tflops=0.0)
    return [
        ok_cell("tilepack", "torch-reference", 0.2),
        ok_cell("tilepack", "triton", 0.1),
        skipped_cell("tilepack", "onnxruntime"),
        flat,
        single,
        interpreted,
        no_rates,
    ]


def test_a_cpu_run_with_odd_cells_renders_and_its_numbers_hold() -> None:
    record = make_report(odd_cells())
    html = render_html(ReportInputs(runs=(RunInput("run0", "cpu.json", record),)))
    numbers = check_numbers(html, Evaluator({"run0": record}))
    sources = {e["attrs"]["data-src"] for e in numbers.found}
    # the interpreted cell has no speed-up (its time is no speed); the triton tilepack cell has one
    assert not any(s.startswith("div(") and s.endswith("/benchmarks/5/stats/p50_ms)") for s in sources)
    assert "div(run0#/benchmarks/0/stats/p50_ms,run0#/benchmarks/1/stats/p50_ms)" in sources
    # these cells count no bytes: the roofline says so instead of drawing nothing
    assert "No timed cell reports achieved bandwidth" in html and "no CUDA device" in html


def test_a_run_without_cells_and_runs_with_different_cells_render() -> None:
    empty = make_report([])
    assert "Every cell ran and was timed" in render_html(ReportInputs(runs=(RunInput("run0", "e", empty),)))
    a = make_report([ok_cell("tilepack", "torch-reference", 0.2), ok_cell("tilepack", "triton", 0.1)])
    b = make_report([ok_cell("tilepack", "torch-reference", 0.25, seed=3), skipped_cell("tilepack", "triton")])
    html = render_html(ReportInputs(runs=(RunInput("run0", "a", a), RunInput("run1", "b", b))))
    check_numbers(html, Evaluator({"run0": a, "run1": b}))
    assert "ok / skipped" in html  # the cell B did not time is listed without a ratio


def test_an_interrupted_run_says_how_many_cells_were_planned() -> None:
    cells = [ok_cell("tilepack", "torch-reference", 0.2)]
    record = {**make_report(cells), "status": "interrupted"}
    record["config"] = {**record["config"], "cells_planned": 4}
    html = render_html(ReportInputs(runs=(RunInput("run0", "cut.json", record),)))
    check_numbers(html, Evaluator({"run0": record}))
    assert "planned: the run was interrupted before the rest started" in html
    complete = {**record, "status": "complete"}
    assert "before the rest started" not in render_html(ReportInputs(runs=(RunInput("run0", "c", complete),)))


def test_a_gate_judged_on_several_runs_says_which_run_gave_each_verdict() -> None:
    record = make_report(odd_cells())
    gate = {"status": "pass", "timestamp_utc": "2026-11-29T00:00:00Z", "checks": [],
            "current": ["apex-bench.json", "confirm2.json", "confirm3.json"], "combine": "median"}
    html = render_html(ReportInputs(runs=(RunInput("run0", "apex-bench.json", record),), gate=gate,
                                    gate_label="compare-summary.json"))
    assert ("Each timing metric is judged on its median run of 3: <code>apex-bench.json</code>, "
            "<code>confirm2.json</code>, <code>confirm3.json</code>") in html
    # one run judged: nothing to say; a summary from before "combine" was recorded judged by the best
    one = render_html(ReportInputs(runs=(RunInput("run0", "apex-bench.json", record),),
                                   gate={**gate, "current": ["apex-bench.json"]}))
    older = render_html(ReportInputs(runs=(RunInput("run0", "apex-bench.json", record),),
                                     gate={k: v for k, v in gate.items() if k != "combine"}))
    assert "is judged on its" not in one and "judged on its best run of 3" in older


def test_a_gate_says_where_the_environment_differed_from_the_baselines() -> None:
    record = make_report(odd_cells())
    floor = ("timer floor: baseline 2.98 us, current 4.35 us (medians over 20 cells): cells within 2x of it "
             "are not comparable between the two machines")
    gate = {"status": "fail", "timestamp_utc": "2026-11-29T00:00:00Z", "checks": [],
            "environment_differences": [floor, "torch: baseline '2.10', current '2.11'"]}
    html = render_html(ReportInputs(runs=(RunInput("run0", "apex-bench.json", record),), gate=gate,
                                    gate_label="compare-summary.json"))
    assert "The environment differs from the baseline's:" in html
    assert "<li>timer floor: baseline 2.98 us, current 4.35 us" in html and "torch: baseline" in html
    same = render_html(ReportInputs(runs=(RunInput("run0", "apex-bench.json", record),),
                                    gate={**gate, "environment_differences": []}))
    assert "The environment differs" not in same
