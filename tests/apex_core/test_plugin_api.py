"""The plugin API holds: its version, the load-time check, the shims of the first API's forms, and
the frozen first-API package (tests/plugins_v1) running unchanged with every status right."""

from __future__ import annotations

import json
import os
import textwrap
import warnings
from pathlib import Path

import pytest

import apex_core
from apex_core import interfaces
from apex_core.interfaces import Prepared, Workload
from apex_core.plugin_api import PLUGIN_API, ApiVersion, check_plugin, work_of
from apex_core.registry import Registry
from apex_core.results import Availability, Case, Status, Work
from tests.apex_core.fakes import Axpy, Eager
from tests.conftest import ROOT, install_plugin_package, run_cli

FAST = ["--device", "cpu", "--warmup", "1", "--iters", "3", "--min-time", "0", "--max-time", "0.2",
        "--no-history", "--build-workers", "0"]


# --- the version ---------------------------------------------------------------------------------

def test_the_version_is_exported_and_reads_as_major_dot_minor():
    assert apex_core.PLUGIN_API is PLUGIN_API
    assert str(PLUGIN_API) == f"{PLUGIN_API.major}.{PLUGIN_API.minor}"
    assert ApiVersion.parse("1.2") == (1, 2) and ApiVersion.parse("1.2") < PLUGIN_API


@pytest.mark.parametrize(("declared", "fragment"), [
    ("2.0", "written for plugin API 2.0"),
    (f"1.{PLUGIN_API.minor + 1}", f"written for plugin API 1.{PLUGIN_API.minor + 1}"),
    ("one", "is not a version"),
])
def test_a_plugin_that_declares_an_api_this_apex_bench_lacks_fails_to_load(declared, fragment):
    backend = type("Declares", (Eager,), {"plugin_api": declared})()
    checked = check_plugin(backend, apex_core.Backend, "backend", "declares")
    assert fragment in checked.error and "declares" in checked.error


def test_a_plugin_that_declares_an_older_minor_of_the_same_major_loads():
    backend = type("Older", (Eager,), {"plugin_api": "1.0"})()
    assert check_plugin(backend, apex_core.Backend, "backend", "older").error == ""


# --- the load-time check -------------------------------------------------------------------------

class ForgetsInputs(Eager):
    def prepare(self, workload, case):  # the third argument is missing
        raise AssertionError("never called: the plugin fails to load")


class Swapped(Eager):
    def supports(self, case, workload, dtype_name):
        raise AssertionError("never called")


class WantsKeyword(Eager):
    def probe(self, device, *, driver):
        raise AssertionError("never called")


class TakesMore(Eager):
    def prepare(self, workload, case, inputs, stream):
        raise AssertionError("never called")


class Flexible(Eager):
    """Extra arguments with defaults, *args, or other names in the right places are all callable."""

    def prepare(self, workload, case, tensors, extra=None):
        return super().prepare(workload, case, tensors)

    def supports(self, *args):
        return super().supports(*args)

    def probe(self, dev):
        return Availability.yes()


@pytest.mark.parametrize(("kind", "fragment"), [
    (ForgetsInputs, "prepare(workload, case) does not match plugin API 1."),
    (ForgetsInputs, "expected prepare(self, workload, case, inputs) (since 1.0); it takes 2 arguments, "
                    "the harness passes 3"),
    (Swapped, "its argument 'case' stands where the harness passes 'workload'"),
    (WantsKeyword, "requires the keyword argument 'driver'"),
    (TakesMore, "it requires 4 arguments, the harness passes 3"),
])
def test_a_method_the_harness_cannot_call_is_one_line_naming_plugin_method_and_signatures(kind, fragment):
    checked = check_plugin(kind(), apex_core.Backend, "backend", "drifted")
    assert fragment in checked.error
    assert checked.error.startswith(f"backend 'drifted' ({__name__}.{kind.__qualname__})")
    assert "\n" not in checked.error


def test_callable_variations_load_without_a_line():
    assert check_plugin(Flexible(), apex_core.Backend, "backend", "flexible") == check_plugin(
        Eager(), apex_core.Backend, "backend", "eager")
    assert check_plugin(Flexible(), apex_core.Backend, "backend", "flexible").error == ""


def test_every_built_in_plugin_matches_the_api_with_no_deprecation():
    registry = Registry.discover()
    assert registry.broken == () and registry.deprecations == ()


class CountsPrepares(Eager):
    """prepare(self, workload, case) is a drift; its cells must be errors before anything is built."""

    name = "drifted"
    built: list[str] = []

    def prepare(self, workload, case):
        CountsPrepares.built.append(case.name)
        raise AssertionError("never called")


def test_cells_of_a_plugin_that_fails_the_check_are_errors_before_build_and_the_run_goes_on():
    registry = Registry.from_objects([Eager(), CountsPrepares()], [Axpy()])
    assert [row.name for row in registry.broken] == ["drifted"]
    report = apex_core.run(["axpy"], ["eager", "drifted"], device="cpu", registry=registry,
                           isolation="inline", timing=apex_core.TimingOptions(min_time_s=0, max_time_s=0.05))
    statuses = {c.backend: c for c in report.cells}
    assert statuses["eager"].status == Status.OK
    drifted = statuses["drifted"]
    assert drifted.status == Status.ERROR and drifted.build_time_s is None
    assert "prepare(workload, case) does not match plugin API" in drifted.reason
    assert CountsPrepares.built == []


# --- the shims -----------------------------------------------------------------------------------

class FirstApiAxpy(Axpy):
    """Axpy with the first API's work(case): 4 bytes an element whatever the dtype, as it counted."""

    def work(self, case):
        n = case.params.n
        return Work(bytes_moved=3 * 4 * n, flops=2 * n, units="elements", count=n)


def test_the_first_api_work_is_served_by_the_shim_and_listed_as_deprecated():
    workload = FirstApiAxpy()
    checked = check_plugin(workload, Workload, "workload", "axpy")
    assert checked.error == ""
    used = {d.used: d for d in checked.deprecations}
    assert used["work(self, case)"].instead == "work(self, case, dtype_name)"
    assert used["work(self, case)"].since == "1.2" and used["work(self, case)"].removal == "2.0"
    case = Case("axpy", "default", workload.make_params())
    assert work_of(workload, case, "fp16").bytes_moved == 3 * 4 * case.params.n  # counted as it counts


@pytest.fixture
def uses_forgotten_after_the_test(monkeypatch):
    """The uses a test records are gone after it: later tests' fakes in this process made none."""
    monkeypatch.setattr(interfaces, "_deprecated_uses",
                        {package: set(uses) for package, uses in interfaces._deprecated_uses.items()})


@pytest.mark.usefixtures("uses_forgotten_after_the_test")
def test_the_engine_workloads_old_module_is_still_importable_with_a_deprecation_warning():
    from apex_core.engine import workload as engine_workload
    from apex_core.interfaces import deprecated_uses

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from apex_core.workloads.engine_file import NO_REFERENCE, EngineWorkload, case_seed
    assert EngineWorkload is engine_workload.EngineWorkload and case_seed is engine_workload.case_seed
    assert NO_REFERENCE == engine_workload.NO_REFERENCE
    assert any(issubclass(w.category, DeprecationWarning) and "apex_core.engine.workload" in str(w.message)
               for w in caught)
    # the report lists the use for the package that made it, as it lists PROFILES
    use = ("apex_core.workloads.engine_file", "apex_core.engine.workload", "1.5")
    assert use in deprecated_uses("tests")


@pytest.mark.usefixtures("uses_forgotten_after_the_test")
def test_profiles_is_still_importable_with_a_deprecation_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from apex_core.interfaces import PROFILES
    assert PROFILES["smoke"]["height"] == 16
    assert any(issubclass(w.category, DeprecationWarning) and "Workload.profiles" in str(w.message)
               for w in caught)
    with pytest.raises(ImportError):
        from apex_core.interfaces import NOT_THERE  # noqa: F401


def test_prepared_keeps_the_positions_of_the_first_api_and_refuses_later_fields_by_position():
    def fn():
        return {}

    def extra():
        return {"k": 1}

    first = Prepared(fn, None, {"m": 1}, "note", "method")
    assert (first.timing_note, first.timing_method, first.timer) == ("note", "method", None)
    assert Prepared(fn, None, {}, "", None, extra).report_metadata is extra  # 1.1's sixth field
    with pytest.raises(TypeError, match="keyword-only"):
        Prepared(fn, None, {}, "", None, "kernel")  # timer passed where 1.2 briefly put it
    assert Prepared(fn, timer="kernel").timer == "kernel"


# --- the frozen first-API package ----------------------------------------------------------------

@pytest.fixture(scope="session")
def first_api_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_plugin_package(ROOT / "tests" / "plugins_v1", tmp_path_factory, "apex_firstapi_plugin")


def _with_path(*paths: Path) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([*map(str, paths), os.environ.get("PYTHONPATH", "")])}


def test_the_first_api_package_runs_unchanged_with_every_status_right(first_api_site, tmp_path):
    out = tmp_path / "run.json"
    result = run_cli([*FAST, "--profile", "smoke", "--workloads", "v1-blend",
                      "--backends", "torch-reference,v1-eager,v1-buffered,v1-unavailable,v1-picky,v1-wrong,"
                      "v1-raises",
                      "--output-json", str(out), "--output-md", str(tmp_path / "run.md"),
                      "--html", str(tmp_path / "run.html")],
                     cwd=tmp_path, env=_with_path(first_api_site))
    assert result.returncode == 1, result.stderr  # v1-wrong and v1-raises fail the run, as they should
    assert "Traceback" not in result.stderr + result.stdout
    report = json.loads(out.read_text())
    status = {(c["case"], c["backend"]): c for c in report["benchmarks"]}
    for case in ("default", "square"):
        for backend in ("torch-reference", "v1-eager", "v1-buffered"):
            assert status[(case, backend)]["status"] == "ok", status[(case, backend)]["reason"]
        assert status[(case, "v1-unavailable")]["status"] == "skipped"
        assert "libv1 is not installed" in status[(case, "v1-unavailable")]["reason"]
        assert status[(case, "v1-wrong")]["status"] == "incorrect"
        assert status[(case, "v1-raises")]["status"] == "error"
        assert "v1 kernel failed" in status[(case, "v1-raises")]["reason"]
    assert status[("default", "v1-picky")]["status"] == "ok"
    assert status[("square", "v1-picky")]["status"] == "skipped"
    eager = status[("default", "v1-eager")]
    # the first API's shared smoke sizes, and the bytes as the plugin counts them (4 an element)
    assert eager["params"] == {"batch": 1, "channels": 8, "height": 16, "width": 16}
    assert eager["bytes_moved"] == 4 * 4 * 1 * 8 * 16 * 16
    assert eager["metadata"]["api"] == "1.0"
    used = {(d["plugin"], d["used"]) for d in report["deprecations"]}
    assert {("v1-blend", "work(self, case)"), ("v1-blend", "apex_core.interfaces.PROFILES")} <= used
    assert "deprecated: workload 'v1-blend' uses work(self, case)" in result.stderr
    assert "Deprecated plugin API" in (tmp_path / "run.md").read_text()
    html = (tmp_path / "run.html").read_text()
    assert "Deprecated plugin API" in html and "work(self, case, dtype_name)" in html


# --- plugins that fail at import -----------------------------------------------------------------

def _synthetic_plugin(site: Path, module: str, body: str, backends: dict[str, str]) -> None:
    """A one-module package with entry points, as pip would lay it out, in ``site``."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(textwrap.dedent(body))
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    lines = "\n".join(f"{name} = {value}" for name, value in backends.items())
    (info / "entry_points.txt").write_text(f"[apex_bench.backends]\n{lines}\n")


@pytest.mark.parametrize("raised", ["AssertionError('not configured')", "KeyboardInterrupt()"])
def test_a_plugin_that_raises_at_import_is_its_own_error_row(tmp_path, raised):
    site = tmp_path / "site"
    _synthetic_plugin(site, "raises_at_import", f"raise {raised}\n",
                      {"raises-at-import": "raises_at_import:Backend"})
    result = run_cli(["--list", "--device", "cpu", "--inline"], cwd=tmp_path, env=_with_path(site))
    assert result.returncode == 0, result.stdout + result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("cannot run: backend"))
    assert "'raises-at-import'" in line and f"{raised.partition('(')[0]} at import" in line
    assert "Traceback" not in result.stdout + result.stderr
    assert "torch-reference" in result.stdout  # the other plugins still load


def test_a_drifted_plugin_is_one_line_at_list_and_at_the_start_of_a_run(tmp_path):
    site = tmp_path / "site"
    _synthetic_plugin(site, "drifted_plugin", """
        from apex_core.interfaces import Backend, Prepared
        from apex_core.results import Availability

        class Drifted(Backend):
            name = "drifted"
            description = "prepare lost its inputs"

            def probe(self, device):
                return Availability.yes()

            def prepare(self, workload, case):
                raise AssertionError("never called")
        """, {"drifted": "drifted_plugin:Drifted"})
    listing = run_cli(["--list", "--device", "cpu", "--inline"], cwd=tmp_path, env=_with_path(site))
    lines = [line for line in listing.stdout.splitlines() if line.startswith("cannot run: backend 'drifted'")]
    assert len(lines) == 1 and "prepare(workload, case) does not match plugin API" in lines[0]
    out = tmp_path / "run.json"
    run = run_cli([*FAST, "--profile", "smoke", "--workloads", "tilepack", "--backends",
                   "torch-reference,drifted", "--output-json", str(out), "--output-md", str(tmp_path / "r.md")],
                  cwd=tmp_path, env=_with_path(site))
    assert run.returncode == 1
    start = [line for line in run.stderr.splitlines() if "'drifted' cannot run" in line]
    assert len(start) == 1 and "expected prepare(self, workload, case, inputs)" in start[0]
    cells = {c["backend"]: c for c in json.loads(out.read_text())["benchmarks"]}
    assert cells["torch-reference"]["status"] == "ok"
    assert cells["drifted"]["status"] == "error" and cells["drifted"].get("build_time_s") is None


# --- implementations a workload brings (1.5) ----------------------------------------------

AXPY_BUILD = object()  # what _Brings names as its "jax" implementation


class _Brings(Axpy):
    implementations = {"jax": "tests.apex_core.test_plugin_api:AXPY_BUILD",
                       "triton": "tests.apex_core.test_plugin_api:NOT_THERE"}


def test_a_workload_brings_its_implementations_imported_only_when_asked():
    from apex_core.plugin_api import implementation

    workload = _Brings()
    assert implementation(workload, "jax") is AXPY_BUILD
    assert implementation(workload, "tensorrt-plugin") is None and implementation(Axpy(), "jax") is None
    with pytest.raises(AttributeError):
        implementation(workload, "triton")  # the cell that needed it becomes an error with this message


@pytest.mark.parametrize("bad", [["triton"], {"triton": "no_colon"}, {"triton": "a:b:c"}, {"triton": ":x"},
                                 {3: "a:b"}])
def test_implementations_that_cannot_be_read_fail_the_load_time_check(bad):
    kind = type("BadImplementations", (Axpy,), {"implementations": bad})
    checked = check_plugin(kind(), apex_core.Workload, "workload", "bad")
    assert "implementations" in checked.error and "'module:attribute'" in checked.error
    assert check_plugin(_Brings(), apex_core.Workload, "workload", "brings").error == ""


def test_backends_find_a_workloads_code_by_their_kind_and_say_so_when_there_is_none():
    from adapters.jax_backend import JaxBackend
    from adapters.tensorrt_plugin import plugin_unsupported_reason
    from adapters.triton_backend import TritonBackend

    case = apex_core.Case("axpy", "default", Axpy().make_params())
    assert JaxBackend().supports(_Brings(), case, "fp32").ok
    for backend in (JaxBackend(), TritonBackend()):
        support = backend.supports(Axpy(), case, "fp32")
        assert not support.ok and "brings no" in support.reason and "Workload.implementations" in support.reason
    assert "brings no TensorRT plugin layer" in plugin_unsupported_reason(Axpy())
    # the built-in workloads name theirs the same way, with no table elsewhere
    builtin = apex_core.Registry.discover().workloads
    assert {name for name, w in builtin.items() if "triton" in w.implementations} == {
        "tilepack", "tileunpack", "fusiongate", "tilessm-scan", "tile-stage1", "ff-infer"}
