"""The fixed rule, missing and failed cells, and the environment check."""

import attrs
import pytest

from apex_core.baseline.artifacts import render_markdown
from apex_core.baseline.compare import compare
from apex_core.baseline.emit import emit_baseline
from apex_core.baseline.errors import EnvironmentMismatchError, InputFileError
from apex_core.baseline.io import load_report
from apex_core.baseline.model import MetricLimit
from tests.apex_core.baseline.conftest import cell, report, samples, write

P50 = "tilepack/default/torch-reference/fp32/p50_ms"
MIN = "tilepack/default/torch-reference/fp32/min_ms"


def _load(tmp_path, name, record):
    return load_report(write(tmp_path / name, record))


@pytest.fixture()
def baseline(tmp_path, two_cells):
    return emit_baseline(_load(tmp_path, "base-report.json", report(two_cells)))


def _with_limit(baseline, name, **changes):
    metrics = dict(baseline.metrics)
    metrics[name] = attrs.evolve(metrics[name], **changes)
    return attrs.evolve(baseline, metrics=metrics)


def test_self_comparison_passes(tmp_path, baseline, two_cells):
    summary = compare(baseline, "b.json", _load(tmp_path, "r.json", report(two_cells)))
    assert summary.status == "pass" and not summary.forced
    assert {c.status for c in summary.checks} == {"pass"}
    assert all(c.regression_ratio == pytest.approx(0.0) for c in summary.checks)


def test_rule_boundary(tmp_path, two_cells):
    current = _load(tmp_path, "r.json", report(two_cells))
    p50 = current.cells[0].stats_ms["p50_ms"]
    base = emit_baseline(current)
    # allowed = value * (1 + ratio) + abs: exactly at the limit passes, just above fails
    at_limit = _with_limit(base, P50, value_ms=(p50 - 0.01) / 1.5, max_regression_ratio=0.5,
                           max_regression_abs_ms=0.01)
    check = next(c for c in compare(at_limit, "b.json", current).checks if c.metric == P50)
    assert check.allowed_max_ms == pytest.approx(p50) and check.status == "pass"
    above = _with_limit(at_limit, P50, max_regression_abs_ms=0.0099)
    check = next(c for c in compare(above, "b.json", current).checks if c.metric == P50)
    assert check.status == "fail" and "exceeds the allowed" in check.reason
    assert check.regression_ratio == pytest.approx(p50 / ((p50 - 0.01) / 1.5) - 1)


def test_slowdown_fails_with_a_slower_verdict(tmp_path, baseline):
    slow = report([cell("tilepack", values=samples(0.4, seed=3)), cell("ff-infer", values=samples(4.0))])
    summary = compare(baseline, "b.json", _load(tmp_path, "r.json", slow))
    assert summary.status == "fail"
    failed = {c.metric: c for c in summary.failed_checks}
    assert set(failed) == {MIN}  # on the CPU the median only guards against gross regressions
    assert failed[MIN].verdict.label == "slower" and failed[MIN].verdict.ratio == pytest.approx(2, rel=0.05)
    p50 = next(c for c in summary.checks if c.metric == P50)
    assert p50.status == "pass" and p50.verdict.label == "slower"


def test_missing_metric_fails_unless_allowed(tmp_path, baseline):
    only_tilepack = _load(tmp_path, "r.json", report([cell("tilepack", values=samples(0.2, seed=1))]))
    summary = compare(baseline, "b.json", only_tilepack)
    assert summary.status == "fail"
    assert {c.metric.split("/")[0] for c in summary.failed_checks} == {"ff-infer"}
    assert {c.status for c in summary.failed_checks} == {"missing"}
    assert compare(baseline, "b.json", only_tilepack, allow_missing=True).status == "pass"


def test_a_cell_that_is_not_ok_fails_its_metrics(tmp_path, baseline):
    crashed = report([cell("tilepack", status="crashed", reason="SIGSEGV in prepare"),
                      cell("ff-infer", values=samples(4.0, seed=2))])
    summary = compare(baseline, "b.json", _load(tmp_path, "r.json", crashed))
    failed = summary.failed_checks
    assert [c.metric.split("/")[0] for c in failed] == ["tilepack", "tilepack"]
    assert all(c.status == "fail" and c.reason == "cell crashed: SIGSEGV in prepare" for c in failed)
    assert all(c.current_ms is None and c.verdict.label == "inconclusive" for c in failed)


def test_another_suite_is_refused(tmp_path, baseline, two_cells):
    with pytest.raises(InputFileError, match="field suite: 'other' does not match the suite 'apex-bench'"):
        compare(baseline, "b.json", _load(tmp_path, "r.json", report(two_cells, suite="other")))


@pytest.mark.parametrize(("change", "field"), [
    ({"profile": "fixed"}, "profile"),
    ({"dtypes": ("fp16",)}, "dtypes"),
    ({"cpu_count": 16}, "cpu_count"),
    ({"device": "cuda", "gpu": "NVIDIA H100"}, "device"),
])
def test_environment_difference_is_refused_then_forced(tmp_path, baseline, two_cells, change, field):
    current = _load(tmp_path, "r.json", report(two_cells, **change))
    with pytest.raises(EnvironmentMismatchError) as info:
        compare(baseline, "b.json", current)
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'r.json'}: field environment_key.{field}: ")
    assert "b.json" in message and "--force" in message
    summary = compare(baseline, "b.json", current, force=True)
    assert summary.forced and any(d.startswith(f"{field}:") for d in summary.environment_differences)


def test_timing_method_difference_is_refused(tmp_path, baseline, two_cells):
    for c in two_cells:
        c["timing_method"] = "cuda_event"
    with pytest.raises(EnvironmentMismatchError, match="timing_methods"):
        compare(baseline, "b.json", _load(tmp_path, "r.json", report(two_cells)))


def test_cpu_model_and_versions_are_noted_not_refused(tmp_path, baseline, two_cells):
    current = _load(tmp_path, "r.json", report(two_cells, cpu="AMD EPYC 7B13", torch="2.14.0+cpu"))
    summary = compare(baseline, "b.json", current)
    assert summary.status == "pass" and not summary.forced
    assert [d.split(":")[0] for d in summary.environment_differences] == ["torch", "hardware"]


def test_gpu_model_is_refused_on_cuda(tmp_path, two_cells):
    on_h100 = report(two_cells, device="cuda", gpu="NVIDIA H100 80GB HBM3")
    base = emit_baseline(_load(tmp_path, "b-report.json", on_h100))
    on_a100 = _load(tmp_path, "r.json", report(two_cells, device="cuda", gpu="NVIDIA A100"))
    with pytest.raises(EnvironmentMismatchError, match="field environment_key.hardware: .*NVIDIA A100"):
        compare(base, "b.json", on_a100)


def test_allowed_max_of_a_limit():
    limit = MetricLimit(value_ms=2.0, max_regression_ratio=0.25, max_regression_abs_ms=0.5)
    assert limit.allowed_max_ms == 3.0


def test_several_runs_take_the_best_run_per_metric(tmp_path, baseline):
    contended = report([cell("tilepack", values=samples(0.5, seed=3)), cell("ff-infer", values=samples(4.0))])
    crashed = report([cell("tilepack", values=samples(0.2, seed=4)),
                      cell("ff-infer", status="crashed", reason="SIGSEGV")])
    runs = [_load(tmp_path, "a.json", contended), _load(tmp_path, "b.json", crashed)]
    assert compare(baseline, "b.json", runs[0]).status == "fail"
    summary = compare(baseline, "b.json", runs)
    assert summary.status == "pass"
    assert summary.current_paths == (str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    tilepack = next(c for c in summary.checks if c.metric == P50)
    assert tilepack.current_ms == pytest.approx(0.2, rel=0.03)


def test_several_runs_are_each_checked(tmp_path, baseline, two_cells):
    runs = [_load(tmp_path, "a.json", report(two_cells)),
            _load(tmp_path, "b.json", report(two_cells, cpu_count=8))]
    with pytest.raises(EnvironmentMismatchError, match="b.json: field environment_key.cpu_count"):
        compare(baseline, "base.json", runs)


def _busy(record, cores):
    record["metadata"] = {"host_load": {"other_busy_cores": cores, "load_avg_1m": 3.2, "cores": 2}}
    return record


def test_a_failure_on_a_busy_machine_says_so(tmp_path, baseline):
    slow = report([_busy(cell("tilepack", values=samples(0.5, seed=3)), 1.4),
                   _busy(cell("ff-infer", values=samples(4.0, seed=2)), 1.4)])
    summary = compare(baseline, "b.json", _load(tmp_path, "r.json", slow))
    failed = {c.metric.split("/")[0] for c in summary.failed_checks}
    assert failed == {"tilepack"}
    assert all(c.contention == "" for c in summary.checks if c.status == "pass")
    text = ("measured while other processes kept 1.4 of 2 cores busy (load average 3.2): "
            "run it again on a quiet machine")
    assert {c.contention for c in summary.failed_checks} == {text}
    markdown = render_markdown(summary)
    assert all(f"- `{c.metric}` {text}" in markdown for c in summary.failed_checks)


def test_a_failure_on_a_quiet_machine_says_nothing_of_load(tmp_path, baseline):
    slow = report([_busy(cell("tilepack", values=samples(0.5, seed=3)), 0.2),
                   cell("ff-infer", values=samples(4.0, seed=2))])
    summary = compare(baseline, "b.json", _load(tmp_path, "r.json", slow))
    assert summary.failed_checks and all(c.contention == "" for c in summary.checks)
