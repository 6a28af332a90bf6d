"""The cards of the history: each card's measured figures, the outlier rule, and values scaled to one card.

Every GPU run stores the card it ran on (``runs.card_model``, ``card_uuid``, ``copy_gbps``,
``sm_clock_mhz``: its fingerprint, apex_core/measure/device_fingerprint.py). A card's figures are
the medians over its runs, so a card with many runs counts once among its model's cards.

**Outlier.** A card is an outlier of its model when one of its figures lies more than
``OUTLIER_DEVIATION`` (3 %) from the median of the model's other cards *and* outside the range
those cards span. The median is the model's usual level; the range keeps a model whose healthy
cards spread wider than 3 % from flagging its edges. Judged only against at least
``MIN_PEERS`` (3) other cards: with fewer, no median says which card is the odd one.
3 %: the gate's smallest effect on the GPU is 5 %, and a card 3 % off its model spends most
of that before the code changes at all; normalization makes up for it only in the cells whose
bound is the figure measured.

Its timer floor (the median over its runs of each run's median cell floor) is judged the same
way against ``FLOOR_MISMATCH`` (a quarter) instead of 3 %: a card whose floor lies that far off
its model's others and outside their range sits in another kind of machine, whose cells near the
floor do not compare with theirs (docs/baselines.md, "Another kind of machine").
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs

from apex_core.baseline.normalize import (
    FIGURES,
    FLOOR_MISMATCH,
    Card,
    CellTiming,
    Scaling,
    floors_differ,
    median_floor_ms,
    scaling,
)
from apex_core.history.model import SeriesPoint

OUTLIER_DEVIATION = 0.03
MIN_PEERS = 3


class HistoryStore(Protocol):
    """What this module reads of apex_core.history.store.HistoryStore (which imports the queries that
    import this module)."""

    path: Path

    def execute(self, action: str, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]: ...


def card_from_columns(model: Any, uuid: Any, copy_gbps: Any, sm_clock_mhz: Any) -> Card | None:
    """The card of a runs row (``rows.CARD_RUN_COLUMNS``); None where the run named none."""
    if not model:
        return None
    return Card(model=str(model), uuid=str(uuid) if uuid else None,
                copy_gbps=None if copy_gbps is None else float(copy_gbps),
                sm_clock_mhz=None if sm_clock_mhz is None else float(sm_clock_mhz))


@attrs.frozen(kw_only=True)
class HistoryCard:
    """One card of the history: its figures (medians over its runs), how many runs, the newest."""

    card: Card
    runs: int
    last_run_id: int
    # the median over its runs of each run's median cell floor (ms); None where no cell kept one
    timer_floor_ms: float | None = None


def history_cards(store: HistoryStore, model: str | None = None) -> tuple[HistoryCard, ...]:
    """Every card (one UUID) the history's runs name, of one model or all, newest use first."""
    where = " AND card_model = ?" if model is not None else ""
    found = store.execute("cannot read the cards",
                          "SELECT run_id, card_model, card_uuid, copy_gbps, sm_clock_mhz FROM runs "
                          f"WHERE card_model IS NOT NULL AND card_uuid IS NOT NULL{where} ORDER BY run_id",
                          () if model is None else (model,))
    runs: dict[tuple[str, str], list[tuple[Any, ...]]] = defaultdict(list)
    for row in found:
        runs[(row[1], row[2])].append(row)
    floors = _run_floors(store, {row[0] for rows in runs.values() for row in rows})
    cards = []
    for (card_model, uuid), rows in runs.items():
        medians = [statistics.median(values) if (values := [r[i] for r in rows if r[i] is not None]) else None
                   for i in (3, 4)]
        own = [floors[r[0]] for r in rows if r[0] in floors]
        cards.append(HistoryCard(card=Card(model=card_model, uuid=uuid, copy_gbps=medians[0],
                                           sm_clock_mhz=medians[1]), runs=len(rows), last_run_id=rows[-1][0],
                                 timer_floor_ms=statistics.median(own) if own else None))
    return tuple(sorted(cards, key=lambda c: -c.last_run_id))


def _run_floors(store: HistoryStore, run_ids: set[int]) -> dict[int, float]:
    """Each run's median cell floor (ms), of the runs that kept one."""
    if not run_ids:
        return {}
    found = store.execute("cannot read the cells' timer floors",
                          "SELECT run_id, timer_floor_ms FROM cells "
                          f"WHERE timer_floor_ms IS NOT NULL AND run_id IN ({', '.join('?' * len(run_ids))})",
                          sorted(run_ids))
    per_run: dict[int, list[Any]] = defaultdict(list)
    for run_id, floor in found:
        per_run[run_id].append(floor)
    # the rule a report's floor follows (normalize.median_floor_ms), so history and compare agree
    medians = {run_id: median_floor_ms(values) for run_id, values in per_run.items()}
    return {run_id: floor for run_id, floor in medians.items() if floor is not None}


@attrs.frozen(kw_only=True)
class CardStanding:
    """A card against its model's other cards in the history."""

    outlier: bool | None  # None: too few other cards to judge
    peers: int
    text: str


def standing(card: Card, cards: Sequence[HistoryCard], timer_floor_ms: float | None = None) -> CardStanding:
    """Whether ``card`` (its runs' timer floor ``timer_floor_ms``, where known) lies outside its model's
    usual spread (the module's rule), in one line."""
    others = [c for c in cards if c.card.model == card.model and c.card.uuid != card.uuid]
    peers = [c.card for c in others]
    name = card.uuid or "this card"
    if len(peers) < MIN_PEERS:
        return CardStanding(outlier=None, peers=len(peers), text=(
            f"{name}: not enough runs of this model to judge ({len(peers)} other {card.model} card(s) in the "
            f"history; {MIN_PEERS} needed)"))
    off, within = [], []
    for field, words, unit in FIGURES.values():
        value = getattr(card, field)
        values = [v for p in peers if (v := getattr(p, field)) is not None]
        if value is None or len(values) < MIN_PEERS:
            continue
        middle = statistics.median(values)
        deviation = value / middle - 1
        figure = f"{words} {value:.0f} {unit}"
        if abs(deviation) > OUTLIER_DEVIATION and not min(values) <= value <= max(values):
            side = "below" if deviation < 0 else "above"
            off.append(f"{figure} is {abs(deviation):.1%} {side} the median {middle:.0f} of "
                       f"{len(values)} other cards (they span {min(values):.0f}-{max(values):.0f})")
        else:
            within.append(f"{figure}, {deviation:+.1%} from the median of {len(values)} other cards")
    floors = [f for c in others if (f := c.timer_floor_ms)]
    if timer_floor_ms and len(floors) >= MIN_PEERS:
        middle = statistics.median(floors)
        figure = f"timer floor {timer_floor_ms * 1e3:.3g} us"
        if floors_differ(timer_floor_ms, middle) and not min(floors) <= timer_floor_ms <= max(floors):
            off.append(f"{figure} is more than {FLOOR_MISMATCH:.0%} off the median {middle * 1e3:.3g} us of "
                       f"{len(floors)} other cards: another kind of machine, whose cells near the floor do not "
                       "compare with theirs")
        else:
            within.append(f"{figure}, {timer_floor_ms / middle - 1:+.1%} from the median of {len(floors)} "
                          "other cards")
    if off:
        return CardStanding(outlier=True, peers=len(peers),
                            text=f"{name} is an outlier of the {card.model}: {'; '.join(off)}")
    if not within:
        return CardStanding(outlier=None, peers=len(peers), text=f"{name}: no measured figure to judge")
    return CardStanding(outlier=False, peers=len(peers),
                        text=f"{name} is within its model's usual spread ({'; '.join(within)})")


def cell_timing_from_columns(p50_ms: Any, gbps: Any, timer_floor_ms: Any, launch_bound: Any,
                             timing_method: Any) -> CellTiming | None:
    """A cells row's timing as normalize.py reads it; None without a p50."""
    if p50_ms is None:
        return None
    return CellTiming(p50_ms=float(p50_ms), gbps=None if gbps is None else float(gbps),
                      timer_floor_ms=None if timer_floor_ms is None else float(timer_floor_ms),
                      launch_bound=None if launch_bound is None else bool(launch_bound),
                      timing_method=timing_method)


def scalings_to(target: Card | None,
                measured: Iterable[tuple[Card | None, CellTiming | None]]) -> list[Scaling]:
    """For each (card, cell) a value was measured on, the factor that scales it to ``target``, or why none."""
    return [scaling(card, target, timing or CellTiming(p50_ms=0.0, gbps=None)) for card, timing in measured]


def scaled_series(points: Sequence[SeriesPoint]) -> tuple[list[SeriesPoint], list[Scaling]]:
    """A time series with each value scaled to the card of its newest point, and how each was.

    A point whose card, cell or figures allow no factor keeps its value (its Scaling says why).
    """
    scalings = scalings_to(points[-1].card, ((p.card, p.timing) for p in points))
    return [attrs.evolve(p, value=p.value * s.factor) for p, s in zip(points, scalings, strict=True)], scalings
