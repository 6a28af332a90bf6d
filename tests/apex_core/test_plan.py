import pytest

from apex_core.errors import ParamError, UsageError
from apex_core.plan import build_plan
from apex_core.registry import Registry
from tests.apex_core.fakes import Axpy, Eager, Picky, Unavailable


@pytest.fixture()
def registry():
    return Registry.from_objects([Eager(), Unavailable(), Picky()], [Axpy()])


def test_cross_product_in_order(registry):
    plan = build_plan(registry, backends=["eager", "picky"], dtypes=("fp32", "fp16"))
    labels = [(c.case.name, c.backend, c.dtype) for c in plan.cells]
    assert labels == [
        ("small", "eager", "fp32"), ("small", "eager", "fp16"),
        ("small", "picky", "fp32"), ("small", "picky", "fp16"),
        ("large", "eager", "fp32"), ("large", "eager", "fp16"),
        ("large", "picky", "fp32"), ("large", "picky", "fp16"),
    ]


def test_all_alias_and_no_repeats(registry):
    assert build_plan(registry, backends=["all"]).backends == ("eager", "picky", "unavail")
    assert build_plan(registry, backends=["eager", "all", "eager"]).backends == (
        "eager", "picky", "unavail")


def test_trt_alias_expands_to_both_tensorrt_backends():
    real = Registry.discover()
    assert build_plan(real, backends=["trt"], workloads=["tilepack"]).backends == (
        "tensorrt-engine", "tensorrt-plugin")  # members of an alias in name order


def test_unknown_names_list_the_valid_ones(registry):
    with pytest.raises(UsageError, match="unknown backend 'nope'; valid backends: eager, picky"):
        build_plan(registry, backends=["nope"])
    with pytest.raises(UsageError, match="unknown workload 'gemm'.*axpy"):
        build_plan(registry, workloads=["gemm"])
    with pytest.raises(UsageError, match="unknown dtype 'fp64'"):
        build_plan(registry, dtypes=("fp64",))


def test_case_selector(registry):
    plan = build_plan(registry, workloads=["axpy:large"], backends=["eager"])
    assert [c.case.name for c in plan.cells] == ["large"]
    with pytest.raises(UsageError, match="unknown case 'huge' of axpy; valid cases: small, large"):
        build_plan(registry, workloads=["axpy:huge"])


def test_set_overrides_are_typed_and_validated(registry):
    plan = build_plan(registry, backends=["eager"], overrides=["n=128"])
    assert plan.cells[0].case.params.n == 128
    with pytest.raises(ParamError, match="unknown parameter; valid keys: height, n, tile_size"):
        build_plan(registry, overrides=["m=3"])
    with pytest.raises(ParamError, match="n=abc: expected int"):
        build_plan(registry, overrides=["n=abc"])
    with pytest.raises(ParamError, match="expects key=value"):
        build_plan(registry, overrides=["n"])
    with pytest.raises(ParamError, match="height 6 is not divisible by tile_size 4"):
        build_plan(registry, overrides=["height=6"])


def test_real_workload_validation_names_both_values():
    real = Registry.discover()
    with pytest.raises(ParamError, match="130.*8|8.*130"):
        build_plan(real, workloads=["tilepack"], backends=["torch-reference"],
                   overrides=["height=130"])


def test_profiles(registry):
    real = Registry.discover()
    smoke = build_plan(real, workloads=["tilepack"], backends=["torch-reference"], profile="smoke")
    assert smoke.cells[0].case.params.height == 16
    fixed = build_plan(real, workloads=["tilepack"], backends=["torch-reference"])
    assert fixed.cells[0].case.params.height == 128
    with pytest.raises(ParamError, match="unknown profile 'huge'"):
        build_plan(registry, profile="huge")


def test_config_records_the_selection(registry):
    config = build_plan(registry, backends=["eager"], seed=7).config()
    assert config["backends"] == ["eager"] and config["seed"] == 7
    assert config["timing"]["cache"] == "cold"
