"""Process-to-process spread of apex-bench reports of one build: what moved, and with what.

Usage: python scripts/dev/spread.py RUN1.json RUN2.json [...]
Per cell: net p50 and timer floor in each report, the largest pairwise difference of the
p50 (%), whether the autotuner picked the same configs in every report, and the median SM
clock. Dev tool; its numbers go to docs/perf.md with the card.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path


def picks(cell: dict) -> str:
    entries = (cell.get("metadata") or {}).get("triton_autotune") or []
    return json.dumps(sorted((e.get("kernel_name"), json.dumps(e.get("selected_config"), sort_keys=True))
                             for e in entries))


def main(paths: list[str]) -> int:
    reports = [json.loads(Path(p).read_text()) for p in paths]
    rows: dict[tuple, list] = {}
    for index, report in enumerate(reports):
        for cell in report["benchmarks"]:
            if cell["status"] != "ok":
                continue
            key = (cell["workload"], cell["case"], cell["backend"], cell["dtype"])
            rows.setdefault(key, [None] * len(reports))[index] = cell
    print("| cell | net p50 us per run | floor us per run | max pair diff | same picks | SM MHz |")
    print("|---|---|---|---|---|---|")
    worst = 0.0
    for key, cells in rows.items():
        present = [c for c in cells if c]
        p50 = [c["stats"]["p50_ms"] * 1e3 for c in present]
        floors = [(c.get("timer_floor_ms") or 0) * 1e3 for c in present]
        diff = max((abs(a - b) / min(a, b) for a, b in itertools.combinations(p50, 2) if min(a, b) > 0),
                   default=0.0)
        worst = max(worst, diff)
        same = len({picks(c) for c in present}) == 1
        clocks = sorted({round(((c.get("telemetry") or {}).get("sm_clock_mhz") or [0, 0, 0])[1])
                         for c in present})
        print(f"| {key[0]} {key[1]} | {' / '.join(f'{v:.2f}' for v in p50)} | "
              f"{' / '.join(f'{v:.2f}' for v in floors)} | {diff:.1%} | {'yes' if same else 'NO'} | {clocks} |")
        if not same:
            for index, cell in enumerate(present):
                print(f"|   run {index}: {picks(cell)[:300]} |")
    print(f"largest pairwise difference: {worst:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
