"""``--executor ray`` on a local Ray instance started here (CPU resources and two fake GPUs for scheduling).

Skipped where Ray is not installed (``pip install -e ".[ray]"``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
import uuid

import pytest

from apex_core.registry import Registry
from apex_core.results import Status
from tests.apex_core.isolation_helpers import kill_leftovers, load, processes_with, start_cli, wait_for
from tests.conftest import run_cli

ray = pytest.importorskip("ray", reason="Ray is not installed (the ray extra: pip install -e '.[ray]')")
# Ray starts its processes through subprocess, a fork followed at once by exec, which JAX's at-fork
# hook warns about whenever another test file of this xdist worker imported JAX first
pytestmark = pytest.mark.filterwarnings(r"ignore:os\.fork\(\) was called:RuntimeWarning")

MARKER_ENV = "APEX_BENCH_RAY_TEST_MARKER"
FAST = ["--warmup", "1", "--min-time", "0.05", "--max-time", "0.2", "--no-energy"]
TASK_TITLE = "ray::run_cell_task"
WARM_MARKS_ENV = "APEX_TESTPLUGIN_WARM_MARKS"


@pytest.fixture(scope="module")
def cluster(plugin_site, tmp_path_factory):
    """A local Ray instance: 2 CPUs and 2 fake GPUs; its workers see the test plugin and carry a marker
    (and the folder test-warm-mark's hook writes its marks to)."""
    marker = uuid.uuid4().hex
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(WARM_MARKS_ENV, str(tmp_path_factory.mktemp("warm-marks")))
        patch.syspath_prepend(str(plugin_site))
        patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(plugin_site),
                                                                 os.environ.get("PYTHONPATH")])))
        patch.setenv(MARKER_ENV, marker)
        context = ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
        address = context.address_info["gcs_address"]
        try:
            yield address, marker
        finally:
            ray.shutdown()


def _task_pids(marker: str) -> set[int]:
    """Ray workers of this test's instance that are running a cell's task now."""
    pids = set()
    for pid in processes_with(marker):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as handle:
            if handle.read().startswith(TASK_TITLE.encode()):
                pids.add(pid)
    return pids


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_address_is_a_one_line_usage_error(tmp_path):
    port = _free_port()
    started = time.monotonic()
    result = run_cli(["--device", "cpu", "--workloads", "tilepack", "--backends", "torch-reference",
                      "--executor", "ray", "--ray-address", f"127.0.0.1:{port}", "--output-json", "r.json",
                      "--output-md", "r.md"], cwd=tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().startswith(f"apex-bench: error: --ray-address 127.0.0.1:{port}: no Ray "
                                            "cluster reachable there")
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "r.json").exists()
    assert time.monotonic() - started < 60


def test_a_cluster_without_gpus_refuses_cuda_before_any_cell(tmp_path):
    result = run_cli(["--device", "cuda", "--workloads", "tilepack", "--backends", "torch-reference",
                      "--executor", "ray", "--output-json", "r.json", "--output-md", "r.md"], cwd=tmp_path,
                     env={"RAY_ADDRESS": ""}, timeout=180)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if line.startswith("apex-bench")]
    assert len(lines) == 1
    assert lines[0].startswith("apex-bench: error: --executor ray: the Ray cluster at the local Ray instance "
                               "has no GPUs (CPU ")
    assert lines[0].endswith("), and --device cuda gives each cell's task one")
    assert not (tmp_path / "r.json").exists()


@pytest.mark.slow
def test_cells_run_as_tasks_and_stream_into_one_report(tmp_path, cluster):
    address, _marker = cluster
    result = run_cli(["--device", "cpu", "--workloads", "test-scale", "--backends",
                      "test-working,test-wrong,test-crash", *FAST, "--executor", "ray", "--ray-address",
                      address, "--output-json", "r.json", "--output-md", "r.md"], cwd=tmp_path, timeout=300)
    assert result.returncode == 1, result.stderr + result.stdout
    record = load(tmp_path / "r.json")
    rows = {b["backend"]: b for b in record["benchmarks"]}
    assert record["status"] == "complete"
    assert {k: v["status"] for k, v in rows.items()} == {"test-working": "ok", "test-wrong": "incorrect",
                                                          "test-crash": "crashed"}
    assert rows["test-crash"]["reason"].startswith("worker killed by signal SIGSEGV")  # isolated on the node
    host = socket.gethostname()
    assert all(row["metadata"]["executor_node"] == host for row in rows.values())
    assert all(row["wait_time_s"] is not None for row in rows.values())
    nodes = record["environment"]["ray"]["nodes"]
    assert list(nodes) == [host] and nodes[host]["torch"] == record["environment"]["torch"]
    assert "Traceback" not in result.stderr


def test_warm_tasks_build_each_cell_before_its_measuring_task_runs_it(tmp_path, cluster):
    address, _marker = cluster
    backends = "test-warm-mark,test-working"
    result = run_cli(["--device", "cpu", "--workloads", "test-scale", "--backends", backends, *FAST,
                      # three warm tasks on the one CPU the measuring task leaves: a third each
                      "--executor", "ray", "--ray-address", address, "--build-workers", "3",
                      "--output-json", "r.json", "--output-md", "r.md"], cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr + result.stdout
    record = load(tmp_path / "r.json")
    warmed = [b for b in record["benchmarks"] if b["backend"] == "test-warm-mark"]
    assert warmed and all(b["status"] == "ok" for b in record["benchmarks"])
    for row in warmed:
        assert row["metadata"]["prebuild"]["state"] == "warmed", row["metadata"]
        # built by a builder process of a warm task, before the measuring worker's prepare
        assert row["metadata"]["warmed_by"] not in (None, row["metadata"]["worker"])
        assert row["warm_time_s"] is not None and row["warm_time_s"] >= 0
    assert all("prebuild" not in b["metadata"] for b in record["benchmarks"] if b["backend"] == "test-working")


@pytest.mark.slow
def test_fake_gpus_give_each_task_one_card_and_never_two_cells_at_once(cluster):
    from apex_core.plan import build_plan
    from apex_core.running.ray_executor import RayExecutor
    from apex_core.running.runner import run_plan
    from apex_core.timing import TimingOptions

    registry = Registry.discover()
    timing = TimingOptions(warmup=1, min_time_s=0.2, max_time_s=0.4, energy=False)
    plan = build_plan(registry, workloads=["test-scale", "test-spin"], backends=["test-working", "test-syncs"],
                      device="cpu", dtypes=("fp32",), timing=timing)
    executor = RayExecutor(cluster[0], "cpu", task_options={"num_gpus": 1})  # CPU cells on fake GPUs
    executor.connect()
    report = run_plan(plan, registry, environment={"device": "cpu"}, executor=executor)
    assert report.status == "complete" and [c.status for c in report.cells] == [Status.OK] * 4
    by_card: dict[int, list[tuple[float, float]]] = {}
    for cell in report.cells:
        assert cell.device_info is not None and cell.device_info.index in (0, 1)
        by_card.setdefault(cell.device_info.index, []).append((cell.wait_time_s, cell.wait_time_s
                                                                + cell.wall_time_s))
    for spans in by_card.values():
        spans.sort()
        assert all(end <= start for (_s, end), (start, _e) in zip(spans, spans[1:], strict=False))
    assert sum(use.cells for use in report.devices) == 4


def _wait_for_new_task(marker: str, seen: set[int], seconds: float = 120) -> int:
    found: list[int] = []

    def appeared() -> bool:
        found[:] = sorted(_task_pids(marker) - seen)
        return bool(found)

    wait_for(appeared, seconds, "a cell's Ray task")
    return found[0]


def _kill_task(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize("kills", [1, 2])
def test_a_task_lost_once_is_retried_and_lost_twice_is_crashed(tmp_path, cluster, kills):
    address, marker = cluster
    process = start_cli(["--device", "cpu", "--workloads", "test-scale", "--backends", "test-hang",
                         "--dtype", "fp32", "--timeout", "8", *FAST, "--executor", "ray", "--ray-address",
                         address, "--output-json", "r.json", "--output-md", "r.md"], tmp_path, {})
    try:
        seen: set[int] = set()
        for _ in range(kills):
            pid = _wait_for_new_task(marker, seen)
            time.sleep(1.0)  # the task has started its cell
            seen.add(pid)
            _kill_task(pid)
        _out, err = process.communicate(timeout=240)
    finally:
        kill_leftovers(process, "no-marker-" + marker)
    (row,) = load(tmp_path / "r.json")["benchmarks"]
    if kills == 1:  # the retry ran the cell: it hangs past its timeout as it does locally
        assert row["status"] == "timeout", row["reason"]
        assert row["reason"].startswith("cell ran past the 8 s timeout")
    else:
        assert row["status"] == "crashed", row["reason"]
        assert row["reason"].startswith("the Ray task was lost 2 times (tried again once): ")
    assert process.returncode == 1 and "Traceback" not in err


@pytest.mark.slow
def test_a_killed_driver_leaves_a_valid_partial_report(tmp_path, cluster):
    address, _marker = cluster
    process = start_cli(["--device", "cpu", "--workloads", "test-scale,test-spin", "--backends",
                         "test-working,test-hang", "--dtype", "fp32,bf16", "--timeout", "6", *FAST,
                         "--executor", "ray", "--ray-address", address, "--output-json", "r.json",
                         "--output-md", "r.md"], tmp_path, {})
    report = tmp_path / "r.json"
    try:
        wait_for(lambda: report.exists() and len(load(report)["benchmarks"]) >= 1, 180, "a first cell")
        os.kill(process.pid, signal.SIGKILL)
        process.wait(30)
    finally:
        kill_leftovers(process, "unused-marker")
    record = load(report)  # valid against the schema
    assert record["status"] == "running" and 1 <= len(record["benchmarks"]) < 8
