"""More input placements of one cell: its inputs made again at other device addresses.

A kernel's time depends on where its data lies in device memory (the DRAM channels and
L2 slices its addresses map to): on an H100 and an H200 the kernel timer saw one triton
cell move by up to 4 % between placements of the same inputs in one process, while it
repeated within 1 % on one placement (docs/perf.md). A process samples one placement, so
that offset moved the cell's p50 between fresh processes. Timing several placements in
turn averages it out, as layout randomisation does for code and heap placement on CPUs.

Each extra placement is the workload's inputs made again with the cell's seed (the same
values) after a padding allocation of its own size, so the caching allocator hands out
other blocks, and the backend's ``prepare`` run again on them. Only backends that say
``prepare`` may run again (``Backend.reprepares``) get more than one placement.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import torch

from apex_core.interfaces import Backend, Case, Inputs, Prepared, Workload

# extra placements may take at most this share of the device memory free before them
MEMORY_SHARE = 0.25
_MIB = 2**20


@attrs.frozen
class Placement:
    """One more copy of a cell's inputs, the callable prepared on it, and the padding that
    moved it (held as long as the placement is timed)."""

    inputs: Inputs
    prepared: Prepared
    padding: Any


def padding_bytes(index: int) -> int:
    """Placement ``index``'s padding: a different number of MiB and pages for each, so no two
    placements start at the same offset in a fresh block (1 -> 10 MiB + 4 KiB, 2 -> 17 MiB + 8 KiB...)."""
    return (index * 7 + 3) * _MIB + index * 4096


def input_bytes(inputs: Inputs) -> int:
    return sum(t.numel() * t.element_size() for t in inputs.values())


def placements_to_add(wanted: int, backend: Backend, prepared: Prepared, inputs: Inputs,
                      free_bytes: int | None) -> tuple[int, str]:
    """How many placements beyond the first to make, and why fewer than ``wanted - 1`` ("" if not)."""
    # a backend that does not prepare again, or times itself, has one placement by design: the
    # report's per-cell count says so without a note on every such cell
    if wanted <= 1 or not type(backend).reprepares or prepared.measure is not None:
        return 0, ""
    each = input_bytes(inputs) + max(padding_bytes(i) for i in range(1, wanted))
    if free_bytes is not None and each * (wanted - 1) > MEMORY_SHARE * free_bytes:
        fit = int(MEMORY_SHARE * free_bytes // max(each, 1))
        if fit < wanted - 1:
            return fit, (f"{fit + 1} input placement{'s' if fit else ''} of {wanted}: more would take over "
                         f"{MEMORY_SHARE:.0%} of the device memory free")
    return wanted - 1, ""


def make_placements(count: int, workload: Workload, backend: Backend, case: Case,
                    new_inputs: Callable[[], Inputs], allocate_padding: Callable[[int], Any]
                    ) -> tuple[list[Placement], str]:
    """``count`` more placements; ``new_inputs`` makes the cell's inputs (the cell's seed), and
    ``allocate_padding`` holds that many bytes on the cell's device. The first call of each
    prepared callable runs here, so lazy work stays out of the timing. A placement the device
    has no memory for ends the list (the cell keeps those made); the note says so."""
    placements: list[Placement] = []
    for index in range(1, count + 1):
        try:
            padding = allocate_padding(padding_bytes(index))
            inputs = new_inputs()
            prepared = backend.prepare(workload, case, inputs)
            prepared.fn()
        except torch.cuda.OutOfMemoryError:
            made = len(placements) + 1
            return placements, (f"{made} input placement{'s' if made > 1 else ''} of {count + 1}: "
                                "the device ran out of memory making more")
        placements.append(Placement(inputs, prepared, padding))
    return placements, ""

