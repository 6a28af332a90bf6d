"""Check every CUDA timer against a kernel of known length (needs a GPU and tests/plugins installed).

Runs the test-spin workload (one ``torch.cuda._sleep`` kernel) at several cycle counts
with each method as shipped (samples net of the method's floor, one empty kernel timed
the same way), reads the SM clock from NVML before and after, and prints per method the
p50, the floor it subtracted and the error against cycles / SM clock. Writes the rows as
JSON to the path given.

    python scripts/timer_check.py OUT.json [--cycles 0,2000,20000,200000]
"""

from __future__ import annotations

import argparse
import json
import sys

import apex_core
from apex_core.timing import TimingOptions

METHODS = {
    "event held": {},
    "event unheld": {"hold": False},
    "graph held": {"graph": True},
    "kernel": {"timer": "kernel"},
}


def sm_clock_mhz() -> float | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        return float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
    except Exception as exc:  # noqa: BLE001 - a missing NVML only costs the clock column
        print(f"NVML unavailable: {exc}", file=sys.stderr)
        return None


def time_spin(cycles: int, options: dict) -> apex_core.CellResult:
    timing = TimingOptions(min_time_s=0.3, max_time_s=1.5, **options)
    report = apex_core.run(workloads=["test-spin"], backends=["test-working"], device="cuda",
                           overrides={"cycles": cycles}, timing=timing, isolation="inline")
    (cell,) = report.cells
    if cell.status != apex_core.Status.OK:
        raise SystemExit(f"test-spin cycles={cycles} {options}: {cell.status} {cell.reason}")
    return cell


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output")
    parser.add_argument("--cycles", default="0,2000,20000,200000")
    args = parser.parse_args()
    cycles_list = [int(c) for c in args.cycles.split(",")]
    clocks = [sm_clock_mhz()]
    rows = []
    for name, options in METHODS.items():
        for cycles in cycles_list:
            cell = time_spin(cycles, options)
            clocks.append(sm_clock_mhz())
            floor = cell.timing.floor_ms
            rows.append({"method": name, "timing_method": cell.timing.method, "cycles": cycles,
                         "p50_us": cell.timing.stats.p50 * 1e3, "min_us": cell.timing.stats.min * 1e3,
                         "floor_us": floor * 1e3 if floor is not None else None,
                         "host_us": cell.timing.host_ms * 1e3 if cell.timing.host_ms else None,
                         "n": cell.timing.stats.n, "note": cell.timing.note})
    known = [c for c in clocks if c]
    clock = sorted(known)[len(known) // 2] if known else None
    print(f"SM clock (NVML) readings: {clocks}; using {clock} MHz")
    print("| method | cycles | expected us | p50 us (net of floor) | floor us | error | allowed | host us |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        expected = row["cycles"] / clock if clock else None
        row["expected_us"] = expected
        error = allowed = ""
        if expected is not None:
            diff = row["p50_us"] - expected
            error = f"{diff:+.2f} us ({diff / expected * 100:+.1f} %)" if expected else f"{diff:+.2f} us"
            # the bars: kernel timer within 3 %, the others within 0.5 us + 2 %
            limit = 0.03 * expected if row["method"] == "kernel" else 0.5 + 0.02 * expected
            allowed = f"{limit:.2f} us {'ok' if abs(diff) <= limit else 'MISSED'}"
        host = f"{row['host_us']:.1f}" if row["host_us"] else ""
        floor = f"{row['floor_us']:.2f}" if row["floor_us"] is not None else ""
        print(f"| {row['method']} | {row['cycles']} | {expected or 0:.2f} | {row['p50_us']:.2f} | {floor} | "
              f"{error} | {allowed} | {host} |")
    with open(args.output, "w", encoding="utf-8") as out:
        json.dump({"sm_clock_mhz": clocks, "rows": rows}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
