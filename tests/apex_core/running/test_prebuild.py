"""The builders' bookkeeping and the built-in warm hooks, without starting a process or a GPU."""

from __future__ import annotations

import argparse
import threading
import time
import types

import pytest
import torch

from apex_core.cli.scale_args import resolve_build_workers
from apex_core.errors import UsageError
from apex_core.interfaces import warms_caches
from apex_core.report.manifest import config_sha256
from apex_core.results import CellResult, Status
from apex_core.running.prebuild import BuildAhead, default_build_workers
from apex_core.running.ray_executor import ClusterFacts, RayExecutor
from apex_core.running.warming import NOT_STARTED, WARMED, WarmResult
from tests.apex_core.fakes import Axpy, Eager


class GatedPool:
    """A builder pool that warms a cell once the test opens ``gate`` (no process); ``warming`` is set
    once it has taken one."""

    gate = threading.Event()
    warming = threading.Event()

    def __init__(self, plugins, env, niceness, name):
        self.env, self.niceness, self.killed = env, niceness, False

    def ensure_started(self):
        pass

    def warm(self, request, timeout_s):
        self.warming.set()
        self.gate.wait(10)
        return WarmResult(WARMED, 0.25)

    def kill(self, for_good=False):
        self.killed = for_good

    def close(self, graceful=True):
        pass


def test_a_cell_is_waited_for_while_warming_and_kept_from_builders_once_claimed():
    cells = [object(), object(), object()]
    GatedPool.gate.clear()
    ahead = BuildAhead(cells, [True, False, True], lambda index: index, 1, [{"A": "1"}], 5.0,
                       make_pool=GatedPool)
    ahead.start()
    assert ahead.claim(cells[1]) is None  # no hook: nothing to say about it
    # the builder took cell 0 at once and is held by the gate: cell 2 is the worker's own
    assert ahead.claim(cells[2]).result.state == NOT_STARTED
    GatedPool.gate.set()
    got = ahead.claim(cells[0])
    assert got.result == WarmResult(WARMED, 0.25) and got.waited_s >= 0
    ahead.close()
    assert [(p.env, p.niceness, p.killed) for p in ahead.pools] == [({"A": "1"}, 10, True)]
    stamped = got.stamp(CellResult("axpy", "small", "b", "fp32", "cpu", Status.OK, metadata={"k": 1}))
    assert stamped.warm_time_s == 0.25
    assert stamped.metadata == {"k": 1, "prebuild": {"state": "warmed", "waited_s": round(got.waited_s, 3)}}


def test_a_cell_counts_as_building_until_its_builder_finishes_or_its_worker_claims_it():
    cells = [object(), object(), object()]
    GatedPool.gate.clear()
    ahead = BuildAhead(cells, [True, False, True], lambda index: index, 1, [{}], 5.0, make_pool=GatedPool)
    ahead.start()
    assert not ahead.building(1)  # no hook: ready at once
    assert ahead.building(0) and ahead.building(2)  # being warmed, and queued behind it
    GatedPool.gate.set()
    ahead.claim(cells[0])  # waits for the builder
    assert not ahead.building(0)
    ahead.close()
    assert not ahead.building(2)  # the builders are gone: nothing is worth waiting for


def test_a_slot_waiting_for_a_build_stops_waiting_when_the_run_stops():
    # a Ctrl-C stops the run (CellBook.stopping) before close() stops the builders: a slot that
    # waited the build out would outlive the wait for the slots and meet the run's teardown
    cells = [object()]
    GatedPool.gate.clear()
    GatedPool.warming.clear()
    run_stopping = threading.Event()
    ahead = BuildAhead(cells, [True], lambda index: index, 1, [{}], 5.0, make_pool=GatedPool,
                       run_stopping=run_stopping)
    ahead.start()
    assert GatedPool.warming.wait(10)  # the builder has taken the cell
    threading.Timer(0.2, run_stopping.set).start()
    started = time.perf_counter()
    got = ahead.claim(cells[0])
    assert time.perf_counter() - started < 5  # not the builder's 10 s (room for a loaded CI machine)
    assert got.result.state == NOT_STARTED
    GatedPool.gate.set()
    ahead.close()


def test_no_builders_no_process_and_no_record():
    ahead = BuildAhead([object()], [True], lambda index: index, 0, [{}], 5.0, make_pool=GatedPool)
    ahead.start()
    assert ahead.pools == [] and ahead.claim(object()) is None
    ahead.close()


def test_the_default_number_of_builders():
    assert default_build_workers("cpu", 64) == 0  # builders would share the CPU being timed
    assert default_build_workers("cuda", 16) == 4
    assert default_build_workers("cuda", 2) == 1
    assert default_build_workers("cuda", 1) == 0
    assert default_build_workers("cuda", 32, gpus=2) == 8  # two GPUs empty the queue twice as fast
    assert default_build_workers("cuda", 12, gpus=2) == 6  # still at most half the cores


def _args(**given):
    return argparse.Namespace(**{"build_workers": None, "inline": False, "executor": "local", **given})


def test_ray_warm_tasks_share_the_cpus_the_measuring_tasks_leave():
    executor = RayExecutor(None, "cuda")
    executor.facts = ClusterFacts("local", {"CPU": 32.0, "GPU": 2.0}, {})
    assert executor.default_warm_tasks() == 30  # one per CPU the two measuring tasks leave
    for wanted in (30, 16, 7, 1):
        executor.build_workers = wanted
        share = executor.warm_task_cpus()
        assert int(30 // share) == wanted, (wanted, share)  # exactly that many fit at once
    executor.build_workers = 64  # more than the CPUs: fractional shares, still 64 at once
    assert executor.warm_task_cpus() == pytest.approx(0.4687) and int(30 // 0.4687) == 64
    on_cpu = RayExecutor(None, "cpu")
    on_cpu.facts = ClusterFacts("local", {"CPU": 8.0}, {})
    assert on_cpu.default_warm_tasks() == 0  # they would share the CPU being timed


def test_build_workers_flag_is_checked():
    assert resolve_build_workers(_args(), "cpu") == 0
    assert resolve_build_workers(_args(build_workers=3), "cpu") == 3
    assert resolve_build_workers(_args(inline=True), "cuda") == 0  # off where cells run in-process
    # the device's default for a given count of GPUs and CPUs (the local one)
    assert resolve_build_workers(_args(executor="ray"), "cuda", gpus=2, cpus=32) == 8
    assert resolve_build_workers(_args(build_workers=2, executor="ray"), "cuda", gpus=2, cpus=32) == 2
    # the Ray executor's own default (RayExecutor.default_warm_tasks) wins over the local one
    assert resolve_build_workers(_args(executor="ray"), "cuda", default=30) == 30
    assert resolve_build_workers(_args(build_workers=3, executor="ray"), "cuda", default=30) == 3
    with pytest.raises(UsageError, match="drop it with --inline"):
        resolve_build_workers(_args(build_workers=2, inline=True), "cuda")
    with pytest.raises(UsageError, match="-1 is not a number of processes"):
        resolve_build_workers(_args(build_workers=-1), "cuda")


def test_builders_do_not_change_the_replay_config_hash():
    config = {"backends": ["triton"], "seed": 0}
    assert config_sha256({**config, "build_workers": 4}) == config_sha256(config)


def test_only_backends_with_the_hook_are_warmed():
    from adapters.torch_compile import TorchCompileBackend
    from adapters.torch_reference import TorchReferenceBackend
    from adapters.triton_backend import TritonBackend

    assert warms_caches(TritonBackend()) and warms_caches(TorchCompileBackend())
    assert not warms_caches(TorchReferenceBackend()) and not warms_caches(Eager())


def test_the_triton_hook_compiles_each_autotune_config_the_autotuner_would_try(monkeypatch):
    triton = pytest.importorskip("triton")
    import triton.language as tl

    from adapters.triton_warm import compile_launches

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)

    def drop_big(configs, nargs, **kwargs):  # the autotuner's own pruning is applied
        assert nargs["n"] == 64 and kwargs["grid"] == (1,)
        return [c for c in configs if c.kwargs["BLOCK"] < 256]

    @triton.autotune([triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((32, 1), (64, 2), (256, 4))],
                     key=["n"], prune_configs_by={"early_config_prune": drop_big})
    @triton.jit
    def scale(x_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        tl.store(x_ptr + offsets, tl.load(x_ptr + offsets) * SCALE, mask=offsets < n)

    compiled = []
    # stands in for Triton's compiler: only the warm-up path may be taken, never a launch
    monkeypatch.setattr(scale.fn, "run", lambda *args, grid, warmup, **kw: compiled.append((warmup, kw)))
    launch = types.SimpleNamespace(kernel=scale, args=(torch.zeros(64), 64), grid=(1,), meta={"SCALE": 2})
    assert compile_launches([launch]) == (2, 0)
    assert sorted((warmup, kw["BLOCK"], kw["num_warps"], kw["SCALE"]) for warmup, kw in compiled) == \
        [(True, 32, 1, 2), (True, 64, 2, 2)]
    assert scale.cache == {}  # nothing was tuned


def test_the_torch_compile_hook_compiles_the_graph_and_never_runs_it(monkeypatch, tmp_path):
    from adapters.torch_compile import TorchCompileBackend

    # dynamo sets this in the process when it is unset: keep it from the later tests' child processes
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))

    compiled = []

    def compile_only(self, graph, example_inputs, **_kwargs):  # stands in for Inductor (seconds on CPU)
        compiled.append(len(example_inputs))
        return graph.forward

    monkeypatch.setattr(torch._TorchCompileInductorWrapper, "__call__", compile_only)
    workload = Axpy()
    case = workload.cases(workload.make_params())[0]
    inputs = workload.make_inputs(case, "cpu", torch.float32, 0)
    assert TorchCompileBackend().warm_caches(workload, case, inputs) is None
    assert compiled == [2]
    reason = TorchCompileBackend("max-autotune").warm_caches(workload, case, inputs)
    assert reason is not None and "max_autotune" in reason and compiled == [2]
