"""A report's cells as the HTML views read them: grouped by workload and case, numbers with sources."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from apex_core.report.html.numbers import Q, percentile_of, pointer
from apex_core.report.markdown import REFERENCE_BACKEND

# how each flag reads in the report, and whether it says "do not trust this number"
FLAG_TEXT = {
    "launch_bound": "launch-bound",
    "throttled": "throttled",
    "noisy": "noisy",
    "faster_than_physics": "faster than physics",
    "p50_over_min": "p50 > 1.5x min",
    "no_device_work": "no device work",
    "below_timer_floor": "below timer floor",
    "few_samples": "few samples",
    "contended": "contended (busy machine)",
}
SEVERE_FLAGS = ("faster_than_physics", "throttled", "no_device_work")
INTERPRETED = "triton_interpreter"  # correctness only: its times are no speed


@attrs.frozen
class Cell:
    """One cell of one run: its record, its place in the document, its sorted samples."""

    doc: str
    index: int
    record: Mapping[str, Any]
    samples: tuple[float, ...]  # sorted

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        r = self.record
        return (r["workload"], r["case"], r["backend"], r["dtype"], str(r.get("device") or "?"))

    @property
    def name(self) -> str:
        return "/".join(self.key)

    @property
    def backend(self) -> str:
        return str(self.record["backend"])

    @property
    def status(self) -> str:
        return str(self.record["status"])

    @property
    def timed(self) -> bool:
        return self.status == "ok" and self.stat("p50_ms") is not None and bool(self.samples)

    @property
    def comparable(self) -> bool:
        """Timed by a method whose times are speeds (not the Triton interpreter)."""
        return self.timed and self.record.get("timing_method") != INTERPRETED

    @property
    def flags(self) -> tuple[str, ...]:
        return tuple(str(f) for f in self.record.get("flags") or ())

    def src(self, *parts: str | int) -> str:
        return pointer(self.doc, "benchmarks", self.index, *parts)

    def field(self, *parts: str | int) -> Q | None:
        """The number at ``parts`` of the cell's record, with its pointer into the whole document."""
        found = Q.at(self.record, self.doc, *parts)
        return None if found is None else Q(found.value, self.src(*parts))

    def stat(self, name: str) -> Q | None:
        return self.field("stats", name)

    def percentile(self, q: float) -> Q | None:
        return percentile_of(self.samples, self.src("samples_ms"), q) if self.samples else None


def report_cells(doc: str, record: Mapping[str, Any]) -> tuple[Cell, ...]:
    return tuple(Cell(doc, i, c, tuple(sorted(float(s) for s in c.get("samples_ms") or [])))
                 for i, c in enumerate(record.get("benchmarks") or []))


@attrs.frozen
class CaseGroup:
    """The cells of one workload, case, dtype and device: the reference backend first."""

    workload: str
    case: str
    dtype: str
    device: str
    cells: tuple[Cell, ...]

    @property
    def title(self) -> str:
        return f"{self.workload} / {self.case} ({self.dtype}, {self.device})"

    @property
    def anchor(self) -> str:
        return "case-" + "-".join(
            self.title.replace("(", "").replace(")", "").replace(",", "").split()
        ).replace("/", "")

    @property
    def reference(self) -> Cell | None:
        return next((c for c in self.cells if c.backend == REFERENCE_BACKEND and c.comparable), None)

    def speedup(self, cell: Cell) -> tuple[Q | None, str]:
        """The reference's p50 over the cell's (how many times faster than torch-reference), and why a
        timed cell has none though the reference ran ("" where it has one, or none is due)."""
        reference = self.reference
        if reference is None or cell is reference or not cell.comparable:
            return None, ""
        ref_p50, p50 = reference.stat("p50_ms"), cell.stat("p50_ms")
        if p50 is None or not p50.value > 0:
            return None, "no speed-up: this cell's p50 is 0 ms, and a ratio to it means nothing"
        if ref_p50 is None or not ref_p50.value > 0:
            return None, f"no speed-up: {REFERENCE_BACKEND}'s p50 is 0 ms, and a ratio to it means nothing"
        return ref_p50 / p50, ""


def case_groups(cells: Sequence[Cell]) -> tuple[CaseGroup, ...]:
    """Groups in the order their first cell appears."""
    grouped: dict[tuple[str, str, str, str], list[Cell]] = {}
    for cell in cells:
        workload, case, _, dtype, device = cell.key
        grouped.setdefault((workload, case, dtype, device), []).append(cell)
    return tuple(CaseGroup(*key, tuple(sorted(members, key=lambda m: m.backend != REFERENCE_BACKEND)))
                 for key, members in grouped.items())
