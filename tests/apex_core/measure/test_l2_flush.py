"""The cold-L2 flush: the persisting lines reset before the write, and said so where they cannot be."""

import pytest

from apex_core.measure import l2_flush
from apex_core.measure.l2_flush import L2Flush, _driver_reset, flush_method, persisting_reset


class FakeBuffer:
    def __init__(self, log):
        self.log = log

    def zero_(self):
        self.log.append("write")

    def numel(self):
        return 1024


class FakeDriver:
    def __init__(self, code):
        self.calls = 0

        def reset():  # a plain function: ctypes sets restype and argtypes on it
            self.calls += 1
            return code
        self.cuCtxResetPersistingL2Cache = reset


@pytest.fixture
def driver(monkeypatch):
    """Stands in for libcuda.so.1; persisting_reset's cache is cleared around each test."""
    made = {"loads": 0}

    def install(code=0, error=None):
        def cdll(name):
            assert name == "libcuda.so.1"
            made["loads"] += 1
            if error is not None:
                raise error
            made["driver"] = FakeDriver(code)
            return made["driver"]
        monkeypatch.setattr(l2_flush.ctypes, "CDLL", cdll)
        monkeypatch.setattr(l2_flush.torch.cuda, "synchronize", lambda: None)
        return made
    _driver_reset.cache_clear()
    yield install
    _driver_reset.cache_clear()


def test_the_reset_comes_before_the_write_on_every_flush():
    log = []
    flush = L2Flush(FakeBuffer(log), lambda: log.append("reset") or 0)
    flush()
    flush()
    assert log == ["reset", "write", "reset", "write"]
    assert flush.numel() == 1024


def test_without_a_reset_the_flush_still_writes():
    log = []
    L2Flush(FakeBuffer(log), None)()
    assert log == ["write"]


def test_the_driver_reset_is_tried_once_and_used(driver):
    made = driver(code=0)
    reset, why_not = persisting_reset()
    assert why_not == "" and reset is not None
    assert made["driver"].calls == 1  # tried when found, before any sample relies on it
    reset()
    assert made["driver"].calls == 2
    assert flush_method() == "persisting lines reset, then 2x L2 written"
    assert made["loads"] == 1  # the library is opened once a process; each check calls it anew
    assert made["driver"].calls == 3


def test_a_driver_that_refuses_the_reset_is_named_with_its_code(driver):
    driver(code=801)  # CUDA_ERROR_NOT_SUPPORTED
    reset, why_not = persisting_reset()
    assert reset is None
    assert "CUresult 801" in why_not
    assert flush_method().startswith("2x L2 written (persisting L2 lines not reset")


def test_no_nvidia_driver_means_no_reset_and_says_why(driver):
    driver(error=OSError("libcuda.so.1: cannot open shared object file"))
    reset, why_not = persisting_reset()
    assert reset is None
    assert "cannot open shared object file" in why_not


def test_a_driver_without_the_entry_point_says_so(driver, monkeypatch):
    class Old:  # a libcuda older than the function (CUDA 11.0)
        pass
    driver()
    monkeypatch.setattr(l2_flush.ctypes, "CDLL", lambda name: Old())
    reset, why_not = persisting_reset()
    assert reset is None and "no cuCtxResetPersistingL2Cache" in why_not


def test_a_reset_that_fails_while_sampling_is_counted_and_noted():
    log, codes = [], iter([0, 201, 0, 201])
    flush = L2Flush(FakeBuffer(log), lambda: next(codes))
    for _ in range(4):
        flush()
    assert log == ["write"] * 4  # the write still runs: the normal lines still leave
    assert flush.failed == 2 and flush.last_code == 201
    note = flush.failure_note()
    assert "not reset before 2 flushes (cuCtxResetPersistingL2Cache returned CUresult 201)" in note
    assert L2Flush(FakeBuffer([]), lambda: 0).failure_note() == ""


def test_a_record_made_without_a_cuda_context_only_looks_the_reset_up(driver, monkeypatch):
    made = driver(code=0)
    monkeypatch.setattr(l2_flush.torch.cuda, "synchronize", lambda: pytest.fail("made a CUDA context"))
    assert flush_method(try_reset=False) == "persisting lines reset, then 2x L2 written"
    assert made["driver"].calls == 0  # looked up, never called
