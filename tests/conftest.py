"""Shared fixtures: the third-party test plugin package, installed for real, and CLI helpers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# The whole suite runs Triton in its interpreter (there is no GPU in CI). triton.jit reads
# TRITON_INTERPRET when a kernel is decorated, so it is set here, before any test module
# imports triton, and it is the same for every test whatever the order the tests run in: a
# test that needs it off passes its own environment to the process it starts.
# On a GPU machine APEX_TEST_KERNEL_DEVICE=cuda compiles the kernels instead and runs the
# kernel tests' calls there (tests/apex_kernels, through repeated_calls.py): every
# configuration the tests pin, checked on the device (docs/kernels.md).
KERNEL_DEVICE = os.environ.get("APEX_TEST_KERNEL_DEVICE", "cpu")
os.environ["TRITON_INTERPRET"] = "0" if KERNEL_DEVICE == "cuda" else "1"
# A run records itself in $APEX_BENCH_HISTORY, else artifacts/history.sqlite under the folder it
# runs in: tests that run the CLI from the checkout would write into its history. Every test
# process gets a history of its own; a test about the default path names its own environment.
_HISTORY_FOLDER = Path(tempfile.mkdtemp(prefix="apex-bench-test-history-"))
os.environ["APEX_BENCH_HISTORY"] = str(_HISTORY_FOLDER / "history.sqlite")
# Importing torch._dynamo (a test module that compiles in its own process) writes Inductor's
# default cache folder into os.environ, in every worker that collects that module. A CLI the tests
# start must see the environment the run began with, where apex-bench picks its own cache folders.
_INDUCTOR_CACHE_SET_BY_USER = "TORCHINDUCTOR_CACHE_DIR" in os.environ

ROOT = Path(__file__).resolve().parent.parent
PLUGIN_SOURCE = ROOT / "tests" / "plugins"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """With the kernels compiled on a GPU, the tests that need the interpreter are skipped."""
    if KERNEL_DEVICE == "cuda":
        skip = pytest.mark.skip(reason="needs Triton's interpreter (APEX_TEST_KERNEL_DEVICE=cuda)")
        for item in items:
            if item.get_closest_marker("interpreter"):
                item.add_marker(skip)


def install_plugin_package(source_dir: Path, tmp_path_factory: pytest.TempPathFactory, package: str) -> Path:
    """Install a plugin package of tests/ with pip into a private folder (not the user's environment)."""
    target = tmp_path_factory.mktemp("plugin-site")
    build = tmp_path_factory.mktemp("plugin-build")
    # setuptools builds in the source tree (build/, *.egg-info): each test process (xdist
    # runs several, each with its own session) builds from a copy of its own, or two
    # builds race on the same files
    source = build / "source"
    shutil.copytree(source_dir, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
         "--no-build-isolation", "--no-compile", "--target", str(target), str(source)],
        check=True,
        env={**os.environ, "PIP_NO_INPUT": "1", "TMPDIR": str(build)},
    )
    assert (target / package).is_dir()
    return target


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/plugins, installed with pip into a private folder."""
    return install_plugin_package(PLUGIN_SOURCE, tmp_path_factory, "apex_testplugin")


@pytest.fixture()
def plugin_on_path(plugin_site: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make the installed plugin visible to this process and to child processes."""
    monkeypatch.syspath_prepend(str(plugin_site))
    existing = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(plugin_site), existing])))
    return plugin_site


def run_cli(args: list[str], *, cwd: Path, env: dict[str, str] | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run ``apex-bench`` as a user would, in a child process."""
    inherited = dict(os.environ)
    if not _INDUCTOR_CACHE_SET_BY_USER:
        inherited.pop("TORCHINDUCTOR_CACHE_DIR", None)
    return subprocess.run(
        [sys.executable, "-m", "apex_core.cli.main", *args],
        cwd=cwd, env={**inherited, **(env or {})}, capture_output=True, text=True,
        timeout=timeout,
    )


def _artifacts_files() -> dict[str, int]:
    """The files under the checkout's artifacts/ (the user's reports and history), with their
    modification times; the folder APEX_TEST_ARTIFACTS names (CI's screenshots, opted in) aside."""
    folder = ROOT / "artifacts"
    allowed = os.environ.get("APEX_TEST_ARTIFACTS")
    kept = (ROOT / allowed).resolve() if allowed else None
    return {str(path.relative_to(ROOT)): path.stat().st_mtime_ns for path in folder.rglob("*")
            if path.is_file() and not (kept is not None and path.resolve().is_relative_to(kept))}


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller, or a run without xdist
        session.config.stash[_ARTIFACTS_BEFORE] = _artifacts_files()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The suite never writes into the user's artifacts/ (reports, history): a run that did fails."""
    before = session.config.stash.get(_ARTIFACTS_BEFORE, None)
    if before is None:
        return
    changed = sorted(set(_artifacts_files().items()) ^ set(before.items()))
    if changed:
        names = sorted({name for name, _ in changed})
        sys.stderr.write(f"\nthe tests wrote into the checkout's artifacts/: {', '.join(names)}\n")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_ARTIFACTS_BEFORE = pytest.StashKey[dict[str, int]]()
