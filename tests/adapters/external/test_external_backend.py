"""ext:NAME backends end to end: the shipped numpy example, and every way a command can misbehave.

The commands are real processes (examples/external/numpy_bench.py and fake_tool.py beside
this file), run through the normal cell pipeline.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import sys
from pathlib import Path

import pytest

from apex_core.api import run
from apex_core.registry import Registry
from apex_core.results import SkipKind, Status
from apex_core.timing import TimingOptions
from tests.conftest import ROOT, run_cli

EXAMPLE = ROOT / "examples" / "external" / "numpy_bench.py"
FAKE = Path(__file__).with_name("fake_tool.py")
QUICK = TimingOptions(warmup=1, min_iters=4, min_time_s=0.0, max_time_s=0.2)


def _command(*argv: str | Path) -> str:
    return shlex.join([sys.executable, *map(str, argv)])


def _run_ext(monkeypatch: pytest.MonkeyPatch, command: str, workloads=("tilepack",), isolation="inline",
             timeout_s: float = 120.0, dtypes=("fp32",)):
    monkeypatch.setenv("APEX_BENCH_EXT_TOOL_CMD", command)
    report = run(list(workloads), ["ext:tool"], device="cpu", dtypes=dtypes, profile="smoke", timing=QUICK,
                 isolation=isolation, timeout_s=timeout_s)
    return report.cells


def test_example_command_runs_tilepack_and_fusiongate_ok(monkeypatch):
    cells = _run_ext(monkeypatch, _command(EXAMPLE), workloads=("tilepack", "fusiongate"),
                     dtypes=("fp32", "fp16"))
    assert [(c.workload, c.dtype, c.status) for c in cells] == [
        ("tilepack", "fp32", Status.OK), ("tilepack", "fp16", Status.OK),
        ("fusiongate", "fp32", Status.OK), ("fusiongate", "fp16", Status.OK)]
    for cell in cells:
        assert cell.timing.method == "external"
        assert cell.timing.stats.n == QUICK.min_iters == len(cell.timing.samples_ms)
        assert all(a.passed for a in cell.accuracy) and {a.stage for a in cell.accuracy} == {
            "before-timing", "after-timing"}
        assert cell.metadata["external_wall_s"] > 0
        reported = cell.metadata["external_reported"]
        assert reported["iterations"] == QUICK.min_iters and reported["latency_ms"]["min"] >= 0
        # first call (build), two checks and the timed invocation
        assert cell.metadata["external_invocations"] == 4


def test_the_request_names_the_cell(monkeypatch, tmp_path):
    script = tmp_path / "echo_request.py"
    script.write_text(
        "import json, os, shutil, sys\n"
        "shutil.copy(os.environ['APEX_BENCH_REQUEST'], sys.argv[1])\n"
        "print(json.dumps({'status': 'skipped', 'reason': 'only looking'}))\n")
    copy = tmp_path / "request.json"
    cells = _run_ext(monkeypatch, _command(script, copy))
    assert cells[0].status == Status.SKIPPED and cells[0].reason == "ext:tool: only looking"
    request = json.loads(copy.read_text())
    assert request["workload"] == "tilepack" and request["case"] == "default"
    assert request["dtype"] == "fp32" and request["device"] == "cpu"
    assert request["params"]["tile_size"] == 4  # the smoke profile
    assert (request["warmup"], request["iterations"]) == (0, 1)
    assert request["inputs"].endswith("inputs.npz") and request["outputs"].endswith("outputs.npz")


def test_summary_only_result_keeps_the_commands_numbers(monkeypatch):
    [cell] = _run_ext(monkeypatch, _command(FAKE, "summary-only"))
    assert cell.status == Status.OK
    stats = cell.timing.stats
    assert (stats.p50, stats.p95, stats.min, stats.max, stats.mean) == (1.0, 1.5, 0.5, 2.0, 1.0)
    assert cell.timing.samples_ms == () and "summary only" in cell.timing.note


@pytest.mark.parametrize(("mode", "status", "reason"), [
    ("junk", Status.ERROR, "printed no JSON object on stdout: 'loading model... done | result: fast'"),
    ("exit3", Status.ERROR, "ext:tool exited with code 3; it printed: fatal: device lost"),
    ("schema", Status.ERROR, "breaks the contract at latency_ms.mean: 'fast' is not of type 'number'"),
    ("error-status", Status.ERROR, "ext:tool reported an error: out of device memory"),
    ("no-outputs", Status.ERROR, "reported ok but wrote no outputs file (outputs.npz)"),
    ("missing-output", Status.INCORRECT, "missing outputs: packed"),
    ("wrong-shape", Status.ERROR, "output 'packed' has shape (1, 6, 8, 4, 1), expected (1, 6, 8, 4, 4)"),
    ("wrong-dtype", Status.INCORRECT, "output 'packed' is float64, the cell is float32"),
    ("wrong-values", Status.INCORRECT, "packed: 768/768 elements off"),
])
def test_a_misbehaving_command_gets_a_clear_status(monkeypatch, mode, status, reason):
    [cell] = _run_ext(monkeypatch, _command(FAKE, mode))
    assert cell.status == status, cell.reason
    assert reason in cell.reason
    assert cell.timing is None and "\n" not in cell.reason


def test_a_command_that_answers_skipped_skips_the_cell(monkeypatch):
    [cell] = _run_ext(monkeypatch, _command(FAKE, "skipped"))
    assert (cell.status, cell.skip_kind) == (Status.SKIPPED, SkipKind.UNSUPPORTED)
    assert cell.reason == "ext:tool: no kernel for this shape"


def test_missing_command_is_unavailable_with_the_reason(monkeypatch):
    [cell] = _run_ext(monkeypatch, "no-such-benchmark-tool --fast")
    assert (cell.status, cell.skip_kind) == (Status.SKIPPED, SkipKind.UNAVAILABLE)
    assert "'no-such-benchmark-tool' not found on PATH" in cell.reason
    assert "APEX_BENCH_EXT_TOOL_CMD" in cell.reason


def test_command_that_is_not_executable_is_unavailable(monkeypatch, tmp_path):
    script = tmp_path / "tool.sh"
    script.write_text("#!/bin/sh\necho '{}'\n")
    script.chmod(stat.S_IRUSR | stat.S_IWUSR)
    [cell] = _run_ext(monkeypatch, shlex.quote(str(script)))
    assert (cell.status, cell.skip_kind) == (Status.SKIPPED, SkipKind.UNAVAILABLE)
    assert "is not executable (chmod +x" in cell.reason


@pytest.mark.slow
def test_a_hanging_command_is_a_timeout_with_what_it_printed(monkeypatch):
    [cell] = _run_ext(monkeypatch, _command(FAKE, "hang"), isolation="process", timeout_s=8.0)
    assert cell.status == Status.TIMEOUT
    assert "ran past the 8 s timeout" in cell.reason
    assert "fake tool: waiting forever" in cell.worker_output


def test_ext_backends_appear_in_the_registry_with_their_source(monkeypatch):
    monkeypatch.setenv("APEX_BENCH_EXT_MY_TOOL_CMD", "my-tool --bench")
    registry = Registry.discover()
    assert registry.backends["ext:my-tool"].command.argv == ("my-tool", "--bench")
    assert registry.sources[("backend", "ext:my-tool")].startswith("APEX_BENCH_EXT_MY_TOOL_CMD via ")


@pytest.mark.slow
def test_cli_runs_the_example_config_end_to_end(tmp_path):
    config = tmp_path / "apex-bench.toml"
    config.write_text(f"[external.numpy]\ncommand = {json.dumps([sys.executable, str(EXAMPLE)])}\n"
                      "workloads = ['tilepack', 'fusiongate']\n")
    out = tmp_path / "r.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("APEX_BENCH_")}
    listing = run_cli(["--list", "--device", "cpu"], cwd=tmp_path, env=env)  # the default file name
    # probed in the worker process: it rebuilt the registry from the exported config and found the command
    assert listing.returncode == 0 and re.search(r"ext:numpy\s*│\s*ok\s*│", listing.stdout), listing.stdout
    done = run_cli(["--external-config", str(config), "--backends", "ext:numpy,torch-reference",
                    "--workloads", "tilepack,fusiongate", "--profile", "smoke", "--device", "cpu",
                    "--min-time", "0.02", "--max-time", "0.2", "--output-json", str(out),
                    "--output-md", str(tmp_path / "r.md")], cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    ext = [b for b in report["benchmarks"] if b["backend"] == "ext:numpy"]
    assert [(b["workload"], b["status"], b["timing_method"]) for b in ext] == [
        ("tilepack", "ok", "external"), ("fusiongate", "ok", "external")]


def test_cli_refuses_a_missing_or_broken_config_file(tmp_path):
    missing = run_cli(["--config", str(tmp_path / "nope.toml"), "--list"], cwd=tmp_path)
    assert missing.returncode == 2 and "no such config file" in missing.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("[external.x\ncommand = 1\n")
    broken = run_cli(["--config", str(bad), "--list"], cwd=tmp_path)
    assert broken.returncode == 2 and f"{bad}: invalid TOML" in broken.stderr
    assert "Traceback" not in broken.stderr
