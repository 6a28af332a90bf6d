"""The cells a failed gate would re-measure: ``python scripts/failing_cells.py REPORT SUMMARY``.

Prints ``WORKLOADS BACKENDS`` (``workload:case,...`` and ``backend,...``, the ``--workloads``
and ``--backends`` arguments that re-run exactly the failing checks' cells; an empty line when
only missing metrics failed) from the run's JSON report and its compare summary. A cell whose
status fails a run (incorrect, error, timeout, crashed, suspect: apex_core.results.FAILING_STATUSES)
is final, in the gate or not: it is named on stderr and the exit code is 1. Used by
scripts/ci_perf_gate.sh and scripts/gpu_gate_confirm.sh.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from apex_core.results import FAILING_STATUSES

FINAL = {str(status) for status in FAILING_STATUSES}


def main(report: str, summary: str) -> int:
    with open(report, encoding="utf-8") as handle:
        cells = json.load(handle)["benchmarks"]
    broken = [c["name"] for c in cells if c["status"] in FINAL]
    if broken:
        print(f"{Path(sys.argv[0]).stem}: failed cells (final): {', '.join(broken)}", file=sys.stderr)
        return 1
    with open(summary, encoding="utf-8") as handle:
        failing = [c["metric"].split("/") for c in json.load(handle)["checks"] if c["status"] == "fail"]
    workloads, backends = {f"{w}:{c}" for w, c, *_ in failing}, {b for _, _, b, *_ in failing}
    print(",".join(sorted(workloads)), ",".join(sorted(backends)))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
