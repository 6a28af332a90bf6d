"""Is a worker's GPU still fit for the next cell? Checked in the worker, after each cell and at its start.

After a cell, a worker whose CUDA context reports an error, or that still holds more
device memory than before the cell (a backend that keeps tensors alive between cells),
leaves: the pool starts a clean one before the next cell on that GPU. A fresh worker
pinned to a GPU first runs a tiny self-test there; a GPU that fails it repeatedly is
taken out of the run's rotation (``apex_core.running.sharding``).
"""

from __future__ import annotations

import gc
import os

import torch

from apex_core.errors import describe_exception

LEAK_LIMIT_ENV = "APEX_BENCH_LEAK_LIMIT_MB"
# Device memory a cell may leave allocated before its worker is replaced. Caches a backend
# keeps on purpose (compiled graphs, autotuning buffers) stay well under it.
DEFAULT_LEAK_LIMIT_MB = 256.0


def leak_limit_mb() -> float:
    try:
        return float(os.environ.get(LEAK_LIMIT_ENV, DEFAULT_LEAK_LIMIT_MB))
    except ValueError:
        return DEFAULT_LEAK_LIMIT_MB


def allocated_mb(device: str) -> float | None:
    """Device memory torch's allocator holds for live tensors, in MB; None off CUDA."""
    if not device.startswith("cuda"):
        return None

    if not torch.cuda.is_initialized():
        return 0.0  # nothing allocated yet; asking would initialise CUDA for nothing
    gc.collect()
    return torch.cuda.memory_allocated() / 2**20


def release_cached_blocks(device: str) -> None:
    """Give torch's cached device blocks back before a cell, so its buffers come from fresh allocations.

    Otherwise a cell's inputs, outputs and flush buffer land in blocks the cells before it
    left in the cache, and where they land moved a short kernel's time: on an H100 the
    triton tilepack cell read 1.3 us net right after the torch-compile cell of the same
    workload in the same process and 2.5 us after any other cell or alone; with the cache
    emptied before each cell, 2.5 us after both (docs/perf.md, 2026-11-27).
    """
    if not device.startswith("cuda"):
        return

    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def check_after_cell(device: str, before_mb: float | None) -> tuple[str, float | None]:
    """Why this worker must not run the next cell ("" when it may: a CUDA error, or a leak), and the
    device memory the cell left (None when not measured)."""
    if before_mb is None or not device.startswith("cuda"):
        return "", None

    if not torch.cuda.is_initialized():
        return "", None
    try:
        torch.cuda.synchronize()  # a sticky error of the context surfaces here
    except Exception as exc:
        return f"the CUDA context reports an error after the cell ({describe_exception(exc)})", None
    after = allocated_mb(device) or 0.0
    leaked = after - before_mb
    if leaked > leak_limit_mb():
        return (f"the cell left {leaked:.0f} MB of device memory allocated (limit {leak_limit_mb():g} MB, "
                f"{LEAK_LIMIT_ENV})"), after
    return "", after


def self_test() -> str:
    """Run a small computation on the worker's one visible GPU; "" when it passes, else why not."""
    try:
        if not torch.cuda.is_available():
            return "no CUDA device is visible to the worker"
        values = torch.arange(1 << 16, device="cuda", dtype=torch.float32)
        total = float(values.sum().item())
        torch.cuda.synchronize()
    except Exception as exc:
        return describe_exception(exc)
    expected = float((1 << 16) * ((1 << 16) - 1) // 2)
    if abs(total - expected) > 1e-3 * expected:
        return f"a sum on the GPU came out {total!r}, expected {expected!r}"
    return ""
