"""``--devices`` end to end on the CPU: two workers on two fake cards (APEX_BENCH_FAKE_GPUS), one report."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from apex_core.running.devices import FAKE_GPUS_ENV
from tests.apex_core.isolation_helpers import (
    commands_with,
    kill_leftovers,
    load,
    signal_run,
    start_cli,
    wait_for,
    wait_until_gone,
)
from tests.conftest import run_cli

FAKE = {FAKE_GPUS_ENV: "Fake GPU|GPU-fake-0;Fake GPU|GPU-fake-1"}
ARGS = ["--device", "cpu", "--workloads", "test-scale,test-spin", "--backends", "test-working,test-wrong",
        "--dtype", "fp32,bf16", "--warmup", "1", "--min-time", "1.0", "--max-time", "1.2",
        "--no-energy"]
# long enough that cells on the two workers overlap in time, short enough for CI: each call
# of test-working sleeps 1 ms, so its cells sample for their full second instead of reaching
# the sample cap at once, and each card's cells outlast the gap between its worker's start
# and the other's on a loaded 2-core machine (a slot starts its worker before its first cell)
SLOW_CALLS = {"APEX_TESTPLUGIN_DELAY_S": "0.001"}


def _rows(path):
    record = load(path)
    return record, {(b["workload"], b["backend"], b["dtype"]): b for b in record["benchmarks"]}


@pytest.mark.slow
def test_two_workers_share_the_cells_and_agree_with_one_worker(tmp_path, plugin_on_path):
    env = {**FAKE, **SLOW_CALLS, "APEX_BENCH_CACHE": str(tmp_path / "cache")}
    one = run_cli([*ARGS, "--output-json", "one.json", "--output-md", "one.md"], cwd=tmp_path, env=env,
                  timeout=300)
    two = run_cli([*ARGS, "--devices", "all", "--output-json", "two.json", "--output-md", "two.md"],
                  cwd=tmp_path, env=env, timeout=300)
    assert one.returncode == two.returncode == 1, two.stderr  # test-wrong is incorrect: exit 1
    single, single_rows = _rows(tmp_path / "one.json")
    sharded, sharded_rows = _rows(tmp_path / "two.json")
    assert sharded["status"] == "complete" and list(sharded_rows) == list(single_rows)  # plan order
    for key, row in sharded_rows.items():
        alone = single_rows[key]
        assert (row["status"], row["reason"]) == (alone["status"], alone["reason"]), key
        assert [a["passed"] for a in row["accuracy"]] == [a["passed"] for a in alone["accuracy"]]
        assert row["device_name"] == "Fake GPU" and row["device_uuid"] == f"GPU-fake-{row['device_index']}"
        assert row["wait_time_s"] >= 0 and "device_index" not in alone
    assert {d["index"]: d["cells"] > 0 for d in sharded["devices"]} == {0: True, 1: True}
    assert sum(d["cells"] for d in sharded["devices"]) == len(sharded_rows)
    spans = {}
    for row in sharded_rows.values():  # [taken, taken + its time in the worker]
        spans.setdefault(row["device_index"], []).append((row["wait_time_s"],
                                                          row["wait_time_s"] + row["wall_time_s"]))
    for intervals in spans.values():  # one card: one cell at a time
        intervals.sort()
        assert all(end <= next_start + 0.05 for (_s, end), (next_start, _e) in zip(intervals, intervals[1:],
                                                                                  strict=False))
    assert any(s0 < e1 and s1 < e0 for s0, e0 in spans[0] for s1, e1 in spans[1])  # the cards overlapped
    assert sharded["environment"]["compile_cache"]["root"] == str(tmp_path / "cache")
    assert sharded["environment"]["fake_devices"] is True
    text = (tmp_path / "two.md").read_text()
    assert "@cuda:0" in text and "@cuda:1" in text and "- cuda:1: Fake GPU (GPU-fake-1)" in text


@pytest.mark.parametrize(("args", "env", "message"), [
    (["--devices", "2"], FAKE, "--devices: no GPU 2 on this host; valid: all, 0, 1"),
    (["--devices", "0,0"], FAKE, "a GPU is named twice"),
    (["--devices", "zero"], FAKE, "expected 'all' or a comma list of GPU indices"),
    (["--devices", "0"], {}, "--devices shards cells over GPUs: it needs --device cuda"),
    (["--devices", "0", "--inline"], FAKE, "drop --inline"),
    (["--ray-address", "127.0.0.1:1"], {}, "--ray-address needs --executor ray"),
])
def test_bad_scale_flags_are_one_line_usage_errors_before_any_cell(tmp_path, args, env, message):
    result = run_cli(["--device", "cpu", "--workloads", "tilepack", "--backends", "torch-reference", *args,
                      "--output-json", "r.json", "--output-md", "r.md"], cwd=tmp_path,
                     env=env, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"apex-bench: error: {message}" or message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r.json").exists()


def test_executor_ray_without_ray_names_the_extra(tmp_path, monkeypatch, capsys):
    from apex_core.cli.main import main

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    monkeypatch.chdir(tmp_path)
    code = main(["--device", "cpu", "--workloads", "tilepack", "--backends", "torch-reference",
                 "--executor", "ray"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err == ('apex-bench: error: --executor ray needs Ray, which is not installed here: '
                   'pip install -e ".[ray]" (the ray extra)')


@pytest.mark.slow
def test_fresh_builds_in_a_new_empty_cache_folder_that_goes_away(tmp_path):
    env = {"APEX_BENCH_CACHE": str(tmp_path / "kept")}
    common = ["--device", "cpu", "--workloads", "tilepack", "--backends", "torch-reference", "--warmup", "1",
              "--min-time", "0.02", "--max-time", "0.1", "--output-md", "r.md"]
    kept = run_cli([*common, "--output-json", "kept.json"], cwd=tmp_path, env=env, timeout=300)
    fresh = run_cli([*common, "--fresh", "--output-json", "fresh.json"], cwd=tmp_path, env=env, timeout=300)
    assert kept.returncode == fresh.returncode == 0, fresh.stderr
    kept_cache = load(tmp_path / "kept.json")["environment"]["compile_cache"]
    fresh_cache = load(tmp_path / "fresh.json")["environment"]["compile_cache"]
    assert kept_cache == {"root": str(tmp_path / "kept"), "fresh": False,
                          "dirs": {"TRITON_CACHE_DIR": str(tmp_path / "kept" / "triton"),
                                   "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "kept" / "inductor")}}
    assert fresh_cache["fresh"] is True and fresh_cache["root"] != kept_cache["root"]
    assert fresh_cache["dirs"]["TRITON_CACHE_DIR"].startswith(fresh_cache["root"])
    assert not Path(fresh_cache["root"]).exists() and (tmp_path / "kept").is_dir()


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_a_sharded_run_stops_every_worker_and_keeps_the_report(tmp_path, plugin_on_path,
                                                                              sig, code):
    out = tmp_path / "r.json"
    marker = f"APEX_TEST_SHARDED_{os.getpid()}_{int(sig)}"
    process = start_cli(["--device", "cpu", "--devices", "all", "--workloads", "test-scale,test-spin",
                         "--backends", "test-working,test-spawns-helper", "--timeout", "120", "--warmup", "1",
                         "--min-time", "0.02", "--max-time", "0.1", "--output-json", str(out),
                         "--output-md", str(tmp_path / "r.md")], tmp_path, {marker: "1", **FAKE})
    try:
        wait_for(lambda: out.exists() and len(load(out)["benchmarks"]) >= 1, 120, "the first cell")
        # both hanging cells have started their helpers, one per worker
        wait_for(lambda: commands_with(marker).count("sleep 1000") >= 2, 90, "both helpers' start")
        signal_run(process, sig)
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == code, stderr
        assert "Traceback" not in stderr
        record = load(out)
        assert record["status"] == "interrupted" and 1 <= len(record["benchmarks"]) < 4
        assert wait_until_gone(marker) == []
    finally:
        kill_leftovers(process, marker)
