"""--fixed-iters: exactly N warm-up calls and N timed samples per cell, and the report says so."""

from __future__ import annotations

import json
import time

import attrs
import pytest

from apex_core.interfaces import Backend, Prepared
from apex_core.measure.cell import CellSpec, execute_cell
from apex_core.report.markdown import render_markdown
from apex_core.results import Availability, Report
from apex_core.timing import FIXED_MODE, StopRule, TimingOptions, measure_cpu, remaining_samples, warm_up
from tests.apex_core.fakes import Axpy
from tests.conftest import run_cli


class Counting(Backend):
    """The reference, counting its calls."""

    name = "counting"
    description = "counts calls"

    def __init__(self) -> None:
        self.calls = 0

    def probe(self, device):
        return Availability.yes()

    def prepare(self, workload, case, inputs):
        def run():
            self.calls += 1
            return workload.reference(case, inputs)

        return Prepared(run)


def test_options_say_which_mode_and_check_the_count():
    assert TimingOptions().mode == "adaptive" and TimingOptions().fixed_iters is None
    fixed = TimingOptions(fixed_iters=3)
    assert fixed.mode == FIXED_MODE
    assert attrs.evolve(fixed, fixed_iters=None).mode == "adaptive"  # derived, never stale
    assert attrs.asdict(fixed)["mode"] == FIXED_MODE  # what the report's config carries
    for bad in (0, -2, True):
        with pytest.raises(ValueError, match="fixed iters must be >= 1"):
            TimingOptions(fixed_iters=bad)


def test_stop_rule_ignores_time_and_noise_under_fixed_iters():
    rule = StopRule(TimingOptions(fixed_iters=4, min_time_s=0, max_time_s=0.001, max_samples=2))
    assert rule.reason([1.0, 5.0, 9.0], 100.0) is None  # past the time and sample caps: still owed one
    assert rule.reason([1.0, 5.0, 9.0, 2.0], 100.0) == FIXED_MODE
    assert remaining_samples(TimingOptions(fixed_iters=25), 20, 10) == 5
    assert remaining_samples(TimingOptions(), 20, 10) == 10


def test_cpu_timer_makes_exactly_n_warmup_and_n_timed_calls():
    calls = []

    def slow():  # slower than max_time_s: the adaptive sampler would stop after one sample
        calls.append(1)
        time.sleep(0.002)

    options = TimingOptions(fixed_iters=6, warmup=50, min_iters=50, min_time_s=0, max_time_s=0.001)
    assert len(warm_up(slow, options)) == 6
    calls.clear()
    timing = measure_cpu(slow, options)
    assert len(calls) == 12  # 6 warm-up + 6 timed
    assert len(timing.samples_ms) == 6 and timing.stats.n == 6 and timing.stop_reason == FIXED_MODE


def test_a_cell_calls_the_backend_2n_times_plus_build_and_two_checks():
    backend, workload = Counting(), Axpy()
    spec = CellSpec("axpy", "small", "counting", "fp32", "cpu", {}, 0, TimingOptions(fixed_iters=9))
    result = execute_cell(workload, backend, spec)
    assert result.status == "ok", result.reason
    assert result.timing is not None and len(result.timing.samples_ms) == 9
    assert backend.calls == 2 * 9 + 3  # the build call and the two checks are not timed


def test_markdown_names_the_sampling_mode():
    def text(options):
        config = {"profile": "smoke", "timing": attrs.asdict(options)}
        return render_markdown(Report("s", "2026-01-01T00:00:00Z", {"device": "cpu"}, config, "complete", ()))

    assert "Sampling: fixed, 12 warm-up calls and 12 timed samples per cell (--fixed-iters)." in text(
        TimingOptions(fixed_iters=12))
    assert "Sampling: adaptive, at least 10 samples and 0.5 s, until the noise is under 0.5% or 3.0 s." in text(
        TimingOptions())


def test_cli_run_with_fixed_iters_records_the_mode_and_exact_counts(tmp_path):
    result = run_cli(["--device", "cpu", "--profile", "smoke", "--backends", "torch-reference",
                      "--workloads", "tilepack,tilessm-scan:forward", "--fixed-iters", "7",
                      "--output-json", "r.json", "--output-md", "r.md"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr + result.stdout
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["config"]["timing"]["mode"] == FIXED_MODE
    assert record["config"]["timing"]["fixed_iters"] == 7
    cells = record["benchmarks"]
    assert len(cells) == 2 and {c["status"] for c in cells} == {"ok"}
    assert all(len(c["samples_ms"]) == 7 and c["stats"]["n"] == 7 for c in cells)
    assert all(c["stop_reason"] == FIXED_MODE for c in cells)
    assert "Sampling: fixed, 7 warm-up calls" in (tmp_path / "r.md").read_text()


def test_cli_rejects_a_count_below_one(tmp_path):
    result = run_cli(["--fixed-iters", "0"], cwd=tmp_path)
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last == "apex-bench: error: argument --fixed-iters: must be >= 1, got 0"


def test_the_floor_sampling_flag_reaches_the_timing_options_and_the_report_config():
    from apex_core.cli.args import build_run_parser
    from apex_core.cli.run_command import timing_options

    parser = build_run_parser()
    assert timing_options(parser.parse_args([]), "cpu").floor_sampling == "rounds"
    chosen = timing_options(parser.parse_args(["--floor-sampling", "interleaved"]), "cpu")
    assert chosen.floor_sampling == "interleaved"
    assert attrs.asdict(chosen)["floor_sampling"] == "interleaved"  # the config block is asdict of these
