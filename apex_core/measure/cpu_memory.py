"""Peak memory of a CPU cell's timed region: how far the process's resident set rose above its start.

On the CPU there is no allocator to ask (torch, XLA and ONNX Runtime each allocate natively),
so the number comes from the kernel's resident-set accounting:

- ``rss_hwm_delta`` (Linux): the high-water mark is reset through ``/proc/self/clear_refs``
  (value 5) when timing starts, and the peak is ``VmHWM`` at the end minus ``VmRSS`` at the
  start: what the timed calls needed beyond what was already resident, this region alone.
  The objects alive before the region are frozen during it (``earlier_garbage_kept``): an
  automatic collection inside the region would otherwise free garbage left from before (an
  earlier cell's cycles, a test's kept traceback frames), and memory freed there hides as much
  of what the calls took (0 MB read where a call held 64).
- ``ru_maxrss_delta`` (elsewhere, or when the reset is refused): the rise of
  ``getrusage``'s lifetime peak. It cannot be reset, so a worker that peaked higher earlier
  (an earlier cell, the float64 reference of a check) reads 0: a lower bound only.

tracemalloc is not used: it sees the Python heap only, not the native buffers of the stacks.
Neither number compares with a CUDA cell's ``peak_memory_mb`` (the caching allocator's peak,
inputs included): memory the allocator keeps from the untimed build and check calls is
reused without raising the resident set. docs/timing.md has the details.
"""

from __future__ import annotations

import contextlib
import gc
import resource
import sys
from collections.abc import Iterator
from pathlib import Path

RSS_HWM_DELTA = "rss_hwm_delta"
RU_MAXRSS_DELTA = "ru_maxrss_delta"
_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")
_RESET_PEAK = "5"  # clear_refs: reset the peak resident set size to the current one (Linux >= 4.0)


def _status_kib(field: str) -> int | None:
    """A ``/proc/self/status`` field in KiB (``VmRSS``, ``VmHWM``), or None where it cannot be read."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _maxrss_kib() -> int:
    """``getrusage``'s lifetime peak in KiB (macOS reports bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak


def _reset_high_water() -> bool:
    try:
        _CLEAR_REFS.write_text(_RESET_PEAK)
    except OSError:
        return False
    return _status_kib("VmHWM") is not None


@contextlib.contextmanager
def earlier_garbage_kept() -> Iterator[None]:
    """Within it, the cycle collector sees only objects made inside: what was garbage before stays
    unfreed until it ends, so it cannot lower the resident set inside the region (and a collection
    there does not walk the whole heap, a pause of about 0.1 s in a process with torch and jax).

    ``gc.freeze`` moves every tracked object to a permanent generation at O(1) cost; a full
    ``gc.collect()`` first would cost that 0.1 s per cell. Where something in the process froze
    objects already (a pre-forking server calling us inline), it is left as it is.
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class RssPeak:
    """Started before the timed region, read after it: ``peak_mb()`` and the ``method`` used."""

    def __init__(self) -> None:
        self.start_rss_kib = _status_kib("VmRSS")
        reset = self.start_rss_kib is not None and _reset_high_water()
        self.method = RSS_HWM_DELTA if reset else RU_MAXRSS_DELTA
        self.start_maxrss_kib = _maxrss_kib()

    def peak_mb(self) -> float:
        """MiB the resident set rose above its level at the start (0 when it did not rise)."""
        if self.method == RSS_HWM_DELTA:
            high = _status_kib("VmHWM")
            if high is not None and self.start_rss_kib is not None:
                return max(high - self.start_rss_kib, 0) / 1024
        return max(_maxrss_kib() - self.start_maxrss_kib, 0) / 1024
