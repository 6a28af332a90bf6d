"""Do a cell's outputs' addresses carry the part of its spread that every placement of a process
shares? Input placements (apex_core/measure/placements.py) put each placement's inputs at other
addresses, but the caching allocator hands every call of a cell the same one or two freed blocks for
its outputs and intermediates, for the whole process. Here each placement's calls allocate from a
memory pool of their own (``torch.cuda.use_mem_pool``), so its outputs lie in segments of their own
as its inputs do. Runs apex-bench in this process (``--inline``); ``POOLS=0`` runs the same without
the pools, the control. Compare several fresh processes of each with scripts/dev/process_noise.py
(scripts/dev/output_pools.sh names them runN.json and varN.json).
Usage: [POOLS=0] python scripts/dev/output_pools.py OUT.json [apex-bench arguments]
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import torch

from apex_core.cli.main import main
from apex_core.measure import cell

real_measure_cuda = cell.measure_cuda


def pooled(fn: Callable[[], Any], pool: Any) -> Callable[[], Any]:
    def call() -> Any:
        with torch.cuda.use_mem_pool(pool):  # host-side only: nothing queued on the device
            return fn()

    return call


def measure_cuda(fn: Callable[[], Any], options: Any, more: list[Callable[[], Any]], *args: Any,
                 **kwargs: Any) -> Any:
    """cell.measure_cuda with each placement's calls (the cell's own first) in a pool of their own."""
    pools = [torch.cuda.MemPool() for _ in range(1 + len(more))]
    others = [pooled(f, pool) for f, pool in zip(more, pools[1:], strict=True)]
    return real_measure_cuda(pooled(fn, pools[0]), options, others, *args, **kwargs)


if __name__ == "__main__":
    if os.environ.get("POOLS", "1") != "0":
        cell.measure_cuda = measure_cuda
    sys.exit(main(["--inline", "--quiet", "--no-history", "--device", "cuda", "--output-json", sys.argv[1],
                   *sys.argv[2:]]))
