"""What programmatic dependent launch (PDL) takes off a chain of small dependent Triton kernels (exploration).

ff-infer is 14 dependent kernels per call; by the default method (held events, the host queued ahead)
it reads about 20 us above the kernels' own time on an H100 (90 against 69 us, docs/perf.md), the
device's gaps between launches. On Hopper a kernel launched with ``launch_pdl=True`` may start while
the kernel before it still runs; ``gdc_wait()`` at its top holds it until that kernel has finished
and its writes are visible, and ``gdc_launch_dependents()`` in the kernel before says when the next
may launch. This times, by CUDA events around ROUNDS back-to-back chains (the host queued ahead
behind the timer's stream hold), a chain of LENGTH kernels that each add one to a
buffer of N elements and write the next buffer, so every kernel depends on the one before:
  plain        no PDL;
  pdl-wait     launched with PDL, each waits first, no early trigger (launch when the kernel before ends);
  pdl-trigger  launched with PDL, each waits first and triggers its dependents right after the wait;
and one kernel alone, so that the gap per edge is (chain - LENGTH x alone) / (LENGTH - 1). Each
variant's result is checked (the last buffer must hold x + LENGTH) before it is timed: a wait that
did not hold would show there. One JSON line per measurement.
Usage (on a GPU machine, after ``source scripts/gpu_env.sh``):
    python scripts/dev/pdl_chain.py [--length 12] [--elements 65536 262144 4194304] [--rounds 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
from functools import partial

import torch
import triton
import triton.language as tl
from dev_cells import queued_held  # scripts/dev, this script's folder


@triton.jit
def _add_one(src, dst, n, BLOCK: tl.constexpr, PDL: tl.constexpr, TRIGGER: tl.constexpr):
    if PDL:
        tl.extra.cuda.gdc_wait()  # the kernel before has finished and its writes are visible
    if TRIGGER:
        tl.extra.cuda.gdc_launch_dependents()
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask) + 1.0, mask=mask)


BLOCK = 1024
VARIANTS = {"plain": (False, False), "pdl-wait": (True, False), "pdl-trigger": (True, True)}


def chain(buffers: list[torch.Tensor], length: int, pdl: bool, trigger: bool) -> None:
    n = buffers[0].numel()
    grid = (triton.cdiv(n, BLOCK),)
    for i in range(length):
        extra = {"launch_pdl": True} if pdl and i > 0 else {}
        _add_one[grid](buffers[i % 2], buffers[(i + 1) % 2] if i + 1 < length else buffers[2], n,
                       BLOCK=BLOCK, PDL=pdl, TRIGGER=trigger, num_warps=4, **extra)


def between(start, end, run, rounds: int) -> None:
    """``rounds`` runs between two events."""
    start.record()
    for _ in range(rounds):
        run()
    end.record()


def per_chain_us(run, rounds: int, repeats: int = 5) -> float:
    """Median over ``repeats`` of the events' time around ``rounds`` back-to-back runs, per run.

    The stream is held until every run is queued (``queued_held``, the timer's own hold): unheld,
    the first version of this script timed Python's launch rate, 13-17 us per launch, not the device
    (H200, 2026-11-28: one kernel of 65,536 elements read 24 us).
    """
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if not queued_held(partial(between, start, end, run, rounds)):
            raise RuntimeError(f"{rounds} rounds overflowed the launch queue under the hold: lower --rounds")
        times.append(start.elapsed_time(end) * 1e3 / rounds)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--length", type=int, default=12)
    parser.add_argument("--elements", type=int, nargs="+", default=[65536, 262144, 4194304])
    parser.add_argument("--rounds", type=int, default=50)  # x length launches must fit the launch queue
    args = parser.parse_args()
    print(json.dumps({"gpu": torch.cuda.get_device_name(), "triton": triton.__version__}))
    for n in args.elements:
        x = torch.randint(-1000, 1000, (n,), device="cuda").float()  # integers: x + 1 + ... + 1 is exact
        buffers = [x.clone(), torch.empty_like(x), torch.empty_like(x)]
        alone = per_chain_us(partial(chain, buffers, 1, False, False), args.rounds)
        print(json.dumps({"elements": n, "variant": "one kernel", "us": round(alone, 3)}))
        for name, (pdl, trigger) in VARIANTS.items():
            try:
                buffers[0].copy_(x)
                chain(buffers, args.length, pdl, trigger)
                torch.cuda.synchronize()
                # each step adds one to the step before; with length 1 the chain writes buffers[2]
                correct = torch.equal(buffers[2], x + args.length) if args.length > 1 else True
                us = per_chain_us(partial(chain, buffers, args.length, pdl, trigger), args.rounds)
            except Exception as exc:  # noqa: BLE001 - an exploration prints why a variant cannot run
                reason = f"{type(exc).__name__}: {exc}"[:300]
                print(json.dumps({"elements": n, "variant": name, "error": reason}))
                continue
            gap = (us - args.length * alone) / (args.length - 1)
            print(json.dumps({"elements": n, "variant": name, "correct": correct, "chain_us": round(us, 3),
                              "gap_per_edge_us": round(gap, 3)}))


if __name__ == "__main__":
    main()
