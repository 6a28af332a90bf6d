"""Baseline and report files: every bad input is one line naming the file and the field."""

import copy
import json

import pytest

from apex_core.baseline.emit import emit_baseline
from apex_core.baseline.errors import InputFileError
from apex_core.baseline.io import (
    baseline_record,
    dumps,
    load_baseline,
    load_report,
    read_regular_file,
    write_baseline,
)
from apex_core.errors import UsageError
from tests.apex_core.baseline.conftest import cell, report, write

METRIC = "tilepack/default/torch-reference/fp32/p50_ms"


@pytest.fixture()
def good_baseline(tmp_path, two_cells):
    source = write(tmp_path / "source.json", report(two_cells))
    return baseline_record(emit_baseline(load_report(source)))


def _set(record, path, value):
    target = record
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return record


_DELETE = object()

BAD_BASELINES = [
    (("suite",), _DELETE, "suite", "missing"),
    (("metrics", METRIC, "value_ms"), _DELETE, f"metrics.{METRIC}.value_ms", "missing"),
    (("metrics", METRIC, "value_ms"), "fast", f"metrics.{METRIC}.value_ms", "expected number, got string"),
    (("metrics", METRIC, "max_regression_ratio"), -0.1, f"metrics.{METRIC}.max_regression_ratio",
     "is negative"),
    (("metrics", METRIC, "max_regression_abs_ms"), -1, f"metrics.{METRIC}.max_regression_abs_ms",
     "is negative"),
    (("metrics", METRIC, "max_regression_ratio"), True, f"metrics.{METRIC}.max_regression_ratio",
     "expected number, got boolean"),
    (("metrics", METRIC, "value_ms"), 0, f"metrics.{METRIC}.value_ms", "must be >= 1e-06, got 0"),
    # below the nanosecond a baseline stores, a ratio over the value could overflow to inf
    (("metrics", METRIC, "value_ms"), 1e-300, f"metrics.{METRIC}.value_ms", "must be >= 1e-06, got 1e-300"),
    (("metrics", METRIC, "samples_ms"), [0.1, 2e9], f"metrics.{METRIC}.samples_ms[1]",
     "must be <= 1e+09, got 2000000000.0"),
    (("metrics", METRIC, "ratio"), 0.1, f"metrics.{METRIC}", "unknown field(s) ratio"),
    (("metrics",), {}, "metrics", "is empty"),
    (("metrics", "tilepack/p50"), {"value_ms": 1, "max_regression_ratio": 0, "max_regression_abs_ms": 0},
     "metrics", "is not workload/case/backend/dtype/STAT (STAT one of min_ms, p50_ms"),
    (("schema_version",), 3, "schema_version", "must be one of"),
    (("environment_key", "device"), _DELETE, "environment_key.device", "missing"),
    (("environment_key", "dtypes"), "fp32", "environment_key.dtypes", "expected array"),
]


@pytest.mark.parametrize(("path", "value", "field", "problem"), BAD_BASELINES)
def test_bad_baseline_field(tmp_path, good_baseline, path, value, field, problem):
    target = write(tmp_path / "base.json", _set(copy.deepcopy(good_baseline), path, value))
    with pytest.raises(InputFileError) as info:
        load_baseline(target)
    message = str(info.value)
    assert isinstance(info.value, UsageError)
    assert message.startswith(f"{target}: field {field}: "), message
    assert problem in message
    assert "\n" not in message


@pytest.mark.parametrize(("text", "problem"), [
    ('{"suite": ', "malformed JSON at line 1 column 11"),
    ("", "malformed JSON at line 1 column 1"),
    ('{"value": NaN}', "NaN is not a number JSON allows"),
    # a denormal number is no time, ratio or limit: dividing by one gives inf
    ('{"value": 5e-324}', "5e-324 is subnormal"),
    ('{"value": [0.1, -2.5e-310]}', "-2.5e-310 is subnormal"),
    ('{"value": 1e-400}', "1e-400 is too small for a float"),
    ("[1, 2]", "expected object, got array"),
])
def test_malformed_files(tmp_path, text, problem):
    target = write(tmp_path / "base.json", text)
    for load in (load_baseline, load_report):
        with pytest.raises(InputFileError, match=problem) as info:
            load(target)
        assert str(info.value).startswith(str(target))


def test_missing_file(tmp_path):
    with pytest.raises(InputFileError, match="cannot read: No such file"):
        load_baseline(tmp_path / "absent.json")


BAD_REPORTS = [
    (("benchmarks",), [], "benchmarks", "is empty"),
    (("benchmarks",), _DELETE, "benchmarks", "missing"),
    (("suite",), 3, "suite", "expected string, got integer"),
    (("benchmarks", 0, "stats", "p50_ms"), "slow", "benchmarks[0].stats.p50_ms", "expected number"),
    (("benchmarks", 0, "stats", "p50_ms"), _DELETE, "benchmarks[0].stats.p50_ms", "missing"),
    (("benchmarks", 0, "samples_ms"), [], "benchmarks[0].samples_ms", "should be non-empty"),
    (("benchmarks", 1, "status"), "great", "benchmarks[1].status", "must be one of"),
    (("config", "profile"), _DELETE, "config.profile", "missing"),
    # a week is 6e8 ms: beyond 1e9 a time over a baseline's nanosecond could overflow to inf
    (("benchmarks", 0, "stats", "p50_ms"), 1e300, "benchmarks[0].stats.p50_ms", "must be <= 1e+09, got 1e+300"),
    (("benchmarks", 0, "samples_ms"), [0.2, 1e300], "benchmarks[0].samples_ms[1]", "must be <= 1e+09"),
]


@pytest.mark.parametrize(("path", "value", "field", "problem"), BAD_REPORTS)
def test_bad_report_field(tmp_path, two_cells, path, value, field, problem):
    target = write(tmp_path / "report.json", _set(report(two_cells), path, value))
    with pytest.raises(InputFileError) as info:
        load_report(target)
    assert str(info.value).startswith(f"{target}: field {field}: "), str(info.value)
    assert problem in str(info.value)


def test_report_fields_the_gate_does_not_read_may_change(tmp_path, two_cells):
    record = report(two_cells)
    record["replay"] = {"anything": "new"}
    del record["status"]
    assert len(load_report(write(tmp_path / "r.json", record)).cells) == 2


def test_round_trip_keeps_samples_on_one_line(tmp_path, good_baseline):
    first = tmp_path / "a.json"
    write_baseline(first, load_baseline(write(tmp_path / "b.json", good_baseline)))
    assert json.loads(first.read_text()) == good_baseline
    sample_lines = [line for line in first.read_text().splitlines() if '"samples_ms"' in line]
    assert len(sample_lines) == 2 and sample_lines[0].rstrip().endswith("]")


def test_dumps_leaves_string_lists_alone():
    assert '"fp32"' in dumps({"dtypes": ["fp32"], "x": [1, 2.5, -3e-05]})
    assert "[1, 2.5, -3e-05]" in dumps({"x": [1, 2.5, -3e-05]})


def test_cell_without_status_ok_needs_no_samples(tmp_path):
    record = report([cell(status="crashed", reason="SIGSEGV")])
    assert load_report(write(tmp_path / "r.json", record)).cells[0].status == "crashed"


def test_a_denormal_anywhere_in_a_report_names_the_file(tmp_path, two_cells):
    record = report(two_cells)
    record["benchmarks"][0]["samples_ms"][7] = 5e-324
    target = write(tmp_path / "report.json", json.dumps(record))
    assert "5e-324" in target.read_text()
    with pytest.raises(InputFileError) as info:
        load_report(target)
    assert str(info.value) == (f"{target}: malformed JSON: 5e-324 is subnormal (below 2.225e-308): "
                               "no time, ratio or limit is that small")


def test_zero_and_the_smallest_normal_float_are_still_numbers(tmp_path, two_cells):
    record = report(two_cells)
    record["benchmarks"][0]["samples_ms"][:2] = [0.0, 2.2250738585072014e-308]  # GPU samples net of the floor
    loaded = load_report(write(tmp_path / "report.json", json.dumps(record)))
    assert loaded.cells[0].samples_ms[:2] == (0.0, 2.2250738585072014e-308)


def test_the_schema_minimum_of_value_ms_is_the_resolution_baselines_are_written_at():
    from apex_core.baseline.io import MIN_BASELINE_MS, _round_ms, baseline_schema

    assert baseline_schema()["$defs"]["metric"]["properties"]["value_ms"]["minimum"] == MIN_BASELINE_MS
    assert _round_ms(MIN_BASELINE_MS) == MIN_BASELINE_MS and _round_ms(MIN_BASELINE_MS / 2.1) == 0


def test_a_file_past_the_size_cap_is_refused_before_it_is_parsed(tmp_path):
    path = tmp_path / "big.json"
    path.write_text('{"a": "' + "x" * 100 + '"}')
    with pytest.raises(InputFileError, match=r"big\.json: 109 bytes: larger than any report or baseline"):
        read_regular_file(path, max_bytes=64)
    assert read_regular_file(path, max_bytes=109) == path.read_bytes()
