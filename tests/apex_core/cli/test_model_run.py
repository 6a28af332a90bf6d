"""A model file run as it is, from the command line: ``--model`` / ``sweep`` with ``--input-shape``.

The model (tests/apex_core/engine/foreign_model.py) has inputs named like no workload, a named and an
unnamed open dimension; ONNX Runtime runs it on the CPU. Every mistake is one line on stderr
and exit code 2 before any cell; TensorRT is not installed here, so a serialized engine stops
with its probe's reason.
"""


import pytest

from apex_core.cli.main import main
from apex_core.engine.workload import NO_REFERENCE
from tests.apex_core.cli.cli_helpers import one_line_error
from tests.apex_core.engine.foreign_model import build_model
from tests.apex_core.isolation_helpers import load
from tests.conftest import run_cli
from tests.markdown_helpers import note_number

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

FAST = ["--warmup", "1", "--iters", "3", "--min-time", "0", "--max-time", "0.05"]
SHAPES = ["--input-shape", "pixel_values:0=2x4", "--input-shape", "Mask=2x4"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("foreign")
    return {"model": build_model(folder / "model.onnx"), "reference": build_model(folder / "ref.onnx"),
            "wrong": build_model(folder / "wrong.onnx", scale=3.0)}


def outputs(tmp_path, name="r"):
    return ["--output-json", str(tmp_path / f"{name}.json"), "--output-md", str(tmp_path / f"{name}.md")]


def test_the_console_runs_the_model_ok_and_unchecked(tmp_path, models):
    done = run_cli(["--model", str(models["model"]), *SHAPES, *FAST, *outputs(tmp_path)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "apex-bench: 1 ok;" in done.stdout and "Traceback" not in done.stderr
    record = load(tmp_path / "r.json")
    assert record["suite"] == "apex-bench-sweep" and record["config"]["profile"] == "sweep"
    (cell,) = record["benchmarks"]
    assert cell["name"] == "model/pixel_values:0=2x4;Mask=2x4/onnxruntime/fp32/cpu"
    assert cell["status"] == "ok" and cell["correctness"] == "unchecked"
    assert cell["metadata"]["inputs"] == {"pixel_values:0": {"shape": [2, 4], "dtype": "fp32", "dynamic": True},
                                          "Mask": {"shape": [2, 4], "dtype": "int64", "dynamic": True}}
    markdown = (tmp_path / "r.md").read_text()
    number = note_number(markdown, NO_REFERENCE)
    assert number is not None and f"unchecked [{number}]" in markdown
    assert "| pixel_values:0 2x4 fp32, Mask 2x4 int64 | logits 2x4 fp32 |" in markdown


@pytest.mark.parametrize(("command", "path_flag"), [([], "--model"), (["sweep"], "--engine")])
def test_a_reference_checks_the_cell_and_a_wrong_one_makes_it_incorrect(tmp_path, models, capsys, command,
                                                                        path_flag):
    base = [*command, path_flag, str(models["model"]), *SHAPES, *FAST]
    assert main([*base, "--reference-model", str(models["reference"]), *outputs(tmp_path)]) == 0
    (cell,) = load(tmp_path / "r.json")["benchmarks"]
    assert cell["status"] == "ok" and cell["correctness"] == "passed"
    assert "Correctness checked against the reference model" in (tmp_path / "r.md").read_text()
    assert main([*base, "--reference-model", str(models["wrong"]), *outputs(tmp_path, "w")]) == 1
    (cell,) = load(tmp_path / "w.json")["benchmarks"]
    assert cell["status"] == "incorrect" and "logits: 8/8 elements off" in cell["reason"]
    capsys.readouterr()


def test_sweep_takes_input_shapes_alone_or_shared_by_every_case(tmp_path, models, capsys):
    assert main(["sweep", "--engine", str(models["model"]), "--trt-input-shape", "Mask=2x4",
                 "--shape-case", "b2:pixel_values:0=2x4", "--shape-case", "b1:pixel_values:0=2x4", *FAST,
                 *outputs(tmp_path)]) == 0
    cells = load(tmp_path / "r.json")["benchmarks"]
    assert [(c["name"], c["correctness"]) for c in cells] == [
        ("model/b2/onnxruntime/fp32/cpu", "unchecked"), ("model/b1/onnxruntime/fp32/cpu", "unchecked")]
    assert cells[0]["params"]["shape_case"] == "b2:pixel_values:0=2x4;Mask=2x4"
    assert main(["sweep", "--engine", str(models["model"]), *SHAPES, *FAST, *outputs(tmp_path, "s")]) == 0
    (cell,) = load(tmp_path / "s.json")["benchmarks"]
    assert cell["status"] == "ok" and cell["params"]["shape_case"] == ":pixel_values:0=2x4;Mask=2x4"
    capsys.readouterr()


BAD = [
    (["--input-shape", "Nope=2", *SHAPES], "--input-shape: unknown input 'Nope'"),
    (["--input-shape", "pixel_values:0=2x4"], "--input-shape: input 'Mask' has dynamic dimensions (-1x4) and "
     "no shape; pass --input-shape Mask=..."),
    (["--input-shape", "pixel_values:0=2x4", "--input-shape", "Mask=2x5"],
     "--input-shape: input 'Mask': dimension 1 is 5 in 2x5, the engine fixes it at 4 (-1x4)"),
    (["--input-shape", "Mask=2xx4"], "argument --input-shape/--trt-input-shape: 'Mask=2xx4': dimension '' of "
     "input 'Mask' is not a positive integer"),
    (["--input-shape", "Mask=2x0"], "'Mask=2x0': dimension '0' of input 'Mask' must be >= 1"),
    (["--input-shape", "Mask=-1x4"], "'Mask=-1x4': dimension '-1' of input 'Mask' is not a positive integer"),
    (["--trt-input-shape", "Mask"], "'Mask': expected NAME=AxBxC"),
    ([*SHAPES, "--input-shape", "Mask=2x4"], "--input-shape gives input 'Mask' more than once"),
    ([*SHAPES, "--reference-model", "{tmp}/nope.onnx"], "--reference-model {tmp}/nope.onnx: file not found"),
]


@pytest.mark.parametrize(("command", "path_flag"), [([], "--model"), (["sweep"], "--engine")])
@pytest.mark.parametrize(("args", "fragment"), BAD)
def test_every_mistake_is_one_line_and_exit_2_before_any_cell(tmp_path, models, capsys, command, path_flag,
                                                               args, fragment):
    argv = [*command, path_flag, str(models["model"]), *[a.replace("{tmp}", str(tmp_path)) for a in args],
            *FAST, *outputs(tmp_path)]
    assert exit_code(argv) == 2
    assert fragment.replace("{tmp}", str(tmp_path)) in one_line_error(capsys)
    assert not (tmp_path / "r.json").exists()


def exit_code(argv):
    """What the process would exit with: argparse's errors exit, the others are returned."""
    try:
        return main(argv)
    except SystemExit as stop:
        return stop.code


@pytest.mark.parametrize(("args", "fragment"), [
    (["--model", "{tmp}/nope.onnx"], "--model {tmp}/nope.onnx: file not found"),
    (["--input-shape", "Mask=2x4"], "--input-shape needs a model: pass --model PATH"),
    (["--reference-model", "{model}"], "--reference-model needs a model"),
    (["--model", "{model}", *SHAPES, "--workloads", "ff-infer"], "--workloads does not apply to --model"),
    (["--model", "{model}", *SHAPES, "--dtype", "fp16"], "--dtype does not apply to --model"),
    (["--model", "{model}", "--trt-engine-path", "{model}"], "--model and --trt-engine-path both name a model"),
])
def test_run_flags_that_do_not_go_with_a_model(tmp_path, models, capsys, args, fragment):
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{model}", str(models["model"])) for a in args]
    assert main([*argv, *FAST, *outputs(tmp_path)]) == 2
    assert fragment.replace("{tmp}", str(tmp_path)) in one_line_error(capsys)


def test_an_engine_with_input_shapes_needs_tensorrt(tmp_path, capsys):
    from tests.apex_core.engine.test_sweep import tensorrt_reason

    reason = tensorrt_reason()
    if not reason:
        pytest.skip("tensorrt is installed here: the engine would load")
    engine = tmp_path / "model.plan"
    engine.write_bytes(b"\0" * 16)
    assert main(["--trt-engine-path", str(engine), "--trt-input-shape", "x=1x3", *outputs(tmp_path)]) == 2
    assert one_line_error(capsys).endswith(f"runtime tensorrt cannot run here: {reason}")
    assert main(["sweep", "--engine", str(engine), "--input-shape", "x=1x3", *outputs(tmp_path)]) == 2
    assert one_line_error(capsys).endswith(f"runtime tensorrt cannot run here: {reason}")


def test_a_sweep_without_any_shape_is_a_usage_error(tmp_path, models, capsys):
    assert main(["sweep", "--engine", str(models["model"]), *outputs(tmp_path)]) == 2
    assert ("no shapes given; pass --shape-case CASE (repeatable) or --input-shape NAME=AxBxC"
            in one_line_error(capsys))
