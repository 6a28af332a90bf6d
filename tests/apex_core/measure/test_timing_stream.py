"""The timing stream: chosen once per process and device by its cold floor, then shared."""

import itertools
import types

import pytest

from apex_core.measure import cuda_timer, timing_stream
from apex_core.measure.timing_stream import CANDIDATES, chosen


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch):
    monkeypatch.setattr(timing_stream, "_chosen", {})


def floors_by_stream(floors_ms):
    """New streams numbered 0, 1, ...; the probe reads stream i's floor from ``floors_ms``."""
    counter = itertools.count()
    probed = []

    def probe(stream):
        probed.append(stream)
        return floors_ms[stream]

    return (lambda: next(counter)), probe, probed


def test_the_stream_with_the_lowest_cold_floor_is_chosen_once_and_shared():
    floors = [0.0031, 0.0041, 0.0030, 0.0045, 0.0029, 0.0044, 0.0031, 0.0031, 0.0032]
    new_stream, probe, probed = floors_by_stream(floors)
    first = timing_stream.timing_stream(0, new_stream, probe)
    assert first.stream == 4 and first.chosen == 4
    assert first.floors_us == pytest.approx(tuple(f * 1e3 for f in floors))
    assert probed == list(range(CANDIDATES))
    # later timers of the process take the same stream without measuring again
    assert timing_stream.timing_stream(0, new_stream, probe) is first
    assert len(probed) == CANDIDATES and chosen(0) is first
    assert "stream 5 of 9" in first.describe() and "2.90" in first.describe()


def test_each_device_gets_its_own_choice():
    new_stream, probe, _ = floors_by_stream([0.003 - 0.0001 * i for i in range(2 * CANDIDATES)])
    on_0 = timing_stream.timing_stream(0, new_stream, probe)
    on_1 = timing_stream.timing_stream(1, new_stream, probe)
    assert on_0.stream == CANDIDATES - 1 and on_1.stream == 2 * CANDIDATES - 1
    assert chosen(2) is None


def test_a_timer_without_a_stream_takes_the_process_stream_and_the_probe_names_its_own(monkeypatch):
    made = itertools.count()
    fake_cuda = types.SimpleNamespace(current_device=lambda: 0, Stream=lambda: f"stream-{next(made)}")
    monkeypatch.setattr(cuda_timer, "torch", types.SimpleNamespace(cuda=fake_cuda))
    monkeypatch.setattr(cuda_timer.L2Flush, "on_device", classmethod(lambda cls: None))
    monkeypatch.setattr(cuda_timer, "probe_stream_hold", lambda: (None, "no hold here"))
    probed = []

    def measure_raw(timer, call, options, why_unheld):
        # the candidate's own timer samples on the candidate, cold, with the floor's short sampling
        probed.append(timer.stream)
        assert options.cache == "cold" and options.max_time_s == cuda_timer.FLOOR_MAX_TIME_S
        level = 0.0030 if timer.stream == "stream-6" else 0.0040
        return types.SimpleNamespace(stats=types.SimpleNamespace(p50=level)), why_unheld, []

    monkeypatch.setattr(cuda_timer.CudaTimer, "_measure_raw", measure_raw)
    monkeypatch.setattr(cuda_timer.CudaTimer, "_floor_call", lambda self, graph: lambda: None)
    options = cuda_timer.TimingOptions(energy=False)
    first, second = cuda_timer.CudaTimer(options), cuda_timer.CudaTimer(options)
    assert first.stream == second.stream == "stream-6"
    assert probed == [f"stream-{i}" for i in range(CANDIDATES) for _ in range(cuda_timer.STREAM_PROBE_ROUNDS)]
    assert cuda_timer.CudaTimer(options, stream="mine").stream == "mine"
