"""A fake pynvml that keeps the clocks it was asked to lock, for the --lock-clocks tests (no GPU here)."""

from __future__ import annotations

import sys
import types

import pytest

from apex_core.measure import telemetry

NO_PERMISSION, NOT_SUPPORTED = 4, 3
TDP = 0xFFFFFF01
BASE_MHZ, TOP_SM_MHZ, TOP_MEM_MHZ = 1590, 1980, 2619


class NVMLError(Exception):
    """As pynvml's: the return code in ``value``, NVML's words in ``str``."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        words = {NO_PERMISSION: "Insufficient Permissions", NOT_SUPPORTED: "Not Supported"}
        return words.get(self.value, "Unknown")


class ClockNvml(types.SimpleNamespace):
    """``sm`` and ``mem`` map a card to its locked (min, max); ``refuse`` / ``refuse_memory`` map a card
    to the NVML error its lock raises; ``reset_raises`` is raised (once) by the first SM reset."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2
    NVML_CLOCK_LIMIT_ID_TDP = TDP
    NVML_ERROR_NO_PERMISSION, NVML_ERROR_NOT_SUPPORTED = NO_PERMISSION, NOT_SUPPORTED

    def __init__(self, refuse=None, refuse_memory=None, reset_raises=None):
        super().__init__()
        self.sm, self.mem = {}, {}
        self.refuse, self.refuse_memory = refuse or {}, refuse_memory or {}
        self.reset_raises = reset_raises
        self.started = 0  # nvmlInit calls not yet matched by nvmlShutdown

    def nvmlInit(self):
        self.started += 1

    def nvmlShutdown(self):
        self.started -= 1

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return uuid

    def nvmlDeviceGetUUID(self, handle):
        return handle.encode()  # older bindings give bytes

    def nvmlDeviceGetMaxClockInfo(self, handle, which):
        return TOP_SM_MHZ if which == self.NVML_CLOCK_SM else TOP_MEM_MHZ

    def nvmlDeviceGetClockInfo(self, handle, which):
        if which == self.NVML_CLOCK_MEM:
            return self.mem.get(handle, (877, 877))[0]
        low = self.sm.get(handle, (345, 345))[0]
        return BASE_MHZ if low == TDP else low

    def nvmlDeviceSetGpuLockedClocks(self, handle, low, high):
        if handle in self.refuse:
            raise NVMLError(self.refuse[handle])
        self.sm[handle] = (low, high)

    def nvmlDeviceSetMemoryLockedClocks(self, handle, low, high):
        if handle in self.refuse_memory:
            raise NVMLError(self.refuse_memory[handle])
        self.mem[handle] = (low, high)

    def nvmlDeviceResetGpuLockedClocks(self, handle):
        if self.reset_raises is not None:
            error, self.reset_raises = self.reset_raises, None
            raise error
        self.sm.pop(handle)

    def nvmlDeviceResetMemoryLockedClocks(self, handle):
        self.mem.pop(handle)


def install_clock_nvml(monkeypatch: pytest.MonkeyPatch, **kwargs) -> ClockNvml:
    """A ``ClockNvml`` as pynvml, for the test; this process's CUDA device 0 is the card ``GPU-0``."""
    fake = ClockNvml(**kwargs)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(telemetry, "device_handle", lambda nvml, index: f"GPU-{index}")
    return fake
