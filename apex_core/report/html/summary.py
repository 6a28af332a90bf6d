"""The report at a glance, right after the header: per case the fastest backend whose time can be
trusted, the cells that failed, and how many cells carry each flag.

A cell flagged ``no_device_work`` or ``faster_than_physics`` is never the fastest: its time is not
the time of the work (the timer saw none, or it moved its bytes faster than the memory can).
"""

from __future__ import annotations

from collections.abc import Sequence

from apex_core.errors import plural
from apex_core.report.flags import NOT_THE_WORK
from apex_core.report.html.cells import FLAG_TEXT, SEVERE_FLAGS, CaseGroup, Cell
from apex_core.report.html.failures import STATUS_RANK
from apex_core.report.html.numbers import number
from apex_core.report.html.svg import esc
from apex_core.report.markdown import REFERENCE_BACKEND
from apex_core.results import FAILING_STATUSES


def _p50(cell: Cell) -> float:
    p50 = cell.stat("p50_ms")
    return p50.value if p50 is not None else float("inf")


def trusted(cell: Cell) -> bool:
    """A time that is a speed of the work: ok, not interpreted, not flagged as someone else's time."""
    return cell.comparable and not set(cell.flags) & set(NOT_THE_WORK) and 0 < _p50(cell) < float("inf")


def best_cell(group: CaseGroup) -> Cell | None:
    """The backend with the lowest p50 among the case's trusted cells (None when none is)."""
    return min((c for c in group.cells if trusted(c)), key=_p50, default=None)


def _speedup(group: CaseGroup, best: Cell) -> str:
    if best.backend == REFERENCE_BACKEND:
        return f'<span class="none">{esc(REFERENCE_BACKEND)} itself</span>'
    reference = group.reference
    if reference is None:
        return f'<span class="none">no {esc(REFERENCE_BACKEND)} time</span>'
    if not trusted(reference):
        return f'<span class="none">– ({esc(REFERENCE_BACKEND)}\'s time is not the work\'s)</span>'
    return number(group.speedup(best)[0], "x")


def _case_row(group: CaseGroup) -> str:
    title = f'<td><a href="#{esc(group.anchor)}">{esc(group.workload)} / {esc(group.case)}</a></td>'
    dtype = f"<td>{esc(group.dtype)}</td>"
    best = best_cell(group)
    if best is None:
        timed = [c for c in group.cells if c.comparable]
        why = ("every timed cell is flagged no device work or faster than physics" if timed
               else "no cell has a time")
        return f'<tr>{title}{dtype}<td colspan="4" class="none">{esc(why)}</td></tr>'
    flags = ", ".join(FLAG_TEXT.get(f, f) for f in best.flags)
    return (
        f"<tr>{title}{dtype}<td><b>{esc(best.backend)}</b></td><td>{number(best.stat('p50_ms'), 'ms')}</td>"
        f"<td>{_speedup(group, best)}</td><td>{esc(flags) or '–'}</td></tr>"
    )


def _failures(cells: Sequence[Cell]) -> str:
    failed = sorted((c for c in cells if c.status in FAILING_STATUSES),
                    key=lambda c: STATUS_RANK.get(c.status, 6))
    skipped = sum(c.status == "skipped" for c in cells)
    also = f" ({plural(skipped, 'cell')} skipped)" if skipped else ""
    where = ' <a href="#not-timed">cells without a time</a> gives each reason.'
    if not failed:
        return f"<p><b>Failures:</b> none{esc(also)}.{where if skipped else ''}</p>"
    grouped: dict[tuple[str, str], list[str]] = {}
    for cell in failed:
        case = f"{cell.record['workload']}/{cell.record['case']} ({cell.record['dtype']})"
        grouped.setdefault((cell.status, cell.backend), []).append(case)
    items = "".join(
        f'<li><span class="bad">{esc(status)}</span>: <b>{esc(backend)}</b> on {esc(", ".join(cases))}</li>'
        for (status, backend), cases in grouped.items()
    )
    count = f'<span class="bad">{plural(len(failed), "cell")}</span>'
    return f'<p><b>Failures:</b> {count}{esc(also)}.{where}</p><ul class="failures">{items}</ul>'


def _flags(cells: Sequence[Cell]) -> str:
    counts: dict[str, int] = {}
    for cell in cells:
        for flag in cell.flags:
            counts[flag] = counts.get(flag, 0) + 1
    if not counts:
        return "<p><b>Flags:</b> none.</p>"
    order = [f for f in FLAG_TEXT if f in counts] + sorted(set(counts) - set(FLAG_TEXT))
    shown = ", ".join(
        f'<span class="{"bad" if f in SEVERE_FLAGS else "flag"}" data-flag-count="{esc(f)}">'
        f"{esc(FLAG_TEXT.get(f, f))}: {plural(counts[f], 'cell')}</span>"
        for f in order
    )
    return f"<p><b>Flags:</b> {shown}.</p>"


def summary_section(groups: Sequence[CaseGroup], cells: Sequence[Cell]) -> str:
    rows = "".join(_case_row(g) for g in groups)
    head = "".join(f"<th>{h}</th>" for h in ("case", "dtype", "fastest", "p50", f"vs {REFERENCE_BACKEND}",
                                               "its flags"))
    table = (f'<table class="summary"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>' if rows
             else '<p class="none">No cells.</p>')
    return (
        '<section id="summary"><h2>Summary</h2><p class="caption">Per case the backend with the lowest p50 '
        "among the cells that ran correctly (a cell flagged no device work or faster than physics does not "
        f"count: its time is not the work's), and {esc(REFERENCE_BACKEND)}'s p50 over its p50.</p>"
        f"{table}{_failures(cells)}{_flags(cells)}</section>"
    )
