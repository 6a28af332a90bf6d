"""The spread of one build's cells over the cards of scripts/dev/cards_gpu.sh, raw and normalized.

Reads DIR/card{i}-{kind}-{round}.json, or, given several DIRs, each one machine's reports from
scripts/dev/host_triton.sh (runN.json: triton; spinN.json, slowN.json) as card i. Per cell, each
card's p50 is the median over its rounds; the normalized p50 is card i's scaled to card 0 by
apex_core.baseline.normalize (the factor a comparison with card 0's baseline would apply). Prints
one row per cell and each card's figures.
Usage: python scripts/dev/cards_spread.py DIR [DIR ...] [--kinds triton,variant,spin,slow]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path

from apex_core.baseline.normalize import CellTiming, card_of_report, gbps_of, scaling

# host_triton.sh's report names: runN the suite, varN the suite with VARIANT's arguments
HOST_KINDS = {"run": "triton", "var": "variant", "spin": "spin", "slow": "slow"}


def main(folders: list[Path], kinds: list[str]) -> None:
    runs: dict[tuple[str, int], list[dict]] = defaultdict(list)
    if len(folders) == 1:
        for path in sorted(folders[0].glob("card*-*-*.json")):
            found = re.fullmatch(r"card(\d+)-(\w+)-(\d+)\.json", path.name)
            if found and found[2] in kinds:
                runs[(found[2], int(found[1]))].append(json.loads(path.read_text()))
    for card, folder in enumerate(folders if len(folders) > 1 else []):
        for path in sorted(folder.glob("*.json")):
            found = re.fullmatch(r"(run|var|spin|slow)\d+\.json", path.name)
            if found and HOST_KINDS[found[1]] in kinds:
                runs[(HOST_KINDS[found[1]], card)].append(json.loads(path.read_text()))
    for (kind, card), reports in sorted(runs.items()):
        c = card_of_report(reports[0])
        figures = [(x.copy_gbps or 0, x.sm_clock_mhz or 0) for r in reports if (x := card_of_report(r))]
        print(f"{kind} card {card}: {c.describe() if c else 'no card'}; {len(reports)} runs, figures per run: "
              + ", ".join(f"{gbps:.0f} GB/s {mhz:.0f} MHz" for gbps, mhz in figures))
    for kind in kinds:
        cards = sorted(card for k, card in runs if k == kind)
        if not cards:
            continue
        cells: dict[str, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
        for card in cards:
            for report in runs[(kind, card)]:
                for cell in report["benchmarks"]:
                    if cell["status"] == "ok":
                        cells[f"{cell['workload']}/{cell['case']}/{cell['dtype']}"][card].append(cell)
        print(f"\n{kind}: p50 us per card (median over rounds); spread = max/min - 1")
        for name, by_card in sorted(cells.items()):
            p50 = {card: statistics.median(c["stats"]["p50_ms"] for c in found)
                   for card, found in by_card.items()}
            reference = by_card[cards[0]][0]
            ref_card = card_of_report(runs[(kind, cards[0])][0])
            timing = CellTiming(p50_ms=p50[cards[0]], gbps=gbps_of(reference.get("bytes_moved"), p50[cards[0]]),
                                timer_floor_ms=reference.get("timer_floor_ms"),
                                launch_bound=reference.get("launch_bound"),
                                timing_method=reference.get("timing_method"))
            normalized, how = {}, []
            for card in p50:
                s = scaling(ref_card, card_of_report(runs[(kind, card)][0]), timing)
                normalized[card] = p50[card] / s.factor
                how.append(s.text())
            raw = max(p50.values()) / min(p50.values()) - 1
            norm = max(normalized.values()) / min(normalized.values()) - 1
            print(f"  {name:40s} " + " ".join(f"{p50[c] * 1e3:7.3f}" for c in sorted(p50))
                  + f"  raw {raw:6.1%}  normalized {norm:6.1%}  [{', '.join(dict.fromkeys(how))}]")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--kinds", default="triton,variant,spin,slow")
    args = parser.parse_args()
    main(args.folders, args.kinds.split(","))
