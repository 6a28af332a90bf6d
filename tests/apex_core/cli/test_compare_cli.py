"""``apex-bench compare``, ``apex-bench baseline emit`` and ``--compare`` runs, end to end."""

import copy
import json
import os
import subprocess
import sys

import pytest

from apex_core.cli.main import main
from tests.apex_core.baseline.conftest import cell, report, samples, write
from tests.conftest import ROOT, run_cli

FAST = ["--min-time", "0.2", "--max-time", "1.0", "--warmup", "3"]
ARTIFACTS = ("summary.json", "trend.json", "compare.md")


def _compare(tmp_path, baseline, current, *extra):
    currents = [str(c) for c in current] if isinstance(current, list) else [str(current)]
    return main(["compare", "--baseline", str(baseline), "--current", *currents,
                 "--summary", str(tmp_path / "summary.json"), "--trend-output", str(tmp_path / "trend.json"),
                 "--markdown", str(tmp_path / "compare.md"), *extra])


def _emit(source, output, *extra):
    return main(["baseline", "emit", "--from", str(source), "--output", str(output), *extra])


def _one_line_error(capsys, *fragments):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    for fragment in fragments:
        assert fragment in err[0], err[0]
    return err[0]


@pytest.fixture()
def synthetic(tmp_path):
    """A report with three ok cells and the baseline emitted from it."""
    cells = [cell("tilepack", values=samples(0.2, seed=1)), cell("fusiongate", values=samples(0.05, seed=2)),
             cell("ff-infer", values=samples(4.0, seed=3))]
    source = write(tmp_path / "report.json", report(cells))
    assert _emit(source, tmp_path / "baseline.json") == 0
    return source, tmp_path / "baseline.json"


def test_self_baseline_passes_and_writes_artifacts(tmp_path, synthetic, capsys):
    source, baseline = synthetic
    assert _compare(tmp_path, baseline, source) == 0
    out = capsys.readouterr().out
    assert "apex-bench compare: PASS, 0 of 6 metrics failed" in out
    assert "tilepack/default/torch-reference/fp32/p50_ms" in out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (summary["suite"], summary["status"], summary["forced"]) == ("apex-bench", "pass", False)
    assert set(summary["checks"][0]) >= {"metric", "status", "baseline_ms", "allowed_max_ms", "current_ms",
                                         "regression_ratio", "verdict", "ci_low", "ci_high"}
    trend = json.loads((tmp_path / "trend.json").read_text())
    assert (trend["schema_version"], trend["overall_status"], trend["total_metrics"],
            trend["failed_metrics"]) == (1, "pass", 6, 0)
    assert set(trend["metrics"][0]) == {"metric", "status", "baseline_ms", "allowed_max_ms", "current_ms",
                                        "regression_ratio"}
    assert "| `ff-infer/default/torch-reference/fp32/p50_ms` | pass |" in (tmp_path / "compare.md").read_text()


def test_halved_baseline_fails_and_names_every_metric(tmp_path, synthetic, capsys):
    source, baseline = synthetic
    record = json.loads(baseline.read_text())
    for metric in record["metrics"].values():
        metric["value_ms"] /= 2
        metric["samples_ms"] = [s / 2 for s in metric.get("samples_ms", [])]
    halved = write(tmp_path / "halved.json", record)
    assert _compare(tmp_path, halved, source) == 1
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "fail"
    failed = [c["metric"] for c in summary["checks"] if c["status"] == "fail"]
    # on the CPU the minimum is the 2x gate; the median only guards against gross regressions
    assert failed == [name for name in record["metrics"] if name.endswith("/min_ms")]
    assert summary["failing_metrics"] == failed
    assert {c["verdict"] for c in summary["checks"]} == {"slower"}
    out = capsys.readouterr().out
    assert "FAIL, 3 of 6 metrics failed: " + ", ".join(failed) in out
    markdown = (tmp_path / "compare.md").read_text()
    assert all(f"| `{name}` | **fail** (" in markdown for name in failed)


def test_several_runs_give_each_metric_its_best(tmp_path, synthetic, capsys):
    source, baseline = synthetic
    record = json.loads(source.read_text())
    slow = write(tmp_path / "slow.json", record | {"benchmarks": [
        cell(b["workload"], values=[s * 2 for s in b["samples_ms"]]) for b in record["benchmarks"]]})
    assert _compare(tmp_path, baseline, slow) == 1
    assert _compare(tmp_path, baseline, [slow, source]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["current"] == [str(slow), str(source)] and summary["combine"] == "best"
    assert "(best run per timing metric)" in (tmp_path / "compare.md").read_text()
    # the median of three runs, two of them slow: the summary and the Markdown name the rule it judged by
    assert _compare(tmp_path, baseline, [slow, source, slow], "--combine", "median") == 1
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["combine"] == "median" and len(summary["current"]) == 3
    assert "(median run per timing metric)" in (tmp_path / "compare.md").read_text()


def _mutate(record, path, value):
    target = record
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return record


BAD_INPUTS = [
    ("baseline", "{not json", None, "malformed JSON"),
    ("baseline", ("suite",), None, "field suite: expected string, got null"),
    ("baseline", ("metrics", "tilepack/default/torch-reference/fp32/p50_ms", "max_regression_ratio"), -0.5,
     "field metrics.tilepack/default/torch-reference/fp32/p50_ms.max_regression_ratio: is negative"),
    ("baseline", ("metrics", "tilepack/default/torch-reference/fp32/p50_ms", "value_ms"), "1 ms",
     "value_ms: expected number, got string"),
    ("baseline", ("suite",), "other-suite", "field suite: 'apex-bench' does not match the suite 'other-suite'"),
    ("report", "", None, "malformed JSON at line 1 column 1"),
    ("report", ("benchmarks",), [], "field benchmarks: is empty"),
    ("report", ("environment",), "cpu", "field environment: expected object"),
    ("report", ("config", "profile"), "fixed", "field environment_key.profile"),
    # numbers a float cannot hold, limits that would let anything pass, absurd integers, deep nesting
    ("baseline", '{"schema_version": 1, "suite": 1e999}', None, "1e999 is beyond the range of a float"),
    ("baseline", ("metrics", "tilepack/default/torch-reference/fp32/p50_ms", "max_regression_ratio"), 1e308,
     "max_regression_ratio"),
    ("report", '{"n": ' + "9" * 400 + "}", None, "an integer of 400 digits is out of range"),
    ("report", "[" * 100_000 + "]" * 100_000, None, "nested too deeply"),
    # denormal times, ratios and limits: no inf arithmetic, a line naming the file
    ("baseline", ("metrics", "tilepack/default/torch-reference/fp32/p50_ms", "value_ms"), 5e-324,
     "5e-324 is subnormal"),
    ("baseline", ("metrics", "tilepack/default/torch-reference/fp32/min_ms", "samples_ms"), [5e-324] * 50,
     "5e-324 is subnormal"),
    ("baseline", ("metrics", "tilepack/default/torch-reference/fp32/p50_ms", "max_regression_ratio"), 5e-324,
     "5e-324 is subnormal"),
    ("baseline", ("metrics", "tilepack/default/torch-reference/fp32/p50_ms", "max_regression_abs_ms"), 1e-310,
     "1e-310 is subnormal"),
    ("baseline", ("metrics", "tilepack/default/torch-reference/fp32/p50_ms", "value_ms"), 1e-300,
     "value_ms: must be >= 1e-06, got 1e-300"),
    ("report", ("benchmarks", 0, "samples_ms", 0), 5e-324, "5e-324 is subnormal"),
    ("report", ("benchmarks", 0, "stats", "p50_ms"), 5e-324, "5e-324 is subnormal"),
]


@pytest.mark.parametrize(("which", "change", "value", "fragment"), BAD_INPUTS)
def test_bad_input_is_one_line_exit_2_and_no_artifact(tmp_path, synthetic, capsys, which, change, value,
                                                      fragment):
    source, baseline = synthetic
    target = baseline if which == "baseline" else source
    if isinstance(change, str):
        target.write_text(change)
    else:
        target.write_text(json.dumps(_mutate(json.loads(target.read_text()), change, value)))
    capsys.readouterr()
    assert _compare(tmp_path, baseline, source) == 2
    line = _one_line_error(capsys, fragment)
    # the file named is the one at fault (the suite of a report is checked against the baseline)
    assert str(source if which == "report" or "does not match" in fragment else baseline) in line
    assert not any((tmp_path / name).exists() for name in ARTIFACTS)


def test_environment_difference_refused_then_forced(tmp_path, synthetic, capsys):
    source, baseline = synthetic
    record = json.loads(source.read_text())
    record["environment"]["cpu_count"] = 64
    other = write(tmp_path / "other.json", record)
    capsys.readouterr()
    assert _compare(tmp_path, baseline, other) == 2
    _one_line_error(capsys, str(other), "field environment_key.cpu_count", "baseline 2, current 64", "--force")
    assert not any((tmp_path / name).exists() for name in ARTIFACTS)
    assert _compare(tmp_path, baseline, other, "--force") == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["forced"] is True
    assert summary["environment_differences"] == ["cpu_count: baseline 2, current 64"]
    assert "**Forced:**" in (tmp_path / "compare.md").read_text()
    assert "forced across differing environments" in capsys.readouterr().out


def test_unwritable_artifact_is_refused_before_writing_any(tmp_path, synthetic, capsys):
    source, baseline = synthetic
    code = main(["compare", "--baseline", str(baseline), "--current", str(source), "--summary",
                 str(tmp_path / "summary.json"), "--markdown", str(tmp_path / "no" / "compare.md")])
    assert code == 2
    _one_line_error(capsys, "--markdown", "does not exist")
    assert not (tmp_path / "summary.json").exists()


def test_missing_metric_and_allow_missing(tmp_path, synthetic, capsys):
    source, baseline = synthetic
    record = json.loads(source.read_text())
    record["benchmarks"] = [b for b in record["benchmarks"] if b["workload"] != "fusiongate"]
    fewer = write(tmp_path / "fewer.json", record)
    assert _compare(tmp_path, baseline, fewer) == 1
    statuses = {c["metric"]: c["status"] for c in json.loads((tmp_path / "summary.json").read_text())["checks"]}
    assert statuses["fusiongate/default/torch-reference/fp32/p50_ms"] == "missing"
    assert _compare(tmp_path, baseline, fewer, "--allow-missing") == 0


def test_emit_usage_errors(tmp_path, synthetic, capsys):
    source, _ = synthetic
    with pytest.raises(SystemExit) as info:
        _emit(source, tmp_path / "b.json", "--ratio", "-1")
    assert info.value.code == 2
    _one_line_error(capsys, "--ratio", "must be a finite number >= 0")
    assert _emit(tmp_path / "absent.json", tmp_path / "b.json") == 2
    _one_line_error(capsys, "absent.json", "cannot read")
    assert not (tmp_path / "b.json").exists()


# ---------------------------------------------------------------- real runs (worker processes)


def _run(tmp_path, name, args, env=None):
    result = run_cli(["--device", "cpu", "--output-json", f"{name}.json", "--output-md", f"{name}.md",
                      *args], cwd=tmp_path, env=env)
    return result


@pytest.mark.slow
def test_planted_30_percent_slowdown_is_caught(tmp_path, plugin_on_path):
    """test-working sleeps APEX_TESTPLUGIN_DELAY_S per call: 1 ms, then 1.3 ms."""
    args = ["--workloads", "test-scale", "--backends", "test-working", *FAST]
    assert _run(tmp_path, "base", args, {"APEX_TESTPLUGIN_DELAY_S": "0.001"}).returncode == 0
    emitted = run_cli(["baseline", "emit", "--from", "base.json", "--output", "b.json", "--ratio", "0.1",
                       "--abs-ms", "0.05"], cwd=tmp_path)
    assert emitted.returncode == 0, emitted.stderr
    same = _run(tmp_path, "same", [*args, "--compare", "--baseline", "b.json"],
                {"APEX_TESTPLUGIN_DELAY_S": "0.001"})
    assert same.returncode == 0, same.stdout + same.stderr
    slow = _run(tmp_path, "slow", [*args, "--compare", "--baseline", "b.json"],
                {"APEX_TESTPLUGIN_DELAY_S": "0.0013"})
    assert slow.returncode == 1, slow.stdout + slow.stderr
    summary = json.loads((tmp_path / "slow.compare.json").read_text())
    checks = {c["metric"].rsplit("/", 1)[1]: c for c in summary["checks"]}
    assert "test-scale/default/test-working/fp32/min_ms" in summary["failing_metrics"]
    assert checks["min_ms"]["verdict"] == "slower" and 0.2 < checks["min_ms"]["regression_ratio"] < 0.4
    assert checks["p50_ms"]["verdict"] == "slower"  # the median's wider CPU limit is for gross regressions
    assert (tmp_path / "slow.trend.json").exists() and (tmp_path / "slow.compare.md").exists()


@pytest.mark.slow
def test_a_a_comparison_on_cpu_passes(tmp_path):
    """A baseline from one run, then the CI gate script (a second run) of the same build against it."""
    env = {"OMP_NUM_THREADS": "1"}
    assert _run(tmp_path, "a", ["--profile", "smoke", "--backends", "torch-reference"], env).returncode == 0
    assert run_cli(["baseline", "emit", "--from", "a.json", "--output", "b.json"], cwd=tmp_path).returncode == 0
    gate = subprocess.run(["bash", str(ROOT / "scripts" / "ci_perf_gate.sh")], capture_output=True, text=True,
                          env={**os.environ, "APEX_PERF_BASELINE": str(tmp_path / "b.json"),
                               "APEX_PERF_GATE_DIR": str(tmp_path / "gate"), "PYTHON": sys.executable},
                          timeout=600)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    summary = json.loads((tmp_path / "gate" / "compare.json").read_text())
    assert summary["status"] == "pass" and len(summary["checks"]) == 20
    assert {"trend.json", "compare.md", "run1.json"} <= {p.name for p in (tmp_path / "gate").iterdir()}


@pytest.mark.parametrize(("args", "fragment"), [
    (["--compare"], "--compare needs --baseline FILE"),
    (["--summary", "s.json"], "--summary needs --compare"),
    (["--compare", "--baseline", "absent.json"], "absent.json: cannot read"),
    (["--compare", "--baseline", "bad.json"], "bad.json: field metrics"),
    (["--compare", "--baseline", "fixed.json"], "field environment_key.profile"),
])
def test_run_gate_is_validated_before_any_cell(tmp_path, args, fragment):
    committed = json.loads((ROOT / "baselines" / "cpu-smoke.json").read_text())
    write(tmp_path / "bad.json", {**committed, "metrics": {}})
    fixed = copy.deepcopy(committed)
    fixed["environment_key"]["profile"] = "fixed"
    write(tmp_path / "fixed.json", fixed)
    result = _run(tmp_path, "r", ["--profile", "smoke", "--backends", "torch-reference", *args])
    assert result.returncode == 2, result.stdout + result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and fragment in result.stderr
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_baseline_that_is_not_a_regular_file_is_refused_without_reading_it(tmp_path, synthetic, capsys, kind):
    source, _ = synthetic
    if kind == "fifo":
        special = tmp_path / "baseline.fifo"
        os.mkfifo(special)  # reading it would block forever
    else:
        special = "/dev/zero"  # reading it would never end
    capsys.readouterr()
    assert _compare(tmp_path, special, source) == 2
    _one_line_error(capsys, "not a regular file")


@pytest.mark.parametrize(("flag", "value"), [("--ratio", "inf"), ("--abs-ms", "1e309"), ("--ratio", "1e308"),
                                             ("--abs-ms", "nan"), ("--ratio", "5e-324"),
                                             ("--abs-ms", "1e-310")])
def test_emit_refuses_limits_that_let_anything_pass(tmp_path, synthetic, capsys, flag, value):
    source, _ = synthetic
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        _emit(source, tmp_path / "b.json", flag, value)
    assert stop.value.code == 2
    _one_line_error(capsys, flag)
    assert not (tmp_path / "b.json").exists()


def test_a_gpu_report_at_the_timers_floor_emits_and_compares_without_inf(tmp_path, capsys):
    # samples net of the timer's floor may be 0 ms: the baseline stores 1 ns, the verdict has no ratio
    at_floor = [cell("tilepack", values=[0.0] * 50), cell("ff-infer", values=samples(4.0, seed=3))]
    source = write(tmp_path / "report.json", report(at_floor, device="cuda", gpu="H100"))
    assert _emit(source, tmp_path / "baseline.json") == 0
    metrics = json.loads((tmp_path / "baseline.json").read_text())["metrics"]
    assert metrics["tilepack/default/torch-reference/fp32/p50_ms"]["value_ms"] == 1e-6
    capsys.readouterr()
    assert _compare(tmp_path, tmp_path / "baseline.json", source) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())  # strict JSON: no inf, no nan
    (check,) = [c for c in summary["checks"] if c["metric"] == "tilepack/default/torch-reference/fp32/p50_ms"]
    assert (check["status"], check["current_ms"], check["regression_ratio"]) == ("pass", 0.0, -1.0)
    assert check["verdict"] == "inconclusive" and check["verdict_ratio"] is None
    assert "too close to 0" in check["reason"]
    assert "Traceback" not in capsys.readouterr().err
