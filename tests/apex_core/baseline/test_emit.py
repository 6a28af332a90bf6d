"""Baseline templates: per-metric thresholds, medians over runs, stored samples, provenance."""

import hashlib

import attrs
import pytest

from apex_core.baseline.emit import (
    DEFAULT_ABS_MS,
    DEFAULT_RATIOS,
    MAX_STORED_SAMPLES,
    emit_baseline,
    ratio_table,
)
from apex_core.baseline.errors import InputFileError
from apex_core.baseline.io import MIN_BASELINE_MS, load_baseline, load_report, write_baseline
from tests.apex_core.baseline.conftest import cell, report, samples, write

TILEPACK = "tilepack/default/torch-reference/fp32/"


@pytest.fixture()
def source(tmp_path):
    cells = [cell("tilepack", values=samples(0.2, n=3000, seed=1)),
             cell("ff-infer", values=samples(4.0, seed=2)),
             cell("fusiongate", backend="triton", status="skipped", reason="no CUDA device")]
    return write(tmp_path / "report.json", report(cells))


def _short(metrics):
    return {name.split("/")[0] + "/" + name.rsplit("/", 1)[1]: m for name, m in metrics.items()}


def test_cpu_metrics_per_ok_cell(source):
    baseline = emit_baseline(load_report(source))
    assert list(_short(baseline.metrics)) == ["tilepack/min_ms", "tilepack/p50_ms", "ff-infer/min_ms",
                                              "ff-infer/p50_ms"]
    assert baseline.suite == "apex-bench"
    assert baseline.environment_key["timing_methods"] == ["cpu_perf_counter"]
    assert baseline.environment_key["cpu_count"] == 2


def test_cpu_defaults_fail_a_2x_slowdown_on_the_minimum(source):
    metrics = _short(emit_baseline(load_report(source)).metrics)
    for name in ("tilepack/min_ms", "ff-infer/min_ms"):
        limit = metrics[name]
        assert limit.allowed_max_ms < 2 * limit.value_ms
    assert metrics["ff-infer/p50_ms"].max_regression_ratio == DEFAULT_RATIOS["cpu"]["p50_ms"][1]
    assert {m.max_regression_abs_ms for m in metrics.values()} == {DEFAULT_ABS_MS["cpu"]}


def test_gpu_defaults_are_tight_with_wider_tails_and_end_to_end(tmp_path):
    cells = [cell("tilepack", values=samples(0.01)), cell("ff-infer", values=samples(0.5))]
    record = report(cells, device="cuda", gpu="NVIDIA H100")
    metrics = _short(emit_baseline(load_report(write(tmp_path / "r.json", record))).metrics)
    ratios = {name: m.max_regression_ratio for name, m in metrics.items()}
    assert ratios == {"tilepack/p50_ms": 0.10, "tilepack/p95_ms": 0.20, "ff-infer/p50_ms": 0.15,
                      "ff-infer/p95_ms": 0.30}
    assert {m.max_regression_abs_ms for m in metrics.values()} == {DEFAULT_ABS_MS["cuda"]}


def test_ratio_and_abs_from_the_command_line(source):
    metrics = _short(emit_baseline(load_report(source), ratio=0.5, abs_ms=0.002).metrics)
    assert (metrics["tilepack/min_ms"].max_regression_ratio, metrics["tilepack/min_ms"].max_regression_abs_ms) \
        == (0.5, 0.002)
    scale = 0.5 / DEFAULT_RATIOS["cpu"]["min_ms"][0]
    assert metrics["tilepack/p50_ms"].max_regression_ratio == pytest.approx(
        DEFAULT_RATIOS["cpu"]["p50_ms"][0] * scale, abs=1e-4)  # rounded to 4 places
    assert ratio_table("cuda", 0.05) == {"p50_ms": (0.05, 0.075), "p95_ms": (0.1, 0.15)}


def test_several_reports_give_the_median(tmp_path):
    paths = [write(tmp_path / f"r{i}.json", report([cell("tilepack", values=samples(median, seed=i))]))
             for i, median in enumerate((0.2, 0.5, 0.21))]
    baseline = emit_baseline([load_report(p) for p in paths])
    p50 = baseline.metrics[TILEPACK + "p50_ms"]
    assert p50.value_ms == pytest.approx(0.21, rel=0.03)
    assert baseline.samples_for(TILEPACK + "p50_ms") == tuple(load_report(paths[2]).cells[0].samples_ms)
    assert baseline.source_report["report_count"] == 3


def test_several_reports_must_share_the_environment(tmp_path):
    first = write(tmp_path / "a.json", report([cell()]))
    other = write(tmp_path / "b.json", report([cell()], profile="fixed"))
    with pytest.raises(InputFileError, match=r"b.json: field environment_key.profile: differs from .*a.json"):
        emit_baseline([load_report(first), load_report(other)])


def test_samples_stored_once_per_cell_and_capped(source):
    loaded = load_report(source)
    baseline = emit_baseline(loaded)
    stored = baseline.metrics[TILEPACK + "min_ms"].samples_ms
    assert len(stored) == MAX_STORED_SAMPLES and set(stored) <= set(loaded.cells[0].samples_ms)
    assert baseline.metrics[TILEPACK + "p50_ms"].samples_ms == ()
    assert baseline.samples_for(TILEPACK + "p50_ms") == stored
    assert emit_baseline(loaded).metrics[TILEPACK + "min_ms"].samples_ms == stored  # seeded


def test_provenance(source):
    baseline = emit_baseline(load_report(source), notes="CI runner class")
    assert baseline.source_report["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert baseline.source_report["git_commit"] == "abc123"
    assert baseline.baseline_notes == "CI runner class"
    assert "medians over the reports" in emit_baseline(load_report(source)).baseline_notes


def test_no_ok_cell_is_an_error(tmp_path):
    path = write(tmp_path / "r.json", report([cell(status="error", reason="boom")]))
    with pytest.raises(InputFileError, match="field benchmarks: holds no ok cell"):
        emit_baseline(load_report(path))


def test_a_statistic_below_a_nanosecond_is_stored_as_one(tmp_path):
    # a kernel at the timer's floor measures 0 ms net; a baseline value must stay a positive time
    at_floor = cell("tilepack", values=[0.0] * 40 + [1e-300] * 10)
    baseline = emit_baseline(load_report(write(tmp_path / "report.json", report([at_floor], device="cuda",
                                                                                    gpu="H100"))))
    assert {m.value_ms for m in baseline.metrics.values()} == {MIN_BASELINE_MS}
    written = tmp_path / "baseline.json"
    write_baseline(written, baseline)
    assert load_baseline(written).metrics == {
        name: attrs.evolve(m, samples_ms=tuple(0.0 for _ in m.samples_ms))  # stored to the nanosecond
        for name, m in baseline.metrics.items()}


def test_a_partial_report_is_refused_unless_allowed_and_then_its_cells_are_named(tmp_path):
    from tests.conftest import run_cli

    record = report([cell("tilepack", values=samples(0.2, seed=1))])
    record["status"] = "interrupted"
    path = write(tmp_path / "partial.json", record)
    with pytest.raises(InputFileError, match="field status: is 'interrupted'.*--allow-partial"):
        emit_baseline(load_report(path))
    assert emit_baseline(load_report(path), allow_partial=True).metrics
    refused = run_cli(["baseline", "emit", "--from", "partial.json", "--output", "b.json"], cwd=tmp_path)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "b.json").exists()
    allowed = run_cli(["baseline", "emit", "--from", "partial.json", "--output", "b.json", "--allow-partial"],
                      cwd=tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    assert "is interrupted; took its 1 ok cell(s): tilepack/default/torch-reference/fp32" in allowed.stdout


def test_runs_that_disagree_past_what_a_baseline_holds_are_refused_in_one_line(tmp_path):
    from apex_core.baseline.emit import emit_baseline
    from apex_core.baseline.errors import InputFileError
    from apex_core.baseline.io import load_report
    from tests.apex_core.baseline.conftest import cell, report, write

    paths = [write(tmp_path / f"r{i}.json", report([cell("tilepack", values=[p50] * 5)]))
             for i, p50 in enumerate((1e-6, 1e-3, 1e4))]
    why = r"the runs disagree on tilepack/default/torch-reference/fp32/\w+_ms: 1e-06 to 1e\+04 ms over 3 runs"
    with pytest.raises(InputFileError, match=why):
        emit_baseline([load_report(p) for p in paths])
