"""--apex-bench-compare on another kind of machine: a test's failed cell near the timer's floor says the
floor was another there (compare.noted_floors), as apex-bench compare does."""

from __future__ import annotations

import json
import random

from apex_core.baseline import emit_baseline, write_baseline
from apex_core.baseline.io import load_report
from apex_core.pytest_plugin.gate import CellGate
from apex_core.report.records import report_record
from apex_core.results import CellResult, Report, Status, Timing
from apex_core.stats import summarize

CONFIG = {"profile": "fixed", "dtypes": ["fp32"], "cache": "cold", "graph": False,
          "timing": {"noise_target": 0.005, "mode": "adaptive", "min_iters": 10, "max_time_s": 3.0}}


def _report(p50_ms: float, floor_ms: float, seed: int) -> Report:
    rng = random.Random(seed)
    samples = tuple(p50_ms * (1 + rng.uniform(-0.02, 0.02)) for _ in range(200))
    timing = Timing("cuda_event_held", "cold", samples, summarize(samples), "noise", floor_ms=floor_ms)
    cell = CellResult("test_k.py::test_a", "default", "fn", "fp32", "cuda", Status.OK, timing=timing)
    return Report(suite="pytest", timestamp_utc="2026-11-29T00:00:00Z",
                  environment={"device": "cuda", "hardware": "NVIDIA H200"}, config=CONFIG, status="complete",
                  cells=(cell,))


def test_a_slower_cell_on_a_machine_with_another_floor_says_so(tmp_path) -> None:
    paths = [tmp_path / f"base-{seed}.json" for seed in range(3)]
    for seed, path in enumerate(paths):
        path.write_text(json.dumps(report_record(_report(0.0030, 0.0030, seed))))
    runs = [load_report(path) for path in paths]
    write_baseline(tmp_path / "base.json", emit_baseline(runs))
    gate = CellGate(tmp_path / "base.json")
    other = _report(0.0039, 0.0044, 10)  # 30 % slower net of a 4.4 us floor (2.9-3.0 us in the baseline)
    (failure, *_) = gate.failures(other.cells[0], other)
    assert failure.startswith("slower than the baseline")
    assert "the timer's floor was 4.4 us here and 3 us in the baseline's runs" in failure
    same = _report(0.0039, 0.0031, 11)  # the same slowdown on the same kind of machine: no word of the floor
    (failure, *_) = gate.failures(same.cells[0], same)
    assert "slower than the baseline" in failure and "floor" not in failure
