"""Hold a CUDA stream until the host has queued a whole sample, so host launch cost stays out of it.

The timing stream is made to wait, on the device, for a 32-bit counter in mapped host
memory (the driver's ``cuStreamWaitValue32``: no kernel and no SM is used) to reach the
sample's number. The host queues the hold, the start event, the call and the end event,
then writes the number: by then every launch of the call is in the queue, so the GPU
runs them back to back and the events bracket device work only (nvbench's blocking
kernel does the same with a spinning kernel).

A call that synchronizes the host inside the hold would wait for a GPU that waits for
the host. A watchdog thread breaks that: if a sample is not released within its
timeout, the watchdog releases it and says so, and the timer drops the sample and
times the rest without the hold (the report says why). A call that issues more
launches than the queue holds blocks the same way and is handled the same way.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import Any

# CUstreamWaitValue_flags: wait until (int32)(*addr - value) >= 0
_WAIT_VALUE_GEQ = 0x0
# CUmemhostalloc flags: portable across contexts, mapped into the device's address space
_HOSTALLOC_PORTABLE_DEVICEMAP = 0x1 | 0x2


class HoldUnavailable(RuntimeError):
    """The driver cannot hold a stream here (no libcuda, or stream memory operations refused)."""


class Watchdog:
    """Releases an armed sample after ``timeout_s`` unless the host disarms it first.

    ``release`` is the function that writes the counter; ``tripped`` says whether the
    watchdog ever had to release (the sample it released is not to be trusted).
    """

    def __init__(self, release: Callable[[int], None]) -> None:
        self._release = release
        self._lock = threading.Condition()
        self._armed: tuple[int, float] | None = None  # (value, timeout)
        self._generation = 0
        self.tripped = False
        self._thread = threading.Thread(target=self._run, name="apex-hold-watchdog", daemon=True)
        self._stopped = False
        self._thread.start()

    def arm(self, value: int, timeout_s: float) -> None:
        with self._lock:
            self._armed = (value, timeout_s)
            self._generation += 1
            self._lock.notify()

    def disarm(self) -> None:
        with self._lock:
            self._armed = None
            self._generation += 1
            self._lock.notify()

    def close(self) -> None:
        with self._lock:
            self._stopped = True
            self._lock.notify()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        with self._lock:
            while not self._stopped:
                if self._armed is None:
                    self._lock.wait()
                    continue
                value, timeout_s = self._armed
                generation = self._generation
                if self._lock.wait(timeout_s) or generation != self._generation:
                    continue  # disarmed or re-armed in time
                if self._armed is not None and generation == self._generation:
                    self.tripped = True
                    self._armed = None
                    self._release(value)


def _libcuda() -> Any:
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise HoldUnavailable(f"libcuda.so.1 not loadable ({exc})") from None


def _function(lib: Any, *names: str) -> Any:
    for name in names:
        found = getattr(lib, name, None)
        if found is not None:
            return found
    raise HoldUnavailable(f"libcuda has none of {', '.join(names)}")


def _check(result: int, what: str) -> None:
    if result != 0:
        raise HoldUnavailable(f"{what} returned CUresult {result}")


class DriverStreamHold:
    """A counter in mapped host memory and ``cuStreamWaitValue32`` on it.

    Create it after the CUDA context exists (any torch CUDA allocation does that), on
    the thread that times. ``hold(stream)`` queues a wait for the next number and
    returns it; ``release(number)`` lets the stream run up to and including it.
    """

    def __init__(self) -> None:
        lib = _libcuda()
        host = ctypes.c_void_p()
        _check(_function(lib, "cuMemHostAlloc")(ctypes.byref(host), ctypes.c_size_t(64),
                                                ctypes.c_uint(_HOSTALLOC_PORTABLE_DEVICEMAP)),
               "cuMemHostAlloc")
        device = ctypes.c_uint64()
        _check(_function(lib, "cuMemHostGetDevicePointer_v2", "cuMemHostGetDevicePointer")(
            ctypes.byref(device), host, ctypes.c_uint(0)), "cuMemHostGetDevicePointer")
        self._lib = lib
        self._host: ctypes.c_void_p | None = host
        self._device_address = device.value
        self._counter = ctypes.cast(host, ctypes.POINTER(ctypes.c_uint32))
        self._counter[0] = 0
        self._next = 0
        self._wait = _function(lib, "cuStreamWaitValue32_v2", "cuStreamWaitValue32")
        self._wait.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
        self._lock = threading.Lock()

    def hold(self, stream: Any) -> int:
        """Queue on ``stream`` (a torch stream) a wait for the next number; return that number."""
        self._next = (self._next + 1) & 0x7FFFFFFF or 1
        if self._next == 1:
            self.release(0)
        _check(self._wait(ctypes.c_void_p(stream.cuda_stream), self._device_address,
                          ctypes.c_uint32(self._next), _WAIT_VALUE_GEQ), "cuStreamWaitValue32")
        return self._next

    def release(self, number: int) -> None:
        """Let every wait up to ``number`` pass (the watchdog's thread may call this too)."""
        with self._lock:
            if number == 0 or _after(number, self._counter[0]):
                self._counter[0] = number

    def close(self) -> None:
        """Release every wait and free the counter (after the stream has drained)."""
        if self._host is not None:
            self._counter[0] = 0x7FFFFFFF
            self._lib.cuMemFreeHost(self._host)
            self._host = None


def _after(number: int, current: int) -> bool:
    """True when ``number`` comes after ``current`` on the counter (31-bit wrap-around)."""
    return 0 < ((number - current) & 0x7FFFFFFF) < 0x40000000


def probe_stream_hold() -> tuple[DriverStreamHold | None, str]:
    """A working hold, or None and why not (the timer then runs without one and says so)."""
    try:
        hold = DriverStreamHold()
    except HoldUnavailable as exc:
        return None, str(exc)
    return hold, ""
