"""``--lock-clocks``: hold the GPUs' SM and memory clocks still for a run, then give them back.

A card left to itself boosts its SM clock as power and temperature allow, so the same
kernel runs at another clock from one run (or cell) to the next. Locking asks the driver,
through NVML, for one SM clock on every card the run uses, as nvbench's ``--lgc base``
does: ``base`` is the clock the card sustains within its power limit
(``NVML_CLOCK_LIMIT_ID_TDP`` as both the lowest and highest clock), ``max`` the card's
highest SM clock, or a number of MHz. The memory clock is locked at its highest where the
driver lets it be. On the way out, normal or not, both are reset to the driver's default.

Locking needs root and a card that allows it (Volta or later, not a vGPU or MIG slice);
in a container it is usually refused. Then nothing is changed and the verdict says why:
a run goes on at the driver's clocks and its report records that they were not locked.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs

from apex_core.errors import UsageError, describe_exception
from apex_core.measure import telemetry

log = logging.getLogger(__name__)

CLOCK_CHOICES = ("base", "max")
USAGE = "expected base, max or a whole number of MHz"


def clock_request(value: str | int) -> str:
    """``base``, ``max`` or a number of MHz as text; a ValueError with a one-line reason otherwise."""
    text = str(value).strip().lower()
    if text in CLOCK_CHOICES:
        return text
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{USAGE}, got {str(value)!r}")
    return str(int(text))


@attrs.frozen
class LockedCard:
    """One card whose clocks were locked, with its clocks as NVML read them right after."""

    uuid: str
    sm_mhz: int | None
    mem_mhz: int | None
    mem_why_not: str = ""  # the memory clock left to the driver, and why (the SM clock still locked)


@attrs.frozen
class ClockVerdict:
    """What ``--lock-clocks`` asked for and got: ``environment.clock_lock`` in the report."""

    requested: str
    locked: bool
    cards: tuple[LockedCard, ...] = ()
    why_not: str = ""

    def record(self) -> dict[str, Any]:
        return attrs.asdict(self)


def _nvml_reason(nvml: Any, exc: Exception) -> str:
    """Why NVML refused, in words a person can act on."""
    code = getattr(exc, "value", None)
    if code is not None and code == getattr(nvml, "NVML_ERROR_NO_PERMISSION", object()):
        return f"changing GPU clocks needs root ({describe_exception(exc)})"
    if code is not None and code == getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", object()):
        return ("this card or its driver does not let its clocks be locked (Volta or later, not a vGPU or "
                f"MIG slice; {describe_exception(exc)})")
    return describe_exception(exc)


class _Held:
    """The cards locked so far; ``release`` resets each once, however often it is called."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.cards: list[tuple[str, Any, bool]] = []  # (uuid, handle, memory locked too)

    def release(self) -> list[str]:
        """Reset every held card's clocks; one line per card whose reset failed."""
        problems = []
        while self.cards:
            uuid, handle, memory = self.cards[-1]  # dropped once reset: an interrupted reset is tried again
            resets = [self.nvml.nvmlDeviceResetGpuLockedClocks]
            if memory:
                resets.append(self.nvml.nvmlDeviceResetMemoryLockedClocks)
            failed = []
            for reset in resets:
                try:
                    reset(handle)
                except Exception as exc:
                    failed.append(describe_exception(exc))
            if failed:
                problems.append(f"could not reset the clocks of {uuid} ({'; '.join(failed)}); reset them with "
                                f"nvidia-smi -i {uuid} -rgc and nvidia-smi -i {uuid} -rmc")
            self.cards.pop()
        if self.nvml is not None:
            # once: NVML counts starts and stops, and an inline run's telemetry shares this process's count
            nvml, self.nvml = self.nvml, None
            with contextlib.suppress(Exception):
                nvml.nvmlShutdown()
        return problems


def _sm_limits(nvml: Any, handle: Any, request: str) -> int:
    """The SM clock to ask for: NVML's symbol for the TDP clock, or MHz checked against the card's top."""
    if request == "base":
        return int(nvml.NVML_CLOCK_LIMIT_ID_TDP)
    top = int(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM))
    if request == "max":
        return top
    if int(request) > top:
        raise UsageError(f"locked clocks of {request} MHz: above this card's highest SM clock, {top} MHz")
    return int(request)


def _lock_card(nvml: Any, handle: Any, uuid: str, request: str, held: _Held) -> LockedCard:
    sm = _sm_limits(nvml, handle, request)
    nvml.nvmlDeviceSetGpuLockedClocks(handle, sm, sm)
    held.cards.append((uuid, handle, False))
    mem_why_not = ""
    try:
        top_mem = int(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM))
        nvml.nvmlDeviceSetMemoryLockedClocks(handle, top_mem, top_mem)
        held.cards[-1] = (uuid, handle, True)
    except Exception as exc:  # many cards have one memory clock and refuse; the SM lock stands
        mem_why_not = _nvml_reason(nvml, exc)
    return LockedCard(uuid, _read(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
                      _read(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)), mem_why_not)


def _read(read: Callable[[], Any]) -> int | None:
    try:
        return int(read())
    except Exception:
        return None


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _handles(nvml: Any, card_uuids: Sequence[str]) -> list[tuple[str, Any]]:
    """(uuid, handle) of the named cards, or of this process's CUDA device 0 when none is named."""
    if card_uuids:
        return [(uuid, nvml.nvmlDeviceGetHandleByUUID(uuid)) for uuid in card_uuids]
    handle = telemetry.device_handle(nvml, 0)
    return [(_text(nvml.nvmlDeviceGetUUID(handle)), handle)]


def _lock(nvml: Any, request: str, card_uuids: Sequence[str], held: _Held) -> ClockVerdict:
    try:
        handles = _handles(nvml, card_uuids)
    except Exception as exc:
        why = _nvml_reason(nvml, exc)
        return ClockVerdict(request, False, why_not=f"NVML has no handle for the run's GPU ({why})")
    cards = []
    for uuid, handle in handles:
        try:
            cards.append(_lock_card(nvml, handle, uuid, request, held))
        except UsageError:
            raise
        except Exception as exc:
            # all or none: cards of one run at different clocks would not be comparable
            return ClockVerdict(request, False, why_not=f"{uuid}: {_nvml_reason(nvml, exc)}")
    return ClockVerdict(request, True, tuple(cards))


@contextlib.contextmanager
def locked_clocks(request: str | int, card_uuids: Sequence[str] = (),
                  warn: Callable[[str], None] = log.warning) -> Iterator[ClockVerdict]:
    """Lock the clocks of ``card_uuids`` (this process's CUDA device 0 when empty) for the block.

    Yields the verdict; where the clocks could not be locked nothing is changed and
    ``why_not`` says why. The reset runs when the block ends however it ends (an exception,
    ``KeyboardInterrupt`` or the CLI's SIGTERM, which raises in the main thread), and once
    more at interpreter exit should a second interrupt cut the reset short. A SIGKILL or a
    host crash skips both: the report then still says ``locked`` and names the cards, to be
    reset with ``nvidia-smi -i UUID -rgc`` (and ``-rmc``). Each failed reset is one line to
    ``warn``. A number of MHz above the card's highest SM clock is a ``UsageError``.
    """
    request = clock_request(request)
    nvml, unavailable = telemetry.start_nvml()
    if nvml is None:
        yield ClockVerdict(request, False, why_not=unavailable)
        return
    held = _Held(nvml)

    def release() -> None:
        for line in held.release():
            warn(line)

    atexit.register(release)
    try:
        verdict = _lock(nvml, request, card_uuids, held)
        if not verdict.locked:
            release()  # the cards locked before the one that refused
        yield verdict
    finally:
        release()
        atexit.unregister(release)
