"""Spot checks inside the timing loops: the CPU timer and the CUDA timer's logic (with the fake
CUDA of test_cuda_timer.py), honest and stale calls, inputs changed while timed."""

from __future__ import annotations

import attrs
import pytest
import torch

from apex_core.correctness import compare_outputs
from apex_core.measure import cuda_timer
from apex_core.measure.spot_checks import FreshSet, SpotChecks, SpotWrong
from apex_core.results import Tolerance
from apex_core.timing import TimingOptions, measure_cpu
from tests.apex_core.measure.test_cuda_timer import OPTIONS, TRIP_S, FakeClock, FakeHold, make_timer

TOL = Tolerance(1e-6, 1e-5)
CPU_OPTIONS = TimingOptions(warmup=2, min_iters=40, min_time_s=0.0, max_time_s=1.0)


def double(inputs):
    return {"y": inputs["x"] * 2}


def spot_checks(slots, spots=frozenset({0, 10, 20})):
    sets = [FreshSet({"x": torch.full((4,), float(n + 1))}, {"y": torch.full((4,), 2.0 * (n + 1))})
            for n in range(3)]
    return SpotChecks(sets, slots, lambda out, ref: compare_outputs(out, ref, TOL, "during-timing"), spots)


def test_cpu_honest_calls_pass_and_their_samples_are_marked_fresh():
    inputs = {"x": torch.zeros(4)}
    spot = spot_checks([inputs])
    measure_cpu(lambda: double(inputs), CPU_OPTIONS, spot=spot)
    assert spot.fresh == [0, 10, 20] and not spot.sets  # every set used once


def test_cpu_stale_outputs_inside_the_loop_are_wrong():
    inputs = {"x": torch.zeros(4)}
    first = double(inputs)
    with pytest.raises(SpotWrong, match="wrong result in the timed call on fresh input set 1 of 3"):
        measure_cpu(lambda: first, CPU_OPTIONS, spot=spot_checks([inputs]))


def test_cpu_inputs_changed_while_timed_are_caught_at_the_next_refresh():
    inputs = {"x": torch.zeros(4)}

    def mutating():
        out = double(inputs)
        inputs["x"][0] = out["y"][0]  # after computing: the answer is right, the input is not kept
        return out

    with pytest.raises(SpotWrong, match="changed its input 'x'.*before fresh input set 2 of 3"):
        measure_cpu(mutating, CPU_OPTIONS, spot=spot_checks([inputs]))


def _advancing(clock, inputs, stale=None):
    def call():
        clock.now_ms += 0.01
        return stale if stale is not None else double(inputs)
    return call


def test_cuda_timer_spot_checks_the_placement_called_next():
    clock = FakeClock()
    first, second = {"x": torch.zeros(4)}, {"x": torch.zeros(4)}
    spot = spot_checks([first, second])
    make_timer(clock, None, OPTIONS).measure(_advancing(clock, first), [_advancing(clock, second)], spot=spot)
    assert spot.fresh and set(spot.expected) <= {0, 1}
    assert spot.fresh[0] == 0


def test_cuda_timer_stale_outputs_are_wrong():
    clock = FakeClock()
    inputs = {"x": torch.zeros(4)}
    stale = double(inputs)
    with pytest.raises(SpotWrong, match="wrong result in the timed call on fresh input set 1 of 3"):
        make_timer(clock, None, OPTIONS).measure(_advancing(clock, inputs, stale), spot=spot_checks([inputs]))


def test_the_checks_own_time_does_not_eat_the_cells_sampling_time():
    # at a large size a check (a GB of inputs to write and compare) can outlast --max-time; the
    # stop rule must not see it, or the cell stops at its minimum samples on the time cap
    import time

    inputs = {"x": torch.zeros(4)}

    def slow_compare(out, ref):
        time.sleep(0.3)
        return compare_outputs(out, ref, TOL, "during-timing")

    sets = [FreshSet({"x": torch.full((4,), float(n + 1))}, {"y": torch.full((4,), 2.0 * (n + 1))})
            for n in range(3)]
    spot = SpotChecks(sets, [inputs], slow_compare, frozenset({0, 1, 2}))
    options = TimingOptions(warmup=0, min_iters=5, min_time_s=0.05, max_time_s=0.25)
    timing = measure_cpu(lambda: double(inputs), options, spot=spot)
    assert spot.fresh == [0, 1, 2] and spot.spent_s >= 0.9
    assert timing.stop_reason != "time_cap" and len(timing.samples_ms) > 5


# the cell's own inputs back after each spot call ----------------------------------------------


def restoring_checks(slots, spots=frozenset({0, 10, 20})):
    """Spot checks that write the cell's own inputs (zeros, as every slot holds) back after each spot."""
    spot = spot_checks(slots, spots)
    spot.own = {"x": torch.zeros(4)}
    return spot


def test_cpu_every_call_but_the_spot_calls_runs_on_the_cells_own_inputs():
    inputs = {"x": torch.zeros(4)}
    seen = []

    def recording():
        seen.append(float(inputs["x"][0]))
        return double(inputs)

    spot = restoring_checks([inputs])
    timing = measure_cpu(recording, CPU_OPTIONS, spot=spot)
    sampled = seen[CPU_OPTIONS.warmup:CPU_OPTIONS.warmup + len(timing.samples_ms)]
    assert [i for i, x in enumerate(sampled) if x != 0.0] == [0, 10, 20]  # sets 1, 2, 3 and only there
    assert sampled[0] == 1.0 and sampled[10] == 2.0 and sampled[20] == 3.0
    # one more call at the end on the set last written, checked; the inputs then hold that set
    assert seen[-1] == 3.0 and len(seen) == CPU_OPTIONS.warmup + len(timing.samples_ms) + 1
    assert torch.equal(inputs["x"], torch.full((4,), 3.0))


def test_cpu_inputs_changed_by_the_spot_call_are_caught_before_they_are_restored():
    inputs = {"x": torch.zeros(4)}

    def mutating():
        out = double(inputs)
        inputs["x"][0] = out["y"][0]
        return out

    with pytest.raises(SpotWrong, match="changed its input 'x'.*after the timed call on fresh input set 1"):
        measure_cpu(mutating, CPU_OPTIONS, spot=restoring_checks([inputs]))


def test_cpu_inputs_changed_after_they_were_restored_are_caught_at_the_next_refresh():
    inputs = {"x": torch.zeros(4)}
    calls = []

    def mutating_later():
        calls.append(1)
        out = double(inputs)
        if float(inputs["x"][0]) == 0.0 and len(calls) > CPU_OPTIONS.warmup + 3:
            inputs["x"][1] = 7.0  # on the cell's own inputs, between the spots
        return out

    with pytest.raises(SpotWrong, match="changed its input 'x'.*before fresh input set 2 of 3"):
        measure_cpu(mutating_later, CPU_OPTIONS, spot=restoring_checks([inputs]))


def test_cuda_timer_puts_the_cells_inputs_back_in_every_placement_it_refreshed():
    clock = FakeClock()
    first, second = {"x": torch.zeros(4)}, {"x": torch.zeros(4)}
    seen = []

    def recording(inputs):
        def call():
            seen.append(float(inputs["x"][0]))
            clock.now_ms += 0.01
            return double(inputs)
        return call

    spot = restoring_checks([first, second])
    options = attrs.evolve(OPTIONS, min_iters=60)
    timing = make_timer(clock, None, options).measure(recording(first), [recording(second)], spot=spot)
    assert spot.fresh[:2] == [0, 10] and len(timing.samples_ms) >= 60
    # the spot call's batch (10 samples, 5 on the refreshed placement) runs on the set; after it
    # the cell's own inputs again; and one more call at the end
    assert sum(x != 0.0 for x in seen) == 5 * len(spot.fresh) + 1
    # the final check's call ran on the set last written, back in its placement
    assert seen[-1] != 0.0 and spot.holding[spot.last_slot] is spot.expected[spot.last_slot].inputs


def test_two_spots_queued_before_either_is_checked_are_both_checked_and_given_back():
    # the kernel timer profiles many calls in one session and checks its spots after it
    first, second = {"x": torch.zeros(4)}, {"x": torch.zeros(4)}
    spot = restoring_checks([first, second])
    outputs = {}
    for index, slot in ((0, 0), (10, 0)):
        assert spot.before(index, slot)
        outputs[index] = spot.keep(double([first, second][slot]))
        spot.release(index)  # right after the call, as the kernel timer does
        assert torch.equal(first["x"], torch.zeros(4))
    spot.after(0, outputs[0], 0.01)
    spot.after(10, outputs[10], 0.01)
    assert spot.fresh == [0, 10] and not spot.pending
    # a wrong answer on the second set is not lost behind the first
    spot = restoring_checks([first, second])
    for index, answer in ((0, 2.0), (10, 99.0)):
        spot.before(index, 0)
        outputs[index] = spot.keep({"y": torch.full((4,), answer)})
        spot.release(index)
    spot.after(0, outputs[0], 0.01)
    with pytest.raises(SpotWrong, match="fresh input set 2 of 3"):
        spot.after(10, outputs[10], 0.01)


def test_inputs_changed_after_the_last_restore_are_caught_at_the_end():
    first, second = {"x": torch.zeros(4)}, {"x": torch.zeros(4)}
    spot = restoring_checks([first, second])
    spot.before(0, 0)
    spot.after(0, double(first), 0.01)
    first["x"][2] = 5.0  # a later call wrote its input
    with pytest.raises(SpotWrong, match="changed its input 'x'.*by the end of timing"):
        spot.rewrite()


def test_a_spot_batch_released_by_the_watchdog_is_still_checked_and_given_back(monkeypatch):
    monkeypatch.setattr(cuda_timer, "HOLD_TIMEOUT_MIN_S", TRIP_S)  # trips once, where the call blocks
    clock, hold = FakeClock(), FakeHold()
    first, second = {"x": torch.zeros(4)}, {"x": torch.zeros(4)}

    def synchronizing(inputs):
        def call():
            clock.now_ms += 0.004
            if hold.next and not hold.released.is_set():
                assert hold.released.wait(5), "the watchdog never released the hold"
            return double(inputs)
        return call

    spot = restoring_checks([first, second])
    timing = make_timer(clock, hold, OPTIONS).measure(synchronizing(first), [synchronizing(second)], spot=spot)
    assert "did not finish queueing" in timing.note
    # the first spot's call (in the batch the watchdog released) was checked, and sample 0 of the
    # unheld restart took the next set
    assert spot.fresh[:2] == [0, 0] and not spot.pending


def test_the_cells_own_inputs_are_kept_only_for_several_cuda_placements():
    from apex_core.measure import spot_checks as module
    from apex_core.results import Case
    from apex_core.workloads.tilepack import TilePack

    workload = TilePack()
    case = Case("tilepack", "default", workload.params_type())
    inputs = workload.make_inputs(case, "cpu", torch.float32, 0)
    spot, _ = module.for_cell(workload, case, "fp32", "cpu", 10, [inputs, dict(inputs)],
                              lambda seed: workload.make_inputs(case, "cpu", torch.float32, seed), 3)
    assert spot is not None and spot.own is None  # the CPU keeps its one placement's set


class _Clock:
    """perf_counter_ns for the confirmations: advanced by the fake call and by reading its outputs."""

    def __init__(self):
        self.ns = 0

    def __call__(self):
        return self.ns

    def spend(self, ms):
        self.ns += int(ms * 1e6)


class _ReadCosts(dict):
    """A mapping of another type whose read costs ``read_ms`` on the clock (computed when read)."""

    def __init__(self, clock, read_ms):
        super().__init__(y=torch.zeros(1))
        self.clock, self.read_ms = clock, read_ms

    def __getitem__(self, name):
        self.clock.spend(self.read_ms)
        return super().__getitem__(name)


def _costed_call(clock, call_ms, read_ms):
    """A call whose n-th invocation costs call_ms[n] on the clock; its outputs cost read_ms to read."""
    costs = iter(call_ms)

    def call():
        clock.spend(next(costs))
        return _ReadCosts(clock, read_ms)

    return call


@pytest.mark.parametrize(("call_ms", "read_ms", "caught"), [
    ((0.006, 0.006, 0.006), 0.6, True),
    # the first call after timing stalled on the host: the fastest call is still the call's cost
    ((0.8, 0.04, 0.04), 0.6, True),
    ((0.006, 0.006, 0.006), 0.01, False),  # a read as cheap as the call: nothing computed when read
])
def test_outputs_computed_when_read_are_confirmed_against_the_fastest_call(monkeypatch, call_ms, read_ms,
                                                                            caught):
    from apex_core.measure import spot_checks as module

    clock = _Clock()
    monkeypatch.setattr(module, "perf_counter_ns", clock)
    spot = spot_checks([{"x": torch.zeros(4)}])
    spot.margins = module.MARGINS["cuda"]
    spot.slow_read = (0.6, 0.006)  # a spot call's read during timing was slow
    found = spot.lazy_problem(_costed_call(clock, call_ms, read_ms))
    assert ("its outputs are computed when they are read" in found) is caught
    # a slow read the confirmation cleared is kept for the cell's metadata (integrity_unconfirmed)
    kept = [] if caught else ["reading the outputs of a timed call took 0.6 ms, the call itself 0.006 ms "
                              "(after timing, ms: 0.01 against 0.006, 0.01 against 0.006, 0.01 against 0.006): "
                              "not confirmed"]
    assert spot.unconfirmed == kept


def test_slow_reads_after_timing_alone_are_no_finding(monkeypatch):
    from apex_core.measure import spot_checks as module

    clock = _Clock()
    monkeypatch.setattr(module, "perf_counter_ns", clock)
    spot = spot_checks([{"x": torch.zeros(4)}])
    spot.margins = module.MARGINS["cuda"]
    # every read after timing is slow, but no spot call's read was during timing: nothing to confirm
    assert spot.lazy_problem(_costed_call(clock, (0.006, 0.006, 0.006), 0.6)) == ""


@pytest.mark.parametrize(("repeat_ms", "caught"), [
    ((0.005, 0.005, 0.005), True),
    ((0.9, 0.005, 0.005), True),  # one repeat stalled on the host: the cache still shows
    ((0.5, 0.5, 0.5), False),  # fresh and repeated calls alike: no cache
])
def test_a_cache_is_confirmed_against_the_repeats_median(monkeypatch, repeat_ms, caught):
    from apex_core.measure import spot_checks as module

    clock = _Clock()
    monkeypatch.setattr(module, "perf_counter_ns", clock)
    spot = spot_checks([{"x": torch.zeros(4)}])
    spot.margins = module.MARGINS["cuda"]
    spot.more_inputs = lambda number: {"x": torch.full((4,), 10.0 + number)}
    costs = iter([ms for repeat in repeat_ms for ms in (0.5, repeat)])  # each round: fresh, then repeated
    found = spot._confirm(lambda: clock.spend(next(costs)), lambda: None)
    assert bool(found) is caught


def test_fresh_calls_slow_in_timing_and_not_after_are_kept_as_unconfirmed(monkeypatch):
    from apex_core.measure import spot_checks as module

    clock = _Clock()
    monkeypatch.setattr(module, "perf_counter_ns", clock)
    spot = spot_checks([{"x": torch.zeros(4)}])
    spot.margins = module.MARGINS["cuda"]
    spot.more_inputs = lambda number: {"x": torch.full((4,), 10.0 + number)}
    spot.fresh = [0, 10]  # the two spot calls: slow in timing (a cold start), the rest fast
    samples = tuple(0.5 if i in (0, 10) else 0.005 for i in range(40))
    found = spot.caching_problem(samples, lambda: clock.spend(0.5), lambda: None)  # fresh and repeats alike
    assert found == ""
    assert spot.unconfirmed == ["its 2 timed calls on freshly written inputs took 0.5, 0.5 ms, the others p50 "
                                "0.005 ms: not confirmed after timing"]
