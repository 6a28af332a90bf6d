"""Capture what makes two measurements comparable: hardware, drivers, versions, git state."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

from apex_core.measure.doctor import device_facts
from apex_core.measure.l2_flush import flush_method
from apex_core.measure.telemetry import device_handle, start_nvml


def package_version(name: str) -> str | None:
    """Installed version of a distribution without importing it (None if absent)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def command_output(args: list[str], cwd: str | None = None, timeout_s: float = 10) -> str | None:
    """What a command printed, stripped; None when it cannot run, fails or outlasts ``timeout_s``."""
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s, cwd=cwd, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def git_state(path: str | None = None) -> dict[str, Any]:
    """Commit and dirty flag of the checkout apex-bench runs from (None outside git)."""
    where = path or str(Path(__file__).resolve().parent.parent)
    commit = command_output(["git", "rev-parse", "HEAD"], cwd=where)
    if commit is None:
        return {"commit": None, "dirty": None}
    status = command_output(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where)
    return {"commit": commit, "dirty": bool(status)}


def _nvml_info() -> dict[str, Any]:
    """Driver and clocks through NVML when nvidia-ml-py is installed; empty otherwise."""
    nvml, _why = start_nvml()
    if nvml is None:
        return {}
    try:
        handle = device_handle(nvml, torch.cuda.current_device())  # the run's card, not NVML's first
        info = {
            "driver": nvml.nvmlSystemGetDriverVersion(),
            "sm_clock_mhz": nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
            "mem_clock_mhz": nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM),
            "max_sm_clock_mhz": nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM),
        }
        nvml.nvmlShutdown()
        return info
    except Exception:  # NVML present but unusable (container without the library)
        return {}


def _smi_info() -> dict[str, Any]:
    out = command_output(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.mem,clocks.max.sm",
                "--format=csv,noheader,nounits"])
    if not out:
        return {}
    fields = [f.strip() for f in out.splitlines()[0].split(",")]
    keys = ("driver", "sm_clock_mhz", "mem_clock_mhz", "max_sm_clock_mhz")
    return dict(zip(keys, fields, strict=False))


def gpu_info() -> dict[str, Any]:
    if not torch.cuda.is_available():
        return {"gpu": None}
    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    info: dict[str, Any] = {
        "gpu": props.name,
        "gpu_count": torch.cuda.device_count(),
        "compute_capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count,
        "gpu_memory_gb": round(props.total_memory / 1e9, 2),
        "l2_cache_bytes": int(getattr(props, "L2_cache_size", 0) or 0),
        "l2_flush": flush_method(),  # how a cold sample's L2 is cleared (apex_core/measure/l2_flush.py)
    }
    info.update(_nvml_info() or _smi_info())
    return info


def capture_environment(device: str, measure_device: bool = True) -> dict[str, Any]:
    """The environment record of a report (docs/design.md section 9), with this device's measured facts."""
    env: dict[str, Any] = {
        "device": device,
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),  # CPU timings depend on it (docs/baselines.md)
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton": package_version("triton"),
        "tensorrt": package_version("tensorrt"),
        "onnxruntime": package_version("onnxruntime"),
        "apex_bench": package_version("apex-bench"),
        "triton_interpret": os.environ.get("TRITON_INTERPRET") == "1",
        "argv": list(sys.argv),
    }
    env.update(gpu_info() if device == "cuda" else {"gpu": None})
    env["git"] = git_state()
    if measure_device:
        # what the timers can tell on this device, and the copy bandwidth the flags judge against
        env["device_facts"] = device_facts(device)
    return env


def environment_key(env: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """The fields that must match for two reports' numbers to be compared."""
    timing = config.get("timing", {})
    return {
        "hardware": env.get("gpu") or env.get("cpu"),
        "device": env.get("device"),
        "torch": env.get("torch"),
        "triton": env.get("triton"),
        "tensorrt": env.get("tensorrt"),
        "driver": env.get("driver"),
        "profile": config.get("profile"),
        "dtypes": config.get("dtypes"),
        "cache": timing.get("cache"),
        "graph": timing.get("graph"),
    }
