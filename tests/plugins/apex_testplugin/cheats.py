"""Backends that cheat the timing, one per published class (docs/anti-cheat.md).

Each computes the workload's reference plus a fixed cost that stands for an expensive
kernel (a sleep on the CPU, a spin kernel on CUDA), and cheats on that cost the way the
public catalogues of benchmark reward hacks describe. apex-bench must report every one
``incorrect`` or ``suspect``; ``cheat-none`` is the same work done honestly and must stay ok.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Mapping

import torch

from apex_core.interfaces import Backend, Prepared
from apex_core.results import Availability

COST_S = 0.001  # the CPU's stand-in for an expensive kernel
COST_CYCLES = 1_000_000  # CUDA: a spin kernel of about 0.5 ms


def compute(workload, case, inputs):
    """The honest answer, at the cost of an expensive kernel."""
    outputs = workload.reference(case, inputs)
    if next(iter(inputs.values())).is_cuda:
        torch.cuda._sleep(COST_CYCLES)
    else:
        time.sleep(COST_S)
    return outputs


class _Cheat(Backend):
    devices = ("cpu", "cuda")

    def probe(self, device):
        if device.startswith("cuda") and not torch.cuda.is_available():
            return Availability.no("no CUDA device")
        return Availability.yes()


class HonestBackend(_Cheat):
    name = "cheat-none"
    description = "the cheats' work done honestly (the control: must stay ok)"

    def prepare(self, workload, case, inputs):
        return Prepared(lambda: compute(workload, case, inputs))


class ContentCacheBackend(_Cheat):
    """Answers from a cache when the input values repeat (compared element by element)."""

    name = "cheat-content-cache"
    description = "caches results keyed on the input contents"

    def prepare(self, workload, case, inputs):
        cache = {}

        def run():
            seen = cache.get("inputs")
            if seen is None or not all(torch.equal(seen[k], v) for k, v in inputs.items()):
                cache["inputs"] = {k: v.clone() for k, v in inputs.items()}
                cache["outputs"] = {k: v.clone() for k, v in compute(workload, case, inputs).items()}
            return cache["outputs"]

        return Prepared(run)


class WarmupReplayBackend(_Cheat):
    """Computes for the calls before timing (prepare, the check, the warm-up), then replays."""

    name = "cheat-warmup-replay"
    description = "replays its warm-up results"

    def prepare(self, workload, case, inputs):
        state = {"calls": 0}

        def run():
            state["calls"] += 1
            if state["calls"] <= 12 or "outputs" not in state:
                state["outputs"] = {k: v.clone() for k, v in compute(workload, case, inputs).items()}
            return state["outputs"]

        return Prepared(run)


class PrivateStreamBackend(_Cheat):
    """CUDA: queues the work on a stream of its own and returns without joining it."""

    name = "cheat-private-stream"
    description = "works on a private CUDA stream the timed stream does not wait for"
    devices = ("cuda",)

    def prepare(self, workload, case, inputs):
        stream = torch.cuda.Stream()

        def run():
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                return compute(workload, case, inputs)

        return Prepared(run)


class LazyTensor(torch.Tensor):
    """A tensor whose values are computed the first time any torch function reads it."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for arg in args:
            pending = getattr(arg, "pending", None) if isinstance(arg, LazyTensor) else None
            if pending is not None:
                arg.pending = None
                with torch._C.DisableTorchFunctionSubclass():
                    arg.copy_(pending())
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


class LazyOutputBackend(_Cheat):
    """Returns outputs that compute when first read: in the checks, never in the timed call."""

    name = "cheat-lazy-output"
    description = "returns lazy tensors filled on first read"

    def prepare(self, workload, case, inputs):
        def run():
            snapshot = {k: v.clone() for k, v in inputs.items()}
            shapes = workload.reference(case, inputs)  # cheap here; a real cheat knows its shapes
            lazy = {}
            for name, like in shapes.items():
                tensor = torch.Tensor._make_subclass(LazyTensor, torch.empty_like(like))
                tensor.pending = lambda n=name: compute(workload, case, snapshot)[n]
                lazy[name] = tensor
            return lazy

        return Prepared(run)


class LazyMapping(Mapping):
    """Outputs computed when first looked up, not when the call returns."""

    def __init__(self, names, fill):
        self.names, self.fill, self.values = tuple(names), fill, None

    def __getitem__(self, name):
        if self.values is None:
            self.values = self.fill()
        return self.values[name]

    def __iter__(self):
        return iter(self.names)

    def __len__(self):
        return len(self.names)


class LazyMappingBackend(_Cheat):
    """Returns a mapping whose values are computed on first lookup: in the checks, after the timed call."""

    name = "cheat-lazy-mapping"
    description = "returns a lazy mapping filled on first read"

    def prepare(self, workload, case, inputs):
        names = tuple(workload.reference(case, inputs))

        def run():
            snapshot = {k: v.clone() for k, v in inputs.items()}
            return LazyMapping(names, lambda: compute(workload, case, snapshot))

        return Prepared(run)


def _tenth(clock):
    first = clock()
    return lambda: first + (clock() - first) / 10


class PerfCounterBackend(_Cheat):
    """Replaces time.perf_counter and perf_counter_ns in prepare so they read a tenth of the time."""

    name = "cheat-perf-counter"
    description = "patches the Python clocks"

    def prepare(self, workload, case, inputs):
        fast_ns = _tenth(time.perf_counter_ns)
        time.perf_counter = _tenth(time.perf_counter)
        time.perf_counter_ns = lambda: int(fast_ns())
        return Prepared(lambda: compute(workload, case, inputs))


class EventTimerBackend(_Cheat):
    """Replaces torch.cuda.Event.elapsed_time in prepare so it reads a tenth."""

    name = "cheat-event-timer"
    description = "patches CUDA events' elapsed_time"

    def prepare(self, workload, case, inputs):
        real = torch.cuda.Event.elapsed_time
        torch.cuda.Event.elapsed_time = lambda self, end: real(self, end) / 10
        return Prepared(lambda: compute(workload, case, inputs))


class ProfilerBackend(_Cheat):
    """Asks for the kernel timer and rewrites the profiler's trace to a tenth of each duration."""

    name = "cheat-profiler"
    description = "patches the profiler's results (--timer kernel)"

    def prepare(self, workload, case, inputs):
        import json

        real = torch.profiler.profile.export_chrome_trace

        def export(self, path):
            real(self, path)
            with open(path, encoding="utf-8") as trace:
                data = json.load(trace)
            for event in data.get("traceEvents", []):
                if "dur" in event:
                    event["dur"] = event["dur"] / 10
            with open(path, "w", encoding="utf-8") as trace:
                json.dump(data, trace)

        torch.profiler.profile.export_chrome_trace = export
        return Prepared(lambda: compute(workload, case, inputs), timer="kernel")


class _Skipper(_Cheat):
    """Skips the work when ``in_loop`` says it is being timed, handing back the last outputs."""

    def in_loop(self, state):
        raise NotImplementedError

    def prepare(self, workload, case, inputs):
        state = {"calls": 0, "last": 0.0, "fast": 0}

        def run():
            state["calls"] += 1
            if self.in_loop(state) and "outputs" in state:
                return state["outputs"]
            state["outputs"] = {k: v.clone() for k, v in compute(workload, case, inputs).items()}
            return state["outputs"]

        return Prepared(run)


class CallRateBackend(_Skipper):
    name = "cheat-call-rate"
    description = "skips the work when called in a tight loop"

    def in_loop(self, state):
        now = time.monotonic()
        state["fast"] = state["fast"] + 1 if now - state["last"] < 0.005 else 0
        state["last"] = now
        return state["fast"] >= 3


class CallStackBackend(_Skipper):
    name = "cheat-call-stack"
    description = "skips the work when a caller frame is in apex-bench's timers"

    def in_loop(self, state):
        timers = ("apex_core/timing.py", "apex_core/measure/cuda_timer.py", "apex_core/measure/kernel_timer.py")
        return any(frame.filename.endswith(timers) for frame in inspect.stack(0)[1:8])


class CallCountBackend(_Cheat):
    """After the calls the checks need, computes only when an input was rewritten (its version moved)."""

    name = "cheat-call-count"
    description = "skips the work after the first calls unless the inputs were rewritten"

    def prepare(self, workload, case, inputs):
        state = {"calls": 0}

        def run():
            state["calls"] += 1
            versions = tuple(t._version for t in inputs.values())
            if state["calls"] <= 3 or state.get("versions") != versions or "outputs" not in state:
                state["versions"] = versions
                state["outputs"] = {k: v.clone() for k, v in compute(workload, case, inputs).items()}
            return state["outputs"]

        return Prepared(run)


class MutateInputBackend(_Cheat):
    """Zeroes half of its first input in the calls after a fresh one, so later calls are cheaper;
    the checks write fresh inputs before each call they check, so the checked calls are honest."""

    name = "cheat-mutate-input"
    description = "zeroes part of an input in place during timing"

    def prepare(self, workload, case, inputs):
        state = {}
        first = next(iter(inputs.values()))

        def run():
            versions = tuple(t._version for t in inputs.values())
            if state.get("versions") != versions:  # fresh inputs: compute honestly, touch nothing
                state["versions"] = versions
                return compute(workload, case, inputs)
            flat = first.view(-1)
            flat[: flat.numel() // 2].zero_()
            state["versions"] = tuple(t._version for t in inputs.values())
            return workload.reference(case, inputs)  # the cheap path: half the input is zeros

        return Prepared(run)


class StaleGraphBackend(_Cheat):
    """CUDA, --graph: records no work when captured and fills its buffer only when called eagerly."""

    name = "cheat-graph-stale"
    description = "returns a buffer filled eagerly; its graph capture records no work"
    devices = ("cuda",)

    def prepare(self, workload, case, inputs):
        buffers = {k: torch.empty_like(v) for k, v in workload.reference(case, inputs).items()}

        def run():
            if torch.cuda.is_current_stream_capturing():
                next(iter(buffers.values())).mul_(1)  # one kernel that changes nothing: a graph not empty
            else:
                for name, value in compute(workload, case, inputs).items():
                    buffers[name].copy_(value)
            return buffers

        return Prepared(run, outputs=buffers)
