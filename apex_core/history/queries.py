"""The history's read queries beyond listing: a metric's series, the leaderboard's cell times, and
``latest | RUN-ID | TAG | COMMIT`` turned into runs (or what was meant when nothing matches).

``HistoryStore`` calls these with itself; they read it through its public methods.
"""

from __future__ import annotations

import difflib
import re
from collections import defaultdict
from typing import Any, Protocol

import attrs

from apex_core.baseline.normalize import tally
from apex_core.errors import UsageError
from apex_core.history.cards import HistoryStore as SqlStore
from apex_core.history.cards import card_from_columns, cell_timing_from_columns, scalings_to
from apex_core.history.errors import HistoryError
from apex_core.history.leaderboard import build_leaderboard
from apex_core.history.model import Leaderboard, RunSummary, SeriesPoint
from apex_core.history.rows import METRIC_COLUMNS


class HistoryStore(SqlStore, Protocol):
    """What the queries read of apex_core.history.store.HistoryStore, which calls them with itself
    (a protocol rather than an import of the store, which imports this module): the SQL cards.py
    reads, and the runs, tags and commits."""

    def runs(self, environment_key: Any = None, tag: str | None = None, commit: str | None = None,
             limit: int | None = None, run_id: int | None = None) -> tuple[RunSummary, ...]: ...

    def tags(self) -> tuple[str, ...]: ...

    def commits(self) -> tuple[str, ...]: ...


METRIC_ALIASES = {"p50": "p50_ms", "p90": "p90_ms", "p95": "p95_ms", "p99": "p99_ms", "min": "min_ms",
                  "mean": "mean_ms", "throughput": "units_per_s", "memory": "peak_memory_mb",
                  "peak_memory": "peak_memory_mb", "energy": "energy_j_per_call"}


# the run's card and the cell's timing, after a query's own columns (cards.card_from_columns,
# cards.cell_timing_from_columns)
_CARD_SQL = ("r.card_model, r.card_uuid, r.copy_gbps, r.sm_clock_mhz, c.p50_ms, c.gbps, c.timer_floor_ms, "
             "c.launch_bound, c.timing_method")


def metric_column(metric: str) -> str:
    """The cells column a metric name or alias means; UsageError listing the valid names otherwise."""
    name = METRIC_ALIASES.get(metric.strip(), metric.strip())
    if name in METRIC_COLUMNS:
        return name
    known = (*METRIC_COLUMNS, *METRIC_ALIASES)
    near = difflib.get_close_matches(metric, known, n=3)
    hint = f"did you mean {', '.join(near)}? " if near else ""
    raise UsageError(f"unknown metric {metric!r}: {hint}known: {', '.join(known)}")


def series_query(store: HistoryStore, metric: str, filters: dict[str, str | None],
                 environment_id: str | None, limit: int | None) -> tuple[SeriesPoint, ...]:
    """See ``HistoryStore.series``; ``limit`` keeps each cell's last points."""
    column = metric_column(metric)
    # the column names come from HistoryStore.series, never from the user
    conditions = {**{f"c.{name} = ?": value for name, value in filters.items()},
                  "r.environment_id LIKE ? || '%'": environment_id or None}
    where = {condition: value for condition, value in conditions.items() if value is not None}
    clauses = " AND ".join(["c.status = 'ok'", f"c.{column} IS NOT NULL", *where])
    found = store.execute(
        "cannot read the series",
        f"SELECT r.run_id, r.recorded_utc, r.git_commit, r.environment_id, c.workload, c.case_name, "
        f"c.backend, c.dtype, c.device, c.{column}, {_CARD_SQL} "
        f"FROM cells c JOIN runs r ON r.run_id = c.run_id WHERE {clauses} ORDER BY r.run_id, c.position",
        where.values())
    points = [SeriesPoint(run_id=r[0], recorded_utc=r[1], commit=r[2], environment_id=r[3], workload=r[4],
                          case=r[5], backend=r[6], dtype=r[7], device=r[8], value=float(r[9]),
                          card=card_from_columns(*r[10:14]), timing=cell_timing_from_columns(*r[14:]))
              for r in found]
    if limit is None:
        return tuple(points)
    by_cell: dict[tuple[str, ...], list[SeriesPoint]] = defaultdict(list)
    for point in points:
        by_cell[point.cell_key].append(point)
    kept = {id(p) for series in by_cell.values() for p in series[-max(int(limit), 0):]} if limit else set()
    return tuple(p for p in points if id(p) in kept)


def one_environment(store: HistoryStore, environment_id: str | None) -> str:
    """The one environment id a prefix names, or the latest run's when None."""
    if environment_id is None:
        latest = store.execute("cannot read the runs",
                               "SELECT environment_id FROM runs ORDER BY run_id DESC LIMIT 1")
        if not latest:
            raise HistoryError(store.path, "the history holds no runs")
        return str(latest[0][0])
    found = [r[0] for r in store.execute(
        "cannot read the environments",
        "SELECT environment_id FROM runs WHERE environment_id LIKE ? || '%' GROUP BY environment_id "
        "ORDER BY max(run_id) DESC", (environment_id,))]
    if len(found) == 1:
        return str(found[0])
    known = [r[0] for r in store.execute("cannot read the environments",
                                         "SELECT environment_id FROM runs GROUP BY environment_id "
                                         "ORDER BY max(run_id) DESC LIMIT 5")]
    problem = (f"environment {environment_id!r} is ambiguous: it matches {', '.join(found[:5])}" if found
               else f"no run in environment {environment_id!r} (newest: {', '.join(known) or 'none'})")
    raise HistoryError(store.path, problem)


def leaderboard_query(store: HistoryStore, environment_id: str | None, workload: str | None,
                      last: int, normalize: bool = False) -> Leaderboard:
    """See ``HistoryStore.leaderboard``."""
    environment = one_environment(store, environment_id)
    where, params = ["c.status = 'ok'", "c.p50_ms IS NOT NULL", "r.environment_id = ?"], [environment]
    if workload is not None:
        where.append("c.workload = ?")
        params.append(workload)
    found = store.execute(
        "cannot read the leaderboard",
        f"SELECT r.run_id, c.workload, c.case_name, c.dtype, c.backend, c.p50_ms, {_CARD_SQL} FROM cells c "
        f"JOIN runs r ON r.run_id = c.run_id WHERE {' AND '.join(where)} ORDER BY r.run_id DESC", params)
    if workload is not None and not found:
        known = [r[0] for r in store.execute(
            "cannot read the workloads", "SELECT DISTINCT c.workload FROM cells c JOIN runs r "
            "ON r.run_id = c.run_id WHERE r.environment_id = ? AND c.status = 'ok' ORDER BY 1", (environment,))]
        raise HistoryError(store.path, f"no ok cell of workload {workload!r} in environment {environment} "
                                       f"(it has {', '.join(known) or 'none'})")
    times = [float(r[5]) for r in found]
    note = ""
    if normalize and found:
        # every p50 scaled to the card of the newest run, by its cell's bound (normalize.py)
        measured = [(card_from_columns(*r[6:10]), cell_timing_from_columns(*r[10:])) for r in found]
        scalings = scalings_to(measured[0][0], measured)
        times = [t * s.factor for t, s in zip(times, scalings, strict=True)]
        target = measured[0][0]
        note = (f"p50s scaled to the card of run {found[0][0]}, {target.describe()}: {tally(scalings)}"
                if target is not None else f"not normalized: run {found[0][0]}, the newest, names no card")
    cells = ((r[0], r[1], r[2], r[3], r[4], t) for r, t in zip(found, times, strict=True))
    board = build_leaderboard(environment, cells, last)
    return attrs.evolve(board, normalized=note)


_COMMIT_PREFIX = re.compile(r"[0-9a-fA-F]{4,40}")
_SHOWN = 5  # suggestions in an error message


def _nearest_commits(spec: str, commits: tuple[str, ...]) -> list[str]:
    """Commits (12 digits) whose first ``len(spec)`` digits look like ``spec``; else the newest."""
    short = tuple(dict.fromkeys(c[:12] for c in commits))
    by_prefix: dict[str, str] = {}
    for commit in short:
        by_prefix.setdefault(commit[:max(len(spec), 4)], commit)
    near = difflib.get_close_matches(spec.lower(), list(by_prefix), n=_SHOWN, cutoff=0.5)
    return [by_prefix[n] for n in near] or list(short[:_SHOWN])


def _nothing_matches(store: HistoryStore, spec: str, environment_id: str | None) -> HistoryError:
    tags = store.tags()
    near_tags = difflib.get_close_matches(spec, tags, n=_SHOWN, cutoff=0.5) or list(tags[:_SHOWN])
    near_commits = _nearest_commits(spec, store.commits())
    where = f" in environment {environment_id}" if environment_id else ""
    newest = store.runs(limit=1)
    ids = f"run ids 1 to {newest[0].run_id}" if newest else "no runs yet"
    return HistoryError(store.path, f"{spec!r} names no run, tag or commit{where} ({ids}; "
                                    f"nearest tags: {', '.join(near_tags) or '(none)'}; "
                                    f"nearest commits: {', '.join(near_commits) or '(none)'})")


def _by_commit(store: HistoryStore, prefix: str, environment_id: str | None) -> tuple[RunSummary, ...]:
    found = store.runs(environment_key=environment_id, commit=prefix)
    commits = tuple(dict.fromkeys(r.commit for r in found if r.commit))
    if len(commits) > 1:
        shown = ", ".join(c[:12] for c in commits[:_SHOWN])
        raise HistoryError(store.path, f"commit prefix {prefix!r} is ambiguous: it matches {shown}"
                                       f"{' ...' if len(commits) > _SHOWN else ''}; give more digits")
    return found


def resolve_spec(store: HistoryStore, spec: str, environment_id: str | None) -> tuple[RunSummary, ...]:
    """See ``HistoryStore.resolve``."""
    text = spec.strip()
    if not text:
        raise HistoryError(store.path, "an empty name names no run (use latest, a run id, a tag or a commit)")
    if text == "latest":
        found = store.runs(environment_key=environment_id, limit=1)
        if not found:
            where = f" in environment {environment_id}" if environment_id else ""
            raise HistoryError(store.path, f"'latest': the history holds no runs{where}")
        return found
    if text.isdigit() and not text.startswith("0"):  # a run id; "0123" can only be a commit prefix
        found = store.runs(run_id=int(text))
        if found:
            return found
    found = store.runs(environment_key=environment_id, tag=text)
    if found:
        return found
    if _COMMIT_PREFIX.fullmatch(text):
        found = _by_commit(store, text, environment_id)
        if found:
            return found
    raise _nothing_matches(store, text, environment_id)
