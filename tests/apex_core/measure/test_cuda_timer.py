"""The held event timer's logic with a fake CUDA (the real one needs a GPU: scripts/timer_check.py).

The fakes stand in for torch.cuda's events, streams and synchronization and for the
driver's stream hold: a fake event's time is read from a clock the test advances, and
a "synchronizing" call blocks until its sample is released, as a real one would.
"""

import contextlib
import itertools
import statistics
import threading
import time
import types

import attrs
import pytest

from apex_core.measure import cuda_timer, tuning_timer
from apex_core.measure.cuda_timer import CudaTimer, hold_timeout_s, subtract_floor
from apex_core.measure.stream_hold import Watchdog, _after
from apex_core.measure.tuning_timer import tuning_bench
from apex_core.results import Timing
from apex_core.stats import summarize
from apex_core.timing import TimingOptions


class FakeClock:
    def __init__(self):
        self.now_ms = 0.0


class FakeEvent:
    def __init__(self, clock):
        self.clock = clock
        self.at = None

    def record(self, stream=None):
        self.at = self.clock.now_ms

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return end.at - self.at


def fake_torch(clock):
    cuda = types.SimpleNamespace(
        Event=lambda enable_timing=True: FakeEvent(clock),
        synchronize=lambda: None,
        stream=lambda s: contextlib.nullcontext(),
        current_device=lambda: 0,
    )
    return types.SimpleNamespace(cuda=cuda)


class FakeHold:
    """Numbers each hold; ``released`` is set once the host (or the watchdog) lets it pass."""

    def __init__(self):
        self.next = 0
        self.released_numbers = []
        self.released = threading.Event()

    def hold(self, stream):
        self.next += 1
        self.released.clear()
        return self.next

    def release(self, number):
        self.released_numbers.append(number)
        self.released.set()

    def close(self):
        pass


def make_timer(clock, hold, options):
    timer = object.__new__(CudaTimer)
    timer.torch = fake_torch(clock)
    timer.event, timer.elapsed = timer.torch.cuda.Event, FakeEvent.elapsed_time
    timer.options = options
    timer.stream = object()
    timer.flush = None
    timer.hold = hold
    timer.unheld_reason = "" if hold is not None else "not held (--no-hold)"
    return timer


OPTIONS = TimingOptions(warmup=2, min_iters=20, min_time_s=0.0, max_time_s=5.0, subtract_floor=False)
# The watchdog's timeout in tests where it must not trip (a stall of a loaded CI machine is no
# reason to release a hold there) and in tests where it must, once, when the test's call blocks
NO_TRIP_S, TRIP_S = 5.0, 0.5


def test_every_sample_is_held_and_released_and_host_time_is_measured(monkeypatch):
    monkeypatch.setattr(cuda_timer, "HOLD_TIMEOUT_MIN_S", NO_TRIP_S)
    clock, hold = FakeClock(), FakeHold()
    timer = make_timer(clock, hold, OPTIONS)

    def call():
        clock.now_ms += 0.004  # the device time the events see
        time.sleep(0.0002)  # the host's cost to issue it

    timing = timer.measure(call)
    assert timing.method == "cuda_event_held" and timing.note == ""
    assert timing.stats.p50 == pytest.approx(0.004)
    assert hold.released_numbers == list(range(1, hold.next + 1))
    assert timing.host_ms >= 0.2


def test_a_call_that_raises_inside_a_held_sample_releases_its_hold():
    # the stream is every timer's of the process: a hold left behind would stall all of them
    clock, hold = FakeClock(), FakeHold()
    timer = make_timer(clock, hold, OPTIONS)
    calls = itertools.count()

    def call():
        if next(calls) == OPTIONS.warmup + 3:
            raise ValueError("the plugin's call failed")
        clock.now_ms += 0.004

    with pytest.raises(ValueError, match="plugin's call failed"):
        timer.measure(call)
    assert hold.next > 0 and hold.released_numbers == list(range(1, hold.next + 1))


def test_each_sample_is_flushed_before_its_hold_and_a_failed_reset_is_noted(monkeypatch):
    from apex_core.measure.l2_flush import L2Flush

    monkeypatch.setattr(cuda_timer, "HOLD_TIMEOUT_MIN_S", NO_TRIP_S)
    clock, hold = FakeClock(), FakeHold()
    timer = make_timer(clock, hold, OPTIONS)
    order, codes = [], iter([0, 201] + [0] * 10_000)

    class Buffer:
        def zero_(self):
            order.append("write")

    def reset():
        order.append("reset")
        return next(codes)
    timer.flush = L2Flush(Buffer(), reset)
    original_hold = hold.hold

    def held(stream):
        order.append("hold")
        return original_hold(stream)
    hold.hold = held

    def call():
        clock.now_ms += 0.004
    timing = timer.measure(call)
    samples = order.count("hold")
    assert samples >= timing.stats.n and order[:3] == ["reset", "write", "hold"]
    assert order == ["reset", "write", "hold"] * samples  # every sample: reset, write, then its hold
    assert "not reset before 1 flush (cuCtxResetPersistingL2Cache returned CUresult 201)" in timing.note


def test_a_call_that_synchronizes_inside_the_hold_is_released_by_the_watchdog_and_timed_unheld(monkeypatch):
    monkeypatch.setattr(cuda_timer, "HOLD_TIMEOUT_MIN_S", TRIP_S)
    clock, hold = FakeClock(), FakeHold()
    timer = make_timer(clock, hold, OPTIONS)
    held_calls = []

    def synchronizing_call():
        clock.now_ms += 0.004
        if hold.next and not hold.released.is_set():
            held_calls.append(hold.next)
            # a real sync would wait for the GPU, which waits for this very release
            assert hold.released.wait(5), "the watchdog never released the hold"

    timing = timer.measure(synchronizing_call)
    assert held_calls, "the first held sample should have blocked"
    assert timing.method == "cuda_event"
    assert "did not finish queueing" in timing.note and "without the hold" in timing.note
    assert timing.stats.n >= OPTIONS.min_iters


def test_without_a_hold_the_method_and_note_say_so():
    clock = FakeClock()
    timer = make_timer(clock, None, OPTIONS)
    timing = timer.measure(lambda: setattr(clock, "now_ms", clock.now_ms + 0.01))
    assert timing.method == "cuda_event" and timing.note == "not held (--no-hold)"


def test_the_floor_is_subtracted_and_kept():
    raw = Timing("cuda_event_held", "cold", (0.005, 0.006, 0.002), summarize([0.005, 0.006, 0.002]), "noise")
    net = subtract_floor(raw, 0.003)
    assert net.samples_ms == pytest.approx((0.002, 0.003, 0.0))
    assert net.stats.p50 == pytest.approx(0.002) and net.floor_ms == 0.003


def test_measure_subtracts_the_same_methods_floor(monkeypatch):
    clock, hold = FakeClock(), FakeHold()
    options = attrs.evolve(OPTIONS, subtract_floor=True)
    timer = make_timer(clock, hold, options)
    def empty_kernel():
        return lambda: setattr(clock, "now_ms", clock.now_ms + 0.003)

    monkeypatch.setattr(cuda_timer, "empty_kernel", empty_kernel)
    timing = timer.measure(lambda: setattr(clock, "now_ms", clock.now_ms + 0.010))
    assert timing.floor_ms == pytest.approx(0.003)
    assert timing.stats.p50 == pytest.approx(0.007)
    assert timing.floor_rounds_ms == pytest.approx([0.003] * cuda_timer.FLOOR_ROUNDS)


def test_samples_are_taken_from_every_placement_in_turn_and_pooled():
    clock, hold = FakeClock(), FakeHold()
    timer = make_timer(clock, hold, attrs.evolve(OPTIONS, min_iters=30))
    order = []

    def placement(name, device_ms):
        def call():
            order.append(name)
            clock.now_ms += device_ms
        return call

    first, second, third = placement("a", 0.004), placement("b", 0.005), placement("c", 0.009)
    timing = timer.measure(first, [second, third])
    assert timing.placements == 3 and timing.method == "cuda_event_held"
    assert order[:6] == ["a", "b", "c", "a", "b", "c"]  # warm-up and samples alike
    # every placement gave a third of the samples, so the median is the middle placement's
    assert sorted({round(s, 6) for s in timing.samples_ms}) == [0.004, 0.005, 0.009]
    assert timing.stats.p50 == pytest.approx(0.005)
    assert {name: order.count(name) for name in "abc"}["a"] - order.count("c") in (0, 1)


def test_fewer_samples_than_placements_count_only_the_placements_sampled():
    clock = FakeClock()
    options = TimingOptions(fixed_iters=2, subtract_floor=False)
    step = [lambda: setattr(clock, "now_ms", clock.now_ms + 0.01)] * 4
    timing = make_timer(clock, None, options).measure(step[0], step[1:])
    assert timing.stats.n == 2 and timing.placements == 2


def test_one_callable_is_one_placement():
    clock = FakeClock()
    timing = make_timer(clock, None, OPTIONS).measure(lambda: setattr(clock, "now_ms", clock.now_ms + 0.01))
    assert timing.placements == 1


def test_hold_timeout_grows_with_the_host_time_within_bounds():
    assert hold_timeout_s([]) == cuda_timer.HOLD_TIMEOUT_MIN_S
    assert hold_timeout_s([0.001, 0.05]) == pytest.approx(1.0)
    assert hold_timeout_s([10.0]) == cuda_timer.HOLD_TIMEOUT_MAX_S


def test_watchdog_releases_only_what_is_not_disarmed_in_time():
    released = []
    dog = Watchdog(released.append)
    try:
        dog.arm(1, 0.5)
        dog.disarm()
        time.sleep(0.05)
        assert released == [] and not dog.tripped
        dog.arm(2, 0.02)
        deadline = time.monotonic() + 2
        while not released and time.monotonic() < deadline:
            time.sleep(0.005)
        assert released == [2] and dog.tripped
    finally:
        dog.close()


def test_the_hold_counter_orders_numbers_across_wrap_around():
    assert _after(5, 4) and not _after(4, 5) and not _after(4, 4)
    assert _after(1, 0x7FFFFFFF)  # 1 comes after the last number before the counter wraps


def test_tuning_bench_answers_like_triton_do_bench_with_one_timer_per_device(monkeypatch):
    samples = (0.004, 0.001, 0.002, 0.003, 0.005)
    fake = types.SimpleNamespace(measure=lambda fn: Timing("cuda_event_held", "cold", samples,
                                                           summarize(samples), "noise"))
    device = [0]
    made = []
    monkeypatch.setattr(tuning_timer, "_timers", {})
    monkeypatch.setattr(tuning_timer.torch.cuda, "current_device", lambda: device[0])
    monkeypatch.setattr(tuning_timer, "CudaTimer", lambda options: made.append(options) or fake)
    assert tuning_bench(lambda: None, quantiles=(0.5, 0.2, 0.8)) == pytest.approx([0.003, 0.0018, 0.0042])
    assert tuning_bench(lambda: None) == pytest.approx(0.003)
    assert tuning_bench(lambda: None, return_mode="min") == pytest.approx(0.001)
    assert made == [tuning_timer.TUNING_OPTIONS]
    device[0] = 1  # another device gets a timer of its own
    tuning_bench(lambda: None)
    assert len(made) == 2 and set(tuning_timer._timers) == {0, 1}


def test_an_interleaved_floor_is_sampled_between_the_cells_batches(monkeypatch):
    clock, hold = FakeClock(), FakeHold()
    options = attrs.evolve(OPTIONS, subtract_floor=True, floor_sampling="interleaved")
    timer = make_timer(clock, hold, options)
    order = []
    # the empty kernel's level moves with time (3 ns in the warm-up and the first batch, 4 ns
    # after it): the floor must span the cell's sampling, not one moment of it
    floors_taken = []

    def empty_kernel():
        def launch():
            order.append("floor")
            level = 0.003 if len(floors_taken) < cuda_timer.FLOOR_WARMUP + 10 else 0.004
            floors_taken.append(level)
            clock.now_ms += level
        return launch

    def cell():
        order.append("cell")
        clock.now_ms += 0.010

    def no_rounds(*_args):
        raise AssertionError("an interleaved floor takes no rounds of its own")

    monkeypatch.setattr(cuda_timer, "empty_kernel", empty_kernel)
    monkeypatch.setattr(CudaTimer, "_floor", no_rounds)
    timing = timer.measure(cell)
    # warm-up of each, then a batch of ten cell samples followed by ten floor samples, again and again
    warm = options.warmup + cuda_timer.FLOOR_WARMUP
    runs = [order[warm + i * 10: warm + (i + 1) * 10] for i in range((len(order) - warm) // 10)]
    assert runs and all(run == [run[0]] * 10 for run in runs)
    assert [run[0] for run in runs] == ["cell", "floor"] * (len(runs) // 2)
    assert timing.stats.n == 10 * (len(runs) // 2) >= OPTIONS.min_iters
    sampled = floors_taken[cuda_timer.FLOOR_WARMUP:]
    assert sampled.count(0.003) == 10 and sampled.count(0.004) >= 10
    assert timing.floor_ms == pytest.approx(statistics.median(sampled)) and timing.floor_ms > 0.003
    assert timing.stats.p50 == pytest.approx(0.010 - timing.floor_ms)
    assert hold.released_numbers == list(range(1, hold.next + 1))  # the floor's samples are held too


def test_the_kernel_timer_keeps_the_floor_in_rounds(monkeypatch):
    clock = FakeClock()
    options = attrs.evolve(OPTIONS, subtract_floor=True, floor_sampling="interleaved", timer="kernel")
    timer = make_timer(clock, None, options)
    calls = []

    def measure_raw(call, options, why_unheld, floor_call=None):
        calls.append(floor_call)
        samples = (0.010,) * 20
        return Timing("x", "cold", samples, summarize(samples), "noise"), "", []

    monkeypatch.setattr(timer, "_measure_raw", measure_raw)
    monkeypatch.setattr(CudaTimer, "_floor", lambda self, graph, why: (0.004, [0.004]))
    timing = timer.measure(lambda: None)
    assert calls == [None] and timing.method == "kernel_profiler"
    assert timing.floor_ms == 0.004 and timing.stats.p50 == pytest.approx(0.006)


def test_an_unknown_floor_sampling_is_refused():
    with pytest.raises(ValueError, match="floor_sampling"):
        TimingOptions(floor_sampling="once")


def test_an_unheld_fallback_drops_the_floor_samples_taken_held(monkeypatch):
    monkeypatch.setattr(cuda_timer, "HOLD_TIMEOUT_MIN_S", TRIP_S)
    clock, hold = FakeClock(), FakeHold()
    options = attrs.evolve(OPTIONS, subtract_floor=True, floor_sampling="interleaved")
    timer = make_timer(clock, hold, options)
    tripped = []

    def empty_kernel():
        # held floor samples read 5 ns, unheld ones 3 ns: only the second kind may remain
        return lambda: setattr(clock, "now_ms", clock.now_ms + (0.003 if tripped else 0.005))

    cell_calls = []

    def synchronizing_from_the_second_batch():
        cell_calls.append(1)
        clock.now_ms += 0.010
        held_now = hold.next and not hold.released.is_set()
        if len(cell_calls) > options.warmup + 10 and held_now and not tripped:
            assert hold.released.wait(5), "the watchdog never released the hold"
            tripped.append(True)

    medians = []

    def recording_median(values):
        medians.append(list(values))
        return statistics.median(values)

    monkeypatch.setattr(cuda_timer, "empty_kernel", empty_kernel)
    monkeypatch.setattr(CudaTimer, "_floor", lambda *args: pytest.fail("an interleaved floor takes no rounds"))
    monkeypatch.setattr(cuda_timer, "statistics", types.SimpleNamespace(median=recording_median))
    timing = timer.measure(synchronizing_from_the_second_batch)
    assert tripped and timing.method == "cuda_event" and "without the hold" in timing.note
    (floor_samples,) = [values for values in medians if pytest.approx(0.003) in values]
    assert floor_samples == pytest.approx([0.003] * len(floor_samples))  # none of the held ones
    assert timing.floor_ms == pytest.approx(0.003)
    assert timing.stats.p50 == pytest.approx(0.007)


@pytest.mark.parametrize(("sampling", "second_floor"), [("pooled", 0.004), ("rounds", 0.005)])
def test_a_pooled_floor_averages_every_round_of_the_process_taken_the_same_way(monkeypatch, sampling,
                                                                                 second_floor):
    monkeypatch.setattr(cuda_timer, "_pooled_rounds", {})
    clock, hold = FakeClock(), FakeHold()
    level = [0.003]
    monkeypatch.setattr(cuda_timer, "empty_kernel",
                        lambda: lambda: setattr(clock, "now_ms", clock.now_ms + level[0]))
    options = attrs.evolve(OPTIONS, subtract_floor=True, floor_sampling=sampling)

    def cell():
        clock.now_ms += 0.010

    first = make_timer(clock, hold, options).measure(cell)
    level[0] = 0.005  # the floor's level moved between the two cells
    second = make_timer(clock, hold, options).measure(cell)
    assert first.floor_ms == pytest.approx(0.003) and second.floor_ms == pytest.approx(second_floor)
    assert second.stats.p50 == pytest.approx(0.010 - second_floor)
    # each cell keeps its own rounds, pooled or not: what the floor's spread can be read from
    assert second.floor_rounds_ms == pytest.approx([0.005] * cuda_timer.FLOOR_ROUNDS)
    # another method (here: unheld) has a pool of its own
    unheld = make_timer(clock, None, options).measure(cell)
    assert unheld.floor_ms == pytest.approx(0.005)
