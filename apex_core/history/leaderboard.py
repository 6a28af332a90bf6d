"""Rank backends by p50 per workload, case and dtype, and overall by a geometric mean of ratios.

A backend's time in a group is the median p50 of its ``last`` most recent ok cells there
(one run is noise; many runs mix old code). Overall, each backend gets the geometric mean,
over the groups where it and at least one other backend ran, of its p50 divided by the
group's fastest p50: 1.00 means fastest everywhere it ran, 1.25 means 25 % slower than
the best on a typical group. The fastest, not torch-reference, is the yardstick, so the
ranking needs no particular backend to have run; the number of groups counted is shown
beside it because a backend that ran only where it is strong would look better otherwise.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable

from apex_core.history.model import BackendTime, Leaderboard, LeaderboardGroup, OverallRank

# (run_id, workload, case, dtype, backend, p50_ms), newest run first
CellTime = tuple[int, str, str, str, str, float]


def _group_entries(times: dict[str, list[float]]) -> tuple[BackendTime, ...]:
    medians = {backend: statistics.median(values) for backend, values in times.items()}
    fastest = min(medians.values())
    return tuple(BackendTime(backend=b, p50_ms=m, runs=len(times[b]),
                             ratio_to_fastest=m / fastest if fastest > 0 else (1.0 if m == 0 else math.inf))
                 for b, m in sorted(medians.items(), key=lambda item: (item[1], item[0])))


def _overall(groups: tuple[LeaderboardGroup, ...]) -> tuple[OverallRank, ...]:
    contested = [g for g in groups if len(g.entries) >= 2]
    logs: dict[str, list[float]] = defaultdict(list)
    for group in contested:
        for entry in group.entries:
            if math.isfinite(entry.ratio_to_fastest) and entry.ratio_to_fastest > 0:
                logs[entry.backend].append(math.log(entry.ratio_to_fastest))
    ranks = [OverallRank(backend=b, geomean_ratio=math.exp(statistics.fmean(v)), groups=len(v),
                         groups_total=len(contested)) for b, v in logs.items()]
    return tuple(sorted(ranks, key=lambda r: (r.geomean_ratio, -r.groups, r.backend)))


def build_leaderboard(environment_id: str, cells: Iterable[CellTime], last: int) -> Leaderboard:
    """The leaderboard of one environment from its ok cells' p50s (newest run first)."""
    if last < 1:
        raise ValueError(f"last must be >= 1, got {last}")
    times: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    runs: set[int] = set()
    for run_id, workload, case, dtype, backend, p50 in cells:
        runs.add(run_id)
        values = times[(workload, case, dtype)][backend]
        if len(values) < last:
            values.append(p50)
    groups = tuple(LeaderboardGroup(workload=w, case=c, dtype=d, entries=_group_entries(times[(w, c, d)]))
                   for w, c, d in sorted(times))
    return Leaderboard(environment_id=environment_id, runs=len(runs), last=last, groups=groups,
                       overall=_overall(groups))
