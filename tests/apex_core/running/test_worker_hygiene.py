"""What a worker gets before it starts (its card, the compile caches), and when it must be replaced."""

from __future__ import annotations

import os
import threading
import time
import types

import pytest

from apex_core.measure import device_health
from apex_core.plan import build_plan
from apex_core.registry import Registry
from apex_core.results import DeviceInfo, Status
from apex_core.running.runner import run_plan
from apex_core.running.workers import WorkerPool, WorkerStartError
from apex_core.timing import TimingOptions
from tests.apex_core.fakes import Axpy, Eager

QUICK = TimingOptions(warmup=1, min_iters=3, min_time_s=0.0, max_time_s=0.2, energy=False)
SEEN = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")


class EnvReporting(Eager):
    """Writes the variables a worker was started with into the cell's metadata."""

    name = "env-reporting"

    def prepare(self, workload, case, inputs):
        prepared = super().prepare(workload, case, inputs)
        prepared.metadata.update({name: os.environ.get(name) for name in SEEN})
        prepared.metadata["pid"] = os.getpid()
        return prepared


def _plan(registry):
    return build_plan(registry, workloads=["axpy"], backends=["env-reporting"], device="cpu", timing=QUICK)


def test_each_worker_starts_pinned_to_its_card_with_the_runs_caches(tmp_path):
    registry = Registry.from_objects([EnvReporting()], [Axpy()])
    cards = (DeviceInfo(0, "Fake", "GPU-f0"), DeviceInfo(1, "Fake", "GPU-f1"))
    caches = {"TRITON_CACHE_DIR": str(tmp_path / "t"), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "i")}
    report = run_plan(_plan(registry), registry, environment={"device": "cpu"}, devices=cards,
                      worker_env=caches)
    assert [c.status for c in report.cells] == [Status.OK, Status.OK], [c.reason for c in report.cells]
    for cell in report.cells:
        meta = cell.metadata
        assert meta["CUDA_VISIBLE_DEVICES"] == cell.device_info.uuid  # the card that ran it
        assert meta["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
        assert (meta["TRITON_CACHE_DIR"], meta["TORCHINDUCTOR_CACHE_DIR"]) == (caches["TRITON_CACHE_DIR"],
                                                                                  caches["TORCHINDUCTOR_CACHE_DIR"])
    assert [use.device for use in report.devices] == list(cards)
    assert "TRITON_CACHE_DIR" not in os.environ or os.environ["TRITON_CACHE_DIR"] != caches["TRITON_CACHE_DIR"]


def test_an_inline_run_sets_the_caches_only_while_it_runs(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    registry = Registry.from_objects([EnvReporting()], [Axpy()])
    report = run_plan(_plan(registry), registry, isolation="inline", environment={"device": "cpu"},
                      worker_env={"TRITON_CACHE_DIR": str(tmp_path)})
    assert report.cells[0].metadata["TRITON_CACHE_DIR"] == str(tmp_path)
    assert "TRITON_CACHE_DIR" not in os.environ


def test_a_worker_whose_gpu_fails_the_self_test_does_not_start():
    pool = WorkerPool(self_test=True)  # no GPU here: the self-test fails as on a broken card
    try:
        with pytest.raises(WorkerStartError, match="the GPU failed the worker's self-test: no CUDA device"):
            pool.ensure_started()
    finally:
        pool.close()


def _fake_cuda(monkeypatch, allocated_mb: float, sync_error: Exception | None = None):
    import torch

    def synchronize():
        if sync_error is not None:
            raise sync_error

    fake = types.SimpleNamespace(is_initialized=lambda: True, synchronize=synchronize,
                                 memory_allocated=lambda: int(allocated_mb * 2**20))
    monkeypatch.setattr(torch, "cuda", fake)


def test_a_cell_that_leaks_device_memory_or_leaves_a_cuda_error_makes_its_worker_go(monkeypatch):
    # torch.cuda replaced by a fake: no GPU here (the check itself is what is tested)
    _fake_cuda(monkeypatch, allocated_mb=900.0)
    assert device_health.check_after_cell("cuda", 100.0)[0].startswith("the cell left 800 MB of device memory")
    assert device_health.check_after_cell("cuda", 800.0)[0] == ""  # within the limit
    monkeypatch.setenv(device_health.LEAK_LIMIT_ENV, "10")
    assert device_health.check_after_cell("cuda", 800.0)[0].startswith("the cell left 100 MB")
    _fake_cuda(monkeypatch, allocated_mb=0.0, sync_error=RuntimeError("CUDA error: an illegal memory access"))
    assert device_health.check_after_cell("cuda", 0.0)[0] == (
        "the CUDA context reports an error after the cell (RuntimeError: CUDA error: an illegal memory access)")
    assert device_health.check_after_cell("cpu", None)[0] == ""


def test_every_cell_starts_with_torchs_cached_device_blocks_given_back(monkeypatch):
    import torch

    released = []
    fake = types.SimpleNamespace(is_initialized=lambda: True, empty_cache=lambda: released.append("cuda"))
    monkeypatch.setattr(torch, "cuda", fake)
    device_health.release_cached_blocks("cpu")
    assert released == []  # nothing to give back off CUDA, and CUDA is not touched
    device_health.release_cached_blocks("cuda")
    assert released == ["cuda"]
    fake.is_initialized = lambda: False  # a worker whose CUDA is not started yet: left alone
    device_health.release_cached_blocks("cuda")
    assert released == ["cuda"]


def test_execute_cell_gives_the_cached_blocks_back_before_anything_of_the_cell_runs(monkeypatch):
    from apex_core.measure import cell as cell_module
    from apex_core.measure.cell import CellSpec, execute_cell
    from apex_core.timing import TimingOptions
    from tests.apex_core.fakes import Axpy, Eager

    order = []
    monkeypatch.setattr(cell_module, "release_cached_blocks", lambda device: order.append(("release", device)))
    workload = Axpy()
    shipped_make_inputs = workload.make_inputs

    def make_inputs(*args, **kwargs):
        order.append(("inputs",))
        return shipped_make_inputs(*args, **kwargs)

    monkeypatch.setattr(workload, "make_inputs", make_inputs)
    spec = CellSpec("axpy", "small", "eager", "fp32", "cpu", {"n": 8}, 0,
                    TimingOptions(warmup=1, min_iters=2, min_time_s=0.0, max_time_s=0.05))
    result = execute_cell(workload, Eager(), spec)
    assert result.status.value == "ok", result.reason
    assert order[0] == ("release", "cpu") and ("inputs",) in order[1:]


def test_the_memory_a_cell_left_is_the_next_cells_starting_point(monkeypatch):
    _fake_cuda(monkeypatch, allocated_mb=300.0)
    assert device_health.check_after_cell("cuda", 100.0) == ("", 300.0)  # 200 MB: within the limit
    reason, after = device_health.check_after_cell("cuda", 0.0)
    assert reason.startswith("the cell left 300 MB") and after == 300.0
    assert device_health.check_after_cell("cpu", None) == ("", None)


def test_a_worker_discarded_by_two_threads_at_once_is_closed_once():
    # a slot's thread discarding the worker that died under it while the run's main thread closes
    # the pools: a second close of the pipe's descriptor could close another file by then
    class SlowToClose:
        def __init__(self) -> None:
            self.closed = 0

        def close(self) -> None:
            self.closed += 1
            time.sleep(0.2)  # the other thread comes in meanwhile

    pool = WorkerPool()
    conn, output = SlowToClose(), SlowToClose()
    pool._conn, pool._output = conn, output
    threads = [threading.Thread(target=pool._discard) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert (conn.closed, output.closed) == (1, 1)
    assert (pool._conn, pool._output) == (None, None)
