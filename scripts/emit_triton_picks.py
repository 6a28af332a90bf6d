"""Write the shipped autotuning picks of one GPU model from apex-bench reports of a --retune run.

Usage: python scripts/emit_triton_picks.py REPORT.json [REPORT.json ...] [--output PATH]

Every ok triton cell's ``triton_autotune`` entries that were tuned in the run (selection
source ``triton_best_config``, with a kernel id and a tuning key) become picks. With
several reports (fresh processes of one build on one GPU model), each key takes the
configuration most of them chose, and every disagreement is printed: a kernel whose
pick flips between processes is one whose configurations time alike at that shape.
The file goes to apex_kernels/picks/<model>.json unless --output says otherwise; its
header records the GPU model, Triton, torch, the tuning method, the date and the reports.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from apex_kernels.tuned import picks_path, write_picks  # noqa: E402


def _tuned_entries(report: dict) -> list[dict]:
    entries = []
    for cell in report.get("benchmarks", []):
        if cell.get("backend") != "triton" or cell.get("status") != "ok":
            continue
        for entry in (cell.get("metadata") or {}).get("triton_autotune", []):
            if entry.get("selection_source") == "triton_best_config" and "tuning_key" in entry:
                entries.append(entry)
    return entries


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--output", type=Path, help="default: apex_kernels/picks/<model>.json")
    args = parser.parse_args(argv)
    reports = [json.loads(path.read_text()) for path in args.reports]
    devices = {(r.get("environment") or {}).get("gpu") for r in reports}
    if len(devices) != 1 or None in devices:
        print(f"emit_triton_picks: the reports must come from one GPU model, got {sorted(map(str, devices))}",
              file=sys.stderr)
        return 2
    device = devices.pop()
    votes: dict[tuple[str, str], collections.Counter] = collections.defaultdict(collections.Counter)
    for report in reports:
        for entry in _tuned_entries(report):
            key = (entry["kernel_id"], json.dumps(entry["tuning_key"]))
            votes[key][json.dumps(entry["selected_config"], sort_keys=True)] += 1
    if not votes:
        print("emit_triton_picks: no tuned triton entries in these reports (run with --retune on a GPU)",
              file=sys.stderr)
        return 2
    picks = []
    for (kernel, key), counter in sorted(votes.items()):
        (config, count), *others = counter.most_common()
        if others:
            print(f"{kernel} {key}: chose {config} in {count} of {sum(counter.values())} reports; "
                  f"also {', '.join(f'{c} x{n}' for c, n in others)}", file=sys.stderr)
        picks.append((kernel, tuple(json.loads(key)), json.loads(config)))
    first = reports[0]
    environment = first.get("environment") or {}
    cell_meta = next((c.get("metadata") or {} for c in first.get("benchmarks", [])
                      if c.get("backend") == "triton" and (c.get("metadata") or {}).get("autotune_timer")), {})
    provenance = {
        "triton": environment.get("triton"), "torch": environment.get("torch"),
        "driver": environment.get("driver"), "method": cell_meta.get("autotune_timer"),
        "tuned": first.get("timestamp_utc"),
        "profile": (first.get("config") or {}).get("profile"),
        "reports": len(reports),
    }
    output = args.output or picks_path(device)
    write_picks(output, device, provenance, picks)
    print(f"{output}: {len(picks)} picks for {device}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
