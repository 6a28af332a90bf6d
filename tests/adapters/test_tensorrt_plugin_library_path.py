"""--trt-plugin-lib and APEXX_TRT_PLUGIN_LIB: which file a name means, decided before any worker runs.

dlopen never searches the current folder for a name without a slash, so ``myplugin.so``
given as a file here must become an absolute path; a bare name that is no file here stays
the dynamic loader's to find; a path that does not exist is a usage error. TensorRT is not
needed: loading runs for real on shared libraries compiled with gcc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from adapters import tensorrt_plugin
from adapters.tensorrt_plugin import (
    PLUGIN_LIB_ENV,
    PluginLibraryError,
    TensorRTPluginBackend,
    load_plugin_libraries,
    plugin_library_paths,
    shared_library_problem,
)
from apex_core.cli.args import build_run_parser
from apex_core.cli.run_command import backend_options_from_args
from tests.conftest import run_cli

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not on PATH")


def parse_libs(*values: str) -> list[str]:
    argv = [arg for value in values for arg in ("--trt-plugin-lib", value)]
    return build_run_parser().parse_args(argv).trt_plugin_lib


def usage_error(capsys, *values: str) -> str:
    with pytest.raises(SystemExit) as raised:
        parse_libs(*values)
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line
    return err


def compile_library(folder: Path, name: str, answer: int) -> Path:
    src = folder / f"{name}.c"
    src.write_text(f"int apexx_answer(void) {{ return {answer}; }}\n")
    out = folder / name
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(src)], check=True, capture_output=True)
    return out


@needs_gcc
def test_a_file_in_the_current_folder_loads_even_from_a_worker_in_another_folder(tmp_path, monkeypatch):
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    library = compile_library(here, "myplugin.so", 42)
    monkeypatch.chdir(here)
    if "." not in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        # what went wrong before: dlopen searches for a bare name, never in the current folder
        with pytest.raises(OSError):
            ctypes.CDLL("myplugin.so")

    args = build_run_parser().parse_args(["--trt-plugin-lib", "myplugin.so"])
    options = backend_options_from_args(args)

    assert options == {"tensorrt-plugin": {"plugin_libs": [str(library)]}}
    monkeypatch.chdir(elsewhere)  # the worker's folder need not be the user's
    backend = TensorRTPluginBackend()
    backend.configure(options["tensorrt-plugin"])
    assert load_plugin_libraries(backend.libraries()) == [os.path.realpath(library)]
    assert tensorrt_plugin._LOADED_LIBRARIES[os.path.realpath(library)].apexx_answer() == 42


def test_relative_and_home_paths_become_absolute(tmp_path, monkeypatch):
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "libapexx.so").write_bytes(b"")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "libhome.so").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert parse_libs("build/libapexx.so", "./build/libapexx.so", "~/libhome.so") == [
        str(tmp_path / "build" / "libapexx.so"), str(tmp_path / "build" / "libapexx.so"),
        str(tmp_path / "home" / "libhome.so")]


def test_a_bare_name_that_is_no_file_here_is_left_to_the_dynamic_loader(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert parse_libs("libapexx_plugins.so") == ["libapexx_plugins.so"]
    assert shared_library_problem("libapexx_plugins.so") == ""  # only the loader can tell
    with pytest.raises(PluginLibraryError, match=r"^plugin library libapexx_nowhere_0\.so failed to load: "):
        load_plugin_libraries(["libapexx_nowhere_0.so"])


def test_a_bare_name_the_loader_finds_loads_under_that_name(tmp_path, monkeypatch):
    libm = ctypes.util.find_library("m")
    if libm is None or os.sep in libm:
        pytest.skip("no bare name for the C math library on this system")
    monkeypatch.chdir(tmp_path)
    assert parse_libs(libm) == [libm]
    assert load_plugin_libraries([libm]) == [libm]  # not a file in the current folder


@pytest.mark.parametrize("value", ["build/nope.so", "./nope.so", "/nowhere/libapexx.so", "~/nope.so"])
def test_a_path_that_does_not_exist_is_a_one_line_usage_error(tmp_path, monkeypatch, capsys, value):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    err = usage_error(capsys, value)
    assert "--trt-plugin-lib" in err and f"no such file: {value!r}" in err
    assert "dynamic loader" in err  # says how a bare name would be treated


def test_a_folder_or_an_empty_value_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plugins").mkdir()
    assert "'plugins/' is not a file" in usage_error(capsys, "plugins/")
    assert "expected a shared library path or name" in usage_error(capsys, "")


def test_the_command_line_exits_2_before_running_anything(tmp_path):
    result = run_cli(["--backends", "tensorrt-plugin", "--trt-plugin-lib", "missing/libapexx.so",
                      "--output-json", "r.json"], cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "no such file: 'missing/libapexx.so'" in result.stderr
    assert not (tmp_path / "r.json").exists()


def test_the_environment_variable_is_resolved_the_same_way(tmp_path, monkeypatch):
    (tmp_path / "myplugin.so").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    value = os.pathsep.join(["myplugin.so", "libbare.so", "sub/libx.so"])
    assert plugin_library_paths((), {PLUGIN_LIB_ENV: value}) == [
        str(tmp_path / "myplugin.so"), "libbare.so", str(tmp_path / "sub" / "libx.so")]
    # a missing path from the environment makes the backend unavailable with its name (no usage error)
    assert shared_library_problem(str(tmp_path / "sub" / "libx.so")).startswith("plugin library not found")
