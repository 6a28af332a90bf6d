"""``apex-bench export-onnx``: files, manifest, and one-line usage errors (run in-process)."""

from __future__ import annotations

import hashlib
import json

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from apex_core.cli.main import main  # noqa: E402
from apex_core.engine.ort_runtime import load_onnx_model  # noqa: E402
from apex_core.measure.environment import package_version  # noqa: E402


def test_writes_one_checked_file_per_case_and_a_manifest(tmp_path, capsys):
    out = tmp_path / "onnx"
    code = main(["export-onnx", "--workloads", "tilepack,tileunpack:blend,tilessm-scan", "--case", "blend",
                 "--case", "default", "--case", "forward", "--output-dir", str(out), "--profile", "smoke",
                 "--set", "height=32"])
    assert code == 0, capsys.readouterr().err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["schema_version"] == 1 and manifest["opset"] == 18
    assert manifest["apex_bench_version"] == package_version("apex-bench")
    assert manifest["torch_version"].split("+")[0] == __import__("torch").__version__.split("+")[0]
    assert manifest["profile"] == "smoke" and manifest["overrides"] == ["height=32"]
    assert manifest["not_exported"] == []
    by_case = {(m["workload"], m["case"]): m for m in manifest["models"]}
    assert set(by_case) == {("tilepack", "default"), ("tileunpack", "blend"), ("tilessm-scan", "forward")}
    for record in manifest["models"]:
        path = out / record["file"]
        assert record["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        onnx.checker.check_model(onnx.load(str(path)), full_check=True)
        model = load_onnx_model(path)
        assert [i["name"] for i in record["inputs"]] == [spec.name for spec in model.inputs]
        assert [o["name"] for o in record["outputs"]] == [spec.name for spec in model.outputs]
    pack = by_case[("tilepack", "default")]
    assert pack["params"]["height"] == 32 and pack["dtype"] == "fp32"
    assert pack["inputs"][0] == {"name": "features", "dtype": "fp32", "shape": [1, 8, 32, 16],
                                 "dynamic_axes": {"0": "batch", "2": "height", "3": "width"}}
    assert pack["inputs"][1] == {"name": "idx", "dtype": "int32", "shape": [1, 6],
                                 "dynamic_axes": {"0": "batch", "1": "K"}}
    assert pack["outputs"] == [{"name": "packed", "dtype": "fp32", "shape": [1, 6, 8, 4, 4],
                                "dynamic_axes": {}}]
    assert by_case[("tilessm-scan", "forward")]["unused_inputs"] == ["gate"]
    blend_inputs = {i["name"]: i["dynamic_axes"] for i in by_case[("tileunpack", "blend")]["inputs"]}
    assert blend_inputs["packed"] == {"0": "batch", "1": "K"}  # blend's sum is closed-form, not a loop
    stdout = capsys.readouterr().out
    assert "3 exported, 0 not exportable, 0 failed" in stdout


def test_cases_without_an_export_are_listed_with_the_reason(tmp_path, capsys):
    out = tmp_path / "bf16"
    code = main(["export-onnx", "--workloads", "fusiongate,tilepack", "--dtype", "bf16",
                 "--output-dir", str(out), "--profile", "smoke"])
    assert code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert [m["workload"] for m in manifest["models"]] == ["tilepack"]
    assert manifest["models"][0]["inputs"][0]["dtype"] == "bf16"
    (skipped,) = manifest["not_exported"]
    assert skipped["workload"] == "fusiongate" and skipped["reason"].startswith("no bf16 ONNX export: ")
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "tilepack-default-bf16.onnx"]
    assert "fusiongate/default: not exported: no bf16 ONNX export" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workloads", "nope"], "unknown workload 'nope'; valid workloads: "),
        (["--workloads", "tileunpack:zz"],
         "unknown case 'zz' of tileunpack; valid cases: override, blend, overlap"),
        (["--workloads", "tilepack", "--set", "colour=1"], "--set colour: unknown parameter"),
        (["--workloads", "tilepack", "--set", "height=7"], "height 7 is not divisible by tile_size"),
        (["--workloads", "tilepack", "--case", "blend"], "--case blend: no selected workload has such a case"),
    ],
)
def test_usage_errors_are_one_line_with_exit_2(tmp_path, capsys, args, message):
    code = main(["export-onnx", *args, "--output-dir", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "x" / "manifest.json").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workloads", "tilepack"], "the following arguments are required: --output-dir"),
        (["--dtype", "fp64", "--output-dir", "x"], "argument --dtype: invalid choice: 'fp64'"),
    ],
)
def test_argument_errors_are_one_line_with_exit_2(capsys, args, message):
    with pytest.raises(SystemExit) as info:
        main(["export-onnx", *args])
    err = capsys.readouterr().err
    assert info.value.code == 2 and message in err and err.count("\n") == 1


def test_an_output_dir_that_cannot_be_created_is_a_usage_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["export-onnx", "--workloads", "tilepack", "--output-dir", str(blocker / "sub")]) == 2
    assert "--output-dir" in capsys.readouterr().err


def test_a_case_that_cannot_be_written_fails_alone_with_one_line(tmp_path, capsys):
    # a folder where the .onnx file should go: that case fails, the manifest is still written
    (tmp_path / "tilepack-default-fp32.onnx").mkdir()
    code = main(["export-onnx", "--workloads", "tilepack,fusiongate", "--profile", "smoke",
                 "--output-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1
    failure = [line for line in err.splitlines() if "export failed" in line]
    assert len(failure) == 1 and "tilepack/default" in failure[0] and "Traceback" not in err
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert [m["workload"] for m in manifest["models"]] == ["fusiongate"]
    assert manifest["not_exported"][0]["error"] is True
