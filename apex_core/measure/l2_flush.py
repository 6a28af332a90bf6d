"""The cold-L2 flush before each CUDA sample: persisting lines reset, then twice the L2 written.

Writing a buffer twice the L2's size evicts every line loaded with the normal eviction
priority, but not the lines a kernel loaded with ``evict_last`` (PTX ``.L2::evict_last``, which
Triton's ``eviction_policy="evict_last"`` emits and Inductor uses for loads it expects to reuse):
those outlive any amount of normal writes. On an H200 a gather that loads that way read 1.95 us
per call with the write alone and 3.07 us with its inputs really out of L2; torch.compile's
tilepack read 2.08 and 3.10 us, and a triton kernel run on the same inputs after it read 2.05
instead of 3.10 (docs/perf.md, 2026-11-28). So the driver's ``cuCtxResetPersistingL2Cache``
first returns every such line to normal priority, and the write that follows evicts them too.
Where the driver's entry point cannot be used, the flush only writes and ``flush_method`` says so.
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


def l2_flush_bytes(device_index: int = 0) -> int:
    """Bytes of the buffer written before each cold sample: twice the device's L2 size."""
    props = torch.cuda.get_device_properties(device_index)
    l2 = int(getattr(props, "L2_cache_size", 0) or 0)
    # 64 MiB is larger than the L2 of every current part; used only if the attribute is absent.
    return 2 * l2 if l2 > 0 else 64 * 1024 * 1024


@functools.cache
def persisting_reset() -> tuple[Callable[[], int] | None, str]:
    """The driver's ``cuCtxResetPersistingL2Cache`` (for the current context), and why not ("" if found).

    Called once here, so a driver or device that refuses it (before compute capability 8.0, or a
    platform without NVIDIA's driver) is known before any sample relies on it."""
    try:
        reset = ctypes.CDLL("libcuda.so.1").cuCtxResetPersistingL2Cache
    except (OSError, AttributeError) as error:
        return None, f"persisting L2 lines not reset: no cuCtxResetPersistingL2Cache ({error})"
    reset.restype, reset.argtypes = ctypes.c_int, []
    torch.cuda.synchronize()  # makes the primary context, which the reset applies to, current here
    code = reset()
    if code != _SUCCESS:
        return None, f"persisting L2 lines not reset: cuCtxResetPersistingL2Cache returned CUresult {code}"
    return reset, ""


def flush_method() -> str:
    """How the flush clears the L2, as the report's environment records it."""
    reset, why_not = persisting_reset()
    return "persisting lines reset, then 2x L2 written" if reset is not None else f"2x L2 written ({why_not})"


@attrs.frozen
class L2Flush:
    """One cold-L2 flush per call: the persisting lines reset (``reset``, None where the driver
    does not allow it), then ``buffer``, twice the L2, zeroed on the current stream."""

    buffer: Any
    reset: Callable[[], int] | None

    @classmethod
    def on_device(cls, device_index: int = 0) -> L2Flush:
        buffer = torch.empty(l2_flush_bytes(device_index), dtype=torch.uint8, device="cuda")
        return cls(buffer, persisting_reset()[0])

    def __call__(self) -> None:
        # the reset first: it returns the lines to normal priority, and the write then evicts them
        if self.reset is not None:
            self.reset()
        self.buffer.zero_()

    def numel(self) -> int:
        return self.buffer.numel()
