import json
import re

import attrs
import jsonschema
import pytest

from apex_core.files import atomic_write_text
from apex_core.plan import build_plan
from apex_core.registry import Registry
from apex_core.report.formats import report_json
from apex_core.report.markdown import render_markdown
from apex_core.report.records import report_record
from apex_core.report.schema import validate_report
from apex_core.running.runner import run_plan
from apex_core.timing import TimingOptions
from tests.apex_core.fakes import Axpy, Eager, Raising, Unavailable

FAST = TimingOptions(warmup=1, min_iters=3, min_time_s=0.0, max_time_s=0.1)


@pytest.fixture(scope="module")
def report():
    registry = Registry.from_objects([Eager(), Unavailable(), Raising("call")], [Axpy()])
    registry.backends["torch-reference"] = registry.backends.pop("eager")
    plan = build_plan(registry, backends=["torch-reference", "unavail", "raising"], timing=FAST)
    env = {"device": "cpu", "cpu": "test cpu", "python": "3", "torch": "x", "gpu": None,
           "git": {"commit": None, "dirty": None}}
    return run_plan(plan, registry, isolation="inline", environment=env)


def test_report_validates_against_the_shipped_schema(report):
    record = json.loads(report_json(report))
    validate_report(record)
    assert record["schema_version"] == 1
    assert {"schema_version", "suite", "timestamp_utc", "environment", "config", "status",
            "benchmarks", "triton_autotune"} <= set(record)
    ok = next(b for b in record["benchmarks"] if b["status"] == "ok")
    assert ok["elements_per_s"] > 0 and ok["stats"]["p50_ms"] > 0
    assert len(ok["samples_ms"]) == ok["stats"]["n"]


def test_schema_rejects_an_ok_cell_without_stats(report):
    record = report_record(report)
    broken = next(b for b in record["benchmarks"] if b["status"] == "ok")
    broken["stats"] = None
    with pytest.raises(jsonschema.ValidationError):
        validate_report(record)


def test_schema_rejects_a_skip_without_reason(report):
    record = report_record(report)
    skipped = next(b for b in record["benchmarks"] if b["status"] == "skipped")
    skipped["reason"] = ""
    with pytest.raises(jsonschema.ValidationError):
        validate_report(record)


def test_markdown_has_one_row_per_case_and_reasons(report):
    text = render_markdown(report)
    # a backend skipped on every row is one line with its reason, not a column of skips
    assert "| workload | case | dtype | torch-reference | raising |" in text
    assert "- unavail (unavailable): libfoo missing" in text.split("Not run (every cell skipped")[1]
    assert text.count("| axpy |") == 2
    # the summary comes first: the fastest ok backend of each row, then what failed
    summary = text.split("## Summary")[1].split("## Times")[0]
    assert "- axpy / small / fp32: **torch-reference**" in summary
    assert "Failed: 2 cells: raising on axpy/" in summary
    # notes are numbered in order of first use; a real CPU sample on a loaded machine may add
    # a note of its own (unstable samples, contention) before these, so look each number up
    notes = dict(line.split(". ", 1)[::-1] for line in text.splitlines() if re.match(r"\d+\. ", line))
    error = next(number for note, number in notes.items() if note.startswith("ValueError"))
    assert f"error [{error}]" in text


def test_atomic_write_replaces_whole_file(tmp_path):
    target = tmp_path / "r.json"
    atomic_write_text(target, "one")
    atomic_write_text(target, "two")
    assert target.read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_launch_bound_cell_is_marked_and_its_host_cost_and_floor_are_recorded(report):
    import attrs

    from apex_core.results import KernelActivity, Status

    ok = next(c for c in report.cells if c.status == Status.OK)
    bound = attrs.evolve(ok.timing, method="cuda_event_held", host_ms=ok.timing.stats.p50 * 4, floor_ms=0.003,
                         floor_rounds_ms=(0.0029, 0.0031),
                         kernel=KernelActivity(kernels_per_call=2, span_p50_ms=0.01, streams=1, calls=40))
    cells = tuple(attrs.evolve(c, timing=bound) if c is ok else c for c in report.cells)
    marked = attrs.evolve(report, cells=cells)
    record = report_record(marked)
    validate_report(record)
    cell = next(b for b in record["benchmarks"] if b["status"] == "ok")
    assert cell["launch_bound"] is True and cell["host_ms"] == pytest.approx(ok.timing.stats.p50 * 4)
    assert cell["timer_floor_ms"] == 0.003 and cell["kernel_activity"]["kernels_per_call"] == 2
    assert cell["timer_floor_rounds_ms"] == [0.0029, 0.0031]
    text = render_markdown(marked)
    assert " †" in text and "† launch-bound" in text
    # the CPU timer measures no host cost apart: nothing is marked
    plain = report_record(report)
    assert all(b.get("launch_bound") is None for b in plain["benchmarks"] if b["status"] == "ok")
    assert "†" not in render_markdown(report)


def test_the_summary_says_where_the_triton_configurations_came_from(report):
    import attrs

    from apex_core.results import Status
    from apex_core.running.autotune import summarize_autotune

    def entry(shape, source):
        return {"op_name": "pack", "kernel_name": "_k", "shape_bucket": shape, "selected_config": {"B": 4},
                "selection_source": source, "launches": 1, "cache_hits": 1, "cache_misses": 0,
                "kernel_id": "apex_kernels.x:_k", "tuning_key": [shape, "torch.float16"]}

    ok = next(c for c in report.cells if c.status == Status.OK)
    shipped = {"state": "shipped", "file": "apex_kernels/picks/h100-80gb-hbm3.json", "picks": 9, "stale": 0,
               "triton": "3.6.0"}
    entries = [entry("N8", "shipped_picks"), entry("N16", "shipped_picks"), entry("N64", "triton_best_config")]
    cell = attrs.evolve(ok, metadata={**ok.metadata, "autotune_picks": shipped, "triton_autotune": entries})
    marked = attrs.evolve(report, cells=(cell,), triton_autotune=summarize_autotune([cell]))
    validate_report(report_record(marked))
    assert ("Triton configurations per kernel and shape: 2 from the picks shipped for this GPU model "
            "(`apex_kernels/picks/h100-80gb-hbm3.json`, tuned with Triton 3.6.0), 1 tuned in this run."
            in render_markdown(marked))
    none = {"state": "none", "reason": "no picks shipped for NVIDIA H200 (h200.json)"}
    tuned = [entry("N8", "triton_best_config")]
    cell = attrs.evolve(ok, metadata={**ok.metadata, "autotune_picks": none, "triton_autotune": tuned})
    text = render_markdown(attrs.evolve(report, cells=(cell,), triton_autotune=summarize_autotune([cell])))
    assert "1 tuned in this run (no picks shipped for NVIDIA H200 (h200.json))." in text
    assert "Triton configurations" not in render_markdown(report)  # no triton cell, no line


def test_an_interleaved_floor_is_named_in_the_timing_line(report):
    import attrs

    from apex_core.results import Status

    ok = next(c for c in report.cells if c.status == Status.OK)
    floored = attrs.evolve(ok, timing=attrs.evolve(ok.timing, floor_ms=0.003))
    config = {**report.config, "timing": {**report.config["timing"], "floor_sampling": "interleaved"}}
    text = render_markdown(attrs.evolve(report, cells=(floored,), config=config))
    assert "sampled between each cell's batches (--floor-sampling interleaved)" in text
    assert "--floor-sampling" not in render_markdown(attrs.evolve(report, config=config))  # no floor, no words
    assert "--floor-sampling" not in render_markdown(attrs.evolve(report, cells=(floored,)))  # the default
    pooled = {**report.config, "timing": {**report.config["timing"], "floor_sampling": "pooled"}}
    assert "(--floor-sampling pooled)" in render_markdown(attrs.evolve(report, cells=(floored,), config=pooled))


def test_the_timing_line_says_when_the_flush_could_not_reset_persisting_lines(report):
    caveat = "kernels that load with evict_last may have kept their data in L2"

    def with_cache(cache, flush):
        cells = tuple(attrs.evolve(c, timing=attrs.evolve(c.timing, cache=cache)) if c.timing else c
                      for c in report.cells)
        return render_markdown(attrs.evolve(report, cells=cells, environment={**report.environment,
                                                                              "l2_flush": flush}))
    unreset = "2x L2 written (persisting L2 lines not reset: no driver)"
    assert caveat not in render_markdown(report)  # a CPU run records no flush
    assert caveat not in with_cache("cold", "persisting lines reset, then 2x L2 written")
    assert caveat not in with_cache("warm", unreset)  # no cell flushed: nothing to qualify
    timing_line = next(line for line in with_cache("cold", unreset).splitlines() if line.startswith("Timing: "))
    assert unreset in timing_line and caveat in timing_line


def test_an_interrupted_report_says_how_many_planned_cells_never_started(report):
    planned = report.config["cells_planned"]
    assert planned == len(report.cells) == 6  # axpy's two cases on three backends
    assert "never started" not in render_markdown(report)  # a complete run says nothing of it
    cut = attrs.evolve(report, status="interrupted", cells=report.cells[:1])
    validate_report(json.loads(report_json(cut)))
    assert "Cells: ok: 1; 5 of 6 planned cells never started (the run was interrupted)." in render_markdown(cut)
    killed = render_markdown(attrs.evolve(cut, status="running"))  # a killed run's last write
    assert "5 of 6 planned cells never started (the run never ended)." in killed
    from_before = attrs.evolve(cut, config={k: v for k, v in cut.config.items() if k != "cells_planned"})
    assert "never started" not in render_markdown(from_before)  # a report from before the field
