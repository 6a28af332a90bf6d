"""Does the cold-L2 flush's kind move the floor and short cells between placements? One process.

Between fresh processes of one build the held-event floor of a cell moves by up to 1 us (3.0-4.0
us on an H200), and the cell's raw time moves with it and further (fusiongate 8.3-10.0 us raw,
docs/perf.md 2026-11-29); within one process cells of other workloads kept a floor of 3.0 us.
Each cell gets fresh allocations, its flush buffer among them. The shipped flush writes twice
the L2, so every sample starts with an L2 full of dirty lines of that buffer: each line the
sample then brings in first writes one back to DRAM, harness traffic inside the events, and
where those lines lie may decide how much of it there is. This times, over PLACEMENTS placements
(a fresh timer and flush buffer, fresh inputs, after a padding allocation of another size), the
floor's empty kernel and each cell raw, with these flushes:
  write        the shipped one: persisting lines reset, 2 x L2 zeroed (a buffer of the placement's)
  write@first  the same with placement 0's buffer: whether the flush buffer's address decides
  read         persisting lines reset, 2 x L2 read (one reduction): the L2 left holding clean lines
  write+empty  the shipped write, then one empty kernel (the launch path used after the flush)
  read+empty   the read, then one empty kernel
  write+sync   the shipped write, then the host waits for it before it queues the sample
  read+sync    the read, then the same wait
  none         no flush (warm L2): whether the floor moves without one
Prints each placement, then per flush the spread of the floor, of each cell raw and of each
cell net of its placement's floor across placements. JSON to $OUT/flush-kind.json. Each
placement's timer takes a new pool stream: what this found is that the stream decides the level
(docs/perf.md, 2026-11-29), so apex-bench's timers now share one (timing_stream.py).
Dev tool; its numbers go to docs/perf.md with the card.
"""

from __future__ import annotations

import json
import os
import statistics
import sys

import attrs
import torch

from apex_core.measure.cuda_timer import CudaTimer, empty_kernel
from apex_core.measure.l2_flush import L2Flush, l2_flush_bytes
from apex_core.registry import Registry
from apex_core.timing import TimingOptions

CELLS = tuple(tuple(item.split(":", 1)) for item in os.environ.get(
    "CELLS", "tilepack:default,fusiongate:default,tile-stage1:default,tilessm-scan:backward,"
    "tileunpack:overlap").split(","))
PLACEMENTS = int(os.environ.get("PLACEMENTS", 6))
FLOOR_ROUNDS = 4


@attrs.define
class ReadFlush(L2Flush):
    """The persisting lines reset, then the buffer read: clean lines of it fill the L2."""

    sink: object = None

    def __call__(self) -> None:
        if self.reset is not None:
            self.reset()
        self.sink = torch.amax(self.buffer.view(torch.int32))


@attrs.define
class ThenEmpty(L2Flush):
    """Another flush, then one empty kernel on the same stream: the launch path used again
    after the flush, no data touched."""

    first: L2Flush | None = None

    def __call__(self) -> None:
        self.first()
        torch.cuda._sleep(0)


@attrs.define
class ThenSync(L2Flush):
    """Another flush, then the host waits for it: the sample is queued onto an idle GPU, so
    its start event cannot follow the flush's last writes at once."""

    first: L2Flush | None = None

    def __call__(self) -> None:
        self.first()
        torch.cuda.current_stream().synchronize()


@attrs.define
class NoFlush(L2Flush):
    """No flush at all (warm L2): the control, whether the floor moves without one."""

    def __call__(self) -> None:
        pass


FIRST: list[L2Flush] = []  # placement 0's write flush, kept for write@first


def flushes() -> dict[str, L2Flush]:
    write = L2Flush.on_device()
    FIRST[:] = FIRST or [write]
    read = ReadFlush(torch.zeros(l2_flush_bytes(), dtype=torch.uint8, device="cuda"), write.reset)
    kinds = {"write": write, "write@first": FIRST[0], "read": read,
            "write+empty": ThenEmpty(write.buffer, write.reset, first=write),
            "read+empty": ThenEmpty(read.buffer, read.reset, first=read),
            "write+sync": ThenSync(write.buffer, write.reset, first=write),
            "read+sync": ThenSync(read.buffer, read.reset, first=read),
            "none": NoFlush(write.buffer, None)}
    # KINDS=write,none,... measures only those
    return {k: v for k, v in kinds.items() if k in os.environ.get("KINDS", ",".join(kinds)).split(",")}


def spread(values: list[float]) -> str:
    return f"{min(values):7.3f}-{max(values):7.3f} ({(max(values) - min(values)) / min(values):5.1%})"


def main() -> int:
    registry = Registry.discover()
    backend = registry.backends["triton"]
    backend.configure({})
    raw = TimingOptions(energy=False, subtract_floor=False)
    cell_options = attrs.evolve(raw, min_time_s=0.2, max_time_s=1.0)
    floor_options = attrs.evolve(raw, warmup=10, min_iters=100, min_time_s=0.05, max_time_s=0.3)
    empty = empty_kernel()
    keep: list[object] = []  # padding, old inputs and buffers stay allocated: every placement is new
    rows = []
    for placement in range(PLACEMENTS):
        keep.append(torch.empty((placement * 7 + 3) * 2**20 + placement * 4096, dtype=torch.uint8,
                                device="cuda"))
        calls = {}
        for workload_name, case_name in CELLS:
            workload = registry.workloads[workload_name]
            case = next(c for c in workload.cases(workload.make_params("fixed")) if c.name == case_name)
            inputs = workload.make_inputs(case, "cuda", torch.float16, seed=0)
            keep.append(inputs)
            calls[f"{workload_name}/{case_name}"] = backend.prepare(workload, case, inputs).fn
        timer = CudaTimer(raw, stream=torch.cuda.Stream())  # a new pool stream each: the levels under study
        kinds = flushes()
        keep.append(kinds)
        address = kinds["write"].buffer.data_ptr()
        print(f"placement {placement}: write buffer at {address:#x} (mod 4 MiB {address % 2**22:#x}, "
              f"mod 32 MiB {address % 2**25:#x}), read buffer at {kinds['read'].buffer.data_ptr():#x}, "
              f"stream {timer.stream.stream_id} ({timer.stream.cuda_stream:#x})",
              flush=True)
        try:
            for kind, flush in kinds.items():
                timer.flush = flush
                floor = statistics.mean(
                    statistics.median(timer._measure_raw(empty, floor_options, "")[0].samples_ms) * 1e3
                    for _ in range(FLOOR_ROUNDS))
                row = {"placement": placement, "flush": kind, "floor_us": floor, "cells_us": {},
                       "kinds": list(kinds), "buffer": flush.buffer.data_ptr()}
                for name, call in calls.items():
                    row["cells_us"][name] = statistics.median(
                        timer._measure_raw(call, cell_options, "")[0].samples_ms) * 1e3
                rows.append(row)
                cells = " ".join(f"{name.split('/')[0]} {us:7.3f}" for name, us in row["cells_us"].items())
                print(f"placement {placement} {kind:10s} floor {floor:6.3f} {cells}", flush=True)
        finally:
            timer.close()
    print("\nspread across placements (min-max, us): raw | net of the placement's floor")
    for kind in rows[0]["kinds"]:
        mine = [r for r in rows if r["flush"] == kind]
        print(f"{kind}: floor {spread([r['floor_us'] for r in mine])}")
        for name in mine[0]["cells_us"]:
            cell_raw = [r["cells_us"][name] for r in mine]
            net = [r["cells_us"][name] - r["floor_us"] for r in mine]
            print(f"  {name:22s} raw {spread(cell_raw)} | net {spread(net)}")
    with open(os.path.join(os.environ.get("OUT", "."), "flush-kind.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
