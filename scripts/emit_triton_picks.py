"""Write the shipped autotuning picks of one GPU model from apex-bench reports of a --retune run.

Usage: python scripts/emit_triton_picks.py REPORT.json [REPORT.json ...] [--output PATH]

Every ok triton cell's ``triton_autotune`` entries that were tuned in the run (selection
source ``triton_best_config``, with a kernel id and a tuning key) become picks. With
several reports (fresh processes of one build on one GPU model), each key takes the
configuration most of them chose, and every disagreement is printed: a kernel whose
pick flips between processes is one whose configurations time alike at that shape.
The file goes to apex_kernels/picks/<model>.json unless --output says otherwise; its
header records the GPU model, Triton, torch, the tuning method, the date and the reports.

Reports written before the entries carried their tuning key need ``--keys-from-cases``:
each such cell's case is bound again here, on the CPU in Triton's interpreter (binding
launches nothing), and each entry takes the key of the launch with its op, kernel and
shape. The file's header then says ``keys: bound from the cases``. A key that differs
from the GPU's is harmless: no launch asks for it, and that shape is tuned as before.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from apex_kernels.tuned import picks_path, write_picks  # noqa: E402


def _tuned_entries(report: dict, bind: bool) -> list[dict]:
    """The report's tuned entries, each with its kernel_id and tuning_key (bound again if asked)."""
    entries = []
    for cell in report.get("benchmarks", []):
        if cell.get("backend") != "triton" or cell.get("status") != "ok":
            continue
        keys = None
        for entry in (cell.get("metadata") or {}).get("triton_autotune", []):
            if entry.get("selection_source") != "triton_best_config":
                continue
            if "tuning_key" not in entry and bind:
                keys = keys if keys is not None else _bound_keys(report, cell)
                found = keys.get((entry["op_name"], entry["kernel_name"], entry["shape_bucket"]))
                if found is None:
                    print(f"{cell['name']}: no launch of {entry['kernel_name']} at {entry['shape_bucket']} "
                          "when bound here; left out", file=sys.stderr)
                    continue
                entry = {**entry, "kernel_id": found[0], "tuning_key": found[1]}
            if "tuning_key" in entry:
                entries.append(entry)
    return entries


@functools.cache
def _workloads() -> dict[str, Any]:
    """The registered workloads, discovered once for every cell bound here."""
    import os

    os.environ["TRITON_INTERPRET"] = "1"  # before triton decorates any kernel: binding needs no GPU
    from apex_core.registry import Registry

    return Registry.discover().workloads


def _bound_keys(report: dict, cell: dict) -> dict[tuple[str, str, str], tuple[str, list]]:
    """(op, kernel, shape) -> (kernel_id, tuning key) of the cell's launches, bound on the CPU."""
    workloads = _workloads()  # sets TRITON_INTERPRET before anything below imports triton
    import torch

    from adapters.triton_autotune import tuning_key
    from apex_core.measure.cell import cell_torch_dtype
    from apex_core.measure.replay_artifacts import case_from_record
    from apex_core.plugin_api import implementation
    from apex_kernels.tuned import autotuners, kernel_ids

    workload = workloads[cell["workload"]]
    # the case as the cell ran it: its record carries the parameters (a profile fallback included)
    case = case_from_record(workload, cell["case"], cell["params"])
    dtype = cell_torch_dtype(cell["dtype"])
    inputs = workload.make_inputs(case, "cpu", dtype, int((report.get("config") or {}).get("seed", 0)))
    with torch.no_grad():
        launcher = implementation(workload, "triton").bind(workload, case, inputs)
    names = kernel_ids(autotuners())  # after binding: the kernel modules it imported are among them
    return {(launch.op_name, launch.kernel_name, launch.shape_bucket):
            (names[id(launch.kernel)], list(tuning_key(launch.kernel, launch.args, launch.meta)))
            for launch in launcher.launches if id(launch.kernel) in names}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--output", type=Path, help="default: apex_kernels/picks/<model>.json")
    parser.add_argument("--keys-from-cases", action="store_true",
                        help="bind each cell's case on the CPU for entries written without their tuning key")
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
        for entry in _tuned_entries(report, args.keys_from_cases):
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
    if args.keys_from_cases:
        provenance["keys"] = "bound from the cases (scripts/emit_triton_picks.py --keys-from-cases)"
    output = args.output or picks_path(device)
    write_picks(output, device, provenance, picks)
    print(f"{output}: {len(picks)} picks for {device}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
