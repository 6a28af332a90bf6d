"""The node's side of the Ray executor: one cell per task, run in a worker process on that node.

A Ray task does what a slot does on one host (``apex_core.running.cell_path``): it probes the
backend and runs the cell in a ``WorkerPool`` worker, so a cell that crashes or hangs is
recorded as ``crashed`` or ``timeout`` exactly as it is locally, and the Ray worker
itself survives it. A warm task does what a local builder does, in a builder process.
The pool, the registry and the probes are kept in the Ray worker process between tasks
(per GPU and settings), so a second cell on one node does not start Python and load
every plugin again.
"""

from __future__ import annotations

import hashlib
import json
import socket
import time
from typing import Any

import attrs

from apex_core.errors import describe_exception
from apex_core.measure.l2_flush import flush_method
from apex_core.results import CellResult, DeviceInfo, Status

# What a Ray worker process keeps between tasks: key -> (registry, pool, probes)
_KEPT: dict[tuple[Any, ...], tuple[Any, Any, Any]] = {}
# A Ray worker's builder processes between warm tasks: (plugins digest, env) -> WorkerPool
_BUILDERS: dict[tuple[Any, ...], Any] = {}


def node_environment(device: str) -> dict[str, Any]:
    """This node's environment record (no device measurement): versions, CPU, and its GPUs."""
    from apex_core.measure.environment import capture_environment
    from apex_core.running.devices import host_gpus

    env = capture_environment("cpu", measure_device=False)  # no CUDA context for a listing
    gpus = host_gpus() if device == "cuda" else ()
    env.update(device=device, host=socket.gethostname(), gpus=[attrs.asdict(card) for card in gpus],
               gpu=gpus[0].name if gpus else None)
    if device == "cuda":
        env["l2_flush"] = flush_method(try_reset=False)
    return env


def _kept(plugins: bytes, env: dict[str, str], probe_timeout_s: float, plan: Any,
          self_test: bool) -> tuple[Any, Any, Any]:
    """The registry, worker pool and probes this Ray worker keeps for these settings (made once)."""
    from apex_core.registry import Registry
    from apex_core.running.probing import Probes
    from apex_core.running.workers import WorkerPool, pool_prober

    options = json.dumps(plan.backend_options, sort_keys=True, default=str)  # probes depend on them
    key = (hashlib.sha256(plugins).hexdigest(), tuple(sorted(env.items())), probe_timeout_s, self_test, options)
    if key not in _KEPT:
        registry = Registry.discover()
        registry.add_in_memory(plugins)
        pool = WorkerPool(plugins, env=env, self_test=self_test)  # the blob the registry was just given
        _KEPT[key] = (registry, pool, Probes(registry.backends, pool_prober(pool, probe_timeout_s),
                                             plan.options_for))
    return _KEPT[key]


def _device_info(gpu_ids: list[str], host: str) -> DeviceInfo | None:
    from apex_core.running.devices import host_gpus

    if not gpu_ids:
        return None
    index = int(gpu_ids[0]) if gpu_ids[0].isdigit() else -1
    card = next((c for c in host_gpus() if c.index == index), None)
    return DeviceInfo(index, card.name if card else "", card.uuid if card else "", host)


def warm_cell_task(plan: Any, index: int, plugins: bytes, worker_env: dict[str, str]) -> Any:
    """Fill this node's compile caches for cell ``index`` in a builder process; never raises.

    The task asks Ray for CPUs only: the builder is pinned to one of the node's GPUs (by the
    cell's index) itself, since it needs a card for the compile target and the cell's
    inputs, as a local builder does, while Ray keeps the GPUs for measuring tasks.
    """
    from apex_core.running.cell_path import cell_spec
    from apex_core.running.prebuild import BUILDER_NICENESS
    from apex_core.running.warming import FAILED, WarmRequest, WarmResult
    from apex_core.running.workers import WorkerPool

    try:
        from apex_core.running.devices import host_gpus, pinning_env

        env = dict(worker_env)
        gpus = host_gpus() if plan.device == "cuda" else ()
        if gpus:
            env.update(pinning_env(gpus[index % len(gpus)]))
        key = (hashlib.sha256(plugins).hexdigest(), tuple(sorted(env.items())))
        if key not in _BUILDERS:
            _BUILDERS[key] = WorkerPool(plugins, env=env, niceness=BUILDER_NICENESS, name="apex-bench-builder")
        return _BUILDERS[key].warm(WarmRequest(cell_spec(plan, plan.cells[index])), plan.timeout_s)
    except Exception as exc:  # the measuring task builds the cell itself
        return WarmResult(FAILED, reason=f"on {socket.gethostname()}: {describe_exception(exc)}")


def run_cell_task(plan: Any, index: int, plugins: bytes, configure_failures: dict[str, str],
                  worker_env: dict[str, str], probe_timeout_s: float,
                  warmed: Any = None) -> tuple[CellResult, float]:
    """Probe and run cell ``index`` of ``plan`` on this node, and say when the task started (wall
    clock); never raises for the cell's failures.

    ``warmed`` is the cell's warm task's result (Ray starts this task only once it is in):
    it goes into the cell's record as a local builder's does.
    """
    import ray

    from apex_core.running.cell_path import cell_spec, decide_without_running
    from apex_core.running.workers import failed_result

    started = time.time()
    host = socket.gethostname()
    env = dict(worker_env)
    gpu_ids = [str(gpu) for gpu in ray.get_gpu_ids()]  # none unless the task asked for GPUs
    if gpu_ids:  # the card Ray gave this task, in the order nvidia-smi counts them
        env.update({"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(gpu_ids)})
    registry, pool, probes = _kept(plugins, env, probe_timeout_s, plan,
                                   self_test=plan.device == "cuda" and bool(gpu_ids))
    cell = plan.cells[index]
    try:
        result = decide_without_running(cell, registry, probes, configure_failures)
        if result is None:
            result = pool.run(cell_spec(plan, cell), plan.timeout_s)
            if warmed is not None:
                from apex_core.running.prebuild import Prebuild

                result = Prebuild(warmed).stamp(result)
    except Exception as exc:  # the node cannot run cells at all (a worker that never starts)
        result = failed_result(cell_spec(plan, cell), Status.ERROR, f"on {host}: {describe_exception(exc)}",
                               time.time() - started)
    device = _device_info(gpu_ids, host)
    metadata = {**result.metadata, "executor_node": host}
    return attrs.evolve(result, device_info=device, metadata=metadata), started

