"""scripts/perf_table.py --versus: one backend's p50 against another's, a row per cell."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "perf_table.py"


def _cell(workload: str, case: str, backend: str, status: str, p50_ms: float | None) -> dict:
    return {"workload": workload, "case": case, "backend": backend, "status": status,
            "stats": {"p50_ms": p50_ms} if p50_ms is not None else None}


def test_versus_divides_the_first_backend_by_the_second_and_names_what_did_not_run(tmp_path):
    report = tmp_path / "fixed.json"
    report.write_text(json.dumps({"benchmarks": [
        _cell("tilepack", "default", "triton", "ok", 0.0024),
        _cell("tilepack", "default", "torch-compile", "ok", 0.0030),
        _cell("ff-infer", "default", "triton", "ok", 0.0504),
        _cell("ff-infer", "default", "torch-compile", "timeout", None),
        _cell("fusiongate", "default", "triton", "ok", 0.005),
    ]}))
    done = subprocess.run([sys.executable, str(SCRIPT), "--versus", "triton,torch-compile", str(report)],
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.splitlines() == [
        "| cell | triton us | torch-compile us | triton / torch-compile |",
        "| --- | --- | --- | --- |",
        "| tilepack/default | 2.400 | 3.000 | 0.80 |",
        "| ff-infer/default | 50.400 | timeout | – |",
        "| fusiongate/default | 5.000 | absent | – |",
    ]
