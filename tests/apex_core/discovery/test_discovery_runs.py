"""--discover end to end: bench.yaml folders become workloads here and in the workers; bad files become rows."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from apex_core.api import run
from apex_core.cli.config_flags import configured_variables
from apex_core.config_file import CONFIG_ENV, DISCOVER_ENV
from apex_core.errors import UsageError
from apex_core.registry import Registry
from apex_core.results import SkipKind, Status
from apex_core.timing import TimingOptions
from tests.conftest import ROOT, run_cli

EXAMPLES = ROOT / "examples" / "discover"
QUICK = TimingOptions(warmup=1, min_iters=3, min_time_s=0.0, max_time_s=0.1)
CLEAN_ENV = {k: v for k, v in os.environ.items() if not k.startswith("APEX_BENCH_")}


@pytest.fixture()
def kernels(tmp_path: Path) -> Path:
    """A folder with the saxpy example and two broken bench.yaml files beside it."""
    folder = tmp_path / "kernels"
    shutil.copytree(EXAMPLES / "saxpy", folder / "saxpy")
    (folder / "typo").mkdir()
    (folder / "typo" / "bench.yaml").write_text((EXAMPLES / "saxpy" / "bench.yaml").read_text()
                                                .replace("name: saxpy", "name: typo").replace("work:", "wrok:"))
    (folder / "unsafe").mkdir()
    (folder / "unsafe" / "bench.yaml").write_text(
        "name: unsafe\nmodule: k\nfunction: f\nreference: g\ninputs: {x: {shape: [4]}}\noutputs: [y]\n"
        "skip: {requires: \"__import__('os').system('touch pwned')\"}\n")
    return folder


def test_folder_workloads_run_ok_and_bad_files_are_error_rows(kernels, monkeypatch):
    monkeypatch.setenv(DISCOVER_ENV, str(kernels))
    registry = Registry.discover()
    assert "bench-function" in registry.backends and "saxpy" in registry.workloads
    rows = {row.name: row for row in registry.broken}
    assert f"{kernels}/typo/bench.yaml: field 'wrok': unknown key" in rows["typo"].reason
    assert f"{kernels}/unsafe/bench.yaml: field 'skip.requires'" in rows["unsafe"].reason
    report = run(["saxpy", "typo", "unsafe"], ["torch-reference", "bench-function"], device="cpu",
                 dtypes=("fp32", "fp16"), profile="smoke", timing=QUICK, isolation="inline", registry=registry)
    by = {(c.workload, c.backend, c.dtype): c for c in report.cells}
    for backend in ("torch-reference", "bench-function"):
        for dtype in ("fp32", "fp16"):
            cell = by[("saxpy", backend, dtype)]
            assert cell.status == Status.OK, cell.reason
            assert cell.params == {"n": 4096} and cell.derived.units == "elements"
    assert by[("typo", "bench-function", "fp32")].status == Status.ERROR
    assert "field 'wrok'" in by[("typo", "bench-function", "fp32")].reason
    assert not (kernels / "unsafe" / "pwned").exists() and not Path("pwned").exists()


def test_skip_conditions_and_precisions_skip_cells(kernels, monkeypatch, tmp_path):
    needs_gpu = tmp_path / "gpu_only"
    shutil.copytree(EXAMPLES / "saxpy", needs_gpu / "saxpy")
    text = (needs_gpu / "saxpy" / "bench.yaml").read_text().replace("max_memory_gb: 1", "requires: cuda")
    (needs_gpu / "saxpy" / "bench.yaml").write_text(text.replace("[fp32, fp16, bf16]", "[fp16]"))
    monkeypatch.setenv(DISCOVER_ENV, str(needs_gpu))
    report = run(["saxpy"], ["bench-function"], device="cpu", dtypes=("fp32",), profile="smoke", timing=QUICK,
                 isolation="inline")
    [cell] = report.cells
    assert (cell.status, cell.skip_kind) == (Status.SKIPPED, SkipKind.UNAVAILABLE)
    assert cell.reason == "bench.yaml requires cuda; this cell runs on cpu"


def test_a_function_that_returns_the_wrong_count_is_an_error(tmp_path, monkeypatch):
    folder = tmp_path / "k" / "pair"
    shutil.copytree(EXAMPLES / "saxpy", folder)
    (folder / "kernel.py").write_text((folder / "kernel.py").read_text() + (
        "\n\ndef pair(x, y, a):\n    return x, y\n"))
    text = (folder / "bench.yaml").read_text()
    (folder / "bench.yaml").write_text(text.replace("function: saxpy ", "function: pair "))
    monkeypatch.setenv(DISCOVER_ENV, str(folder.parent))
    [cell] = run(["saxpy"], ["bench-function"], device="cpu", dtypes=("fp32",), profile="smoke", timing=QUICK,
                 isolation="inline").cells
    assert cell.status == Status.ERROR and "the function returned 2 value(s), 'outputs' lists 1" in cell.reason


@pytest.mark.slow
def test_cli_discovers_in_the_workers_from_the_flag_and_the_config_key(kernels, tmp_path):
    out = tmp_path / "r.json"
    common = ["--workloads", "saxpy", "--backends", "torch-reference,bench-function", "--profile", "smoke",
              "--device", "cpu", "--min-time", "0.02", "--max-time", "0.1",
              "--output-md", str(tmp_path / "r.md")]
    done = run_cli(["--discover", str(kernels), "--output-json", str(out), *common], cwd=tmp_path,
                   env=CLEAN_ENV)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert [(b["backend"], b["status"]) for b in report["benchmarks"]] == [
        ("torch-reference", "ok"), ("bench-function", "ok")]
    assert {p["name"] for p in report["plugins"]} == {"typo", "unsafe"}
    config = tmp_path / "apex-bench.toml"
    config.write_text(f"discover = [{json.dumps(kernels.name)}]\n")  # relative to the file's folder
    listing = run_cli(["--config", str(config), "--list", "--device", "cpu"], cwd=ROOT, env=CLEAN_ENV)
    assert listing.returncode == 0 and "saxpy" in listing.stdout and "typo" in listing.stdout


def test_cli_usage_errors_for_missing_folder_and_missing_pyyaml(tmp_path, monkeypatch):
    missing = run_cli(["--discover", str(tmp_path / "nope"), "--list"], cwd=tmp_path, env=CLEAN_ENV)
    assert missing.returncode == 2 and "--discover: no such folder" in missing.stderr
    monkeypatch.setitem(sys.modules, "yaml", None)  # PyYAML not installed, as far as imports go
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=r"needs PyYAML.*pip install 'apex-bench\[discover\]'"):
        configured_variables(SimpleNamespace(config=None, discover=[str(tmp_path)]))


def test_yaml_syntax_errors_and_duplicate_names_are_error_rows(tmp_path, monkeypatch):
    for folder in ("one", "two"):
        shutil.copytree(EXAMPLES / "saxpy", tmp_path / folder)
    (tmp_path / "three").mkdir()
    (tmp_path / "three" / "bench.yaml").write_text("name: three\ninputs: {x: [1, 2\n")
    monkeypatch.setenv(DISCOVER_ENV, str(tmp_path))
    registry = Registry.discover()
    rows = {row.name: row for row in registry.broken}
    assert "saxpy" not in registry.workloads
    assert f"declared by {tmp_path}/one/bench.yaml and {tmp_path}/two/bench.yaml" in rows["saxpy"].reason
    assert rows["three"].reason.startswith(f"{tmp_path}/three/bench.yaml: not valid YAML (line 3)")
