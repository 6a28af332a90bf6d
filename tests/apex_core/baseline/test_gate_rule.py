"""The statistical rule per metric (GateRule), its file form, and baseline promotion."""

from __future__ import annotations

import json

import attrs
import pytest

from apex_core.baseline.compare import compare
from apex_core.baseline.emit import emit_baseline
from apex_core.baseline.errors import InputFileError
from apex_core.baseline.io import load_baseline, load_report, write_baseline
from apex_core.baseline.model import FAILED_BY_CAP, FAILED_BY_RULE, GateRule
from apex_core.baseline.promote import PromotionRefused, promote
from tests.apex_core.baseline.conftest import cell, report, samples, write
from tests.conftest import run_cli

P50 = "spin/10us/test-working/fp16/p50_ms"
P95 = "spin/10us/test-working/fp16/p95_ms"


def gpu_report(tmp_path, name, median_ms, *, seed, spread=0.01, n=1000):
    """A CUDA-like report of one ~10 us cell: a narrow body of samples around ``median_ms``."""
    cells = [cell("spin", "10us", "test-working", "fp16",
                  values=samples(median_ms, n=n, spread=spread, seed=seed))]
    record = report(cells, device="cuda", gpu="NVIDIA H100 80GB HBM3", dtypes=("fp16",))
    return load_report(write(tmp_path / name, record))


@pytest.fixture()
def gpu_baseline(tmp_path):
    runs = [gpu_report(tmp_path, f"base-{i}.json", 0.010 * (1 + d), seed=i)
            for i, d in enumerate((0.0, 0.01, -0.005))]
    return emit_baseline(runs)


def test_emit_gives_the_gpu_median_a_five_percent_rule_and_the_tail_the_cap_only(gpu_baseline):
    rule = gpu_baseline.metrics[P50].rule
    assert rule is not None and rule.min_effect == pytest.approx(0.05) and rule.confidence == 0.95
    assert rule.run_spread == pytest.approx(0.015, rel=0.05)
    assert gpu_baseline.metrics[P95].rule is None


def test_a_ten_percent_slowdown_fails_by_the_rule_while_the_cap_lets_it_pass(tmp_path, gpu_baseline):
    slowed = compare(gpu_baseline, "b.json", gpu_report(tmp_path, "slow.json", 0.011, seed=7))
    check = next(c for c in slowed.checks if c.metric == P50)
    # the cap (x1.10 + 5 us) would allow 16 us: only the statistics see the 10 %
    assert check.current_ms < check.allowed_max_ms
    assert check.status == "fail" and check.failed_by == FAILED_BY_RULE
    assert check.verdict.ci_low > 1.05 and "lies above 1 + 5.0%" in check.reason
    assert slowed.status == "fail"


@pytest.mark.parametrize("drift", [0.0, 0.02, -0.03, 0.04])
def test_a_a_runs_within_the_spread_between_processes_pass(tmp_path, gpu_baseline, drift):
    current = gpu_report(tmp_path, "aa.json", 0.010 * (1 + drift), seed=11)
    summary = compare(gpu_baseline, "b.json", current)
    assert summary.status == "pass", [c.reason for c in summary.checks]


def test_the_cap_still_fails_a_metric_without_samples_for_an_interval(tmp_path, gpu_baseline):
    few = gpu_report(tmp_path, "few.json", 0.030, seed=3, n=5)  # too few samples for a verdict
    check = next(c for c in compare(gpu_baseline, "b.json", few).checks if c.metric == P50)
    assert check.verdict.label == "inconclusive"
    assert check.status == "fail" and check.failed_by == FAILED_BY_CAP


def test_the_runs_own_spread_raises_the_min_effect(tmp_path):
    runs = [gpu_report(tmp_path, f"r{i}.json", m, seed=i) for i, m in enumerate((0.010, 0.0108, 0.0100))]
    rule = emit_baseline(runs).metrics[P50].rule
    assert rule.run_spread == pytest.approx(0.08, rel=0.02)
    # three standard deviations between runs, estimated from the range of three (d2 = 1.693)
    assert rule.min_effect == pytest.approx(3 * rule.run_spread / 1.693, rel=1e-4)


def test_the_spread_allowance_follows_the_number_of_runs():
    from apex_core.baseline.emit import spread_allowance

    assert spread_allowance(None, 3) == 0.0 and spread_allowance(0.05, 1) == 0.0
    assert spread_allowance(0.038, 3) == pytest.approx(0.0673, abs=1e-4)  # the H100 fusiongate triple
    assert spread_allowance(0.038, 2) > spread_allowance(0.038, 3) > spread_allowance(0.038, 10)
    assert spread_allowance(0.038, 10) > spread_allowance(0.038, 15) == spread_allowance(0.038, 50)  # last row


def test_min_effect_option_and_the_rule_round_trip_through_the_file(tmp_path, gpu_baseline):
    run = gpu_report(tmp_path, "one.json", 0.010, seed=1)
    one = emit_baseline(run, min_effect=0.08)
    assert one.metrics[P50].rule == GateRule(min_effect=0.08, confidence=0.95, run_spread=None)
    write_baseline(tmp_path / "b.json", gpu_baseline)
    record = json.loads((tmp_path / "b.json").read_text())
    assert record["schema_version"] == 2 and "gate_rule" in record["metrics"][P50]
    assert "gate_rule" not in record["metrics"][P95]
    assert load_baseline(tmp_path / "b.json").metrics[P50].rule == gpu_baseline.metrics[P50].rule


def test_a_version_1_baseline_loads_with_the_cap_only(tmp_path, gpu_baseline):
    write_baseline(tmp_path / "b.json", gpu_baseline)
    record = json.loads((tmp_path / "b.json").read_text())
    record["schema_version"] = 1
    for metric in record["metrics"].values():
        metric.pop("gate_rule", None)
    old = load_baseline(write(tmp_path / "v1.json", record))
    assert all(limit.rule is None for limit in old.metrics.values())
    slowed = compare(old, "v1.json", gpu_report(tmp_path, "slow.json", 0.011, seed=7))
    assert slowed.status == "pass"  # what version 1 did: the cap alone


def test_a_rule_with_a_bad_field_is_refused_naming_it(tmp_path, gpu_baseline):
    write_baseline(tmp_path / "b.json", gpu_baseline)
    record = json.loads((tmp_path / "b.json").read_text())
    record["metrics"][P50]["gate_rule"]["confidence"] = 1.5
    with pytest.raises(InputFileError, match="gate_rule.confidence"):
        load_baseline(write(tmp_path / "bad.json", record))


def test_the_committed_cpu_baseline_carries_its_rules():
    from tests.conftest import ROOT

    committed = load_baseline(ROOT / "baselines" / "cpu-smoke.json")
    rules = {name.rsplit("/", 1)[1]: limit.rule for name, limit in committed.metrics.items()}
    assert rules["min_ms"].min_effect == pytest.approx(0.75)
    assert rules["p50_ms"].min_effect == pytest.approx(2.0)


# promotion -------------------------------------------------------------------------------------


def test_promotion_of_agreeing_runs_keeps_tuned_caps_and_reports_each_change(tmp_path, gpu_baseline):
    tuned = attrs.evolve(gpu_baseline, metrics={**gpu_baseline.metrics, P50: attrs.evolve(
        gpu_baseline.metrics[P50], max_regression_ratio=0.3)})
    runs = [gpu_report(tmp_path, f"new-{i}.json", 0.009 * (1 + d), seed=20 + i)
            for i, d in enumerate((0.0, 0.01, 0.005))]
    new, changes = promote(tuned, "b.json", runs)
    assert new.metrics[P50].value_ms == pytest.approx(0.009 * 1.005, rel=0.01)
    assert new.metrics[P50].max_regression_ratio == 0.3
    change = next(c for c in changes if c.metric == P50)
    assert change.change == pytest.approx(-0.1, abs=0.02) and change.verdict.label == "faster"
    assert "Promoted" in new.baseline_notes


def test_promotion_refuses_runs_that_disagree_and_names_the_metrics(tmp_path, gpu_baseline):
    runs = [gpu_report(tmp_path, f"new-{i}.json", m, seed=30 + i) for i, m in enumerate((0.009, 0.0099, 0.009))]
    with pytest.raises(PromotionRefused) as refused:
        promote(gpu_baseline, "b.json", runs)
    assert [d.metric for d in refused.value.disagreements] == [P50]
    assert refused.value.disagreements[0].spread == pytest.approx(0.1, rel=0.05)


def test_more_runs_may_span_as_much_more_as_their_expected_range(tmp_path, gpu_baseline):
    # medians 6 % apart: too far for three runs (5 %), within what twelve runs may span (9.6 %)
    medians = [0.0090, 0.00954] + [0.0092] * 10
    runs = [gpu_report(tmp_path, f"new-{i}.json", m, seed=70 + i) for i, m in enumerate(medians)]
    with pytest.raises(PromotionRefused):
        promote(gpu_baseline, "b.json", runs[:3])
    new, _ = promote(gpu_baseline, "b.json", runs)
    assert new.metrics[P50].value_ms == pytest.approx(0.0092, rel=0.01)
    assert "p50_ms 9.6%" in new.baseline_notes
    from apex_core.baseline.promote import allowances
    assert allowances("cuda", ["p50_ms"], 3)["p50_ms"] == pytest.approx(0.05)
    assert allowances("cuda", ["p50_ms"], 12)["p50_ms"] == pytest.approx(0.05 * 3.258 / 1.693, rel=1e-4)
    assert allowances("cuda", ["p50_ms"], 40) == allowances("cuda", ["p50_ms"], 15)  # the table's end


def test_promotion_refuses_fewer_than_three_runs_and_failed_cells(tmp_path, gpu_baseline):
    runs = [gpu_report(tmp_path, f"new-{i}.json", 0.009, seed=40 + i) for i in range(2)]
    with pytest.raises(InputFileError, match="at least 3 runs"):
        promote(gpu_baseline, "b.json", runs)
    broken = report([cell("spin", "10us", "test-working", "fp16", status="error", reason="boom"),
                     cell("other", "default", "test-working", "fp16", values=samples(0.01))],
                    device="cuda", gpu="NVIDIA H100 80GB HBM3", dtypes=("fp16",))
    runs.append(load_report(write(tmp_path / "broken.json", broken)))
    with pytest.raises(PromotionRefused) as refused:
        promote(gpu_baseline, "b.json", runs)
    assert any("error in" in d.detail for d in refused.value.disagreements)


def test_promote_command_writes_or_refuses_with_exit_2(tmp_path, gpu_baseline):
    write_baseline(tmp_path / "b.json", gpu_baseline)
    for i, m in enumerate((0.009, 0.00905, 0.00902)):
        gpu_report(tmp_path, f"ok-{i}.json", m, seed=50 + i)
    done = run_cli(["baseline", "promote", "--baseline", "b.json", "--runs", "ok-0.json", "ok-1.json",
                    "ok-2.json"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert P50 in done.stdout and "faster" in done.stdout and "promoted 3 agreeing runs" in done.stdout
    assert load_baseline(tmp_path / "b.json").metrics[P50].value_ms == pytest.approx(0.00902, rel=0.01)
    before = (tmp_path / "b.json").read_text()
    for i, m in enumerate((0.009, 0.012, 0.009)):
        gpu_report(tmp_path, f"bad-{i}.json", m, seed=60 + i)
    refused = run_cli(["baseline", "promote", "--baseline", "b.json", "--runs", "bad-0.json", "bad-1.json",
                       "bad-2.json"], cwd=tmp_path)
    assert refused.returncode == 2
    assert "promotion refused" in refused.stderr and P50 in refused.stderr and "Traceback" not in refused.stderr
    assert (tmp_path / "b.json").read_text() == before


# several runs of one build: best or median ----------------------------------------------------


def test_the_median_of_three_runs_sets_one_process_aside_either_way(tmp_path, gpu_baseline):
    def runs(name, medians):
        return [gpu_report(tmp_path, f"{name}-{i}.json", m, seed=80 + i, spread=0.002)
                for i, m in enumerate(medians)]

    def status(reports, combine):
        return next(c for c in compare(gpu_baseline, "b.json", reports, combine=combine).checks
                    if c.metric == P50).status

    outlier = runs("aa", (0.0108, 0.0100, 0.01005))  # one process 8 % slow, the build unchanged
    assert status(outlier[:1], "best") == "fail"
    assert status(outlier, "median") == "pass" and status(outlier, "best") == "pass"
    slower = runs("slow", (0.0107, 0.01075, 0.0100))  # 7 % slower, one process read fast
    assert status(slower, "median") == "fail"
    assert status(slower, "best") == "pass"  # the best run hides it


def test_compare_command_takes_the_median_run_on_request(tmp_path, gpu_baseline):
    write_baseline(tmp_path / "b.json", gpu_baseline)
    for i, m in enumerate((0.0107, 0.01075, 0.0100)):
        gpu_report(tmp_path, f"r{i}.json", m, seed=90 + i, spread=0.002)
    currents = ["--current", "r0.json", "r1.json", "r2.json"]
    best = run_cli(["compare", "--baseline", "b.json", *currents, "--quiet"], cwd=tmp_path)
    median = run_cli(["compare", "--baseline", "b.json", *currents, "--combine", "median", "--quiet"],
                     cwd=tmp_path)
    assert best.returncode == 0 and median.returncode == 1, median.stdout + median.stderr
    refused = run_cli(["compare", "--baseline", "b.json", *currents, "--combine", "mean"], cwd=tmp_path)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
