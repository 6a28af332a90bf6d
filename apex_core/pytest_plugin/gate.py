"""``--apex-bench-compare``: each test's cells judged against a baseline by the gate's own rules.

The baseline is a baseline file (``apex-bench baseline emit``) or a report of an earlier test run
(``--apex-bench-json``), from which a baseline is emitted as ``baseline emit`` would. Each cell is
checked when its test runs, so the test that got slower is the one that fails, with the verdict.
"""

from __future__ import annotations

from pathlib import Path

from apex_core.baseline.artifacts import change_text, verdict_text
from apex_core.baseline.compare import check_environment, check_metric, noted_floors
from apex_core.baseline.emit import emit_baseline
from apex_core.baseline.io import check_suite, load_baseline, load_report, loaded_report, read_json
from apex_core.baseline.model import FAIL, Baseline
from apex_core.errors import ApexBenchError
from apex_core.report.records import report_record
from apex_core.results import CellResult, Report

# A test's cell is compared alone, so two fields of the run's key do not apply to it: the dtypes a
# run selected (a test run selects none) and the set of timing methods of all its cells.
PER_RUN_FIELDS = ("dtypes", "timing_methods")


def load(path: Path) -> Baseline:
    """The baseline at ``path``: a baseline file, or one emitted from a report of an earlier run."""
    record = read_json(path)
    if isinstance(record, dict) and "benchmarks" in record:
        return emit_baseline(load_report(path))
    return load_baseline(path)


class CellGate:
    """A baseline, loaded once per test process; a file that cannot serve fails each compared test
    with one line rather than the test run."""

    def __init__(self, path: Path, force: bool = False) -> None:
        self.path = path
        self.force = force
        self.baseline: Baseline | None = None
        self.error = ""
        try:
            self.baseline = load(path)
        except ApexBenchError as exc:
            self.error = f"--apex-bench-compare: {exc}"

    def failures(self, cell: CellResult, report: Report) -> list[str]:
        """Why ``cell`` fails against the baseline (none when it passes or the baseline lacks it).

        ``report`` holds the run's environment and config, with this cell as its only one.
        """
        if self.baseline is None:
            return [self.error]
        prefix = f"{cell.workload}/{cell.case}/{cell.backend}/{cell.dtype}/"
        limits = {name: limit for name, limit in self.baseline.metrics.items() if name.startswith(prefix)}
        if not limits:
            return []
        try:
            current = loaded_report(report_record(report), cell.workload)
            check_suite(self.baseline, self.path, current)
            check_environment(self.baseline, self.path, current.environment_key, cell.workload,
                              force=self.force, skip=PER_RUN_FIELDS)
        except ApexBenchError as exc:
            return [f"--apex-bench-compare: {str(exc).replace('--force', '--apex-bench-force')}"]
        checked = [check_metric(name, limit, current.cells[0], self.baseline.samples_for(name))
                   for name, limit in limits.items()]
        # on another kind of machine (its timer floor a quarter off), a failure near the floor says so
        _, checks = noted_floors(checked, limits, dict.fromkeys(limits, current.cells[0]))
        return [f"slower than the baseline {self.path}: {c.metric}: {c.reason}; verdict {verdict_text(c)} "
                f"(change {change_text(c)}){'; ' + c.contention if c.contention else ''}"
                for c in checks if c.status == FAIL]

