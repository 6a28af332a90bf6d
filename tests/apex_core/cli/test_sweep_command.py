"""``apex-bench sweep`` end to end over ONNX models under ONNX Runtime, and its regression gate."""

import json

import pytest

from apex_core.cli.main import main
from tests.apex_core.cli.cli_helpers import one_line_error
from tests.apex_core.engine.test_sweep import export_image_model, export_reshape_model
from tests.apex_core.isolation_helpers import load
from tests.conftest import run_cli

pytest.importorskip("onnxruntime")

FAST = ["--warmup", "1", "--iters", "3", "--min-time", "0", "--max-time", "0.05"]
CASES = ["--shape-case", "b1:x=1x3x8x8;idx=1x4", "--shape-case", "b2:x=2x3x16x8;idx=2x4",
         "--shape-case", "b4:x=4x3x8x8;idx=4x2"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return export_image_model(tmp_path_factory.mktemp("models") / "image.onnx")


def sweep(tmp_path, engine, *extra, name="r"):
    return main(["sweep", "--engine", str(engine), *extra, *FAST, "--output-json",
                 str(tmp_path / f"{name}.json"), "--output-md", str(tmp_path / f"{name}.md")])


def test_three_cases_three_ok_cells_that_compare_and_baseline_accept(tmp_path, model, capsys):
    assert sweep(tmp_path, model, *CASES) == 0
    out = capsys.readouterr().out
    assert "apex-bench sweep: 3 ok;" in out and "b2:x=2x3x16x8;idx=2x4" in out
    record = load(tmp_path / "r.json")
    assert record["status"] == "complete"
    assert [(b["name"], b["status"]) for b in record["benchmarks"]] == [
        (f"image/{case}/onnxruntime/fp32/cpu", "ok") for case in ("b1", "b2", "b4")]
    shapes = record["benchmarks"][2]["metadata"]
    assert shapes["inputs"]["idx"]["shape"] == [4, 2] and shapes["outputs"]["picked"]["shape"] == [4, 2]
    assert "| b4 | onnxruntime | x 4x3x8x8 fp32, idx 4x2 int64, 1 fixed |" in (tmp_path / "r.md").read_text()

    assert main(["baseline", "emit", "--from", str(tmp_path / "r.json"),
                 "--output", str(tmp_path / "b.json")]) == 0
    metrics = json.loads((tmp_path / "b.json").read_text())["metrics"]
    assert "image/b2/onnxruntime/fp32/min_ms" in metrics and len(metrics) == 6
    assert main(["compare", "--baseline", str(tmp_path / "b.json"), "--current", str(tmp_path / "r.json")]) == 0
    assert "apex-bench compare: PASS, 0 of 6 metrics failed" in capsys.readouterr().out


def test_compare_flag_gates_the_sweep_against_a_baseline(tmp_path, model, capsys):
    assert sweep(tmp_path, model, *CASES, name="first") == 0
    assert main(["baseline", "emit", "--from", str(tmp_path / "first.json"),
                 "--output", str(tmp_path / "b.json"), "--ratio", "1000", "--abs-ms", "1000",
                 "--min-effect", "1000"]) == 0  # loose enough that a loaded CI machine's noise passes
    capsys.readouterr()
    assert sweep(tmp_path, model, *CASES, "--compare", "--baseline", str(tmp_path / "b.json")) == 0
    assert "apex-bench compare: PASS" in capsys.readouterr().out
    assert json.loads((tmp_path / "r.compare.json").read_text())["status"] == "pass"
    # a case the baseline holds but this sweep does not run is a missing metric: the gate fails
    assert sweep(tmp_path, model, *CASES[:4], "--compare", "--baseline", str(tmp_path / "b.json")) == 1
    assert "metrics failed: image/b4/onnxruntime/fp32/min_ms" in capsys.readouterr().out


def test_malformed_case_is_one_line_and_exit_2(tmp_path, model, capsys):
    assert sweep(tmp_path, model, "--shape-case", "x=1x3xx8") == 2
    assert "dimension '' of input 'x' is not a positive integer" in one_line_error(capsys)
    assert not (tmp_path / "r.json").exists()


def test_case_outside_the_fixed_dims_names_the_input(tmp_path, model, capsys):
    assert sweep(tmp_path, model, *CASES, "--shape-case", "c5:x=1x5x8x8;idx=1x4") == 2
    line = one_line_error(capsys)
    assert "case 'c5': input 'x': dimension 1 is 5 in 1x5x8x8, the engine fixes it at 3" in line
    assert not (tmp_path / "r.json").exists()  # nothing ran


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--engine", "missing.onnx", "--shape-case", "x=1"], "--engine missing.onnx: file not found"),
        (["--engine", "{model}", "--shape-case", "x=1x3x8x8"], "input 'idx' has dynamic dimensions"),
        (["--engine", "{model}", "--shape-case", "x=1x3x8x8;idx=1x4", "--compare"],
         "--compare needs --baseline"),
        (["--engine", "{model}", "--shape-case", "x=1x3x8x8;idx=1x4", "--device", "cuda"],
         "runtime onnxruntime cannot run here"),
    ],
)
def test_usage_errors(tmp_path, model, capsys, args, fragment, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["sweep", *[a.replace("{model}", str(model)) for a in args], "--output-json", "r.json",
            "--output-md", "r.md"]
    assert main(argv) == 2
    assert fragment in one_line_error(capsys)
    assert not (tmp_path / "r.json").exists()


def test_argument_errors_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["sweep", "--shape-case", "x=1x3"])
    assert info.value.code == 2
    assert "the following arguments are required: --engine" in one_line_error(capsys)


def test_unknown_suffix_and_missing_tensorrt(tmp_path, model, capsys):
    renamed = tmp_path / "model.bin"
    renamed.write_bytes(model.read_bytes())
    assert sweep(tmp_path, renamed, "--shape-case", "x=1x3x8x8;idx=1x4") == 2
    assert "cannot tell the runtime from the suffix '.bin'" in one_line_error(capsys)
    assert sweep(tmp_path, renamed, "--runtime", "onnxruntime", "--shape-case", "x=1x3x8x8;idx=1x4") == 0
    capsys.readouterr()
    from tests.apex_core.engine.test_sweep import tensorrt_reason

    reason = tensorrt_reason()
    if reason:
        engine = tmp_path / "model.plan"
        engine.write_bytes(b"\0" * 16)
        assert sweep(tmp_path, engine, "--shape-case", "x=1x3") == 2
        assert one_line_error(capsys).endswith(f"runtime tensorrt cannot run here: {reason}")


def test_a_failing_case_exits_1_with_the_report_and_log_written(tmp_path, capsys):
    engine = export_reshape_model(tmp_path / "reshape.onnx")
    assert sweep(tmp_path, engine, "--shape-case", "x=2x3", "--shape-case", "x=1x4") == 1
    out = capsys.readouterr().out
    assert "1 error, 1 ok" in out and "1 case(s) failed" in out
    record = load(tmp_path / "r.json")
    assert [b["status"] for b in record["benchmarks"]] == ["ok", "error"]
    assert "Traceback" in (tmp_path / "r.log").read_text()


def test_sweep_over_the_ff_infer_export(tmp_path, capsys):
    export = pytest.importorskip("apex_core.engine.onnx_export")
    from apex_core.workloads.ff_infer import FFInfer

    workload = FFInfer()
    case = workload.cases(workload.make_params("smoke"))[0]
    exported = export.export_workload(workload, case, "fp32", tmp_path / "ff-infer.onnx")
    channels, height, width = exported.input_shapes[0][1:]
    cases = [arg for batch in (1, 2, 3) for arg in ("--shape-case", f"b{batch}:features={batch}x{channels}x"
                                                    f"{height}x{width}")]
    assert sweep(tmp_path, exported.path, *cases) == 0
    record = load(tmp_path / "r.json")
    assert [(b["case"], b["status"]) for b in record["benchmarks"]] == [
        ("b1", "ok"), ("b2", "ok"), ("b3", "ok")]
    # the other batch-sized inputs took the batch from 'features' (their axis 0 is named alike)
    assert record["benchmarks"][2]["metadata"]["inputs"]["util0"]["shape"][0] == 3
    assert record["benchmarks"][2]["metadata"]["outputs"]["fused"]["shape"] == [3, channels, height, width]


@pytest.mark.slow
def test_the_console_script_sweeps_and_refuses_a_malformed_case(tmp_path, model):
    outputs = ["--output-json", "s.json", "--output-md", "s.md"]
    result = run_cli(["sweep", "--engine", str(model), *CASES, *FAST, *outputs], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert [b["status"] for b in load(tmp_path / "s.json")["benchmarks"]] == ["ok"] * 3
    result = run_cli(["sweep", "--engine", str(model), "--shape-case", "x=1x3x8", *outputs], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "apex-bench: error: case 'x=1x3x8': input 'x': rank 3 given (1x3x8), the engine expects rank 4 "
        "(-1x3x-1x-1)"]
