"""Net p50 (us) of every cell in each report of a folder, one column per report, and per group of
reports (the name before its last '-' or digit run: run1, run2 -> run; one-tilepack-2 -> one-tilepack)
their median. For scripts/dev/host_kind.sh (alone-c0-event, alone-c0-kernel, both-c1-event, ...) and
scripts/dev/one_cell.sh (runN, one-CELL-N): tar xzf the .tgz into DIR first.
Usage: python scripts/dev/p50_table.py DIR
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def main(folder: Path) -> None:
    reports = {path.stem: json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))}
    table: dict[str, dict[str, float]] = defaultdict(dict)
    floors: dict[str, list[float]] = defaultdict(list)
    for name, report in reports.items():
        for cell in report.get("benchmarks", []):
            if cell.get("status") == "ok":
                table[f"{cell['workload']}/{cell.get('case')}"][name] = cell["stats"]["p50_ms"] * 1e3
                if cell.get("timer_floor_ms"):
                    floors[name].append(cell["timer_floor_ms"] * 1e3)
    groups: dict[str, list[str]] = defaultdict(list)
    for name in reports:
        groups[re.sub(r"-?\d+$", "", name)].append(name)
    width = max(16, *(len(g) + 2 for g in groups))
    print(f"{'cell':28}" + "".join(f"{g:>{width}}" for g in groups))
    for cell, values in table.items():
        row = []
        for names in groups.values():
            found = [values[n] for n in names if n in values]
            row.append(f"{statistics.median(found):10.3f} ({len(found)})" if found else "-")
        print(f"{cell:28}" + "".join(f"{r:>{width}}" for r in row))
    for name, values in floors.items():
        print(f"timer floor {name}: {min(values):.2f}-{max(values):.2f} us over {len(values)} cells")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
