"""The timing stream: chosen once per process and device by its cold floor, then shared."""

import itertools
import types

import pytest

from apex_core.measure import cuda_timer, timing_stream
from apex_core.measure.timing_stream import CANDIDATES, choose, chosen


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
    first = choose(0, new_stream, probe)
    assert first.stream == 4 and first.chosen == 4 and first.failed == ""
    assert first.floors_us == pytest.approx(tuple(f * 1e3 for f in floors))
    assert probed == list(range(CANDIDATES))
    # later timers of the process take the same stream without measuring again
    assert choose(0, new_stream, probe) is first
    assert len(probed) == CANDIDATES and chosen(0) is first
    kept = first.as_metadata()
    assert kept["chosen"] == 4 and kept["floors_us"][4] == pytest.approx(2.9)
    assert "candidate 4 of 9" in kept["note"]


def test_each_device_gets_its_own_choice_under_its_own_key():
    new_stream, probe, probed = floors_by_stream([0.003 - 0.0001 * i for i in range(2 * CANDIDATES)])
    on_0 = choose(0, new_stream, probe)
    on_1 = choose(1, new_stream, probe)
    assert on_0.stream == CANDIDATES - 1 and on_1.stream == 2 * CANDIDATES - 1
    assert chosen(0) is on_0 and chosen(1) is on_1 and chosen(2) is None
    assert choose(0, new_stream, probe) is on_0 and len(probed) == 2 * CANDIDATES


def test_a_failing_probe_leaves_one_plain_stream_with_the_reason_and_is_not_retried():
    calls = []

    def probe(stream):
        calls.append(stream)
        raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore")

    new_stream = itertools.count().__next__
    choice = choose(0, new_stream, probe)
    assert choice.stream == 0 and choice.floors_us == ()
    assert choice.failed == "the probe failed: CUDA error: an illegal memory access was encountered"
    assert choose(0, new_stream, probe) is choice and len(calls) == 1
    kept = choice.as_metadata()
    assert kept["chosen"] is None and "not chosen: the probe failed" in kept["note"]


@pytest.fixture
def fake_cuda(monkeypatch):
    """cuda_timer on a fake CUDA: pool streams named in turn, a current device the test sets, no
    flush buffer, no hold; each candidate's probe rounds read from ``levels``."""
    made = itertools.count()
    state = types.SimpleNamespace(device=0, probed=[], levels={})
    fake = types.SimpleNamespace(current_device=lambda: state.device, Stream=lambda: f"stream-{next(made)}")
    monkeypatch.setattr(cuda_timer, "torch", types.SimpleNamespace(cuda=fake))
    monkeypatch.setattr(cuda_timer.L2Flush, "on_device", classmethod(lambda cls, device: None))
    monkeypatch.setattr(cuda_timer, "probe_stream_hold", lambda: (None, "no hold here"))

    def measure_raw(timer, call, options, why_unheld):
        # the candidate's own timer samples on the candidate, cold, with the floor's short sampling
        state.probed.append((timer.stream, options.hold))
        assert options.cache == "cold" and options.max_time_s == cuda_timer.FLOOR_MAX_TIME_S
        rounds = state.levels.get(timer.stream, [0.0040, 0.0040])
        p50 = rounds[sum(1 for stream, _ in state.probed if stream == timer.stream) - 1]
        return types.SimpleNamespace(stats=types.SimpleNamespace(p50=p50)), why_unheld, []

    monkeypatch.setattr(cuda_timer.CudaTimer, "_measure_raw", measure_raw)
    monkeypatch.setattr(cuda_timer.CudaTimer, "_floor_call", lambda self, graph: lambda: None)
    return state


def test_a_timer_without_a_stream_takes_its_devices_process_stream(fake_cuda):
    # stream 6's second round is its low one: the lower of the two rounds counts
    fake_cuda.levels = {"stream-6": [0.0045, 0.0030], "stream-2": [0.0033, 0.0034]}
    options = cuda_timer.TimingOptions(energy=False)
    first, second = cuda_timer.CudaTimer(options), cuda_timer.CudaTimer(options)
    assert first.stream == second.stream == "stream-6"
    assert [stream for stream, _ in fake_cuda.probed] == [
        f"stream-{i}" for i in range(CANDIDATES) for _ in range(cuda_timer.STREAM_PROBE_ROUNDS)]
    assert cuda_timer.CudaTimer(options, stream="mine").stream == "mine"
    fake_cuda.device = 1  # another device: a choice of its own, from the pool's next streams
    assert cuda_timer.CudaTimer(options).stream == f"stream-{CANDIDATES}"
    assert chosen(0).stream == "stream-6" and chosen(1).stream == f"stream-{CANDIDATES}"


def test_the_probe_holds_only_where_the_first_timer_would(fake_cuda):
    cuda_timer.CudaTimer(cuda_timer.TimingOptions(energy=False, hold=False))
    assert fake_cuda.probed and {held for _, held in fake_cuda.probed} == {False}
