"""The cold-L2 flush before each CUDA sample: persisting lines reset, then twice the L2 written.

Writing a buffer twice the L2's size evicts every line loaded with the normal eviction
priority, but not the lines a kernel loaded with ``evict_last`` (PTX ``.L2::evict_last``, which
Triton's ``eviction_policy="evict_last"`` emits and Inductor uses for loads it expects to reuse):
those outlive any amount of normal writes. On an H200 a gather that loads that way read 2.02 us
per call with the write alone and 2.98 us with its inputs really out of L2; torch.compile's
tilepack read 2.11 and 3.04 us, and a triton kernel run on the same inputs after it 2.08 and
2.98 us (kernel timer, raw; docs/perf.md, 2026-11-28). So the driver's ``cuCtxResetPersistingL2Cache``
first returns every such line to normal priority, and the write that follows evicts them too.
Where the driver's entry point cannot be used, the flush only writes and ``flush_method`` says so.

The reset is a host call, not a stream operation. The gather above was timed in the kernel
timer's loop, which queues flush and call back to back while the GPU works through earlier 42 us
flushes, so a reset acting the moment it is called would have left the previous call's lines
persisting, and the gather would have read warm; it read cold. It does not wait for that work:
it took 5.9 us of host time with the GPU idle and 14.9 us with 2 ms of work queued ahead
(``scripts/dev/flush_probe.py``, H200, docs/perf.md 2026-11-28), so the driver evidently orders it
after the queued work, and the held timer's host does not stall on it.
The call goes through ctypes rather than NVIDIA's cuda-python bindings: one driver function
without arguments does not warrant a dependency.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any

import attrs
import torch

# the driver API's CUDA_SUCCESS
_SUCCESS = 0
# the environment's ``l2_flush`` where the reset runs; the reports' caveat keys on it
RESET_THEN_WRITE = "persisting lines reset, then 2x L2 written"


def l2_flush_bytes(device_index: int = 0) -> int:
    """Bytes of the buffer written before each cold sample: twice the device's L2 size."""
    props = torch.cuda.get_device_properties(device_index)
    l2 = int(getattr(props, "L2_cache_size", 0) or 0)
    # 64 MiB is larger than the L2 of every current part; used only if the attribute is absent.
    return 2 * l2 if l2 > 0 else 64 * 1024 * 1024


@functools.cache
def _driver_reset() -> tuple[Callable[[], int] | None, str]:
    """The driver's ``cuCtxResetPersistingL2Cache``, or why there is none. Only the lookup is
    cached: whether a call succeeds depends on the moment (the context current, an error left
    by an earlier kernel), so each flush checks its own call."""
    try:
        reset = ctypes.CDLL("libcuda.so.1").cuCtxResetPersistingL2Cache
    except (OSError, AttributeError) as error:
        return None, f"persisting L2 lines not reset: no cuCtxResetPersistingL2Cache ({error})"
    reset.restype, reset.argtypes = ctypes.c_int, []
    return reset, ""


def persisting_reset() -> tuple[Callable[[], int] | None, str]:
    """The driver's ``cuCtxResetPersistingL2Cache`` (for the current context), and why not ("" if usable).

    Tried once here, so a driver or device that refuses it is known before any sample relies on
    it. Parts without L2 persistence control (before compute capability 8.0) are expected to
    refuse; that was not measured here."""
    reset, why_not = _driver_reset()
    if reset is None:
        return None, why_not
    torch.cuda.synchronize()  # makes the primary context, which the reset applies to, current here
    code = reset()
    if code != _SUCCESS:
        return None, f"persisting L2 lines not reset: cuCtxResetPersistingL2Cache returned CUresult {code}"
    return reset, ""


def flush_method(try_reset: bool = True) -> str:
    """How the flush clears the L2, as the report's environment records it. ``try_reset=False``
    only looks the driver's function up, for a process that must not make a CUDA context (a Ray
    node's record); each timer still tries it, and a failure shows in the cell's note."""
    reset, why_not = persisting_reset() if try_reset else _driver_reset()
    return RESET_THEN_WRITE if reset is not None else f"2x L2 written ({why_not})"


@attrs.define
class L2Flush:
    """One cold-L2 flush per call: the persisting lines reset (``reset``, None where the driver
    does not allow it), then ``buffer``, twice the L2, zeroed on the current stream. A reset that
    fails during sampling is counted (``failed``, with its last ``CUresult``): the samples after
    it may have found data in L2, and the cell's note says so (``failure_note``)."""

    buffer: Any
    reset: Callable[[], int] | None
    failed: int = 0
    last_code: int = _SUCCESS

    @classmethod
    def on_device(cls, device_index: int = 0) -> L2Flush:
        buffer = torch.empty(l2_flush_bytes(device_index), dtype=torch.uint8, device="cuda")
        return cls(buffer, persisting_reset()[0])

    def __call__(self) -> None:
        # the reset first: it returns the lines to normal priority, and the write then evicts them
        if self.reset is not None:
            code = self.reset()
            if code != _SUCCESS:
                self.failed, self.last_code = self.failed + 1, code
        self.buffer.zero_()

    def numel(self) -> int:
        return self.buffer.numel()

    def failure_note(self) -> str:
        """The cell's note when a reset failed while it was sampled ("" if none did)."""
        if not self.failed:
            return ""
        return (f"the L2's persisting lines were not reset before {self.failed} flush"
                f"{'es' if self.failed > 1 else ''} (cuCtxResetPersistingL2Cache returned CUresult "
                f"{self.last_code}): samples after them may have found evict_last data in L2")
