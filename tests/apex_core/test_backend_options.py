"""Backend options: from the plan (and the CLI flags) to Backend.configure in every process."""

from __future__ import annotations

import pickle
from pathlib import Path

import attrs
import pytest

import apex_core
from apex_core.cli.args import build_run_parser
from apex_core.cli.run_command import backend_options_from_args
from apex_core.errors import UsageError
from apex_core.interfaces import CellSkipped
from apex_core.measure.cell import CellSpec, execute_cell
from apex_core.plan import build_plan
from apex_core.registry import Registry
from apex_core.results import Availability, SkipKind, Status, Support
from apex_core.running.runner import run_plan
from apex_core.running.workers import WorkerPool
from apex_core.timing import TimingOptions
from tests.apex_core.fakes import Axpy, Eager

FAST = TimingOptions(warmup=1, min_iters=3, min_time_s=0.0, max_time_s=0.05)


class Recording(Eager):
    """Remembers the options it held at each step; ``configure`` replaces them."""

    name = "recording"

    def __init__(self) -> None:
        self.options: dict = {}
        self.seen: dict[str, dict] = {}

    def configure(self, options):
        self.options = dict(options)

    def probe(self, device):
        self.seen["probe"] = dict(self.options)
        return Availability.yes()

    def supports(self, workload, case, dtype_name):
        self.seen["supports"] = dict(self.options)
        return Support.yes()

    def prepare(self, workload, case, inputs):
        self.seen["prepare"] = dict(self.options)
        return super().prepare(workload, case, inputs)


class Refusing(Eager):
    name = "refusing"

    def __init__(self, error: Exception) -> None:
        self.error = error

    def configure(self, options):
        if options:
            raise self.error


class BuildRejects(Eager):
    name = "rejects"

    def prepare(self, workload, case, inputs):
        raise CellSkipped("engine build failed: the builder found no kernel for this shape")


def test_plan_carries_plain_picklable_options_of_selected_backends_only(tmp_path):
    registry = Registry.from_objects([Recording(), Eager()], [Axpy()])
    options = {"recording": {"path": tmp_path / "x.engine", "libs": ("a.so", "b.so"), "build": True},
               "eager": {"ignored": 1}}
    plan = build_plan(registry, backends=["recording"], backend_options=options)
    expected = {"recording": {"path": str(tmp_path / "x.engine"), "libs": ["a.so", "b.so"], "build": True}}
    assert plan.backend_options == expected
    assert pickle.loads(pickle.dumps(plan)).backend_options == expected
    assert plan.config()["backend_options"] == expected
    assert plan.options_for("eager") == {}
    assert build_plan(registry, backends=["eager"]).config()["backend_options"] == {}


def test_bad_backend_options_are_usage_errors():
    registry = Registry.from_objects([Recording()], [Axpy()])
    with pytest.raises(UsageError, match="unknown backend 'nope'; valid backends: recording"):
        build_plan(registry, backend_options={"nope": {"a": 1}})
    with pytest.raises(UsageError, match="option 'fn' of backend 'recording' is a set; options are"):
        build_plan(registry, backend_options={"recording": {"fn": {1, 2}}})
    with pytest.raises(UsageError, match="must be a mapping"):
        build_plan(registry, backend_options={"recording": ["a"]})


def test_options_reach_probe_supports_and_prepare_and_the_report():
    backend = Recording()
    registry = Registry.from_objects([backend], [Axpy()])
    report = apex_core.run(["axpy:small"], ["recording"], device="cpu", timing=FAST, isolation="inline",
                           registry=registry, backend_options={"recording": {"engine_path": "ff.plan"}})
    assert [c.status for c in report.cells] == [Status.OK]
    assert backend.seen == {step: {"engine_path": "ff.plan"} for step in ("probe", "supports", "prepare")}
    assert report.config["backend_options"] == {"recording": {"engine_path": "ff.plan"}}
    # a later run without options hands the backend empty ones, not the previous run's
    apex_core.run(["axpy:small"], ["recording"], device="cpu", timing=FAST, isolation="inline",
                  registry=registry)
    assert backend.seen["prepare"] == {}


def test_configure_usage_error_stops_the_run_before_any_cell():
    registry = Registry.from_objects([Refusing(UsageError("bad value for x"))], [Axpy()])
    plan = build_plan(registry, backend_options={"refusing": {"x": 1}}, timing=FAST)
    started = []
    with pytest.raises(UsageError, match="bad value for x"):
        run_plan(plan, registry, isolation="inline", environment={},
                 on_cell=lambda *args: started.append(args))
    assert started == []


def test_configure_crash_turns_that_backends_cells_into_errors():
    registry = Registry.from_objects([Refusing(RuntimeError("boom")), Eager()], [Axpy()])
    plan = build_plan(registry, backends=["refusing", "eager"], backend_options={"refusing": {"x": 1}},
                      timing=FAST)
    report = run_plan(plan, registry, isolation="inline", environment={})
    by_backend = {c.backend: c for c in report.cells}
    assert by_backend["refusing"].status == Status.ERROR
    assert by_backend["refusing"].reason == "configure() raised RuntimeError: boom"
    assert by_backend["eager"].status == Status.OK


def test_a_configure_crash_in_a_probe_or_a_cell_keeps_its_traceback_for_the_log():
    from apex_core.measure.cell import CellSpec, execute_cell
    from apex_core.running.probing import ERROR, probe_here

    probed = probe_here(Refusing(RuntimeError("boom")), "cpu", {"x": 1})
    assert (probed.status, probed.reason) == (ERROR, "configure() raised RuntimeError: boom")
    assert "Traceback" in probed.log and "RuntimeError: boom" in probed.log
    axpy = Axpy()
    spec = CellSpec("axpy", "default", "refusing", "fp32", "cpu", attrs.asdict(axpy.make_params()), 0, FAST,
                    {"x": 1})
    cell = execute_cell(axpy, Refusing(RuntimeError("boom")), spec)
    assert (cell.status, cell.reason) == (Status.ERROR, "configure() raised RuntimeError: boom")
    assert "RuntimeError: boom" in cell.log


def test_cell_skipped_from_prepare_is_a_skip_with_its_reason():
    registry = Registry.from_objects([BuildRejects()], [Axpy()])
    report = apex_core.run(["axpy:small"], ["rejects"], device="cpu", timing=FAST, isolation="inline",
                           registry=registry)
    (cell,) = report.cells
    assert (cell.status, cell.skip_kind) == (Status.SKIPPED, SkipKind.UNSUPPORTED)
    assert cell.reason == "engine build failed: the builder found no kernel for this shape"


def test_execute_cell_configures_the_backend_from_the_spec():
    backend = Recording()
    spec = CellSpec("axpy", "small", "recording", "fp32", "cpu", {"n": 64, "height": 8, "tile_size": 4},
                    0, FAST, {"lib": "x.so"})
    assert execute_cell(Axpy(), backend, spec).status == Status.OK
    assert backend.seen["prepare"] == {"lib": "x.so"}
    assert pickle.loads(pickle.dumps(spec)).backend_options == {"lib": "x.so"}


@pytest.mark.slow
def test_options_reach_the_backend_in_a_spawned_worker():
    # tensorrt-engine is registered through entry points, so the worker finds it; its configure
    # refuses this pair of options, and the worker's result names that refusal
    params = {"batch": 1, "channels": 8, "height": 16, "width": 16, "tile_size": 4, "kmax": 6}
    spec = CellSpec("tilepack", "default", "tensorrt-engine", "fp32", "cpu", params, 0, FAST,
                    {"engine_path": "ff.engine", "build": True})
    pool = WorkerPool()
    try:
        refused = pool.run(spec, timeout_s=120)
        accepted = pool.run(CellSpec("tilepack", "default", "torch-reference", "fp32", "cpu", params, 0, FAST,
                                     {"any": "value"}), timeout_s=120)
    finally:
        pool.close()
    assert refused.status == Status.ERROR
    assert refused.reason.startswith("UsageError during configure: --trt-engine-path and --trt-build")
    assert accepted.status == Status.OK


def parse(*argv):
    return build_run_parser().parse_args(list(argv))


def test_cli_flags_become_backend_options():
    assert backend_options_from_args(parse()) == {}
    assert backend_options_from_args(parse("--trt-engine-path", "ff.plan")) == {
        "tensorrt-engine": {"engine_path": "ff.plan"}}
    one_workload = parse("--trt-engine-path", "t.plan", "--workloads", "tilepack:default")
    assert backend_options_from_args(one_workload) == {
        "tensorrt-engine": {"engine_path": "t.plan", "engine_workload": "tilepack"}}
    assert backend_options_from_args(parse("--trt-build", "--trt-plugin-lib", "a.so", "--trt-plugin-lib",
                                           str(Path("b.so")))) == {
        "tensorrt-engine": {"build": True}, "tensorrt-plugin": {"plugin_libs": ["a.so", "b.so"]}}


def test_cli_flag_mistakes_are_usage_errors():
    with pytest.raises(UsageError, match="exclude each other"):
        backend_options_from_args(parse("--trt-engine-path", "a.plan", "--trt-build"))
    with pytest.raises(UsageError, match="serves one workload"):
        backend_options_from_args(parse("--trt-engine-path", "a.plan", "--workloads", "tilepack,ff-infer"))


# --backend-opt: options every backend declares ------------------------------------------------


def _declared_registry():
    from apex_core.backend_options import BackendOption

    class Tunable(Eager):
        name = "tunable"
        option_specs = (BackendOption("block", "int", "block size"),
                        BackendOption("fast", "bool", "take the fast path"),
                        BackendOption("lib", "path", "a library", repeatable=True))

    return Registry.from_objects([Tunable(), Eager()], [Axpy()])


def test_backend_opt_is_checked_against_the_declared_options(tmp_path, monkeypatch):
    from apex_core.backend_options import parse_backend_opts

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.so").write_text("")
    backends = _declared_registry().backends
    got = parse_backend_opts(["tunable.block=64", "tunable.fast=yes", "tunable.lib=mine.so",
                              "tunable.lib=libc.so.6"], backends)
    assert got == {"tunable": {"block": 64, "fast": True, "lib": [str(tmp_path / "mine.so"), "libc.so.6"]}}
    for bad, fragment in (("tunable.block=big", "expected an integer"), ("tunable.fast=maybe", "true or false"),
                          ("tunable.color=red", "has no option 'color'; its options: block, fast, lib"),
                          ("eager.x=1", "its options: none"), ("nobody.x=1", "unknown backend 'nobody'"),
                          ("tunable.block", "NAME.KEY=VALUE"), ("block=1", "NAME.KEY=VALUE")):
        with pytest.raises(UsageError, match=fragment):
            parse_backend_opts([bad], backends)
    with pytest.raises(UsageError, match="given twice"):
        parse_backend_opts(["tunable.block=1", "tunable.block=2"], backends)


def test_backend_opt_and_the_trt_aliases_meet_in_one_mapping(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    registry = Registry.discover()
    args = parse("--trt-plugin-lib", "libone.so", "--backend-opt", "tensorrt-plugin.plugin_libs=libtwo.so",
                 "--backend-opt", "tensorrt-engine.build=true")
    assert backend_options_from_args(args, registry) == {
        "tensorrt-plugin": {"plugin_libs": ["libone.so", "libtwo.so"]}, "tensorrt-engine": {"build": True}}
    clash = parse("--trt-engine-path", "a.plan",
                  "--backend-opt", f"tensorrt-engine.engine_path={tmp_path}/b.plan")
    with pytest.raises(UsageError, match="two values"):
        backend_options_from_args(clash, registry)


def test_backend_opt_reaches_configure_in_the_worker_and_list_shows_the_options(tmp_path):
    from tests.conftest import run_cli

    listed = run_cli(["--list", "--device", "cpu"], cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert all(word in listed.stdout for word in ("backend options", "engine_path", "plugin_libs"))
    bad = run_cli(["--device", "cpu", "--backend-opt", "torch-reference.x=1"], cwd=tmp_path)
    assert bad.returncode == 2 and "its options: none" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    done = run_cli(["--device", "cpu", "--profile", "smoke", "--workloads", "tilepack", "--backends",
                    "torch-reference,tensorrt-engine", "--backend-opt", "tensorrt-engine.build=true",
                    "--output-json", "r.json", "--output-md", "r.md", "--no-history"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    import json

    report = json.loads((tmp_path / "r.json").read_text())
    assert report["config"]["backend_options"] == {"tensorrt-engine": {"build": True}}


def test_a_backend_gets_its_options_in_one_place():
    """Every process that uses a backend configures it through backend_options.configure alone
    (a backend of its own may still call super().configure)."""
    import ast

    from tests.conftest import ROOT

    callers = [f"{path.relative_to(ROOT)}:{node.lineno}"
               for path in (ROOT / "apex_core").rglob("*.py")
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr == "configure"]
    assert len(callers) == 1 and callers[0].startswith("apex_core/backend_options.py:"), callers
