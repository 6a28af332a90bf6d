"""tensorrt-plugin: library path handling and loading, the workload -> plugin table, skip reasons.

TensorRT itself cannot be installed here: what needs it skips with the backend's own
probe reason. Library loading runs for real on shared libraries compiled with gcc.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from adapters import tensorrt_plugin
from adapters.tensorrt_common import tensorrt_reason
from adapters.tensorrt_plugin import (
    DIRECTION_CODES,
    MERGE_CODES,
    NO_LIBRARY,
    PLUGIN_LIB_ENV,
    PLUGIN_NAMESPACE,
    PLUGIN_VERSION,
    TILESSM_SCAN,
    TILEUNPACK,
    PluginLibraryError,
    TensorRTPluginBackend,
    load_plugin_libraries,
    plugin_library_paths,
    plugin_unsupported_reason,
    shared_library_problem,
)
from apex_core.errors import UsageError
from apex_core.plugin_api import implementation
from apex_core.registry import Registry

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not on PATH")
needs_no_tensorrt = pytest.mark.skipif(importlib.util.find_spec("tensorrt") is not None,
                                       reason="tensorrt is installed here")


def compile_c(tmp_path: Path, source: str, name: str, *flags: str) -> Path:
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    out = tmp_path / name
    subprocess.run(["gcc", *flags, "-o", str(out), str(src)], check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def workloads():
    return Registry.discover().workloads


# --- skip reasons on this machine -------------------------------------------------------


@needs_no_tensorrt
@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_probe_without_tensorrt_names_the_missing_package_before_anything_else(device, monkeypatch):
    monkeypatch.delenv(PLUGIN_LIB_ENV, raising=False)
    backend = TensorRTPluginBackend()
    backend.configure({})  # no library given either: the tensorrt reason still comes first
    availability = backend.probe(device)
    assert not availability.ok
    assert availability.reason == "tensorrt not installed (pip install tensorrt; needs NVIDIA's package index)"


def test_probe_reasons_follow_the_documented_order_where_tensorrt_runs(tmp_path, monkeypatch):
    reason = tensorrt_reason("cuda")
    if reason:
        pytest.skip(reason)
    monkeypatch.delenv(PLUGIN_LIB_ENV, raising=False)
    backend = TensorRTPluginBackend()
    backend.configure({})
    assert backend.probe("cuda").reason == NO_LIBRARY
    text = tmp_path / "notes.so"
    text.write_text("not a library")
    backend.configure({"plugin_libs": [str(text)]})
    assert "not a shared library" in backend.probe("cuda").reason


# --- options and library paths ----------------------------------------------------------


def test_flag_libraries_win_over_the_environment(monkeypatch):
    monkeypatch.setenv(PLUGIN_LIB_ENV, os.pathsep.join(["/env/a.so", "/env/b.so"]))
    backend = TensorRTPluginBackend()
    backend.configure({"plugin_libs": ["/flag/x.so", "/flag/y.so"]})
    assert backend.libraries() == ["/flag/x.so", "/flag/y.so"]
    backend.configure({})
    assert backend.libraries() == ["/env/a.so", "/env/b.so"]


def test_environment_list_splits_on_pathsep_and_drops_empty_entries():
    value = os.pathsep.join(["/opt/a.so", "", "  /opt/b.so ", "~/c.so", ""])
    paths = plugin_library_paths((), {PLUGIN_LIB_ENV: value})
    assert paths == ["/opt/a.so", "/opt/b.so", os.path.expanduser("~/c.so")]
    assert plugin_library_paths((), {}) == []
    assert plugin_library_paths((), {PLUGIN_LIB_ENV: os.pathsep}) == []


def test_configure_rejects_unknown_options_and_non_lists():
    backend = TensorRTPluginBackend()
    with pytest.raises(UsageError, match="unknown option 'plugin_lib'"):
        backend.configure({"plugin_lib": ["a.so"]})
    with pytest.raises(UsageError, match="list of paths"):
        backend.configure({"plugin_libs": "a.so"})


def test_missing_file_and_directory_are_named(tmp_path):
    missing = tmp_path / "libnope.so"
    assert shared_library_problem(str(missing)) == f"plugin library not found: {missing}"
    assert shared_library_problem(str(tmp_path)) == f"plugin library {tmp_path} is not a file"
    with pytest.raises(PluginLibraryError, match="libnope.so"):
        load_plugin_libraries([str(missing)])


def test_a_text_file_is_not_a_shared_library(tmp_path):
    fake = tmp_path / "libfake.so"
    fake.write_text("#!/bin/sh\necho not a library\n")
    expected = f"plugin library {fake} is not a shared library (no ELF header)"
    assert shared_library_problem(str(fake)) == expected
    with pytest.raises(PluginLibraryError) as raised:
        load_plugin_libraries([str(fake)])
    assert str(raised.value) == expected


@needs_gcc
def test_an_object_file_is_elf_but_not_a_shared_library(tmp_path):
    obj = compile_c(tmp_path, "int apexx_answer(void) { return 42; }\n", "answer.o", "-c")
    assert shared_library_problem(str(obj)).endswith("is not a shared library (an ELF file, but a "
                                                     "relocatable object)")


@needs_gcc
def test_a_real_shared_library_loads_once_and_the_next_bad_one_is_named(tmp_path):
    good = compile_c(tmp_path, "int apexx_answer(void) { return 42; }\n", "libgood.so", "-shared", "-fPIC")
    assert shared_library_problem(str(good)) == ""
    assert load_plugin_libraries([str(good)]) == [os.path.realpath(good)]
    handle = tensorrt_plugin._LOADED_LIBRARIES[os.path.realpath(good)]
    assert handle.apexx_answer() == 42
    load_plugin_libraries([str(good)])  # cached: the same handle, not a second load
    assert tensorrt_plugin._LOADED_LIBRARIES[os.path.realpath(good)] is handle
    broken = compile_c(tmp_path, "int apexx_missing(void);\nint apexx_call(void) { return apexx_missing(); }\n",
                       "libbroken.so", "-shared", "-fPIC")
    with pytest.raises(PluginLibraryError) as raised:
        load_plugin_libraries([str(good), str(broken)])
    message = str(raised.value)
    assert message.startswith(f"plugin library {broken} failed to load: ")
    assert "apexx_missing" in message  # the loader's own words: the undefined symbol


@needs_gcc
def test_libraries_from_the_environment_load_through_the_same_path(tmp_path, monkeypatch):
    first = compile_c(tmp_path, "int apexx_one(void) { return 1; }\n", "libone.so", "-shared", "-fPIC")
    second = compile_c(tmp_path, "int apexx_two(void) { return 2; }\n", "libtwo.so", "-shared", "-fPIC")
    monkeypatch.setenv(PLUGIN_LIB_ENV, os.pathsep.join([str(first), str(second)]))
    backend = TensorRTPluginBackend()
    backend.configure({})
    loaded = load_plugin_libraries(backend.libraries())
    assert loaded == [os.path.realpath(first), os.path.realpath(second)]


# --- the plugin layer each workload brings -----------------------------------------------

PLUGIN_WORKLOADS = ("tilepack", "tileunpack", "tilessm-scan")


def test_each_workload_brings_its_layer_and_the_rest_say_why_not(workloads):
    layers = {name: implementation(w, "tensorrt-plugin") for name, w in workloads.items()}
    assert {name: spec.plugin for name, spec in layers.items() if spec is not None} == {
        "tilepack": "TilePack", "tileunpack": "TileUnpackFusion", "tilessm-scan": "TileSSMScan"}
    assert (PLUGIN_VERSION, PLUGIN_NAMESPACE) == ("1", "apexx")
    for name, workload in workloads.items():
        reason = plugin_unsupported_reason(workload)
        assert (reason == "") == (name in PLUGIN_WORKLOADS), name
    reason = plugin_unsupported_reason(workloads["ff-infer"])
    assert reason.startswith("ff-infer brings no TensorRT plugin layer") and "tensorrt-engine" in reason


@pytest.mark.parametrize("name", PLUGIN_WORKLOADS)
def test_plugin_io_matches_the_workload_inputs_and_reference_outputs(name, workloads):
    workload = workloads[name]
    spec = implementation(workload, "tensorrt-plugin")
    for case in workload.cases(workload.make_params("smoke")):
        inputs = workload.make_inputs(case, "cpu", torch.float32, 0)
        assert set(spec.inputs) <= set(inputs), case.id
        assert spec.outputs(case) == tuple(workload.reference(case, inputs)), case.id


def test_fields_carry_the_case_parameters(workloads):
    scan = workloads["tilessm-scan"]
    for case in scan.cases(scan.make_params("smoke", {"merge": "avg", "clamp": 50.0})):
        fields = {f.name: (f.kind, f.values) for f in TILESSM_SCAN.fields(case)}
        assert fields == {"direction": ("INT32", (DIRECTION_CODES[case.name],)),
                          "merge": ("INT32", (MERGE_CODES["avg"],)), "clamp_value": ("FLOAT32", (50.0,))}
    unpack = workloads["tileunpack"]
    modes = {c.name: {f.name: f.values for f in TILEUNPACK.fields(c)}
             for c in unpack.cases(unpack.make_params("smoke"))}
    assert modes == {"override": {"tile_size": (4,), "mode": (0,)}, "blend": {"tile_size": (4,), "mode": (1,)},
                     "overlap": {"tile_size": (4,), "mode": (0,)}}


# --- what needs TensorRT -----------------------------------------------------------------


def test_a_plugin_library_that_registers_nothing_leaves_creators_unregistered(tmp_path, workloads):
    reason = tensorrt_reason("cuda")
    if reason:
        pytest.skip(reason)
    if shutil.which("gcc") is None:
        pytest.skip("gcc not on PATH")
    empty = compile_c(tmp_path, "int apexx_nothing(void) { return 0; }\n", "libempty.so", "-shared", "-fPIC")
    backend = TensorRTPluginBackend()
    backend.configure({"plugin_libs": [str(empty)]})
    assert backend.probe("cuda").ok
    tilepack = workloads["tilepack"]
    case = tilepack.cases(tilepack.make_params("smoke"))[0]
    support = backend.supports(tilepack, case, "fp16")
    assert support.reason.startswith("plugin creator not registered: TilePack version 1 in namespace apexx")
