"""The gate across cards of one model: the baseline's times scaled to the card the current run used.

A baseline that names its card (``fingerprint``) and a current run that names another card of
the same model: each time metric's value and samples are multiplied by its cell's factor
(normalize.py), so the rule and the cap judge the code and not the card. The rule's min_effect
and the cap's ratio are relative and stay as they are. The extra metrics (throughput, memory,
energy, error) are compared as measured. Which card's figures scaled what goes in one line of
the summary; a comparison where neither run names its card (CPU runs) says nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from apex_core.baseline.model import Baseline, MetricLimit, ReportCell
from apex_core.baseline.normalize import (
    SAME_CARD,
    CellTiming,
    HostNormalization,
    Scaling,
    between_cards,
    card_of,
    gbps_of,
    scaling,
    tally,
)


def cell_timing(name: str, baseline: Baseline, cell: ReportCell) -> CellTiming:
    """The cell as the baseline's card ran it: the baseline's p50 of the cell (else the current run's),
    and the bytes the current run counts (the same work: the same workload, case and dtype)."""
    p50 = baseline.metrics.get(name.rsplit("/", 1)[0] + "/p50_ms")
    p50_ms = p50.value_ms if p50 is not None else cell.stats_ms.get("p50_ms", 0.0)
    return CellTiming(p50_ms=p50_ms, gbps=gbps_of(cell.bytes_moved, p50_ms), timer_floor_ms=cell.timer_floor_ms,
                      launch_bound=cell.launch_bound, timing_method=cell.timing_method)


def _scaled(limit: MetricLimit, factor: float) -> MetricLimit:
    return attrs.evolve(limit, value_ms=limit.value_ms * factor,
                        samples_ms=tuple(s * factor for s in limit.samples_ms))


def normalized_baseline(baseline: Baseline, cells: Mapping[str, ReportCell],
                        fingerprints: Mapping[str, Mapping[str, Any] | None], *, enabled: bool = True,
                        ) -> tuple[Baseline, dict[str, Scaling], HostNormalization | None]:
    """The baseline with its times scaled to the current card, each metric's scaling, and what was done.

    ``cells`` is the current cell of each metric, ``fingerprints`` the fingerprint of the run it came
    from. Returns the baseline as it is, no scalings and None when neither side names its card.
    """
    reference = card_of(baseline.fingerprint)
    currents = {name: card_of(fingerprints.get(name)) for name in cells}
    current = next((card for card in currents.values() if card is not None), None)
    if reference is None and current is None:
        return baseline, {}, None
    done = HostNormalization(applied=False, summary="", reference=reference, current=current)
    if not enabled:
        return baseline, {}, attrs.evolve(done, summary="not normalized (--no-normalize)")
    if reference is None:
        return baseline, {}, attrs.evolve(done, summary="baseline has no fingerprint: not normalized "
                                                        "(emit it again from runs that carry one)")
    decided = between_cards(reference, current)
    if decided is not None:
        said = f"{decided.reason}: nothing to normalize" if decided.bound == SAME_CARD else \
            f"not normalized ({decided.reason})"
        return baseline, {}, attrs.evolve(done, summary=said)
    assert current is not None  # between_cards refuses a missing card
    scalings = {name: scaling(reference, currents[name], cell_timing(name, baseline, cell))
                for name, cell in cells.items() if name in baseline.metrics}
    metrics = {name: _scaled(limit, scalings[name].factor) if name in scalings and scalings[name].scaled
               else limit for name, limit in baseline.metrics.items()}
    others = {card.uuid for card in currents.values() if card is not None} - {current.uuid}
    more = f" (and {len(others)} other card(s) of the current runs, each by its own figures)" if others else ""
    summary = (f"the baseline's times, measured on {reference.describe()}, scaled to {current.describe()}"
               f"{more}: {tally(list(scalings.values()))}")
    return (attrs.evolve(baseline, metrics=metrics), scalings,
            attrs.evolve(done, applied=any(s.scaled for s in scalings.values()), summary=summary))
