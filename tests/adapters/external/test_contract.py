"""The result an external command prints: parsing, the shipped schema, and the timing made of it."""

from __future__ import annotations

import json

import jsonschema
import pytest

from adapters.external.contract import ExternalCommandError, parse_result, result_schema, timing_from_result

GOOD = {"status": "ok", "latency_ms": {"mean": 1.2, "p50": 1.0, "p95": 2.0, "min": 0.9, "max": 3.0},
        "throughput_tokens_per_sec": 1e6, "peak_memory_bytes": 4096}


def test_the_shipped_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(result_schema())


def test_the_last_line_may_follow_progress_output():
    assert parse_result("compiling...\n" + json.dumps(GOOD) + "\n", "ext:t") == GOOD


@pytest.mark.parametrize(("stdout", "message"), [
    ("", "printed nothing on stdout"),
    ("Segmentation fault", "printed no JSON object on stdout: 'Segmentation fault'"),
    ("[1, 2]", "printed JSON list, expected an object"),
    (json.dumps({**GOOD, "status": "done"}), "at status: 'done' is not one of"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "latency_ms"}), "'latency_ms' is a required property"),
    (json.dumps({**GOOD, "peak_memory_bytes": -1}), "at peak_memory_bytes"),
    (json.dumps({"status": "error"}), "'reason' is a required property"),
    ('{"status": "ok", "latency_ms": {"mean": NaN}}', "printed no JSON object"),
    (json.dumps({**GOOD, "latency_ms": {**GOOD["latency_ms"], "p50": 5.0}}), "latencies out of order"),
])
def test_results_that_break_the_contract_are_refused(stdout, message):
    with pytest.raises(ExternalCommandError, match="^ext:t ") as caught:
        parse_result(stdout, "ext:t")
    assert message in str(caught.value)


def test_long_junk_is_cut_to_an_excerpt_of_its_end():
    with pytest.raises(ExternalCommandError) as caught:
        parse_result("x" * 10_000 + " the end", "ext:t")
    assert len(str(caught.value)) < 400 and str(caught.value).endswith("the end'")


def test_samples_give_our_own_statistics():
    timing = timing_from_result({**GOOD, "samples_ms": [1.0, 2.0, 3.0, 4.0]}, 10)
    assert timing.method == "external" and timing.samples_ms == (1.0, 2.0, 3.0, 4.0)
    assert (timing.stats.n, timing.stats.p50, timing.stats.mean) == (4, 2.5, 2.5)


def test_a_summary_keeps_the_tools_numbers_and_says_what_is_unknown():
    timing = timing_from_result(GOOD, 10)
    assert (timing.stats.n, timing.stats.p50, timing.stats.p95, timing.stats.mean) == (10, 1.0, 2.0, 1.2)
    assert timing.stats.p99 == 3.0 and "std and cv unknown" in timing.note
