"""Numbers from two cards of one model, made comparable: a reference time scaled to the current card.

Cards of one GPU model differ by a few per cent: one streams memory a little slower, another
holds a lower SM clock under load. Every GPU run measures both figures of its own card (the
fingerprint, apex_core/measure/device_fingerprint.py), so a time measured on one card can be
scaled to what it would be on another, by the figure that sets the cell's time:

- **bandwidth-bound**: the cell moved its bytes at ``BANDWIDTH_SHARE`` (half) of the reference
  card's copy bandwidth or more; its time goes with 1 / copy bandwidth, so the reference time
  is multiplied by ``reference copy_gbps / current copy_gbps``;
- **compute-bound** (every other cell that does work on the device: arithmetic, on-chip
  latency): its time goes with 1 / SM clock, so the factor is ``reference clock / current
  clock``, the clock a spin of known cycles ran at under load, not NVML's reading.

A time is left as measured, with the reason, when no factor is honest: either card has no
fingerprint (CPU runs, reports from before it was taken, fingerprints that do not name their
GPU model), the models differ, the cell counts no bytes (its bound is unknown), the figure it
needs is missing on either card, its time includes the host's launch gaps (a launch-bound cell
timed without the hold) or is within ``NEAR_FLOOR`` times the timer's floor (fixed costs that
scale with neither figure, and the floor's own movement between measurements, several per cent,
is as large there as any correction), or the two cards' figures differ by more than cards of
one model do (``MAX_CARD_RATIO``: a MIG slice, a throttled card or a failed measurement, which
scaling would hide). Two runs of one card (one UUID) need no factor.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from apex_core.measure.device_fingerprint import fingerprint_of

# a cell that moved its bytes at half the copy bandwidth or more waits mostly on memory: below
# that, the SM's arithmetic and latency set its time
BANDWIDTH_SHARE = 0.5
# a net time within twice the timer's floor is refused: the floor moves by several per cent
# between measurements (docs/timing.md), which at two floors is as large as the 2-6 % between cards
NEAR_FLOOR = 2.0
# A timer floor a quarter off another run's (the larger over the smaller) is another kind of
# machine: the cells' floors read 2.89-3.41 us on six one-GPU H200 machines and 4.27-4.64 us on a
# two-GPU H200 machine, where cells within twice the floor read up to 30 % slower net of it, and
# ff-infer (58 us) up to 4 % (docs/perf.md, 2026-11-29). The subtraction does not carry such cells
# between the two; no figure of the fingerprint tells them apart.
FLOOR_MISMATCH = 0.25
# cards of one model differ by a few per cent (up to 5.9 % per cell over three H100 hosts);
# figures 15 % apart are not two healthy cards of one model
MAX_CARD_RATIO = 1.15
# timing methods whose samples hold device time only: the host's launch gaps never count
DEVICE_ONLY_METHODS = ("cuda_event_held", "cuda_graph_held", "kernel_profiler")

BANDWIDTH, COMPUTE, SAME_CARD, REFUSED = "bandwidth", "compute", "same card", "refused"
# How far one card's own figure moves between runs: two cards whose figures differ by less are
# not told apart, and their times are compared as measured (factor 1). On one H100 (2026-11-28,
# scripts/dev/copy_noise.py, 100 rounds in 5 processes) the best of 100 copies spread by up to
# 2.2 % (stdev 0.5 %); the spin's clock read 1975-1992 MHz on the same card. Four H100s of one host
# ran the large profile's bandwidth-bound cells within 0.3 % of each other while their copy
# figures (then a median of 10) differed by 1.1 %: scaling by such a figure added 1 % of spread.
FIGURE_PRECISION = {BANDWIDTH: 0.02, COMPUTE: 0.01}
# the fingerprint's figure each bound scales by, and its name and unit in words
FIGURES = {BANDWIDTH: ("copy_gbps", "copy bandwidth", "GB/s"),
           COMPUTE: ("sm_clock_mhz", "SM clock", "MHz")}


def _positive(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


@attrs.frozen(kw_only=True)
class Card:
    """A fingerprint's part that scales numbers: the model, which card, and its two measured figures."""

    model: str
    uuid: str | None
    copy_gbps: float | None
    sm_clock_mhz: float | None

    def describe(self) -> str:
        """``GPU-1234 (copy 2866 GB/s, SM clock 1755 MHz)``."""
        figures = ", ".join(f"{words} {value:.0f} {unit}" for _, (name, words, unit) in FIGURES.items()
                            if (value := getattr(self, name)) is not None)
        return f"{self.uuid or 'a card without UUID'} ({figures or 'no measured figures'})"


def card_of(fingerprint: Mapping[str, Any] | None) -> Card | None:
    """The card of a fingerprint (``fingerprint_of(report)``); None without one or when it does not
    name its GPU model (reports from before NVML's identity joined it): nothing to scale by."""
    if not isinstance(fingerprint, Mapping):
        return None
    model, uuid = fingerprint.get("gpu"), fingerprint.get("uuid")
    if not isinstance(model, str) or not model.strip():
        return None
    return Card(model=model, uuid=uuid if isinstance(uuid, str) and uuid else None,
                copy_gbps=_positive(fingerprint.get("copy_gbps")),
                sm_clock_mhz=_positive(fingerprint.get("sm_clock_under_load_mhz")))


def card_of_report(report: Mapping[str, Any]) -> Card | None:
    """The card a report record ran on; None also when its device facts are malformed (a record the
    history stores as it is: its card is then unknown, never an error)."""
    try:
        return card_of(fingerprint_of(report))
    except (TypeError, AttributeError):  # identity or clock of another type than an object
        return None


def floors_differ(one_ms: float, other_ms: float) -> bool:
    """Two timer floors of two kinds of machine: the larger more than ``FLOOR_MISMATCH`` above the smaller."""
    return max(one_ms, other_ms) / min(one_ms, other_ms) - 1.0 > FLOOR_MISMATCH


def median_floor_ms(floors: Iterable[Any]) -> float | None:
    """The median of the timer floors (ms) among ``floors`` that were subtracted (positive numbers);
    None where none was."""
    found = [f for f in floors if isinstance(f, int | float) and not isinstance(f, bool) and f > 0]
    return statistics.median(found) if found else None


def timer_floor_of_report(report: Mapping[str, Any]) -> float | None:
    """The median timer floor (ms) the report's cells subtracted; None where none did."""
    cells = [c for c in report.get("benchmarks") or [] if isinstance(c, Mapping)]
    return median_floor_ms(c.get("timer_floor_ms") for c in cells)


def pooled_fingerprint(fingerprints: Iterable[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """One fingerprint for a baseline made of several runs: the first's identity, each measured figure
    the median over the runs (as the values are), and no UUID when the runs came from several cards."""
    found = [dict(f) for f in fingerprints if f is not None and card_of(f) is not None]
    if not found:
        return None
    pooled = dict(found[0])
    for name in ("copy_gbps", "sm_clock_under_load_mhz"):
        values = [v for f in found if (v := _positive(f.get(name))) is not None]
        pooled[name] = statistics.median(values) if values else None
    if len({f.get("uuid") for f in found}) > 1:
        pooled["uuid"] = None
    return pooled


@attrs.frozen(kw_only=True)
class CellTiming:
    """What decides a cell's bound, as measured on the reference card."""

    p50_ms: float  # net of the timer's floor where one was subtracted
    gbps: float | None  # bytes moved / p50; None: the cell counts no bytes
    timer_floor_ms: float | None = None
    launch_bound: bool | None = None
    timing_method: str | None = None


def gbps_of(bytes_moved: float | None, p50_ms: float) -> float | None:
    """The bandwidth a cell reached: bytes / p50 (None without a byte count or a positive time)."""
    if bytes_moved is None or not p50_ms > 0:
        return None
    return bytes_moved / (p50_ms * 1e-3) / 1e9


@attrs.frozen(kw_only=True)
class Scaling:
    """How one reference time becomes comparable with the current card's: ``time x factor``."""

    factor: float
    bound: str  # BANDWIDTH, COMPUTE, SAME_CARD or REFUSED
    reason: str  # one line: the figures used, or why none was

    @property
    def scaled(self) -> bool:
        return self.bound in FIGURES

    @property
    def label(self) -> str:
        """The kind of reason: its words before the colon (``launch-bound``, ``near the timer's floor``)."""
        return self.reason.split(":")[0]

    def text(self) -> str:
        """``x1.031 bandwidth``, ``same card``, ``no: launch-bound``: a table's cell."""
        if self.scaled:
            return f"x{self.factor:.3f} {self.bound}"
        return self.bound if self.bound == SAME_CARD else f"no: {self.label}"


def _refused(reason: str) -> Scaling:
    return Scaling(factor=1.0, bound=REFUSED, reason=reason)


def between_cards(reference: Card | None, current: Card | None) -> Scaling | None:
    """The answer for every cell when the cards alone decide it; None when each cell's bound does."""
    if reference is None or current is None:
        side = "the reference run" if reference is None else "the current run"
        return _refused(f"no fingerprint: {side} names no card")
    if reference.model != current.model:
        return _refused(f"different GPU models: {reference.model}, {current.model}")
    if reference.uuid is not None and reference.uuid == current.uuid:
        return Scaling(factor=1.0, bound=SAME_CARD, reason=f"both runs measured on {current.uuid}")
    return None


def bound_of(reference: Card, cell: CellTiming) -> tuple[str, str]:
    """``(BANDWIDTH or COMPUTE, "")``, or ``(REFUSED, why)`` when no figure of the card sets the time."""
    if cell.launch_bound and cell.timing_method not in DEVICE_ONLY_METHODS:
        return REFUSED, "launch-bound: timed with the host's launch gaps in, which go with neither figure"
    floor = cell.timer_floor_ms
    if floor is not None and floor > 0 and cell.p50_ms < NEAR_FLOOR * floor:
        return REFUSED, (f"near the timer's floor: {cell.p50_ms * 1e3:.3g} us is within {NEAR_FLOOR:g}x "
                         f"its {floor * 1e3:.3g} us")
    if cell.gbps is None:
        return REFUSED, "no byte count: the cell counts no bytes moved, so its bound is unknown"
    if cell.gbps == 0:
        return COMPUTE, ""
    if reference.copy_gbps is None:
        return REFUSED, "no copy bandwidth: the reference card has none to tell the cell's bound by"
    return (BANDWIDTH if cell.gbps >= BANDWIDTH_SHARE * reference.copy_gbps else COMPUTE), ""


def scaling(reference: Card | None, current: Card | None, cell: CellTiming) -> Scaling:
    """The factor that turns the reference card's time of ``cell`` into the current card's, or why none."""
    decided = between_cards(reference, current)
    if decided is not None:
        return decided
    assert reference is not None and current is not None  # between_cards answered otherwise
    bound, why = bound_of(reference, cell)
    if bound == REFUSED:
        return _refused(why)
    name, words, unit = FIGURES[bound]
    before, after = getattr(reference, name), getattr(current, name)
    if before is None or after is None:
        side = "reference" if before is None else "current"
        return _refused(f"no {words}: the cell is {bound}-bound and the {side} card has none")
    factor = before / after  # a time goes with 1 / the figure
    if not 1 / MAX_CARD_RATIO <= factor <= MAX_CARD_RATIO:
        return _refused(f"{words} too far apart: {before:.0f} and {after:.0f} {unit} differ by more than "
                        f"cards of one model do ({MAX_CARD_RATIO - 1:.0%}; a MIG slice, a throttled card or a "
                        "failed measurement?)")
    share = f"{cell.gbps / before:.0%} of the copy bandwidth; " if bound == BANDWIDTH and cell.gbps else ""
    if abs(factor - 1) < FIGURE_PRECISION[bound]:
        return Scaling(factor=1.0, bound=bound, reason=f"{bound}-bound: {share}{words} {before:.0f} and "
                       f"{after:.0f} {unit} are within the figure's precision ({FIGURE_PRECISION[bound]:.0%})")
    return Scaling(factor=factor, bound=bound, reason=f"{bound}-bound: {share}{words} {before:.0f} -> "
                                                      f"{after:.0f} {unit}")


def tally(scalings: Sequence[Scaling]) -> str:
    """``6 by copy bandwidth (x0.969-x0.971), 4 by SM clock (x1.009), 2 kept as measured (launch-bound)``:
    how many times each figure scaled, and the kinds of refusal (each reason's words before its colon)."""
    parts = []
    for bound, (_, words, _) in FIGURES.items():
        factors = sorted(s.factor for s in scalings if s.bound == bound)
        if factors:
            spread = f"x{factors[0]:.3f}" + (f"-x{factors[-1]:.3f}" if factors[-1] != factors[0] else "")
            parts.append(f"{len(factors)} by {words} ({spread})")
    same = sum(s.bound == SAME_CARD for s in scalings)
    if same:
        parts.append(f"{same} measured on that card")
    kept = [s.label for s in scalings if s.bound == REFUSED]
    if kept:
        parts.append(f"{len(kept)} kept as measured ({'; '.join(dict.fromkeys(kept))})")
    return ", ".join(parts) or "no metric to scale"


@attrs.frozen(kw_only=True)
class HostNormalization:
    """What a comparison did about the two runs' cards: one line saying which card's figures scaled
    what (or why nothing was), the cards, and whether the current card is an outlier of its model."""

    applied: bool
    summary: str
    reference: Card | None = None
    current: Card | None = None
    outlier: str = ""  # the history's judgement of the current card ("" when not judged)

    def record(self) -> dict[str, Any]:
        """The JSON form, in the compare summary."""
        return {"applied": self.applied, "summary": self.summary,
                "baseline_card": None if self.reference is None else attrs.asdict(self.reference),
                "current_card": None if self.current is None else attrs.asdict(self.current),
                "outlier": self.outlier or None}
