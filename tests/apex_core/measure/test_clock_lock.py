"""--lock-clocks against a fake NVML: locked for the block, reset however it ends, a reason where refused."""

from __future__ import annotations

import atexit
import sys

import pytest

from apex_core.errors import UsageError
from apex_core.measure.clock_lock import clock_request, locked_clocks
from tests.apex_core.measure.clock_nvml import (
    BASE_MHZ,
    NO_PERMISSION,
    NOT_SUPPORTED,
    TDP,
    TOP_MEM_MHZ,
    TOP_SM_MHZ,
    install_clock_nvml,
)


@pytest.mark.parametrize(("text", "expected"), [("base", "base"), (" MAX ", "max"), ("1410", "1410"),
                                                 ("0900", "900")])
def test_a_request_is_base_max_or_mhz(text, expected):
    assert clock_request(text) == expected


@pytest.mark.parametrize("text", ["fast", "", "0", "-5", "1.5e3", "1410MHz"])
def test_anything_else_is_refused_in_one_line(text):
    with pytest.raises(ValueError, match="expected base, max or a whole number of MHz"):
        clock_request(text)


@pytest.mark.parametrize(("request_", "sm"), [("base", (TDP, TDP)), ("max", (TOP_SM_MHZ,) * 2),
                                              ("1410", (1410, 1410))])
def test_locked_for_the_block_and_reset_after(monkeypatch, request_, sm):
    nvml = install_clock_nvml(monkeypatch)
    with locked_clocks(request_) as verdict:
        assert nvml.sm == {"GPU-0": sm}
        assert nvml.mem == {"GPU-0": (TOP_MEM_MHZ, TOP_MEM_MHZ)}
    assert nvml.sm == nvml.mem == {}
    assert nvml.started == 0  # NVML stopped once, as often as it was started
    assert verdict.locked and verdict.why_not == ""
    card = verdict.cards[0]
    assert card.uuid == "GPU-0" and card.mem_mhz == TOP_MEM_MHZ
    assert card.sm_mhz == (BASE_MHZ if request_ == "base" else sm[0])
    assert verdict.record() == {"requested": request_, "locked": True, "why_not": "", "cards": (
        {"uuid": "GPU-0", "sm_mhz": card.sm_mhz, "mem_mhz": TOP_MEM_MHZ, "mem_why_not": ""},)}


@pytest.mark.parametrize("raised", [RuntimeError("a cell broke the run"), KeyboardInterrupt()])
def test_an_exception_or_ctrl_c_resets_the_clocks(monkeypatch, raised):
    nvml = install_clock_nvml(monkeypatch)
    with pytest.raises(type(raised)), locked_clocks("base"):
        assert nvml.sm
        raise raised
    assert nvml.sm == nvml.mem == {} and nvml.started == 0


def test_every_named_card_is_locked_and_reset(monkeypatch):
    nvml = install_clock_nvml(monkeypatch)
    with locked_clocks("max", ["GPU-a", "GPU-b"]) as verdict:
        assert set(nvml.sm) == set(nvml.mem) == {"GPU-a", "GPU-b"}
    assert [card.uuid for card in verdict.cards] == ["GPU-a", "GPU-b"]
    assert nvml.sm == nvml.mem == {}


def test_without_permission_nothing_changes_and_the_verdict_says_why(monkeypatch):
    nvml = install_clock_nvml(monkeypatch, refuse={"GPU-0": NO_PERMISSION})
    with locked_clocks("base") as verdict:
        assert nvml.sm == {}
    assert not verdict.locked and verdict.cards == ()
    assert "needs root" in verdict.why_not and "Insufficient Permissions" in verdict.why_not
    assert nvml.started == 0


def test_one_card_refusing_leaves_every_card_unlocked(monkeypatch):
    nvml = install_clock_nvml(monkeypatch, refuse={"GPU-b": NOT_SUPPORTED})
    with locked_clocks("base", ["GPU-a", "GPU-b"]) as verdict:
        assert nvml.sm == nvml.mem == {}  # GPU-a, locked first, is reset before the run
    assert not verdict.locked
    assert verdict.why_not.startswith("GPU-b: this card or its driver does not let its clocks be locked")


def test_a_memory_clock_the_driver_keeps_leaves_the_sm_lock(monkeypatch):
    nvml = install_clock_nvml(monkeypatch, refuse_memory={"GPU-0": NOT_SUPPORTED})
    with locked_clocks("base") as verdict:
        assert nvml.sm and not nvml.mem
    assert verdict.locked and "Not Supported" in verdict.cards[0].mem_why_not
    assert nvml.sm == {}  # and no memory reset was asked of a clock never locked (the fake would raise)


def test_without_nvml_the_verdict_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # as if nvidia-ml-py were not installed
    with locked_clocks("base") as verdict:
        pass
    assert not verdict.locked and "nvidia-ml-py not installed" in verdict.why_not


def test_mhz_above_the_cards_top_is_a_usage_error_with_nothing_left_locked(monkeypatch):
    nvml = install_clock_nvml(monkeypatch)
    with pytest.raises(UsageError, match=f"above this card's highest SM clock, {TOP_SM_MHZ} MHz"), \
            locked_clocks("5000"):
        pass
    assert nvml.sm == {} and nvml.started == 0


def test_a_failed_reset_is_one_line_naming_the_command(monkeypatch):
    nvml = install_clock_nvml(monkeypatch, reset_raises=RuntimeError("GPU is lost"))
    lines = []
    with locked_clocks("base", warn=lines.append):
        pass
    assert len(lines) == 1 and "GPU-0" in lines[0] and "GPU is lost" in lines[0]
    assert "nvidia-smi -i GPU-0 -rgc" in lines[0]
    assert nvml.mem == {}  # the memory clock was reset all the same


def test_a_reset_cut_short_by_a_second_interrupt_is_finished_at_exit(monkeypatch):
    registered = []
    monkeypatch.setattr(atexit, "register", registered.append)
    monkeypatch.setattr(atexit, "unregister", registered.remove)
    nvml = install_clock_nvml(monkeypatch, reset_raises=KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt), locked_clocks("base"):
        pass
    assert nvml.sm  # the interrupted reset left the card locked ...
    (at_exit,) = registered
    at_exit()  # ... until the interpreter exits
    assert nvml.sm == nvml.mem == {} and nvml.started == 0
