"""Turn apex-bench reports (and a copy-bandwidth measurement) into the perf-notes tables.

Usage: python scripts/perf_table.py --bandwidth bw.json report.json [report.json ...]
Prints one Markdown table per report: p50 per backend, minimal bytes and FLOPs, the
roofline floor (minimal bytes / measured copy bandwidth) and the fraction of it reached.
With --methods, one table over all the reports instead: a row per cell, a column per
report (its timing method), p50 in us, plus the host cost and kernels per call where known.
With --versus A,B, one table per report: a row per cell, A's and B's p50 in us and A / B.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _us(ms: float | None) -> str:
    return "–" if ms is None else f"{ms * 1e3:.2f}"


def _p50(cell: dict) -> float | None:
    """The cell's p50 in ms where it ran ok, else None (its status says why)."""
    return (cell.get("stats") or {}).get("p50_ms") if cell["status"] == "ok" else None


def table(report: dict, copy_gbps: float | None) -> str:
    cells = report["benchmarks"]
    backends = list(dict.fromkeys(b["backend"] for b in cells))
    rows: dict[tuple, dict] = {}
    for b in cells:
        rows.setdefault((b["workload"], b["case"], b["dtype"]), {})[b["backend"]] = b
    cfg = report["config"]
    head = (f"Profile `{cfg['profile']}`, {report['environment'].get('gpu') or 'cpu'}, "
            f"timing {cfg['timing']['cache']} L2, graph={cfg['timing']['graph']}; p50 in us.\n\n")
    cols = ["workload", "case", "dtype", *[f"{b} p50" for b in backends], "min bytes", "FLOPs",
            "floor us", "best / floor"]
    lines = ["| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    for (workload, case, dtype), by in rows.items():
        p50 = {k: _p50(v) for k, v in by.items()}
        texts = [_us(p50.get(b)) if p50.get(b) is not None else by[b]["status"] if b in by else "–"
                 for b in backends]
        nbytes = next((v.get("bytes_moved") for v in by.values() if v.get("bytes_moved")), None)
        flops = next((v.get("flops") for v in by.values() if v.get("flops") is not None), None)
        floor_ms = nbytes / (copy_gbps * 1e9) * 1e3 if nbytes and copy_gbps else None
        best = min((v for v in p50.values() if v), default=None)
        frac = f"{floor_ms / best:.0%}" if floor_ms and best else "–"
        numbers = [f"{nbytes:,}" if nbytes else "–", f"{flops:,}" if flops is not None else "–",
                   _us(floor_ms), frac]
        lines.append("| " + " | ".join([workload, case, dtype, *texts, *numbers]) + " |")
    return head + "\n".join(lines) + "\n"


def methods_table(paths: list[str]) -> str:
    """One row per cell, one p50 column per report, labelled by the report's timing method."""
    reports = [json.loads(Path(p).read_text()) for p in paths]
    columns, rows = [], {}
    for path, report in zip(paths, reports, strict=True):
        methods = sorted({b.get("timing_method") or "?" for b in report["benchmarks"] if b["status"] == "ok"})
        columns.append(f"{Path(path).stem}: {'/'.join(methods)}")
        for b in report["benchmarks"]:
            row = rows.setdefault((b["workload"], b["case"], b["backend"], b["dtype"]), {})
            row[len(columns) - 1] = b
    head = ["workload", "case", "backend", "dtype", *[f"{c} p50 us" for c in columns],
            "host us / call", "kernels / call"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for key, by in rows.items():
        texts = [_us(_p50(by[i])) if i in by and by[i]["status"] == "ok"
                 else (by[i]["status"] if i in by else "–") for i in range(len(columns))]
        host = next((b["host_ms"] for b in by.values() if b.get("host_ms") is not None), None)
        kernels = next((b["kernel_activity"]["kernels_per_call"] for b in by.values()
                        if b.get("kernel_activity")), None)
        lines.append("| " + " | ".join([*key, *texts, _us(host), "–" if kernels is None else f"{kernels:g}"])
                     + " |")
    return "\n".join(lines) + "\n"


def versus_table(report: dict, first: str, second: str) -> str:
    """A row per cell: the two backends' p50 in us (or their status) and the first over the second."""
    by: dict[str, dict[str, tuple[str, float | None]]] = {}
    for c in report["benchmarks"]:
        by.setdefault(f"{c['workload']}/{c['case']}", {})[c["backend"]] = (c["status"], _p50(c))
    lines = [f"| cell | {first} us | {second} us | {first} / {second} |", "| --- | --- | --- | --- |"]
    for cell, b in by.items():
        a, k = (b.get(name, ("absent", None)) for name in (first, second))
        texts = [f"{1e3 * v[1]:.3f}" if v[1] else v[0] for v in (a, k)]
        ratio = f"{a[1] / k[1]:.2f}" if a[1] and k[1] else "–"
        lines.append(f"| {cell} | {texts[0]} | {texts[1]} | {ratio} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bandwidth", help="JSON from scripts/copy_bandwidth.py")
    parser.add_argument("--methods", action="store_true", help="one table, a column per report")
    parser.add_argument("--versus", metavar="A,B", help="a table per report: backend A against backend B")
    parser.add_argument("reports", nargs="+")
    args = parser.parse_args()
    if args.versus:
        first, _, second = args.versus.partition(",")
        for path in args.reports:
            print(versus_table(json.loads(Path(path).read_text()), first, second), end="")
        return
    if args.methods:
        print(methods_table(args.reports))
        return
    copy_gbps = json.loads(Path(args.bandwidth).read_text())["copy_gbps"] if args.bandwidth else None
    for path in args.reports:
        print(f"### {path}\n")
        print(table(json.loads(Path(path).read_text()), copy_gbps))


if __name__ == "__main__":
    main()
