"""Opt-in gated metrics beyond time: throughput, peak memory, energy per call, accuracy drift."""

from __future__ import annotations

import json

import pytest

from apex_core.baseline.compare import compare
from apex_core.baseline.emit import emit_baseline
from apex_core.baseline.extra_metrics import EXTRA_METRICS, parse_metric_list
from apex_core.baseline.io import load_baseline, load_report, write_baseline
from tests.apex_core.baseline.conftest import cell, report, samples, write
from tests.conftest import run_cli

NAME = "tilepack/default/torch-reference/fp32"


def rich_cell(*, gbps=400.0, memory=170.0, energy_j=0.007, error=0.01, median=0.01):
    record = cell("tilepack", values=samples(median, seed=3))
    record.update(gbps=gbps, tflops=1.5, peak_memory_mb=memory,
                  telemetry={"unavailable": "", "energy_j_per_call": energy_j},
                  accuracy=[{"stage": "before-timing", "passed": True,
                             "outputs": [{"name": "y", "max_abs_error": error / 2},
                                         {"name": "z", "max_abs_error": error}]}])
    return record


def load(tmp_path, name, **values):
    return load_report(write(tmp_path / name, report([rich_cell(**values)])))


def test_each_extra_metric_is_read_off_the_report_cell(tmp_path):
    extras = load(tmp_path, "r.json").cells[0].extras
    assert extras == {"gbps": 400.0, "tflops": 1.5, "peak_memory_mb": 170.0, "energy_mj": pytest.approx(7.0),
                      "max_abs_error": 0.01}


def test_extras_are_opt_in_and_round_trip_through_the_file(tmp_path):
    run = load(tmp_path, "r.json")
    assert emit_baseline(run).extra_metrics == {}
    baseline = emit_baseline(run, extra_metrics=("gbps", "energy_mj", "max_abs_error"))
    assert set(baseline.extra_metrics) == {f"{NAME}/gbps", f"{NAME}/energy_mj", f"{NAME}/max_abs_error"}
    write_baseline(tmp_path / "b.json", baseline)
    assert load_baseline(tmp_path / "b.json").extra_metrics == baseline.extra_metrics


@pytest.mark.parametrize(("change", "failing"), [
    ({}, set()),
    ({"gbps": 300.0}, {"gbps"}),                   # throughput 25 % lower
    ({"memory": 200.0}, {"peak_memory_mb"}),       # 30 MB more
    ({"energy_j": 0.0150}, {"energy_mj"}),         # more than double
    ({"error": 0.05}, {"max_abs_error"}),          # the error grew fivefold: accuracy drift
    ({"gbps": 450.0, "memory": 100.0}, set()),     # better in the right directions passes
])
def test_each_metric_fails_only_when_it_moves_the_wrong_way_past_its_limit(tmp_path, change, failing):
    baseline = emit_baseline(load(tmp_path, "base.json"), extra_metrics=tuple(EXTRA_METRICS))
    summary = compare(baseline, "b.json", load(tmp_path, "now.json", **change))
    failed = {c.metric.rsplit("/", 1)[1] for c in summary.checks if c.status == "fail"}
    assert failed == failing
    for check in summary.checks:
        if check.metric.endswith("/gbps"):
            assert check.unit == "GB/s" and check.better == "higher"


def test_a_cell_that_stops_reporting_a_metric_is_missing(tmp_path):
    baseline = emit_baseline(load(tmp_path, "base.json"), extra_metrics=("energy_mj",))
    record = report([cell("tilepack", values=samples(0.01, seed=3))])  # no telemetry
    summary = compare(baseline, "b.json", load_report(write(tmp_path / "bare.json", record)))
    check = next(c for c in summary.checks if c.metric.endswith("energy_mj"))
    assert check.status == "missing" and "energy per call" in check.reason


def test_the_cli_takes_the_metric_list_and_refuses_unknown_names(tmp_path):
    write(tmp_path / "r.json", report([rich_cell()]))
    ok = run_cli(["baseline", "emit", "--from", "r.json", "--output", "b.json", "--extra-metrics",
                  "gbps,max_abs_error"], cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert sorted(json.loads((tmp_path / "b.json").read_text())["extra_metrics"]) == [
        f"{NAME}/gbps", f"{NAME}/max_abs_error"]
    summary = run_cli(["compare", "--baseline", "b.json", "--current", "r.json", "--summary", "s.json"],
                      cwd=tmp_path)
    assert summary.returncode == 0, summary.stdout + summary.stderr
    assert "GB/s" in summary.stdout
    bad = run_cli(["baseline", "emit", "--from", "r.json", "--output", "c.json", "--extra-metrics", "joules"],
                  cwd=tmp_path)
    assert bad.returncode == 2 and "unknown metric(s) joules" in bad.stderr
    assert len(bad.stderr.splitlines()) == 1
    with pytest.raises(ValueError):
        parse_metric_list(",")
