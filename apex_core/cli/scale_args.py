"""The flags that spread a run: --devices, --fresh, --build-workers, --executor, --ray-address.

docs/scale.md says what each does.
"""

from __future__ import annotations

import argparse
from typing import Any

import attrs

from apex_core.errors import UsageError
from apex_core.results import DeviceInfo
from apex_core.running.caches import CompileCaches, compile_caches
from apex_core.running.devices import fake_gpus, host_gpus, parse_devices, select_devices
from apex_core.running.prebuild import default_build_workers
from apex_core.running.ray_executor import RayExecutor


def add_scale_args(parser: argparse.ArgumentParser) -> None:
    scale = parser.add_argument_group("scale", "several GPUs, a Ray cluster and the compile caches "
                                      "(docs/scale.md)")
    scale.add_argument("--devices", metavar="all|0,1,...",
                       help="one worker per named GPU (indices as nvidia-smi lists them), cells shared "
                            "out among them; each cell's report row names its card (cuda only)")
    scale.add_argument("--fresh", action="store_true",
                       help="ignore the persistent Triton and Inductor compile caches (in $APEX_BENCH_CACHE, "
                            "default ~/.cache/apex-bench): build everything in a new empty folder")
    scale.add_argument("--build-workers", type=int, metavar="N",
                       help="builder processes that compile upcoming cells (Triton kernels, torch.compile "
                            "graphs) into the compile caches while each cell is timed alone on its GPU "
                            "(default: min(4 x GPUs, cores/2) with --device cuda, 0 on the CPU or with "
                            "--inline; under --executor ray, warm tasks at once, by default one per CPU of "
                            "the cluster the measuring tasks leave)")
    scale.add_argument("--executor", choices=("local", "ray"), default="local",
                       help="run cells in worker processes here (local, default) or as tasks of a Ray "
                            "cluster (ray; needs the ray extra)")
    scale.add_argument("--ray-address", metavar="ADDR",
                       help="the Ray cluster to use with --executor ray (HOST:PORT, ray://HOST:PORT or auto); "
                            "default: RAY_ADDRESS, else a new local instance")


@attrs.frozen
class ScaleSetup:
    """How a run spreads: the cards it shards over, its compile caches, and an executor (or None)."""

    devices: tuple[DeviceInfo, ...] | None
    caches: CompileCaches
    executor: Any = None
    build_workers: int = 0  # builder processes warming the caches ahead (apex_core.running.prebuild)

    def environment(self) -> dict[str, Any]:
        """What the report's environment says about it (merged into the captured environment)."""
        env: dict[str, Any] = {"compile_cache": self.caches.describe()}
        if self.devices:
            env["devices"] = [attrs.asdict(card) for card in self.devices]
            if fake_gpus() is None:
                env["gpu"] = self.devices[0].name  # one model (select_devices refuses a mix)
            else:
                env["fake_devices"] = True  # APEX_BENCH_FAKE_GPUS: tests only
        if self.executor is not None:
            env.update(self.executor.environment())
        return env

    def close(self) -> None:
        self.caches.cleanup()
        if self.executor is not None:
            self.executor.close()


def resolve_devices(args: Any, device: str) -> tuple[DeviceInfo, ...] | None:
    """The cards ``--devices`` names, checked against this host; None without the flag."""
    if args.devices is None:
        return None
    wanted = parse_devices(args.devices)
    if args.executor == "ray":
        raise UsageError("--devices and --executor ray exclude each other: Ray places each cell on a GPU "
                         "of the cluster itself")
    if args.inline:
        raise UsageError("--devices needs worker processes (one per GPU); drop --inline")
    if device != "cuda" and fake_gpus() is None:
        raise UsageError(f"--devices shards cells over GPUs: it needs --device cuda (got --device {device})")
    return select_devices(wanted, host_gpus())


def resolve_build_workers(args: Any, device: str, gpus: int = 1, cpus: int | None = None,
                          default: int | None = None) -> int:
    """How many builders the run starts: ``--build-workers``, else ``default`` (the Ray
    executor's) or the default for the device, the number of GPUs the run measures on and
    the CPUs it has."""
    wanted = getattr(args, "build_workers", None)
    if wanted is None:
        if args.inline:
            return 0
        return default if default is not None else default_build_workers(device, cpus, gpus=gpus)
    if wanted < 0:
        raise UsageError(f"--build-workers: {wanted} is not a number of processes; give 0 or more")
    if wanted and args.inline:
        raise UsageError("--build-workers starts builder processes beside the workers: drop it with --inline")
    return int(wanted)


def resolve_scale(args: Any, device: str) -> ScaleSetup:
    """Check the scale flags and connect what they name; every problem is a UsageError before any cell."""
    if args.ray_address and args.executor != "ray":
        raise UsageError("--ray-address needs --executor ray")
    devices = resolve_devices(args, device)
    builders = resolve_build_workers(args, device, gpus=len(devices) if devices else 1)
    executor = None
    if args.executor == "ray":
        if args.inline:
            raise UsageError("--executor ray runs cells on the cluster; drop --inline")
        executor = RayExecutor(args.ray_address, device)
        executor.connect()
        # the cluster's CPUs, not this host's: warm tasks run on its nodes
        executor.build_workers = builders = resolve_build_workers(args, device,
                                                                  default=executor.default_warm_tasks())
    try:
        caches = compile_caches(fresh=args.fresh)
    except UsageError:
        if executor is not None:
            executor.close()
        raise
    return ScaleSetup(devices, caches, executor, builders)
