"""Plain-text views of the history for the terminal: run lists, one run, trends, the leaderboard."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from apex_core.baseline.normalize import Scaling, tally
from apex_core.errors import plural
from apex_core.history.cards import CardStanding, HistoryCard
from apex_core.history.changepoints import ChangePoint
from apex_core.history.model import Leaderboard, RunSummary, SeriesPoint, StoredRun

METRIC_UNITS = {"gbps": "GB/s", "tflops": "TFLOP/s", "units_per_s": "units/s", "peak_memory_mb": "MB",
                "energy_j_per_call": "J/call"}


def metric_unit(column: str) -> str:
    return "ms" if column.endswith("_ms") else METRIC_UNITS.get(column, "")


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _table(header: Sequence[str], body: Sequence[Sequence[str]], indent: str = "") -> list[str]:
    """Left-aligned columns wide enough for every cell."""
    widths = [max(len(str(row[i])) for row in (header, *body)) for i in range(len(header))]
    return [indent + "  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
            for row in (header, *body)]


def _commit(commit: str | None) -> str:
    return commit[:10] if commit else "-"


def _value(value: Any) -> str:
    return ",".join(str(v) for v in value) if isinstance(value, list) else str(value)


def environment_line(environment_id: str, key: Mapping[str, Any]) -> str:
    shown = ("device", "hardware", "torch", "triton", "profile", "dtypes", "cache", "graph", "timing_methods")
    fields = ", ".join(f"{name} {_value(key[name])}" for name in shown if key.get(name) not in (None, [], ""))
    return f"environment {environment_id}: {fields}"


def run_list(runs: Sequence[RunSummary]) -> list[str]:
    if not runs:
        return ["no runs match"]
    body = [(str(r.run_id), r.recorded_utc, _commit(r.commit), r.branch or "-", r.environment_id,
             r.hardware or "-", f"{r.cells_ok}/{r.cells_total}", r.status, ",".join(r.tags) or "-")
            for r in runs]
    return _table(("run", "recorded (UTC)", "commit", "branch", "environment", "hardware", "ok/cells",
                   "status", "tags"), body)


def run_details(run: StoredRun, card: Sequence[str] = ()) -> list[str]:
    """One run: its git state, environment, card (what it is, and its standing among its model's cards,
    when the run names one) and every cell."""
    s = run.summary
    dirty = {True: "dirty", False: "clean", None: "dirty unknown"}[s.dirty]
    lines = [f"run {s.run_id}  recorded {s.recorded_utc}  started {s.timestamp_utc}  suite {s.suite}  "
             f"status {s.status}",
             f"commit {s.commit or '-'} (branch {s.branch or '-'}, {dirty})  tags: {', '.join(s.tags) or '-'}",
             environment_line(s.environment_id, s.environment_key),
             *([f"card {card[0]}", *(f"  {line}" for line in card[1:])] if card else []), ""]
    body = [(c.key, c.status, _number(c.p50_ms), _number(c.p95_ms), _number(c.min_ms), _number(c.gbps),
             _number(c.peak_memory_mb), _number(c.energy_j_per_call), c.reason)
            for c in run.cells]
    return lines + _table(("cell", "status", "p50 ms", "p95 ms", "min ms", "GB/s", "peak MB", "J/call",
                           "reason"), body)


def _change_text(change: ChangePoint, points: Sequence[SeriesPoint], unit: str) -> str:
    at = points[change.index]
    relative = change.relative_change
    percent = f"{relative * 100:+.1f} %" if relative != float("inf") else "from 0"
    return (f"  change at run {at.run_id} (commit {_commit(at.commit)}): {change.before:.4g} -> "
            f"{change.after:.4g} {unit} ({percent})")


def trend(column: str, points: Sequence[SeriesPoint], changes: Sequence[ChangePoint],
          method: str, scalings: Sequence[Scaling] = ()) -> list[str]:
    """One series: header, one line per run (a change point marked ``<-``), then the changes; with
    ``scalings`` (``--normalize``), the values are scaled to the newest run's card and say by what."""
    first, unit = points[0], metric_unit(column)
    starts = {c.index for c in changes}
    lines = [f"{column} of {first.workload}/{first.case}/{first.backend}/{first.dtype}/{first.device} "
             f"in environment {first.environment_id} ({plural(len(points), 'run')})"]
    if scalings:
        target = points[-1].card
        lines.append(f"  scaled to the card of run {points[-1].run_id}, {target.describe()}: {tally(scalings)}"
                     if target is not None else f"  not normalized: run {points[-1].run_id} names no card")
    body = [(str(p.run_id), p.recorded_utc, _commit(p.commit), f"{p.value:.4g}",
             *((scalings[i].text(),) if scalings else ()), "<- change" if i in starts else "")
            for i, p in enumerate(points)]
    heading = column if column.endswith("_ms") or not unit else f"{column} ({unit})"
    lines += _table(("run", "recorded (UTC)", "commit", heading, *(("normalized",) if scalings else ()), ""),
                    body, indent="  ")
    return lines + ([_change_text(c, points, unit) for c in changes] if changes else
                    [f"  no change point ({method})"])


def leaderboard(board: Leaderboard, key: Mapping[str, Any]) -> list[str]:
    lines = [environment_line(board.environment_id, key),
             f"{plural(board.runs, 'run')}; a backend's p50 is the median of its last {board.last} ok runs "
             "per group", *([board.normalized] if board.normalized else []), ""]
    for group in board.groups:
        lines.append(f"{group.workload}/{group.case} {group.dtype}")
        body = [(f"{rank}.", e.backend, f"{e.p50_ms:.4g} ms", f"{e.ratio_to_fastest:.2f}x",
                 plural(e.runs, "run"))
                for rank, e in enumerate(group.entries, start=1)]
        lines += _table(("#", "backend", "p50", "vs fastest", "from"), body, indent="  ")
    lines += ["", "overall: geometric mean of p50 / the group's fastest p50, over the groups each backend "
                  "ran with at least one other"]
    if not board.overall:
        return [*lines, "  (no group has two backends)"]
    ranks = [(f"{rank}.", o.backend, f"{o.geomean_ratio:.2f}x", f"{o.groups}/{o.groups_total} groups")
             for rank, o in enumerate(board.overall, start=1)]
    return lines + _table(("#", "backend", "geomean", "counted"), ranks, indent="  ")


def cards(found: Sequence[HistoryCard], standings: Sequence[CardStanding]) -> list[str]:
    """Every card of the history by model, its figures and whether it is an outlier of its model."""
    if not found:
        return ["no run in the history names its card (GPU runs record it since the fingerprint)"]
    verdicts = {True: "OUTLIER", False: "usual", None: "not judged"}
    body = [(c.card.model, c.card.uuid or "-", str(c.runs), _number(c.card.copy_gbps),
             _number(c.card.sm_clock_mhz), "-" if c.timer_floor_ms is None else f"{c.timer_floor_ms * 1e3:.2f}",
             str(c.last_run_id), verdicts[s.outlier])
            for c, s in sorted(zip(found, standings, strict=True), key=lambda pair: pair[0].card.model)]
    lines = _table(("model", "card", "runs", "copy GB/s", "SM MHz", "floor us", "last run", "verdict"), body)
    return lines + [f"  {s.text}" for s in standings if s.outlier]
