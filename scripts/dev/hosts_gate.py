"""The gate across hosts (docs/perf.md): a baseline from one machine, compares of the others' runs.

Each DIR holds one machine's reports from ``SPIN=1 bash scripts/dev/host_triton.sh`` (runN.json:
the fixed triton suite; spinN.json: the spin pair as is; slowN.json: 5 % slower). Every DIR in
turn gives the baselines (``apex-bench baseline emit`` of its runN and of its spinN), and every
report of the other DIRs is compared against them with ``apex-bench compare`` (its default rule,
normalization on): triton and spin are A/A comparisons (a failure is a false alarm), slow is the
planted slowdown (a failure is a catch); "scaled" is each triton report with every sample and
statistic x1.05, a synthetic slowdown of every cell. Prints one line per baseline machine and kind.
With --confirm a failed compare is judged again as scripts/gpu_gate_confirm.sh does: with two more
runs of the same machine, each metric by its median run (``compare --combine median``).
With --pooled each DIR in turn is held out instead: the baselines come from every other DIR's
reports together (as a baseline promoted from several machines' runs) and only the held-out
DIR's reports are compared; a DIR without spin reports gives and takes only the triton ones.
Usage: python scripts/dev/hosts_gate.py DIR DIR [DIR ...] [--min-effect F] [--confirm] [--pooled]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

# kind: (what it is, the other hosts' reports it compares, the baseline it compares them with)
KINDS = {"run": ("triton A/A", "run", "run"), "spin": ("spin A/A", "spin", "spin"),
         "slow": ("spin 5 % slower", "slow", "spin"),
         "scaled": ("triton, samples x1.05 (synthetic)", "run", "run")}
SYNTHETIC = 1.05
CLI = "import sys; from apex_core.cli.main import main; sys.exit(main())"  # main() returns the exit code


def apex(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True)


def emit(reports: list[Path], out: Path, min_effect: str | None) -> Path:
    extra = ["--min-effect", min_effect] if min_effect else []
    done = apex("baseline", "emit", "--from", *map(str, reports), "--output", str(out), *extra)
    if done.returncode:
        raise SystemExit(f"baseline emit failed for {reports[0].parent}: {done.stderr.strip()}")
    return out


def compare(baseline: Path, report: Path, summary: Path, more: list[Path] = ()) -> tuple[str, list[float]]:
    """'pass' or 'FAIL' (with any other exit code), and the p50 checks' current / baseline; with
    ``more`` runs, each metric judged by its median run."""
    combine = ["--combine", "median"] if more else []
    done = apex("compare", "--baseline", str(baseline), "--current", str(report), *map(str, more), *combine,
                "--quiet", "--summary", str(summary))
    outcome = ("FAIL" if done.returncode else "pass") + ("" if done.returncode in (0, 1) else
                                                         f"(exit {done.returncode})")
    checks = json.loads(summary.read_text())["checks"] if summary.exists() else []
    return outcome, [c["current_ms"] / c["baseline_ms"] for c in checks
                     if c["metric"].endswith("/p50_ms") and c.get("current_ms")]


def scaled_copy(report: Path, out: Path) -> Path:
    """The report with every cell's samples and time statistics multiplied by SYNTHETIC."""
    record = json.loads(report.read_text())
    for cell in record["benchmarks"]:
        cell["samples_ms"] = [x * SYNTHETIC for x in cell.get("samples_ms") or ()]
        cell["stats"] = {k: v * SYNTHETIC if k.endswith("_ms") and v is not None else v
                         for k, v in (cell.get("stats") or {}).items()} or None
    out.write_text(json.dumps(record))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--min-effect")
    parser.add_argument("--confirm", action="store_true", help="a failure judged again with two more runs")
    parser.add_argument("--pooled", action="store_true", help="baselines from all DIRs but one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        for base_dir in args.dirs:
            # the DIRs the baselines come from, and those compared against them
            sources = [d for d in args.dirs if d != base_dir] if args.pooled else [base_dir]
            compared = [base_dir] if args.pooled else [d for d in args.dirs if d != base_dir]
            name = f"all but {base_dir.name}" if args.pooled else base_dir.name
            baselines = {kind: emit(found, Path(scratch) / f"{base_dir.name}-{kind}.json", args.min_effect)
                         for kind in ("run", "spin")
                         if (found := sorted(r for d in sources for r in d.glob(f"{kind}[0-9]*.json")))}
            for kind, (label, reports, against) in KINDS.items():
                if against not in baselines:
                    continue
                outcomes, ratios = [], []
                for other in compared:
                    runs = sorted(other.glob(f"{reports}[0-9]*.json"))
                    if kind == "scaled":
                        runs = [scaled_copy(run, Path(scratch) / run.name) for run in runs]
                    for at, report in enumerate(runs):
                        summary = Path(scratch) / "summary.json"
                        summary.unlink(missing_ok=True)
                        outcome, found = compare(baselines[against], report, summary)
                        if outcome.startswith("FAIL") and args.confirm and len(runs) >= 3:
                            more = [runs[(at + 1) % len(runs)], runs[(at + 2) % len(runs)]]
                            outcome = compare(baselines[against], report, summary, more)[0] + "(confirmed)"
                        outcomes.append(f"{other.name}/{report.stem}:{outcome}")
                        ratios += found
                if not outcomes:
                    continue
                fails = sum("FAIL" in o for o in outcomes)
                spread = (f"p50 current/baseline {min(ratios):.3f}-{max(ratios):.3f}, "
                          f"median {statistics.median(ratios):.3f}") if ratios else "no p50 checks"
                print(f"baseline {name} ({kind}): {label}: {fails} of {len(outcomes)} failed; "
                      f"{spread}  " + " ".join(outcomes))


if __name__ == "__main__":
    main()
