"""A sweep runs each shape case in a worker: a case whose engine crashes or hangs is recorded, the next runs.

The engine is a real ONNX model under ONNX Runtime; the faults come from the test plugin's
``test-engine-faults`` backend (tests/plugins), which serves engine files like the built-in
``onnxruntime`` backend but segfaults on cases labelled ``crash...`` and never returns on
cases labelled ``hang...`` (a real engine that does either on demand does not exist).
"""

import json

import pytest

from apex_core.cli.main import main
from apex_core.report.schema import validate_report
from tests.apex_core.engine.test_sweep import export_image_model

pytest.importorskip("onnxruntime")

FAST = ["--warmup", "1", "--iters", "3", "--min-time", "0", "--max-time", "0.05"]


@pytest.mark.slow
def test_a_crashing_and_a_hanging_case_are_recorded_and_the_next_case_runs(tmp_path, capsys, plugin_on_path):
    model = export_image_model(tmp_path / "image.onnx")
    cases = ["first:x=1x3x8x8;idx=1x4", "crash:x=2x3x8x8;idx=2x4", "hang:x=2x3x8x8;idx=2x4",
             "after:x=4x3x8x8;idx=4x2"]
    argv = ["sweep", "--engine", str(model), "--backends", "test-engine-faults", "--timeout", "10", *FAST,
            "--output-json", str(tmp_path / "r.json"), "--output-md", str(tmp_path / "r.md")]
    for case in cases:
        argv += ["--shape-case", case]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "1 crashed, 2 ok, 1 timeout" in out and "2 case(s) failed" in out
    record = json.loads((tmp_path / "r.json").read_text())
    validate_report(record)
    assert record["status"] == "complete"
    cells = {b["case"]: b for b in record["benchmarks"]}
    assert [b["case"] for b in record["benchmarks"]] == ["first", "crash", "hang", "after"]
    assert cells["crash"]["status"] == "crashed" and "SIGSEGV" in cells["crash"]["reason"]
    assert cells["hang"]["status"] == "timeout" and "10 s timeout" in cells["hang"]["reason"]
    for name in ("first", "after"):  # the case after the crash and the hang ran in a fresh worker
        assert cells[name]["status"] == "ok" and cells[name]["correctness"] == "unchecked"
        assert cells[name]["name"] == f"image/{name}/test-engine-faults/fp32/cpu"
        assert cells[name]["stats"]["n"] >= 3
