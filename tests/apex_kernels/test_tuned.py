"""Picks files (apex_kernels/tuned.py): names, reading and writing, and the autotuners they seed."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

import torch  # noqa: E402

from adapters.triton_autotune import tuning_key  # noqa: E402
from apex_core.plugin_api import implementation  # noqa: E402
from apex_core.registry import Registry  # noqa: E402
from apex_kernels import ff_infer, tuned  # noqa: E402
from apex_kernels.tuned import PicksError, model_slug, picks_path, read_picks, write_picks  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("name", "slug"), [
    ("NVIDIA H100 80GB HBM3", "h100-80gb-hbm3"),
    ("NVIDIA H200", "h200"),
    ("nvidia A100-SXM4-40GB", "a100-sxm4-40gb"),
    ("Tesla V100-SXM2-16GB", "tesla-v100-sxm2-16gb"),
])
def test_the_file_is_named_after_the_gpu_model_as_the_baselines_are(name, slug):
    assert model_slug(name) == slug
    assert picks_path(name).name == f"{slug}.json" and picks_path(name).parent == tuned.PICKS_DIR


def test_picks_survive_a_round_trip_with_their_key_types(tmp_path):
    path = tmp_path / "h100.json"
    pack = "apex_kernels.tilepack:_tilepack_kernel"
    picks = [(pack, (128, 8, "torch.float16"), {"BLOCK_C": 4, "num_warps": 4}),
             ("apex_kernels.tileunpack.aligned:_k", (64, 32, True, "torch.bfloat16"), {"BLOCK": 16}),
             (pack, (64, 8, "torch.float32"), {"BLOCK_C": 8, "num_warps": 2})]
    write_picks(path, "NVIDIA H100 80GB HBM3", {"triton": "3.6.0", "method": "held"}, picks)
    read = read_picks(path)
    assert read.device == "NVIDIA H100 80GB HBM3" and read.provenance == {"triton": "3.6.0", "method": "held"}
    assert read.count == 3
    assert read.picks["apex_kernels.tileunpack.aligned:_k"] == [((64, 32, True, "torch.bfloat16"),
                                                                 {"BLOCK": 16})]
    assert sorted(read.picks[pack], key=str) == sorted(((key, config) for kernel, key, config in picks
                                                        if kernel == pack), key=str)
    before = path.read_text()
    write_picks(path, "NVIDIA H100 80GB HBM3", {"triton": "3.6.0", "method": "held"}, reversed(picks))
    assert path.read_text() == before  # a stable order: a refreshed file diffs by what changed


@pytest.mark.parametrize(("text", "message"), [
    ("{not json", "Expecting property name"),
    ('{"format": "other"}', "not a picks file"),
    ('{"format": "apex-kernels-picks/1", "device": "x", "picks": [{"kernel": "k", "key": 3, "config": {}}]}',
     "a pick needs kernel, key"),
    ('{"format": "apex-kernels-picks/1", "device": "x", "picks": [{"kernel": "k", "config": {}}]}',
     "a pick needs kernel, key"),
])
def test_a_broken_file_is_one_clear_error(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(PicksError, match=message):
        read_picks(path)


def test_every_autotuner_is_found_once_under_the_module_it_is_written_in():
    import apex_kernels.ff_infer.kernels  # noqa: F401 - imports fusiongate and tilessm_scan as well
    import apex_kernels.tilepack  # noqa: F401

    found = tuned.autotuners()
    assert "apex_kernels.tilepack:_tilepack_kernel" in found
    assert "apex_kernels.fusiongate:_fusiongate_kernel" in found
    assert all(name.split(":")[0] == tuned._home(tuner) for name, tuner in found.items())
    assert len({id(t) for t in found.values()}) == len(found)


def test_every_shipped_file_reads_and_names_its_own_model():
    assert tuned.PICKS_DIR.is_dir() and (tuned.PICKS_DIR / "README.md").is_file()
    for path in sorted(tuned.PICKS_DIR.glob("*.json")):
        picks = read_picks(path)
        assert path.name == f"{model_slug(picks.device)}.json"
        assert picks.count > 0 and json.loads(path.read_text())["triton"]


def test_every_shipped_pick_names_a_kernel_and_configuration_that_still_exist():
    # the interpreter keeps one configuration per autotuner, so the kernels' own lists are read in a
    # process without it (decorating a kernel needs no GPU); a failure means: refresh the file
    script = """
import importlib, pkgutil, apex_kernels
for module in pkgutil.walk_packages(apex_kernels.__path__, "apex_kernels."):
    importlib.import_module(module.name)
from apex_kernels._utils import config_dict
from apex_kernels.tuned import PICKS_DIR, autotuners, read_picks
tuners = autotuners()
for path in sorted(PICKS_DIR.glob("*.json")):
    for kernel, entries in read_picks(path).picks.items():
        configs = [config_dict(c) for c in tuners[kernel].configs] if kernel in tuners else None
        for key, config in entries:
            if configs is None or config not in configs:
                print(f"{path.name}: {kernel} {key}: {config}")
print("checked", len(tuners), "autotuners")
"""
    env = {**os.environ, "TRITON_INTERPRET": "0", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-1].startswith("checked ") and int(lines[-1].split()[1]) >= 10
    assert lines[:-1] == []


def test_every_shipped_pick_is_for_a_key_a_built_in_cell_computes(monkeypatch):
    # A pick seeds its autotuner under its key (the tuning key's sizes, then the dtypes of every
    # tensor argument). When a kernel gains or loses an argument, or a launcher hands it other
    # sizes, the key moves, the pick is never looked up and the kernel is tuned again in every
    # process, silently. The shipped files are of the fixed profile in fp16: each of their keys
    # must be one that binding a built-in cell there computes (binding launches nothing).
    launches = []
    # the workloads with a triton path, found as the runner finds them
    found = [(w, implementation(w, "triton")) for w in Registry.discover().workloads.values()]
    paths = [(workload, path) for workload, path in found if path is not None]
    assert len(paths) >= 6
    for launch_kind in ("plain", "dependent"):
        if launch_kind == "dependent":
            # a GPU that launches ff-infer's kernels dependently binds kernels of its own (the
            # Triton pointwise mix in cuBLAS's place); the interpreter never does
            monkeypatch.setattr(ff_infer, "dependent_launch_reason", lambda features, device: None)
        for workload, path in paths:
            for case in workload.cases(workload.make_params("fixed")):
                inputs = workload.make_inputs(case, "cpu", torch.float16, 0)
                launches += path.bind(workload, case, inputs).launches
    names = tuned.kernel_ids(tuned.autotuners())  # after binding: every kernel module is imported
    computed = {(names[id(launch.kernel)], tuning_key(launch.kernel, launch.args, launch.meta))
                for launch in launches if id(launch.kernel) in names}
    for path in sorted(tuned.PICKS_DIR.glob("*.json")):
        unused = [(kernel, key) for kernel, entries in read_picks(path).picks.items() for key, _ in entries
                  if (kernel, key) not in computed]
        assert unused == [], f"{path.name}: picks no built-in cell looks up (refresh the file): {unused}"
