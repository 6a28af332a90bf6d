"""A card's fingerprint: what makes one host's numbers differ from another's of the same model.

Cards of one model differ by several per cent (the same build on three H100 hosts: up to
5.9 % per cell, docs/timing.md): memory that streams a little slower, an SM clock that
holds a little lower under load, a lower power limit, ECC on or off, another driver.
The fingerprint is taken when a run starts (``doctor.device_facts``), stored in the
report's ``environment.device_facts.fingerprint`` and so in the history, and read by the
comparisons across hosts (apex_core/baseline/normalize.py). The measured figures (copy
bandwidth, the clock a spin of known cycles ran at) are what scale cells; the static
ones (power limit, ECC, driver, link) explain an outlier and are never used as numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

# the fields two fingerprints are compared by, and the kind of cell each one scales
MEASURED = ("copy_gbps", "sm_clock_under_load_mhz")


def _try(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception:  # a field the driver or the binding does not report stays None
        return None


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def nvml_identity(nvml: Any, handle: Any) -> dict[str, Any]:
    """The card's static facts from NVML; None for each one the driver does not report."""
    ecc = _try(lambda: nvml.nvmlDeviceGetEccMode(handle))
    enforced_mw = _try(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle))
    default_mw = _try(lambda: nvml.nvmlDeviceGetPowerManagementDefaultLimit(handle))
    gen = _try(lambda: nvml.nvmlDeviceGetCurrPcieLinkGeneration(handle))
    width = _try(lambda: nvml.nvmlDeviceGetCurrPcieLinkWidth(handle))
    max_gen = _try(lambda: nvml.nvmlDeviceGetMaxPcieLinkGeneration(handle))
    max_width = _try(lambda: nvml.nvmlDeviceGetMaxPcieLinkWidth(handle))
    return {
        "gpu": _text(_try(lambda: nvml.nvmlDeviceGetName(handle))),
        "uuid": _text(_try(lambda: nvml.nvmlDeviceGetUUID(handle))),
        "driver": _text(_try(nvml.nvmlSystemGetDriverVersion)),
        "vbios": _text(_try(lambda: nvml.nvmlDeviceGetVbiosVersion(handle))),
        "power_limit_w": enforced_mw / 1e3 if enforced_mw else None,
        "power_limit_default_w": default_mw / 1e3 if default_mw else None,
        # (current, pending): the mode in force now
        "ecc": bool(ecc[0]) if isinstance(ecc, tuple | list) and ecc else None,
        "sm_clock_max_mhz": _try(lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)),
        "mem_clock_max_mhz": _try(lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM)),
        # an idle link trains down to gen 1; the maximum says what the slot gives
        "pcie": f"gen{gen} x{width} (max gen{max_gen} x{max_width})" if gen and width else None,
    }


def ecc_words(fingerprint: Mapping[str, Any]) -> str:
    """``on``, ``off`` or ``unknown``: a fingerprint's ECC mode as a report says it."""
    ecc = fingerprint.get("ecc")
    return "on" if ecc is True else "off" if ecc is False else "unknown"


def fingerprint(facts: Mapping[str, Any]) -> dict[str, Any]:
    """The fingerprint of a run's ``device_facts``: the measured figures beside NVML's identity."""
    clock = facts.get("clock") or {}
    return {
        **(facts.get("identity") or {}),
        # the best of the run's copies: the steadiest figure of a card's bandwidth (doctor.COPY_REPEATS)
        "copy_gbps": facts.get("copy_best_gbps") or facts.get("copy_gbps"),
        # the clock a spin of known cycles ran at: the SM clock under load, not NVML's reading
        "sm_clock_under_load_mhz": clock.get("spin_cycles_per_us"),
    }


def fingerprint_of(report: Mapping[str, Any]) -> dict[str, Any] | None:
    """A report's stored fingerprint, or one rebuilt from its facts (reports before it was stored)."""
    facts = (report.get("environment") or {}).get("device_facts") or {}
    if not isinstance(facts, Mapping) or "cuda_unavailable" in facts or not facts:
        return None
    stored = facts.get("fingerprint")
    return dict(stored) if isinstance(stored, Mapping) else fingerprint(facts)
