"""``--executor ray``: each cell a Ray task on any node of a Ray cluster, results streamed into one report.

Before any cell: Ray must be installed (the ``ray`` extra), the cluster reachable, and,
for ``--device cuda``, hold GPUs of one model; each node's environment is captured by a
task pinned to it (and a node that cannot import apex-bench is found there). Then every
cell becomes a task asking for one GPU (``num_gpus=1``; ``num_cpus=1`` on the CPU), so
Ray never puts two cells on one GPU at once. Results come back as they finish and go
through the run's callback, so the incremental report is written after each, and a
killed driver leaves the report of what had finished. A task lost with its worker or its
node is retried once by Ray; lost again, its cell is ``crashed`` with Ray's reason.
With builders (``--build-workers``, by default one per CPU the measuring tasks leave), each warmable
cell's compile caches are filled by a CPU-only warm task first, and its measuring task
waits for that one: builds run in parallel, measurements alone.
"""

from __future__ import annotations

import contextlib
import logging
import math
import socket
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import attrs

from apex_core.errors import UsageError, describe_exception
from apex_core.results import CellResult, DeviceInfo, DeviceUse, Status
from apex_core.running.cell_path import cell_spec, warmable_cells
from apex_core.running.ray_task import node_environment, run_cell_task, warm_cell_task
from apex_core.running.workers import failed_result

log = logging.getLogger(__name__)

RAY_EXTRA = 'pip install -e ".[ray]"'
# Seconds to reach the cluster's address before ray.init, which itself waits minutes on a dead address.
CONNECT_TIMEOUT_S = 10.0
# Seconds the per-node environment tasks may take (they import torch and load plugins).
NODE_PROBE_TIMEOUT_S = 300.0
# How often the driver wakes while it waits for results (Ctrl-C is handled between waits).
WAIT_POLL_S = 0.5
# Ray retries a task lost with its worker or node this many times before its cell is crashed.
TASK_RETRIES = 1
# the least a warm task asks for, however many run at once: Ray's resolution
_MIN_WARM_TASK_CPUS = 1e-4


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Refuse an address nothing answers on (a TCP connect), before ray.init waits on it for minutes."""
    if address in ("auto", "local"):
        return
    parts = urlsplit(address if "://" in address else f"ray://{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or port is None:
        raise UsageError(f"--ray-address {address!r}: expected HOST:PORT (the head's GCS port, 6379 by "
                         "default), ray://HOST:PORT or auto")
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        raise UsageError(f"--ray-address {address}: no Ray cluster reachable there "
                         f"({exc.strerror or type(exc).__name__})") from None


@attrs.frozen
class ClusterFacts:
    """What the driver learnt about the cluster before any cell: resources and each node's environment."""

    address: str
    resources: dict[str, float]
    nodes: dict[str, dict[str, Any]]  # host -> environment

    def gpu_models(self) -> list[str]:
        return sorted({card["name"] for env in self.nodes.values() for card in env.get("gpus", [])})


class RayExecutor:
    """Runs cells as Ray tasks; ``connect`` does every check that must pass before any cell."""

    def __init__(self, address: str | None, device: str, *,
                 task_options: Mapping[str, Any] | None = None,
                 init_options: Mapping[str, Any] | None = None, build_workers: int = 0) -> None:
        self.address = address
        self.device = device
        # warm tasks that may fill compile caches at once, ahead of the measuring tasks
        self.build_workers = build_workers
        # the resources one cell's task asks for; tests may schedule CPU cells on fake GPUs
        self.task_options = dict(task_options) if task_options is not None else (
            {"num_gpus": 1} if device == "cuda" else {"num_cpus": 1})
        self.init_options = dict(init_options or {})
        self.facts: ClusterFacts | None = None
        self._ray: Any = None
        self._started_ray = False

    def connect(self) -> ClusterFacts:
        """Reach the cluster and check it can run this plan; every failure is a one-line UsageError."""
        try:
            import ray
        except ImportError:
            raise UsageError(f"--executor ray needs Ray, which is not installed here: {RAY_EXTRA} "
                             "(the ray extra)") from None
        if self.address:
            check_reachable(self.address)
        if not ray.is_initialized():
            try:
                ray.init(address=self.address or None, log_to_driver=False, logging_level=logging.WARNING,
                         **self.init_options)
            except Exception as exc:
                where = self.address or "a new local instance"
                raise UsageError(f"--executor ray: cannot connect to the Ray cluster at {where} "
                                 f"({describe_exception(exc)})") from None
            self._started_ray = True
        self._ray = ray
        resources = {k: float(v) for k, v in ray.cluster_resources().items()}
        where = self.address or "the local Ray instance"
        if self.device == "cuda" and resources.get("GPU", 0.0) < 1:
            self.close()
            raise UsageError(f"--executor ray: the Ray cluster at {where} has no GPUs (CPU "
                             f"{resources.get('CPU', 0.0):g}), and --device cuda gives each cell's task one")
        facts = ClusterFacts(where, resources, self._node_environments())
        models = facts.gpu_models()
        if self.device == "cuda" and len(models) > 1:
            self.close()
            raise UsageError(f"--executor ray: the cluster's GPUs are of different models "
                             f"({', '.join(models)}); a report compares cells of one model: use a cluster "
                             "of one model")
        self.facts = facts
        return facts

    def _node_environments(self) -> dict[str, dict[str, Any]]:
        """Each live node's environment, from a task pinned to it."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self._ray
        task = ray.remote(node_environment)
        refs = [task.options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(
            node["NodeID"], soft=False)).remote(self.device) for node in ray.nodes() if node.get("Alive")]
        try:
            envs = ray.get(refs, timeout=NODE_PROBE_TIMEOUT_S)
        except Exception as exc:
            self.close()
            raise UsageError(f"--executor ray: a node cannot run apex-bench ({describe_exception(exc)}); "
                             "every node needs it installed, as the driver has it") from None
        return {env["host"]: env for env in envs}

    def environment(self) -> dict[str, Any]:
        """The report's ``ray`` record, and the GPU model every cell ran on (None on the CPU)."""
        assert self.facts is not None, "connect() first"
        models = self.facts.gpu_models()
        return {"ray": {"address": self.facts.address, "resources": self.facts.resources,
                        "task_options": dict(self.task_options), "nodes": self.facts.nodes},
                "gpu": models[0] if self.device == "cuda" and models else None}

    def _free_cpus(self) -> float:
        """The cluster's CPUs the measuring tasks leave: they hold one per GPU (a task's default),
        one on the CPU."""
        assert self.facts is not None, "connect() first"
        measuring = self.facts.resources.get("GPU", 0.0) if self.device == "cuda" else 1.0
        return self.facts.resources.get("CPU", 1.0) - measuring

    def warm_task_cpus(self) -> float:
        """The CPUs one warm task asks for: an equal share of the free CPUs (``_free_cpus``), so at
        most ``build_workers`` warm tasks run at once. The share may be fractional (Ray counts CPUs
        to 1/10,000); it is rounded down to that."""
        share = math.floor(max(self._free_cpus(), 0.0) / max(1, self.build_workers) * 1e4) / 1e4
        return max(share, _MIN_WARM_TASK_CPUS)

    def default_warm_tasks(self) -> int:
        """``--build-workers`` by default under Ray: one warm task per CPU the measuring tasks
        leave (none on the CPU, where they would take the CPU being timed). Ray's CPU
        accounting keeps them off the measuring tasks' CPUs; on two H200s (32 CPUs) a fresh run
        took 106 s with 10 at once and 78-84 s with every free CPU (docs/perf.md, 2026-11-27)."""
        return max(1, int(self._free_cpus())) if self.device == "cuda" else 0

    def run(self, plan: Any, registry: Any, book: Any, configure_failures: dict[str, str],
            worker_env: dict[str, str], probe_timeout_s: float) -> tuple[DeviceUse, ...]:
        """Submit every cell of ``book`` and record each result as it finishes.

        With ``build_workers``, a warmable cell (its backend has ``warm_caches``) first gets a
        warm task, and its measuring task takes the warm task's result as an argument: Ray
        starts it only once the cell is built, so the GPUs time the ready cells meanwhile
        (build in parallel, measure alone, as ``apex_core.running.prebuild`` does on one host). The
        caches are the node's, so a cell built on one node and measured on another is built
        again there (a cluster sharing one cache folder, or one host, does not).
        """
        if self._ray is None:
            self.connect()
        ray = self._ray

        task = ray.remote(run_cell_task).options(max_retries=TASK_RETRIES, retry_exceptions=False,
                                                 **self.task_options)
        warm, warmable = None, [False] * len(book.cells)
        if self.build_workers:
            warm = ray.remote(warm_cell_task).options(max_retries=TASK_RETRIES, retry_exceptions=False,
                                                      num_cpus=self.warm_task_cpus())
            warmable = warmable_cells(book.cells, registry, configure_failures)
        plan_ref, plugins_ref = ray.put(plan), ray.put(registry.in_memory_blob())
        run_started = time.time()
        pending: dict[Any, int] = {}
        warming: list[Any] = []
        while (index := book.take()) is not None:
            warmed = None
            if warm is not None and warmable[index]:
                warmed = warm.remote(plan_ref, index, plugins_ref, worker_env)
                warming.append(warmed)
            ref = task.remote(plan_ref, index, plugins_ref, configure_failures, worker_env, probe_timeout_s,
                              warmed)
            pending[ref] = index
        cards: Counter[DeviceInfo] = Counter()
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=WAIT_POLL_S)
                for ref in ready:
                    index = pending.pop(ref)
                    result = self._collect(ref, book.cells[index], plan, run_started)
                    if result.device_info is not None:
                        cards[result.device_info] += 1
                    book.finish(index, result)
        except BaseException:
            for ref in [*pending, *warming]:
                with contextlib.suppress(Exception):  # a finished warm task cannot be cancelled
                    ray.cancel(ref, force=True)
            raise
        return tuple(DeviceUse(card, cards[card]) for card in sorted(cards, key=lambda card: card.label))

    def _collect(self, ref: Any, cell: Any, plan: Any, run_started: float) -> CellResult:
        try:
            result, started_wall_s = self._ray.get(ref)
        except Exception as exc:  # the task and its retry were lost (worker or node died)
            reason = (f"the Ray task was lost {TASK_RETRIES + 1} times (tried again once): "
                      f"{describe_exception(exc)}")
            return failed_result(cell_spec(plan, cell), Status.CRASHED, reason[:500], 0.0,
                                 log_text=str(exc))
        return attrs.evolve(result, wait_time_s=max(0.0, started_wall_s - run_started))

    def close(self) -> None:
        """Disconnect (and stop a local instance this executor started)."""
        if self._started_ray and self._ray is not None:  # connect() sets _ray right after starting it
            self._ray.shutdown()
        self._ray, self._started_ray = None, False
