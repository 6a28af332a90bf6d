"""Probe the stream-hold mechanisms on a GPU: driver wait-value, events, graph, profiler, NVML.

Prints a table of event / held-event / graph / profiler times for spin kernels of known
cycles, the queue depth a hold can take, and what a synchronizing callable does under a
hold with the watchdog. Dev tool; the numbers it prints go to docs/perf.md with the card.
"""

from __future__ import annotations

import ctypes
import json
import os
import statistics
import sys
import threading
import time

import torch

OUT = os.environ.get("OUT", "/tmp")
cuda = ctypes.CDLL("libcuda.so.1")


def check(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what} failed with CUresult {rc}")


def fn(*names):
    for name in names:
        try:
            return getattr(cuda, name)
        except AttributeError:
            continue
    raise RuntimeError(f"none of {names} in libcuda")


torch.cuda.init()
torch.empty(1, device="cuda")
host_ptr = ctypes.c_void_p()
check(fn("cuMemHostAlloc")(ctypes.byref(host_ptr), ctypes.c_size_t(64), ctypes.c_uint(1 | 2)), "cuMemHostAlloc")
dev_ptr = ctypes.c_uint64()
check(fn("cuMemHostGetDevicePointer_v2", "cuMemHostGetDevicePointer")(
    ctypes.byref(dev_ptr), host_ptr, ctypes.c_uint(0)), "cuMemHostGetDevicePointer")
flag = ctypes.cast(host_ptr, ctypes.POINTER(ctypes.c_uint32))
flag[0] = 0
wait_value = fn("cuStreamWaitValue32_v2", "cuStreamWaitValue32")
wait_value.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
print("host", host_ptr.value, "device", dev_ptr.value, "same" if host_ptr.value == dev_ptr.value else "differ")

stream = torch.cuda.Stream()
handle = ctypes.c_void_p(stream.cuda_stream)
counter = [0]


def hold():
    counter[0] += 1
    check(wait_value(handle, dev_ptr.value, counter[0], 0), "cuStreamWaitValue32")
    return counter[0]


def release(value):
    flag[0] = value


l2 = torch.cuda.get_device_properties(0).L2_cache_size
# a write only, without the timers' reset of persisting lines (apex_core/measure/l2_flush.py):
# the probe's kernels load nothing, so no line of theirs can persist
flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")

try:
    import pynvml

    pynvml.nvmlInit()
    nvml = pynvml.nvmlDeviceGetHandleByIndex(0)

    def sm_clock():
        return pynvml.nvmlDeviceGetClockInfo(nvml, pynvml.NVML_CLOCK_SM)
except Exception as exc:  # noqa: BLE001
    print("nvml unavailable:", exc)

    def sm_clock():
        return float("nan")


def events_sample(call, held, n=200, cold=True):
    out, host = [], []
    with torch.cuda.stream(stream):
        for _ in range(20):
            call()
        torch.cuda.synchronize()
        pairs = []
        for _ in range(n):
            if cold:
                flush.zero_()
            token = hold() if held else None
            b, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            b.record(stream)
            t0 = time.perf_counter_ns()
            call()
            host.append((time.perf_counter_ns() - t0) / 1e3)
            e.record(stream)
            if held:
                release(token)
            pairs.append((b, e))
        torch.cuda.synchronize()
        out = [b.elapsed_time(e) * 1e3 for b, e in pairs]
    return statistics.median(out), min(out), statistics.median(host)


def graph_of(call):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        call()
    stream.synchronize()
    with torch.cuda.graph(g, stream=stream):
        call()
    return g.replay


def profiler_times(call, n=50):
    from torch.profiler import ProfilerActivity, profile, record_function

    with torch.cuda.stream(stream):
        call()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for i in range(n):
                flush.zero_()
                with record_function(f"apex_call_{i}"):
                    call()
            torch.cuda.synchronize()
    path = os.path.join(OUT, "trace.json")
    prof.export_chrome_trace(path)
    with open(path) as handle:
        trace = json.load(handle)
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and "spin" in e.get("name", "")]
    return statistics.median(k["dur"] for k in kernels), len(kernels), path


rows = []
clocks = []
for cycles in (2000, 20000, 200000):
    def call(c=cycles):
        torch.cuda._sleep(c)

    clocks.append(sm_clock())
    unheld = events_sample(call, held=False)
    held = events_sample(call, held=True)
    replay = graph_of(call)
    graph_held = events_sample(replay, held=True)
    graph_unheld = events_sample(replay, held=False)
    prof_us, nk, path = profiler_times(call)
    clocks.append(sm_clock())
    rows.append((cycles, unheld, held, graph_unheld, graph_held, prof_us, nk))
    os.replace(path, os.path.join(OUT, f"trace_{cycles}.json"))

print("SM clock readings (MHz):", clocks)
print("| cycles | events p50/min | held p50/min | graph p50/min | graph held p50/min "
      "| profiler kernel p50 | host us |")
for cycles, u, h, gu, gh, p, nk in rows:
    print(f"| {cycles} | {u[0]:.2f}/{u[1]:.2f} | {h[0]:.2f}/{h[1]:.2f} | {gu[0]:.2f}/{gu[1]:.2f} | "
          f"{gh[0]:.2f}/{gh[1]:.2f} | {p:.2f} ({nk}) | {h[2]:.1f} |")

# a long spin read against the clock: cycles per us
long_cycles = 20_000_000
with torch.cuda.stream(stream):
    b, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    b.record(stream)
    torch.cuda._sleep(long_cycles)
    e.record(stream)
    mid = sm_clock()
    torch.cuda.synchronize()
spin_us = b.elapsed_time(e) * 1e3
print(f"long spin {long_cycles} cycles: {spin_us:.1f} us -> {long_cycles / spin_us:.1f} "
      f"cycles/us; NVML SM clock during it {mid} MHz")

# queue depth behind a hold: how many launches before the host blocks
released = threading.Event()


def watchdog(value, after_s):
    if not released.wait(after_s):
        flag[0] = value
        print(f"watchdog released hold {value} after {after_s}s")


x = torch.zeros(16, device="cuda")
with torch.cuda.stream(stream):
    torch.cuda.synchronize()
    token = hold()
    released.clear()
    dog = threading.Thread(target=watchdog, args=(token, 3.0), daemon=True)
    dog.start()
    t0 = time.perf_counter()
    marks = []
    for i in range(1, 20001):
        x.add_(1)
        if i % 1000 == 0:
            marks.append((i, round((time.perf_counter() - t0) * 1e3, 1)))
    release(token)
    released.set()
    torch.cuda.synchronize()
    dog.join()
print("queued launches vs host ms:", marks)

# a callable that synchronizes inside the hold
with torch.cuda.stream(stream):
    torch.cuda.synchronize()
    token = hold()
    released.clear()
    dog = threading.Thread(target=watchdog, args=(token, 0.5), daemon=True)
    dog.start()
    t0 = time.perf_counter()
    x.add_(1)
    value = x.sum().item()
    elapsed = time.perf_counter() - t0
    release(token)
    released.set()
    torch.cuda.synchronize()
    dog.join()
print(f"synchronizing call under hold returned {value} after {elapsed:.3f}s")
print(torch.cuda.get_device_name(0), torch.__version__, sys.version.split()[0])
