"""The roofline table: each ok cell's rates against the copy bandwidth its run measured."""

from __future__ import annotations

import pytest

from apex_core.report import formats
from apex_core.report.roofline_table import render_roofline
from tests.conftest import run_cli
from tests.golden import records


def cell(workload, status="ok", p50_ms=0.001, bytes_moved=2_000_000, flops=1_000_000):
    return {"workload": workload, "case": "default", "backend": "triton", "dtype": "fp16",
            "status": status, "stats": {"p50_ms": p50_ms} if status == "ok" else None,
            "bytes_moved": bytes_moved, "flops": flops}


def gpu_record(*cells, facts=None):
    fingerprint = {"gpu": "H100", "copy_gbps": 2500.0, "sm_clock_under_load_mhz": 1980.0}
    facts = facts if facts is not None else {"copy_gbps": 2400.0, "fingerprint": fingerprint}
    return {"environment": {"gpu": "NVIDIA H100 80GB HBM3", "device_facts": facts}, "benchmarks": list(cells)}


def rows(text):
    return [line for line in text.splitlines()
            if line.startswith("| ") and not line.startswith(("| cell", "| ---"))]


def test_a_cell_against_the_runs_copy_bandwidth():
    text = render_roofline(gpu_record(cell("streaming"), facts={"copy_gbps": 2500.0, "fingerprint": {
        "gpu": "H100", "copy_gbps": 2600.0, "sm_clock_under_load_mhz": 1980.0}}))
    assert "copy bandwidth 2500 GB/s, SM clock under load 1980 MHz" in text  # the run's copy, as the HTML's
    # 2 MB in 1 us: 2000 GB/s, 80 % of 2500; its bytes take 0.8 us at the copy's rate; 1 MFLOP: 1 TFLOP/s
    expected = "| streaming/default/triton/fp16 | 1 | 2 | 0.001 | 0.5 | 2000 | 80% | 0.8 | 1.25 | 1 |"
    assert rows(text) == [expected]


def test_cells_without_a_time_or_bytes_are_left_out_and_a_cpu_run_has_no_copy():
    text = render_roofline(gpu_record(cell("failed", status="error"), cell("no-bytes", bytes_moved=0)))
    assert rows(text) == ["| (no ok cell with a time and a byte count) | | | | | | | | | |"]
    cpu = {"environment": {"cpu": "AMD EPYC", "device_facts": {"cuda_unavailable": "no CUDA device"}},
           "benchmarks": [cell("streaming", flops=None)]}
    text = render_roofline(cpu)
    assert "AMD EPYC; no copy bandwidth" in text
    assert rows(text) == ["| streaming/default/triton/fp16 | 1 | 2 | – | – | 2000 | – | – | – | – |"]


def test_a_run_from_before_the_fingerprint_has_no_clock_line():
    text = render_roofline(gpu_record(cell("streaming"), facts={"copy_gbps": 2000.0}))
    assert "copy bandwidth 2000 GB/s." in text and "| 100% | 1 | 1 |" in rows(text)[0]


def test_the_roofline_is_a_format_of_the_run():
    text = formats.FORMATS["roofline"].render(records.report(), {})
    assert text.startswith("# Roofline") and len(rows(text)) >= 1


@pytest.mark.slow
def test_the_cli_writes_the_roofline_when_asked(tmp_path):
    args = ["--device", "cpu", "--profile", "smoke", "--workloads", "tilepack", "--backends", "torch-reference",
            "--fixed-iters", "3", "--no-history", "--quiet", "--output-json", "r.json", "--output-md", "r.md",
            "--output-roofline", "roofline.md"]
    result = run_cli(args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr + result.stdout
    (row,) = rows((tmp_path / "roofline.md").read_text())
    assert row.startswith("| tilepack/default/torch-reference/fp32 |") and "| – | – | – |" in row
