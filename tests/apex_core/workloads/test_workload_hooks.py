"""What belongs to a workload lives on it (profiles, export recipe, units, dtype-aware work);
a backend declares its aliases."""

import attrs
import pytest

from apex_core.errors import ParamError
from apex_core.interfaces import ExportRecipe
from apex_core.plan import build_plan
from apex_core.registry import Registry
from apex_core.report.markdown import render_markdown
from apex_core.report.records import cell_record
from apex_core.results import Case, CellResult, Status, Work
from apex_core.running.runner import run_plan
from apex_core.timing import TimingOptions
from apex_core.workloads.tilepack import TilePack
from tests.apex_core.fakes import Axpy, Eager

FAST = TimingOptions(warmup=1, min_iters=3, min_time_s=0.0, max_time_s=0.05)


@attrs.frozen(kw_only=True)
class RowsParams:
    rows: int = 32


class Rows(Axpy):
    """A third-party workload with its own field names and a smoke profile of its own."""

    name = "rows"
    params_type = RowsParams
    case_names = ("default",)
    profiles = {"smoke": {"rows": 3}, "tiny": {"rows": 1}}

    def make_inputs(self, case, device, dtype, seed):
        return super().make_inputs(Case("axpy", "small", attrs.evolve(Axpy.params_type(), n=case.params.rows)),
                                   device, dtype, seed)

    def work(self, case, dtype_name):
        return Work(8 * case.params.rows, 2 * case.params.rows, "samples", case.params.rows)


class Aliased(Eager):
    name = "aliased"
    aliases = ("fast", "eager")  # "eager" is a backend's own name: the backend wins


class AlsoAliased(Eager):
    name = "also"
    aliases = ("fast",)


def test_a_workload_takes_its_own_profiles_and_no_other_workloads_values():
    rows = Rows()
    assert rows.profile_names() == ("fixed", "smoke", "tiny")
    assert rows.make_params("smoke").rows == 3 and rows.make_params().rows == 32
    with pytest.raises(ParamError, match="axpy has no profile 'smoke'; its profiles: fixed"):
        Axpy().make_params("smoke")
    # the built-ins declare the suite's sizes through the same hook
    assert TilePack().make_params("smoke").channels == 8
    assert "steps" not in TilePack.profiles["smoke"]  # only its own fields


def test_a_profile_that_names_a_missing_field_is_refused():
    class Broken(Rows):
        profiles = {"smoke": {"channels": 8}}

    with pytest.raises(ParamError, match="'smoke' sets 'channels', which is not a parameter; valid: rows"):
        Broken().make_params("smoke")


def test_a_workload_without_the_profile_runs_with_its_defaults_and_the_report_says_so():
    registry = Registry.from_objects([Eager()], [Rows(), Axpy()])
    plan = build_plan(registry, profile="smoke", timing=FAST)
    params = {c.case.workload: c.case.params for c in plan.cells}
    assert params["rows"].rows == 3 and params["axpy"] == Axpy().make_params()  # axpy's defaults
    assert plan.profile_fallbacks == ("axpy",) and plan.config()["profile_fallbacks"] == ["axpy"]
    assert "profile_fallbacks" not in build_plan(registry, workloads=["rows"], profile="smoke").config()
    report = run_plan(plan, registry, isolation="inline")
    assert {c.status for c in report.cells} == {Status.OK}
    assert "profile smoke (axpy: no smoke profile, ran with its defaults)" in render_markdown(report)
    # a profile no selected workload defines is a usage error naming the valid ones
    with pytest.raises(ParamError, match="unknown profile 'huge'; valid profiles: fixed, smoke, tiny"):
        build_plan(registry, profile="huge")
    with pytest.raises(ParamError, match="unknown profile 'smoke'; valid profiles: fixed"):
        build_plan(registry, workloads=["axpy"], profile="smoke")


def test_free_text_units_reach_the_report():
    registry = Registry.from_objects([Eager()], [Rows()])
    report = run_plan(build_plan(registry, timing=FAST), registry, isolation="inline")
    record = cell_record(report.cells[0])
    assert record["units"] == "samples" and record["samples_per_s"] > 0
    from apex_core.report.records import report_record
    from apex_core.report.schema import validate_report

    validate_report(report_record(attrs.evolve(report, status="complete")))
    for bad in ("Tiles", "tiles per s", "", "x" * 41):
        with pytest.raises(ValueError, match="throughput unit"):
            Work(1, 1, bad, 1)


def test_work_counts_the_cells_dtype():
    registry = Registry.from_objects([Eager()], [TilePack()])
    plan = build_plan(registry, workloads=["tilepack"], dtypes=("fp32", "fp16"), profile="smoke", timing=FAST)
    cells = {c.dtype: c for c in run_plan(plan, registry, isolation="inline").cells}
    fp32, fp16 = cells["fp32"].derived, cells["fp16"].derived
    index_bytes = 6 * 4  # kmax int32 ids
    assert fp32.bytes_moved - index_bytes == 2 * (fp16.bytes_moved - index_bytes)


def test_export_recipes_are_the_workloads_own():
    tilepack = TilePack()
    case = tilepack.cases(tilepack.make_params("smoke"))[0]
    expected = ExportRecipe({"features": {0: "batch", 2: "height", 3: "width"}, "idx": {0: "batch", 1: "K"}})
    assert tilepack.export_recipe(case, "fp32") == expected
    assert Axpy().export_recipe(case, "fp32") is None  # the default: no export
    assert ExportRecipe.refused("why").unsupported == "why"


def test_backends_declare_their_aliases():
    registry = Registry.from_objects([Eager(), Aliased(), AlsoAliased()], [Axpy()])
    assert registry.backend_aliases() == {"fast": ("aliased", "also")}
    assert registry.select_backends(["fast"]) == ["aliased", "also"]
    assert registry.select_backends(["eager"]) == ["eager"]
    real = Registry.discover()
    assert real.backend_aliases()["trt"] == ("tensorrt-engine", "tensorrt-plugin")


def test_an_ok_cell_without_a_reference_reads_unchecked():
    cell = CellResult("w", "c", "b", "fp32", "cpu", Status.OK, unchecked="no reference")
    assert cell_record(cell)["correctness"] == "unchecked"
    assert cell_record(attrs.evolve(cell, unchecked=""))["correctness"] == "passed"
    assert cell_record(attrs.evolve(cell, status=Status.INCORRECT, unchecked=""))["correctness"] == "failed"


