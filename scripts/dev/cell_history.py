"""Does a triton cell's held-event time depend on the cells its process ran before? (needs a GPU)

    python3 scripts/dev/cell_history.py zero|add [empty]

In the one-GPU scale runs of 2026-11-27 (H100) the tilepack triton cell read 2.45 us net in a
fresh run and 1.22 us in the warm run after it, tile-stage1 4.67 and 3.53 us, with the same
configuration, clocks and floor; host load and a second CUDA context do not move them
(scripts/dev/neighbours.sh). Here one process runs, inline, the triton cells of tilepack and
tile-stage1 (A), then the torch-reference, torch-compile and triton cells of fusiongate,
tile-stage1 and tilepack (B), then A's cells again (C), each after the workload's
torch-reference cell (R), each after its torch-compile cell (K), with the L2 flush of every sample
done one of two ways: ``zero`` (the shipped flush, ``L2Flush``: the persisting lines reset, then
``zero_()`` of a 2 x L2 buffer) or ``add`` (the reset, then ``add_(1)`` on the buffer: every
line read and written back by ordinary loads and stores). The warm readings after a
torch-compile cell were its ``evict_last`` loads outliving a flush that only wrote
(docs/perf.md, 2026-11-28, "the cold-L2 flush"); the flush now resets those lines first.
If the memset leaves lines of the cell's inputs in L2, ``zero`` reads faster than ``add``
and moves with what ran before. With ``empty``, torch's caching allocator gives its cached
blocks back (``torch.cuda.empty_cache()``) before every cell, so each cell's buffers come
from fresh allocations whatever ran before. Prints the triton cells' net p50 of each step.
"""

from __future__ import annotations

import sys
from typing import Any

import apex_core
from apex_core.measure import cuda_timer, integrity


class AddFlush:
    """Stands in for the flush's buffer: ``zero_`` reads and rewrites every byte of it."""

    def __init__(self, buffer: Any) -> None:
        self.buffer = buffer

    def zero_(self) -> Any:
        return self.buffer.add_(1)

    def numel(self) -> int:
        return int(self.buffer.numel())


def release_cached_blocks(_index: int, _total: int, _cell: Any, result: Any) -> None:
    if result is None:  # before the cell
        import torch

        torch.cuda.empty_cache()


def main() -> int:
    flush = sys.argv[1] if len(sys.argv) > 1 else "zero"
    empty = "empty" in sys.argv[2:]
    if flush == "add":
        shipped_init = cuda_timer.CudaTimer.__init__

        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            shipped_init(self, *args, **kwargs)
            if self.flush is not None:
                self.flush.buffer = AddFlush(self.flush.buffer)

        cuda_timer.CudaTimer.__init__ = init  # type: ignore[method-assign]
        # the guard watches CudaTimer and would put it back before the first cell: made again
        # here, it takes this patch as the harness's own for this run
        integrity._guard = None
    steps = {"A": (["tilepack", "tile-stage1"], ["triton"]),
             "B": (["fusiongate", "tile-stage1", "tilepack"], ["torch-reference", "torch-compile", "triton"]),
             "C": (["tilepack", "tile-stage1"], ["triton"]),
             "R": (["tilepack", "tile-stage1"], ["torch-reference", "triton"]),
             "K": (["tilepack", "tile-stage1"], ["torch-compile", "triton"])}
    for step, (workloads, backends) in steps.items():
        report = apex_core.run(workloads, backends, device="cuda", dtypes=["fp16"], isolation="inline",
                               on_cell=release_cached_blocks if empty else None)
        cells = " ".join(f"{c.workload}/{c.backend} {c.timing.stats.p50 * 1e3:.2f}"
                         f" (floor {c.timing.floor_ms * 1e3:.2f})"
                         for c in report.cells if c.timing is not None and c.backend == "triton")
        print(f"flush {flush}{' empty' if empty else ''}, {step}: {cells}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
