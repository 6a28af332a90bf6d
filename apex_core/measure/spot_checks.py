"""Outputs of a few random timed calls checked against the reference (docs/anti-cheat.md).

The checks before and after timing see calls outside the timing loop; a backend that
knows when it is timed (the call rate, the stack, the call count) can compute only then.
So inside the loop, at a few sample numbers drawn at random (the first always), the
timer writes a fresh input set into the inputs in place, outside the timed window, and the
outputs of that timed call are compared with the set's reference, made before timing.
Before each refresh and at the end the inputs must still hold the set last written (a
call may not change its inputs to make later calls cheaper), and the outputs must be a
plain dict of plain tensors (a subclass can compute when read, after the timed call).
The sets are never repeated, so a call on a fresh set cannot be answered from a cache:
if those calls are much slower than the rest, the rest were answered from one.

With several input placements (CUDA), the cell's own inputs are written back into a spot's
placement once its call is done: the rest of the timing runs on the cell's values, but for the
calls queued with the spot call (the rest of the event timer's batch of 10). A kernel whose work
follows its data (a blend's runs of tiles) took 8 % longer on a fresh set than on the cell's own
on an H200, and the placement a spot refreshed used to keep the set for the rest of the timing,
so which samples ran on which values followed where the random spots fell (docs/perf.md,
2026-11-29). With one placement the set stays, as it always did: every sample then runs on one
placement, and the last set holds from early on (the last spot lies within 32 x --iters).
"""

from __future__ import annotations

import collections
import random
import statistics
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import torch

from apex_core.clocks import CudaEvent, elapsed_ms, perf_counter_ns
from apex_core.correctness import (
    DTYPES,
    changed_inputs,
    compare_outputs,
    output_problem,
    reference_dtype,
    upcast_inputs,
    write_inputs_,
)
from apex_core.measure import cuda_timer
from apex_core.measure.integrity import Suspect, checks_on
from apex_core.results import Accuracy

SETS = 3  # fresh input sets per cell: one per planned spot check
CONFIRM_ROUNDS = 3  # new input sets made only when the timing looks cached, to confirm it
# calls on fresh inputs slower than the others' p50 by this factor and margin: a cache answered those
FRESH_RATIO = 3.0


@attrs.frozen
class Margins:
    """How much slower than the others (ms) a fresh call, or reading a mapping, must be to count.
    On the CPU an honest call on freshly written inputs pays cache misses (JAX's tilessm-scan:
    0.05 ms against 0.012 ms at the smoke profile) and JAX's honest lazy view pays DLPack on its
    first lookup, so the CPU's margins are wider; a CUDA sample is flushed from L2 either way
    and a mapping's read is timed on the device."""

    fresh_ms: float
    read_ms: float


MARGINS = {"cpu": Margins(fresh_ms=0.25, read_ms=0.5), "cuda": Margins(fresh_ms=0.02, read_ms=0.05)}
_PLAIN_MAPPINGS = (dict, collections.OrderedDict)
STAGE = "during-timing"


@attrs.frozen
class FreshSet:
    """Inputs no call has seen, and the reference's outputs for them."""

    inputs: Mapping[str, torch.Tensor]
    reference: Mapping[str, torch.Tensor]


@attrs.frozen
class _Spot:
    """A spot call waiting for its check: its placement, the set written there and its number."""

    slot: int
    fresh: FreshSet
    number: int


class SpotWrong(Exception):
    """A spot-checked timed call gave a wrong answer or changed its inputs: the cell is incorrect."""


def plan_spots(min_iters: int, granularity: int = 1, rng: random.Random | None = None) -> frozenset[int]:
    """The sample numbers to check: the first, one among the first few, one further on;
    rounded down to ``granularity`` (a CUDA timer refreshes only between its batches)."""
    rng = rng or random.SystemRandom()  # a backend cannot predict them from a seed
    low = max(min_iters, 2)
    picks = {0, rng.randint(1, 2 * low), rng.randint(2 * low + 1, 32 * low)}
    return frozenset(p - p % granularity for p in picks)


def plain_outputs(outputs: Any) -> None:
    """Raise ``Suspect`` for tensors that can compute when read: a tensor subclass, or a tensor
    whose methods were overridden on the instance. (A mapping of another type can be lazy too,
    as JAX's view of its arrays honestly is: ``SpotChecks`` times reading it instead.)"""
    if not isinstance(outputs, Mapping):
        return  # not an answer at all: the comparison says so
    for name, value in outputs.items():
        if not isinstance(value, torch.Tensor):
            continue
        if type(value) is not torch.Tensor:
            kind = type(value)
            raise Suspect(f"output {name!r} is a {kind.__qualname__} (module {kind.__module__}), a "
                          "torch.Tensor subclass: its values can be computed when they are read, after the "
                          "timed call; return plain tensors")
        shadowed = sorted(k for k in getattr(value, "__dict__", {}) if hasattr(torch.Tensor, k))
        if shadowed:
            raise Suspect(f"output {name!r} overrides tensor methods on the instance ({', '.join(shadowed)}): "
                          "it can compute when read, after the timed call; return plain tensors")


class SpotChecks:
    """The spot checks of one cell's timing; ``slots``: the inputs of each input placement."""

    def __init__(self, sets: list[FreshSet], slots: list[Mapping[str, torch.Tensor]],
                 compare: Callable[[Any, Mapping[str, torch.Tensor]], Accuracy], spots: frozenset[int],
                 margins: Margins = MARGINS["cpu"], own: Mapping[str, torch.Tensor] | None = None) -> None:
        self.sets = list(sets)
        self.slots = slots
        self.compare = compare
        self.spots = spots
        self.margins = margins
        # a copy of the cell's own inputs (every placement holds the same values), written back
        # after each spot call; None leaves the fresh set in place
        self.own = own
        self.expected: dict[int, FreshSet] = {}  # the set last written into each placement
        self.holding: dict[int, Mapping[str, torch.Tensor]] = {}  # what each refreshed placement holds now
        self.pending: dict[int, _Spot] = {}  # the spot calls to check, by sample number
        self.fresh: list[int] = []  # sample numbers taken on a fresh set
        self.last_slot = 0
        self.deferred: Suspect | None = None  # found while a CUDA batch was being queued, raised after it
        self.read: tuple[Any, Any, float] | None = None  # CUDA: events and host ms around reading a mapping
        # new inputs (no reference) by number, for the confirmation of a cache (made only then)
        self.more_inputs: Callable[[int], Mapping[str, torch.Tensor]] | None = None
        self.slow_read: tuple[float, float] | None = None  # a spot call's read and call ms, to confirm
        self.unconfirmed: list[str] = []  # what looked like a cheat in timing and was cleared after it
        # seconds the checks took inside the sampling loop: the timers leave them out of the time
        # the stop rule sees, or at a large size (inputs of a GB) they would eat the cell's budget
        self.spent_s = 0.0

    def before(self, index: int, slot: int = 0) -> bool:
        """Before sample ``index`` (outside the timed window): refresh ``slot``'s inputs if it is a spot."""
        if index not in self.spots or not self.sets:
            return False
        started = perf_counter_ns()
        try:
            self._refresh(slot, index)
        finally:
            self.spent_s += (perf_counter_ns() - started) / 1e9
        return True

    def _refresh(self, slot: int, index: int) -> None:
        self._inputs_kept(slot, f"before fresh input set {SETS - len(self.sets) + 1} of {SETS} was written")
        fresh = self.sets.pop(0)
        self._write(slot, fresh.inputs)
        self.expected[slot], self.last_slot = fresh, slot
        self.pending[index] = _Spot(slot, fresh, SETS - len(self.sets))

    def _write(self, slot: int, values: Mapping[str, torch.Tensor]) -> None:
        write_inputs_(self.slots[slot], values)
        # the copies run on the current stream; a backend on a stream of its own that does not wait
        # for it (JAX) would read the inputs half written (seen on an H100: jax tilepack, large)
        self._synchronize(slot)
        self.holding[slot] = values

    def _synchronize(self, slot: int) -> None:
        if any(t.is_cuda for t in self.slots[slot].values()):
            torch.cuda.synchronize()

    def release(self, index: int) -> None:
        """Right after spot call ``index`` (its outputs kept): the cell's own inputs back in its placement,
        for a timer that can wait for the call there (the kernel timer, between profiled calls)."""
        if index in self.pending:
            self._restore(self.pending[index])

    def _restore(self, spot: _Spot) -> None:
        """The cell's own inputs back into the spot's placement, once its call is done and the
        inputs are found unchanged; not where a later spot has written since, nor twice."""
        if self.own is None or self.holding.get(spot.slot) is not spot.fresh.inputs:
            return
        self._synchronize(spot.slot)  # the call may still run, on a stream of its own
        self._inputs_kept(spot.slot, f"after the timed call on fresh input set {spot.number} of {SETS}")
        self._write(spot.slot, self.own)

    def rewrite(self) -> bool:
        """Before one more call to ``finish`` with: the set last written, back into its placement
        if the cell's own inputs were restored there. True when it wrote (the caller calls again)."""
        slot = self.last_slot
        if slot not in self.expected or self.holding.get(slot) is self.expected[slot].inputs:
            return False
        self._inputs_kept(slot, "by the end of timing")
        self._write(slot, self.expected[slot].inputs)
        return True

    def keep(self, outputs: Any) -> Any:
        """The spot call's outputs, copied on the current stream before a later call can overwrite them
        (a mapping of another type read between two events). A finding waits for ``after``: the
        batch of samples it runs in is still being queued."""
        if isinstance(outputs, Mapping) and type(outputs) not in _PLAIN_MAPPINGS:
            begin, end = CudaEvent(enable_timing=True), CudaEvent(enable_timing=True)
            begin.record()
            start = perf_counter_ns()
            outputs = {k: outputs[k] for k in outputs}
            host_ms = (perf_counter_ns() - start) / 1e6
            end.record()
            self.read = (begin, end, host_ms)
        try:
            plain_outputs(outputs)
        except Suspect as found:
            self.deferred = found
        if not isinstance(outputs, Mapping):
            return outputs
        return {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in outputs.items()}

    def after(self, index: int, outputs: Any, sample_ms: float) -> None:
        """After sample ``index`` (synchronized; ``sample_ms`` its time): check it if it was a spot call."""
        if self.deferred is not None:
            raise self.deferred
        spot = self.pending.pop(index, None)
        if spot is None:
            return
        started = perf_counter_ns()
        try:
            self._check_spot(index, outputs, sample_ms, spot)
            self._restore(spot)
        finally:
            self.spent_s += (perf_counter_ns() - started) / 1e9

    def _check_spot(self, index: int, outputs: Any, sample_ms: float, spot: _Spot) -> None:
        if isinstance(outputs, Mapping) and type(outputs) not in _PLAIN_MAPPINGS:  # CPU: read it here
            start = perf_counter_ns()
            outputs = {k: outputs[k] for k in outputs}
            self.read = (None, None, (perf_counter_ns() - start) / 1e6)
        self._read_in_time(index, sample_ms)
        plain_outputs(outputs)
        self._verify(outputs, spot.fresh, f"the timed call on fresh input set {spot.number} of {SETS}")
        self.fresh.append(index)

    def _read_in_time(self, index: int, sample_ms: float) -> None:
        """Reading a mapping the call returned may not cost much more than the call: else its
        values were computed when read, after the timed call."""
        if self.read is None:
            return
        begin, end, read_ms = self.read
        self.read = None
        if begin is not None:  # CUDA: the device's time, what a lazy value launches when read
            read_ms = elapsed_ms(begin, end)
        if self._slow_read(read_ms, sample_ms):  # confirmed after timing: a host stall can do this once
            self.slow_read = (read_ms, sample_ms)

    def _slow_read(self, read_ms: float, call_ms: float) -> bool:
        return read_ms > max(FRESH_RATIO * call_ms, call_ms + self.margins.read_ms)

    def lazy_problem(self, call: Callable[[], Any], sync: Callable[[], Any] = lambda: None) -> str:
        """Why the outputs look computed when read ("" when they do not): reading a spot call's
        mapping was slow, and after timing every one of ``CONFIRM_ROUNDS`` reads was slower than
        the fastest of their calls. A host stall only adds time: the fastest call is the call's
        cost, and one stalled call (the first after timing took 0.09-0.15 ms against 0.03-0.14 on
        an H200) no longer clears a read that costs 0.6 ms."""
        if self.slow_read is None:
            return ""
        rounds = []
        for _ in range(CONFIRM_ROUNDS):
            sync()
            start = perf_counter_ns()
            outputs = call()
            sync()
            middle = perf_counter_ns()
            _ = {k: outputs[k] for k in outputs} if isinstance(outputs, Mapping) else outputs  # the read timed
            sync()
            rounds.append(((middle - start) / 1e6, (perf_counter_ns() - middle) / 1e6))
        read_ms, sample_ms = self.slow_read
        again = ", ".join(f"{read:.4g} against {call_ms:.4g}" for call_ms, read in rounds)
        seen = (f"reading the outputs of a timed call took {read_ms:.4g} ms, the call itself "
                f"{sample_ms:.4g} ms (after timing, ms: {again})")
        if not self._slow_read(min(read for _, read in rounds), min(call_ms for call_ms, _ in rounds)):
            self.unconfirmed.append(f"{seen}: not confirmed")
            return ""
        return f"{seen}: its outputs are computed when they are read, after the timed call; return a dict of " \
               "computed tensors"

    def finish(self, outputs: Any, slot: int | None = None) -> None:
        """After the last sample: its outputs and its inputs against the set last written there."""
        slot = self.last_slot if slot is None else slot
        if slot not in self.expected:
            return
        plain_outputs(outputs)
        self._inputs_kept(slot, "by the end of timing")
        self._verify(outputs, self.expected[slot], "the last timed call")

    def _inputs_kept(self, slot: int, when: str) -> None:
        held = self.holding.get(slot)
        changed = changed_inputs(self.slots[slot], held) if held is not None else ""
        if changed:
            raise SpotWrong(f"{changed}, while it was timed (found {when})")

    def _verify(self, outputs: Any, fresh: FreshSet, where: str) -> None:
        accuracy = self.compare(outputs, fresh.reference)
        if not accuracy.passed:
            raise SpotWrong(f"wrong result in {where} (a spot check inside the timing loop, on inputs "
                            f"written just before it): {accuracy.message}")

    def caching_problem(self, samples_ms: tuple[float, ...], call: Callable[[], Any] | None = None,
                        sync: Callable[[], Any] = lambda: None) -> str:
        """Why the timed calls look answered from a cache ("" when they do not): the calls on fresh
        inputs were much slower than the others, and after timing (so a slow start of the timing
        does not count) calls on new inputs are still much slower than the same call repeated."""
        fresh = [samples_ms[i] for i in self.fresh if i < len(samples_ms)]
        if len(fresh) < 2 or len(samples_ms) <= len(fresh):
            return ""
        p50 = statistics.median(samples_ms)
        low = min(fresh)
        if low <= FRESH_RATIO * p50 or low - p50 <= self.margins.fresh_ms:
            return ""
        confirmed = self._confirm(call, sync) if call is not None and self.more_inputs is not None else ""
        times = ", ".join(f"{s:.4g}" for s in fresh)
        seen = f"its {len(fresh)} timed calls on freshly written inputs took {times} ms, the others p50 " \
               f"{p50:.4g} ms"
        if not confirmed:
            self.unconfirmed.append(f"{seen}: not confirmed after timing")
            return ""
        return (f"{seen}; after timing, {confirmed}: calls on inputs it has seen are answered without "
                "the work (a cache keyed on the input values or versions)")

    def _confirm(self, call: Callable[[], Any], sync: Callable[[], Any]) -> str:
        """``CONFIRM_ROUNDS`` new input sets written into the first placement, each call on one timed
        and then the same call repeated; the evidence when every fresh call was much slower than the
        repeats' median ("" if not)."""
        assert self.more_inputs is not None
        fresh_ms, repeat_ms = [], []
        for number in range(CONFIRM_ROUNDS):
            write_inputs_(self.slots[0], self.more_inputs(number))
            fresh_ms.append(_timed(call, sync))
            repeat_ms.append(_timed(call, sync))
        # the repeats' median: one repeat stalled on the host must not clear the cache
        repeated = statistics.median(repeat_ms)
        if min(fresh_ms) <= max(FRESH_RATIO * repeated, repeated + self.margins.fresh_ms):
            return ""
        return (f"{CONFIRM_ROUNDS} calls on new inputs took {', '.join(f'{s:.4g}' for s in fresh_ms)} ms and "
                f"the same calls repeated at once {', '.join(f'{s:.4g}' for s in repeat_ms)} ms")


def _timed(call: Callable[[], Any], sync: Callable[[], Any]) -> float:
    """One call's ms from a synchronized start to a synchronized end, on the harness's clock."""
    sync()
    start = perf_counter_ns()
    call()
    sync()
    return (perf_counter_ns() - start) / 1e6


def for_cell(workload: Any, case: Any, dtype_name: str, device: str, min_iters: int,
             slots: list[Mapping[str, torch.Tensor]], make_inputs: Callable[[int], Mapping[str, torch.Tensor]],
             first_seed: int) -> tuple[SpotChecks | None, int]:
    """A cell's spot checks (its workload's reference and tolerance, compared as the checks compare)
    and the device bytes their fresh sets hold; none while the checks are off."""
    if not checks_on():
        return None, 0
    cuda = device.startswith("cuda")
    before = torch.cuda.memory_allocated() if cuda else 0
    tolerance = workload.tolerance(dtype_name)
    cell_dtype = DTYPES.get(dtype_name, torch.float32)

    def reference(inputs: Mapping[str, torch.Tensor]) -> Mapping[str, torch.Tensor]:
        with torch.no_grad():
            return workload.reference(case, upcast_inputs(inputs, reference_dtype(device)))

    def compare(outputs: Any, expected: Mapping[str, torch.Tensor]) -> Accuracy:
        wrong = output_problem(outputs, cell_dtype)
        if wrong:
            return Accuracy(False, tolerance.atol, tolerance.rtol, tolerance.max_mismatch_ratio, (), STAGE,
                            wrong)
        return compare_outputs(outputs, expected, tolerance, STAGE)

    # a CUDA timer refreshes inputs only between its batches of queued samples
    spots = plan_spots(min_iters, cuda_timer.BATCH if cuda else 1)
    # ``SETS`` fresh input sets from seeds first_seed, first_seed + 1..., with their references,
    # made before timing starts
    sets = []
    for number in range(SETS):
        inputs = make_inputs(first_seed + number)
        sets.append(FreshSet(inputs, reference(inputs)))
    # what a spot's placement gets back where there are several (each holds the cell's inputs): one
    # placement more in memory, which fits where the placements did (a quarter of what was free)
    own = {name: tensor.clone() for name, tensor in slots[0].items()} if cuda and len(slots) > 1 else None
    spot = SpotChecks(sets, slots, compare, spots, MARGINS["cuda" if cuda else "cpu"], own)
    spot.more_inputs = lambda number: make_inputs(first_seed + SETS + number)
    return spot, (torch.cuda.memory_allocated() - before if cuda else 0)
