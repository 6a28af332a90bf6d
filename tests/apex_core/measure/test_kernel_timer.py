"""The kernel timer's trace parsing, on a real profiler trace and on made-up ones."""

import json

import pytest

from apex_core.measure.kernel_timer import (
    CallActivity,
    KernelTimer,
    call_activities,
    profiler_unavailable_reason,
    summarize_activity,
)
from apex_core.timing import TimingOptions
from tests.conftest import ROOT

TRACE = ROOT / "tests" / "fixtures" / "kineto-sleep-trace.json"


def test_a_real_trace_gives_one_spin_kernel_per_call_and_leaves_the_flush_out():
    events = json.loads(TRACE.read_text())["traceEvents"]
    activities = call_activities(events)
    assert [a.index for a in activities] == list(range(50))
    assert all(a.kernels == 1 for a in activities)
    # torch.cuda._sleep(2000) at 1980 MHz is 1.01 us of spinning plus the launch: the
    # profiler read 1.86-1.95 us; the 35 us flush before each call is not in any call
    assert all(0.0015 < a.busy_ms < 0.0025 for a in activities)
    assert all(a.span_ms == pytest.approx(a.busy_ms, abs=1e-6) for a in activities)
    summary = summarize_activity(activities)
    assert summary.kernels_per_call == 1 and summary.streams == 1 and summary.calls == 50


def event(cat, name, ts, dur, correlation=None, stream=7):
    args = {} if correlation is None else {"correlation": correlation, "stream": stream}
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "args": args}


def test_work_on_other_streams_and_copies_count_and_span_covers_the_gaps():
    events = [
        event("user_annotation", "apex_call_0", 0, 50),
        event("cuda_runtime", "cudaLaunchKernel", 5, 3, correlation=1),
        event("cuda_runtime", "cudaMemcpyAsync", 10, 3, correlation=2),
        event("cuda_driver", "cuLaunchKernel", 20, 3, correlation=3),
        event("cuda_runtime", "cudaLaunchKernel", 60, 3, correlation=4),  # after the range
        event("kernel", "a", 100, 4, correlation=1, stream=7),
        event("gpu_memcpy", "copy", 110, 2, correlation=2, stream=7),
        event("kernel", "b", 104, 10, correlation=3, stream=9),  # a side stream
        event("kernel", "not ours", 200, 50, correlation=4),
        event("kernel", "unrelated", 100, 99),  # no correlation
    ]
    (activity,) = call_activities(events)
    assert activity.busy_ms == pytest.approx(0.016)
    assert activity.span_ms == pytest.approx(0.014)
    assert activity.kernels == 2 and activity.streams == frozenset({7, 9})


def test_a_graph_launched_where_the_profiler_records_no_launch_counts_in_the_call_it_starts_in():
    # as XLA's command buffers read at the large profile on an H100 (scripts/dev/jax_trace.py): every
    # kernel of a call under one correlation id that no host event carries, inside the call's range
    events = [
        event("user_annotation", "apex_call_0", 300, 7500),
        event("kernel", "memcpy32_post", 2600, 938, correlation=2, stream=14),
        event("kernel", "input_scatter_fusion", 5500, 2034, correlation=2, stream=14),
        event("user_annotation", "apex_call_1", 7950, 5400),
        event("kernel", "memcpy32_post", 8160, 938, correlation=11, stream=14),
        event("cuda_runtime", "cudaDeviceSynchronize", 18800, 24, correlation=30),
    ]
    first, second = call_activities(events)
    assert (first.kernels, first.busy_ms) == (2, pytest.approx(2.972))
    assert (second.kernels, second.busy_ms) == (1, pytest.approx(0.938))


def test_a_call_without_device_work_reads_zero_kernels():
    (activity,) = call_activities([event("user_annotation", "apex_call_3", 0, 10)])
    assert activity.index == 3 and activity.kernels == 0 and activity.busy_ms == 0


def test_the_profiler_says_why_it_cannot_time_kernels_without_cuda():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert "no CUDA device" in profiler_unavailable_reason()


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeProfiledTimer(KernelTimer):
    """A kernel timer whose profiler sessions are made up: a slow first session, as CUPTI's start-up."""

    def __init__(self, options, clock, busy_ms=0.5, startup_s=5.0, session_s=0.0, call_s=0.001):
        super().__init__(options, clock=clock)
        self.busy_ms, self.startup_s, self.session_s, self.call_s = busy_ms, startup_s, session_s, call_s
        self.sessions: list[int] = []

    def _synchronize(self):
        pass

    def _session(self, call, calls, first):
        self.clock.now += (self.startup_s if not self.sessions else self.session_s) + calls * self.call_s
        self.sessions.append(calls)
        return [CallActivity(i, self.busy_ms, self.busy_ms, 1, frozenset({7}))
                for i in range(first, first + calls)]


def test_the_profilers_start_up_stays_out_of_the_time_budget_and_iters_holds():
    options = TimingOptions(warmup=0, min_iters=10, min_time_s=0.0, max_time_s=3.0)
    timer = FakeProfiledTimer(options, FakeClock())
    timing = timer.measure(lambda: None)
    # the primer session (one call) took the 5 s start-up; the cell's samples are its own
    assert timer.sessions[0] == 1
    assert timing.stats.n >= 10 and timing.stop_reason != "time_cap"


def test_kernel_timer_sessions_longer_than_the_cap_still_give_iters_samples():
    # every session costs 4 s (tracing, export, parse: over the 3 s cap), each call reads 0.5 ms
    options = TimingOptions(warmup=0, min_iters=10, min_time_s=0.0, max_time_s=3.0)
    timer = FakeProfiledTimer(options, FakeClock(), startup_s=4.0, session_s=4.0)
    timing = timer.measure(lambda: None)
    assert timing.stats.n >= 10 and timing.stop_reason == "time_cap"


class IdleTimer(FakeProfiledTimer):
    """Calls whose device activity the test chooses: ``busy(index)`` ms, 0 for none at all."""

    def __init__(self, options, busy):
        super().__init__(options, FakeClock(), startup_s=0.0)
        self.busy = busy

    def _session(self, call, calls, first):
        super()._session(call, calls, first)
        return [CallActivity(i, b, b, int(b > 0), frozenset({7}) if b else frozenset())
                for i in range(first, first + calls) for b in [self.busy(i)]]


def test_calls_without_any_device_work_keep_their_zero_samples():
    options = TimingOptions(warmup=0, min_iters=10, min_time_s=0.0, max_time_s=3.0)
    timing = IdleTimer(options, lambda i: 0.0).measure(lambda: None)
    assert timing.stats.n >= 10 and set(timing.samples_ms) == {0.0} and timing.stats.p50 == 0


def test_calls_that_work_only_some_of_the_time_are_an_error_naming_an_idle_call():
    options = TimingOptions(warmup=0, min_iters=10, min_time_s=0.0, max_time_s=3.0)
    with pytest.raises(RuntimeError, match="device activity in .* of .* timed calls and none in call 3"):
        IdleTimer(options, lambda i: 0.0 if i % 4 == 3 else 0.5).measure(lambda: None)
