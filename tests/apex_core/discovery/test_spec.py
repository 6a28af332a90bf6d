"""bench.yaml files checked key by key: every problem names the file and the field; nothing is evaluated."""

from __future__ import annotations

from pathlib import Path

import pytest

from apex_core.discovery.conditions import SkipConditions, parse_conditions
from apex_core.discovery.spec import BenchSpecError, parse_spec
from apex_core.discovery.workload import DiscoveredWorkload

PATH = Path("/bench/saxpy/bench.yaml")
GOOD = {
    "name": "saxpy", "module": "kernel", "function": "saxpy", "reference": "saxpy_reference",
    "inputs": {"x": {"shape": ["n"]}, "idx": {"shape": [2, "n"], "kind": "integers", "high": "n"}},
    "outputs": ["out"], "params": {"n": 64, "scale": 0.5},
    "profiles": {"smoke": {"n": 8}}, "precisions": ["fp32"],
    "tolerances": {"fp32": {"atol": "1e-5", "rtol": 0.001}},
    "work": {"units": "elements", "count": "n", "bytes": ["n", 8]},
    "skip": {"requires": "cuda", "min_compute_capability": 8.0, "requires_module": ["triton.language"],
             "max_memory_gb": 2},
}


def test_a_good_file_parses():
    spec = parse_spec(GOOD, PATH)
    assert spec.name == "saxpy" and spec.params == {"n": 64, "scale": 0.5}
    assert [i.name for i in spec.inputs] == ["x", "idx"] and spec.inputs[1].dtype == "int32"
    assert spec.tolerances["fp32"] == {"atol": 1e-5, "rtol": 0.001}  # YAML 1.1 reads 1e-5 as text
    assert spec.work == {"units": "elements", "count": "n", "bytes": ("n", 8)}
    assert spec.skip == SkipConditions(("cuda",), (8, 0), ("triton.language",), 2.0)


@pytest.mark.parametrize(("change", "field", "message"), [
    ({"kernel": "x"}, "kernel", "unknown key; valid keys: name, description, module"),
    ({"name": None}, "name", "must be a string, got NoneType"),
    ({"name": "Sax Py"}, "name", "is not a usable workload name"),
    ({"module": "os; import sys"}, "module", "is not a module name"),
    ({"reference": "ref()"}, "reference", "is not a function name or module:function"),
    ({"params": {"n": "64"}}, "params.n", "must be a number or a boolean, got str"),
    ({"inputs": {"x": {"shape": ["m"]}}}, "inputs.x.shape", "'m' is not an integer parameter; integer "
     "parameters: n"),
    ({"inputs": {"x": {"shape": [4], "size": 3}}}, "inputs.x.size", "unknown key"),
    ({"inputs": {"x": {"shape": [4], "kind": "poisson"}}}, "inputs.x.kind", "not one of normal"),
    ({"inputs": {"x": {"shape": [4], "dtype": "int32"}}}, "inputs.x.dtype", "for kind normal"),
    ({"inputs": {"i": {"shape": [4], "kind": "integers"}}}, "inputs.i.high", "is required for kind integers"),
    ({"outputs": "out"}, "outputs", "non-empty list"),
    ({"profiles": {"smoke": {"m": 1}}}, "profiles.smoke.m", "is not a parameter"),
    ({"profiles": {"smoke": {"n": 1.5}}}, "profiles.smoke.n", "must be a int like the parameter"),
    ({"precisions": ["fp64"]}, "precisions", "must list some of fp32, fp16, bf16"),
    ({"tolerances": {"fp32": {"atol": "tight"}}}, "tolerances.fp32.atol", "must be a number"),
    ({"work": {"units": "Widgets!"}}, "work.units", "'Widgets!' is not a lower-case word"),
    ({"skip": {"when": "torch.cuda.device_count() > 1"}}, "skip.when", "unknown condition; conditions are "
     "declarative facts, never evaluated"),
    ({"skip": {"requires": "cuda and __import__('os').system('id')"}}, "skip.requires",
     "is not one of cuda, cpu (conditions are names, not expressions)"),
    ({"skip": {"requires_module": "os; rm -rf /"}}, "skip.requires_module", "is not a module name"),
    ({"skip": {"min_compute_capability": "8.0 if True else 9.0"}}, "skip.min_compute_capability",
     "is not a version such as 8.0"),
    ({"skip": {"max_memory_gb": "lots"}}, "skip.max_memory_gb", "is not a positive number of GB"),
])
def test_a_bad_file_names_the_file_and_the_field(change, field, message):
    with pytest.raises(BenchSpecError) as caught:
        parse_spec({**GOOD, **change}, PATH)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{PATH}: field {field!r}: ") and message in str(caught.value)


def test_missing_required_keys_are_named():
    with pytest.raises(BenchSpecError, match="field 'reference': is required"):
        parse_spec({k: v for k, v in GOOD.items() if k != "reference"}, PATH)


def test_conditions_are_checked_against_the_cells_device():
    assert SkipConditions(("cuda",)).unmet("cpu") == "bench.yaml requires cuda; this cell runs on cpu"
    assert SkipConditions(("cpu",)).unmet("cpu") == ""
    assert "requires module 'no_such_module_xyz'" in SkipConditions(
        requires_module=("no_such_module_xyz",)).unmet("cpu")
    assert SkipConditions(requires_module=("json",)).unmet("cpu") == ""
    assert "uses up to 1e+06 GB" in SkipConditions(max_memory_gb=1e6).unmet("cpu")
    assert SkipConditions(min_compute_capability=(9, 0)).unmet("cpu") == ""  # a CUDA fact: not for cpu cells
    assert parse_conditions(None) == SkipConditions()


def test_bytes_may_count_the_cells_element_size():
    spec = parse_spec({**GOOD, "work": {"units": "elements", "bytes": [3, "n", "dtype_bytes"]}}, PATH)
    workload = DiscoveredWorkload(spec)
    case = workload.cases(workload.make_params())[0]
    assert workload.work(case, "fp32").bytes_moved == 3 * 64 * 4
    assert workload.work(case, "fp16").bytes_moved == 3 * 64 * 2
    assert workload.work(case, "bf16").bytes_moved == 3 * 64 * 2
