"""Where a short cell's spread between fresh processes comes from (docs/timing.md, "Between hosts").

Reads the fixed triton suite's reports of several fresh processes (``runN.json`` and
``varJ-N.json`` of ``scripts/dev/host_triton.sh``, any number of machines) and prints, per kind
of process (``run``, ``var1``, ...) and cell:

- the net p50's spread over the processes, ``(max - min) / median``, and its cv;
- the same with other estimates of the floor, from each cell's ``timer_floor_rounds_ms`` (the
  p50 of each floor round; reports older than that field have none): the rounds' median and
  minimum in place of their mean (the gross p50 is net + floor, so any floor can be put back);
- the placements' share: the cv of one placement's median (sample i was taken on placement
  i mod P) and what that leaves in the p50 of P placements, cv / sqrt(P).

Usage: python scripts/dev/process_noise.py DIR [DIR ...]
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

FLOORS = {"mean": statistics.fmean, "median": statistics.median, "min": min}


def kind_of(path: Path) -> str:
    """'run' for runN.json, 'var2' for var2-N.json (varN.json: 'var')."""
    match = re.fullmatch(r"(run|var\d+(?=-)|var)-?\d+\.json", path.name)
    return match.group(1) if match else ""


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else 0.0


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values)


def placement_cv(cell: dict) -> float | None:
    """The cv of the placements' medians within the cell's process."""
    count, samples = cell.get("placements") or 1, cell.get("samples_ms") or []
    if count < 2 or len(samples) < 10 * count:
        return None
    return cv([statistics.median(samples[i::count]) for i in range(count)])


def net_with(cell: dict, estimate: str) -> float | None:
    """The cell's net p50 (ms) with the floor its rounds give by ``estimate``."""
    floor, rounds = cell.get("timer_floor_ms"), cell.get("timer_floor_rounds_ms") or []
    if floor is None or not rounds:
        return None
    return cell["stats"]["p50_ms"] + floor - FLOORS[estimate](rounds)


def main(dirs: list[str]) -> None:
    # kind -> cell -> list of (net p50 by each floor estimate, placements' cv, placements)
    table: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for folder in dirs:
        for path in sorted(Path(folder).glob("*.json")):
            if not (kind := kind_of(path)):
                continue
            for cell in json.loads(path.read_text())["benchmarks"]:
                if cell["status"] != "ok" or not cell.get("stats"):
                    continue
                row = {"shipped": cell["stats"]["p50_ms"], "placement_cv": placement_cv(cell),
                       "placements": cell.get("placements") or 1}
                row.update({name: net_with(cell, name) for name in FLOORS})
                table[kind][f"{cell['workload']}/{cell['case']}"].append(row)
    for kind, cells in sorted(table.items()):
        processes = max(len(rows) for rows in cells.values())
        print(f"\n{kind}: {processes} processes; spread (cv) of the net p50 with each floor, "
              "and the placements' cv (left in the p50 of P)")
        print(f"  {'cell':28} {'shipped (mean)':>16} {'median floor':>16} {'min floor':>16} {'placements':>18}")
        for name, rows in sorted(cells.items()):
            line = f"  {name:28}"
            for estimate in ("shipped", "median", "min"):
                values = [r[estimate] for r in rows if r[estimate] is not None]
                line += f" {100 * spread(values):6.1f}% ({100 * cv(values):4.1f}%)" if len(values) > 1 \
                    else f" {'-':>16}"
            pcvs = [r["placement_cv"] for r in rows if r["placement_cv"] is not None]
            if pcvs:
                within, count = statistics.fmean(pcvs), rows[0]["placements"]
                line += f" {100 * within:5.1f}% ({100 * within / count ** 0.5:4.1f}%)"
            print(line)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(sys.argv[1:])
