"""The triton backend's shipped picks: which file a GPU gets, what a cell records, how a file is written."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

from adapters import triton_backend, triton_picks  # noqa: E402
from adapters.triton_backend import TritonBackend  # noqa: E402
from adapters.triton_picks import ShippedPicks  # noqa: E402
from apex_core.cli.args import build_run_parser  # noqa: E402
from apex_core.cli.run_command import backend_options_from_args  # noqa: E402
from apex_core.registry import Registry  # noqa: E402
from apex_kernels.tuned import FORMAT, autotuners, read_picks, write_picks  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
H100 = "NVIDIA H100 80GB HBM3"
PACK = "apex_kernels.tilepack:_tilepack_kernel"


def test_a_gpu_without_a_file_tunes_and_the_cell_says_why(tmp_path):
    seeding, names, record = ShippedPicks(H100, tmp_path).seed(autotuners())
    assert seeding is None and record == {"state": "none",
                                          "reason": f"no picks shipped for {H100} (h100-80gb-hbm3.json)"}
    assert all(":" in name for name in names.values())


def test_a_file_of_another_model_or_a_broken_one_is_not_used(tmp_path):
    write_picks(tmp_path / "h100-80gb-hbm3.json", "NVIDIA H100 PCIe", {}, [(PACK, (1,), {"BLOCK_C": 4})])
    picks = ShippedPicks(H100, tmp_path)
    assert picks.picks is None and "is for 'NVIDIA H100 PCIe'" in picks.reason
    (tmp_path / "h100-80gb-hbm3.json").write_text("{")
    record = ShippedPicks(H100, tmp_path).seed(autotuners())[2]
    assert record["state"] == "none" and record["reason"].startswith("picks file unreadable")


def test_a_shipped_file_seeds_and_the_cell_records_its_provenance(tmp_path):
    import apex_kernels.tilepack  # noqa: F401 - the autotuner the pick names

    write_picks(tmp_path / "h100-80gb-hbm3.json", H100, {"triton": "3.6.0", "method": "held"},
                [(PACK, (999, 8, 4, "torch.float16"), {"BLOCK_C": 12345})])
    seeding, names, record = ShippedPicks(H100, tmp_path).seed(autotuners())
    assert record == {"state": "shipped", "file": "apex_kernels/picks/h100-80gb-hbm3.json", "picks": 1,
                      "stale": 1, "triton": "3.6.0", "method": "held"}  # BLOCK_C 12345 is no config of it
    assert seeding is not None and PACK in names.values()


def test_retune_is_a_backend_option_with_a_flag_of_its_own():
    parser = build_run_parser()
    assert backend_options_from_args(parser.parse_args(["--retune"])) == {"triton": {"retune": True}}
    registry = Registry.discover()
    assert backend_options_from_args(parser.parse_args(["--backend-opt", "triton.retune=true"]), registry) == {
        "triton": {"retune": True}}
    assert backend_options_from_args(parser.parse_args(["--retune", "--backend-opt", "triton.retune=yes"]),
                                     registry) == {"triton": {"retune": True}}
    assert backend_options_from_args(parser.parse_args([])) == {}
    backend = TritonBackend()
    backend.configure({"retune": True})
    assert backend.retune
    backend.configure({})
    assert not backend.retune
    assert triton_picks.RETUNE["state"] == "retune"


def _report(gpu, picks_of_cells):
    cells = [{"backend": "triton", "status": "ok", "metadata": {
        "autotune_timer": "held", "triton_autotune": [
            {"selection_source": source, "kernel_id": kernel, "tuning_key": key, "selected_config": config}
            for kernel, key, config, source in entries]}} for entries in picks_of_cells]
    cells.append({"backend": "torch-reference", "status": "ok", "metadata": {}})
    return {"timestamp_utc": "2026-11-27T06:00:00Z", "environment": {"gpu": gpu, "triton": "3.6.0",
                                                                     "torch": "2.11.0"},
            "config": {"profile": "fixed"}, "benchmarks": cells}


def _emit(tmp_path, reports, *extra):
    paths = []
    for index, report in enumerate(reports):
        paths.append(tmp_path / f"r{index}.json")
        paths[-1].write_text(json.dumps(report))
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "emit_triton_picks.py"), *map(str, paths),
                           *extra], capture_output=True, text=True, timeout=120)


def test_the_emit_script_takes_the_configuration_most_runs_chose(tmp_path):
    four, eight = {"BLOCK_C": 4, "num_warps": 4}, {"BLOCK_C": 8, "num_warps": 4}
    runs = [_report(H100, [[(PACK, [128, 8, "torch.float16"], four, "triton_best_config"),
                            (PACK, [64, 8, "torch.float16"], eight, "triton_best_config")]]),
            _report(H100, [[(PACK, [128, 8, "torch.float16"], eight, "triton_best_config"),
                            (PACK, [64, 8, "torch.float16"], eight, "shipped_picks")]]),
            _report(H100, [[(PACK, [128, 8, "torch.float16"], four, "triton_best_config")]])]
    out = tmp_path / "picks.json"
    done = _emit(tmp_path, runs, "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert "chose" in done.stderr and "in 2 of 3 reports" in done.stderr  # the flip is printed
    picks = read_picks(out)
    assert picks.device == H100 and picks.provenance["reports"] == 3 and picks.provenance["method"] == "held"
    assert sorted(picks.picks[PACK], key=str) == sorted([((128, 8, "torch.float16"), four),
                                                         ((64, 8, "torch.float16"), eight)], key=str)
    assert json.loads(out.read_text())["format"] == FORMAT


def test_the_emit_script_refuses_reports_of_two_models_or_without_tuned_entries(tmp_path):
    entry = [[(PACK, [1], {"BLOCK_C": 4}, "triton_best_config")]]
    mixed = _emit(tmp_path, [_report(H100, entry), _report("NVIDIA H200", entry)])
    assert mixed.returncode == 2 and "one GPU model" in mixed.stderr
    shipped_only = _emit(tmp_path, [_report(H100, [[(PACK, [1], {"BLOCK_C": 4}, "shipped_picks")]])])
    assert shipped_only.returncode == 2 and "--retune" in shipped_only.stderr


def test_a_failure_on_the_picks_path_leaves_the_autotuners_alone_and_says_why(monkeypatch):
    import torch

    def broken(device_name):
        raise OSError("disk gone")

    monkeypatch.setattr(triton_backend, "shipped_picks", broken)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: H100)
    seeding, names, record = TritonBackend()._seed_picks({"x": torch.zeros(2)}, autotuners())
    assert seeding is None and names == {}
    assert record == {"state": "none", "reason": "picks not used: OSError: disk gone"}


def test_entries_written_without_their_key_get_it_by_binding_the_case_again(tmp_path):
    report = _report(H100, [[]])
    report["benchmarks"][0].update({"name": "tilepack/default/triton/fp16/cuda", "workload": "tilepack",
                                    "case": "default", "dtype": "fp16",
                                    "params": {"batch": 1, "channels": 128, "height": 128, "width": 128,
                                               "tile_size": 8, "kmax": 32}})
    report["benchmarks"][0]["metadata"]["triton_autotune"] = [
        {"op_name": "tilepack", "kernel_name": "_tilepack_kernel", "shape_bucket": "B1-C128-H128-W128-t8-K32",
         "selection_source": "triton_best_config", "selected_config": {"BLOCK_C": 4, "num_warps": 1}},
        {"op_name": "tilepack", "kernel_name": "_tilepack_kernel", "shape_bucket": "B9-nowhere",
         "selection_source": "triton_best_config", "selected_config": {"BLOCK_C": 8, "num_warps": 2}}]
    out = tmp_path / "picks.json"
    without = _emit(tmp_path, [report], "--output", str(out))
    assert without.returncode == 2  # no keys, and not asked to bind
    done = _emit(tmp_path, [report], "--output", str(out), "--keys-from-cases")
    assert done.returncode == 0, done.stderr
    assert "no launch of _tilepack_kernel at B9-nowhere" in done.stderr
    picks = read_picks(out)
    # the fixed profile's tilepack: C, K, T, then the dtypes of features, ids and the output
    assert picks.picks == {PACK: [((128, 32, 8, "torch.float16", "torch.int32", "torch.float16"),
                                   {"BLOCK_C": 4, "num_warps": 1})]}
    assert picks.provenance["keys"].startswith("bound from the cases")
