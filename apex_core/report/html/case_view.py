"""One workload and case: p50 by backend with p5-p95 whiskers, speed-ups, flags, and the numbers table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apex_core.measure.doctor import physics_source
from apex_core.report.flags import UNCONFIRMED_NOTE, FlagFacts, flag_note
from apex_core.report.html.cells import FLAG_TEXT, SEVERE_FLAGS, CaseGroup, Cell
from apex_core.report.html.distributions import ecdf_plot, histogram
from apex_core.report.html.numbers import Q, data_attrs, number, svg_number
from apex_core.report.html.svg import Scale, esc, open_plot, sortable_table, x_axis

WIDTH = 900
LABEL_RIGHT = 150  # backend names end here
PLOT_LEFT, PLOT_RIGHT = 160, 560
ROW = 30
TOP = 12


def floor_source(run: Mapping[str, Any]) -> str:
    """What the physics floor is drawn from, in words ("" where the run has no bound)."""
    environment = run.get("environment")
    facts = environment.get("device_facts") if isinstance(environment, Mapping) else None
    source = physics_source(facts) if isinstance(facts, Mapping) else None
    if source is None:
        return ""
    if source[0] == "dram_peak_gbps":
        return "the memory's peak bandwidth (NVML)"
    return f"{source[1]:g}x the copy bandwidth the run measured"


def physics_floor(cell: Cell, run: Mapping[str, Any]) -> Q | None:
    """The cell's minimal bytes over the device memory's bandwidth, in ms: no correct call is faster
    (the bound of the ``faster_than_physics`` flag, apex_core.measure.doctor.physics_source)."""
    environment = run.get("environment")
    facts = environment.get("device_facts") if isinstance(environment, Mapping) else None
    source = physics_source(facts) if isinstance(facts, Mapping) else None
    if source is None or not str(cell.record.get("device") or "").startswith("cuda"):
        return None
    bound, moved = Q.at(run, cell.doc, "environment", "device_facts", source[0]), cell.field("bytes_moved")
    if bound is None or moved is None or bound.value <= 0 or moved.value <= 0:
        return None
    if source[1] != 1.0:
        bound = bound.scaled(source[1])
    return (moved / bound).scaled(1e-6)  # bytes / (GB/s) is ns; 1e-6 of it is ms


def case_floor(group: CaseGroup, run: Mapping[str, Any]) -> Q | None:
    """The physics floor the case's bar plot draws: its first timed cell's."""
    return next((f for f in (physics_floor(c, run) for c in group.cells if c.timed) if f is not None), None)


def draws_host(group: CaseGroup) -> bool:
    """Whether the case's bar plot draws a host-time diamond (CUDA event timers record host_ms)."""
    return any(c.field("host_ms") is not None for c in group.cells if c.timed)


def _flag_badges(cell: Cell, x: float, y: float) -> str:
    parts, offset = [], 0.0
    for flag in cell.flags:
        text = FLAG_TEXT.get(flag, flag)
        css = "flag severe" if flag in SEVERE_FLAGS else "flag"
        parts.append(
            f'<text class="{css}" data-flag="{esc(flag)}" x="{x + offset:.1f}" y="{y:.1f}">{esc(text)}</text>'
        )
        offset += 9 + 5.6 * len(text)
    return "".join(parts)


def _row(group: CaseGroup, cell: Cell, scale: Scale, y: float, colour: str) -> str:
    middle = y + ROW / 2
    line = middle + 4  # the baseline of the row's text
    label = f'<text class="label" x="{LABEL_RIGHT}" y="{line:.1f}" text-anchor="end">{esc(cell.backend)}</text>'
    if not cell.timed:
        return label + (
            f'<text class="status-text" x="{PLOT_LEFT}" y="{line:.1f}">{esc(cell.status)}: '
            f"{esc((cell.record.get('reason') or '')[:110])}</text>"
        )
    p50, p95, p5 = cell.stat("p50_ms"), cell.stat("p95_ms"), cell.percentile(5)
    assert p50 is not None and p5 is not None
    high = p95 if p95 is not None else p50
    low_x, high_x = scale(p5.value), scale(high.value)
    parts = [
        label,
        f'<rect class="bar" data-mark="bar" x="{scale.start:.1f}" y="{middle - 7:.1f}" '
        f'width="{max(scale(p50.value) - scale.start, 1.0):.1f}" height="14" fill="{colour}" '
        f"{data_attrs(p50)}><title>{esc(cell.name)}: p50 {p50.value:.4g} ms</title></rect>",
        f'<line class="whisker" data-mark="whisker" x1="{low_x:.1f}" y1="{middle:.1f}" '
        f'x2="{high_x:.1f}" y2="{middle:.1f}" {data_attrs(p5)}/>',
        f'<line class="whisker" x1="{low_x:.1f}" y1="{middle - 5:.1f}" x2="{low_x:.1f}" y2="{middle + 5:.1f}"/>'
        f'<line class="whisker" x1="{high_x:.1f}" y1="{middle - 5:.1f}" x2="{high_x:.1f}" '
        f'y2="{middle + 5:.1f}" {data_attrs(high)}/>',
    ]
    host = cell.field("host_ms")
    if host is not None and scale.lo <= host.value <= scale.hi * 1.001:
        x = scale(host.value)
        parts.append(
            f'<path class="host" data-mark="host" d="M{x:.1f},{middle - 6:.1f} l4,6 l-4,6 l-4,-6 z" '
            f"{data_attrs(host)}><title>host time to issue one call: {host.value:.4g} ms</title></path>"
        )
    parts.append(svg_number(p50, PLOT_RIGHT + 8, line, unit="ms"))
    speedup, _ = group.speedup(cell)
    if speedup is not None:
        parts.append(svg_number(speedup, PLOT_RIGHT + 86, line, css="speedup", unit="x"))
    return "".join(parts) + _flag_badges(cell, PLOT_RIGHT + 146, line)


def bar_plot(group: CaseGroup, run: Mapping[str, Any], colours: Mapping[str, str]) -> str:
    """p50 bars with p5-p95 whiskers per backend, host-time marks and the physics floor."""
    timed = [c for c in group.cells if c.timed]
    floor = case_floor(group, run)
    marks = [floor, *(q for c in timed for q in (c.percentile(5), c.stat("p95_ms"), c.stat("p50_ms")))]
    marks += [c.field("host_ms") for c in timed]
    scale = Scale.fit([q.value for q in marks if q], PLOT_LEFT, PLOT_RIGHT)
    bottom = TOP + ROW * len(group.cells)
    parts = [
        open_plot(f"bars:{group.anchor}", WIDTH, bottom + 36, f"p50 by backend, {group.title}"),
        x_axis(scale, bottom, "ms per call: bar p50, whisker p5 to p95"
               + (", diamond host time" if draws_host(group) else ""), TOP),
    ]
    for position, cell in enumerate(group.cells):
        parts.append(_row(group, cell, scale, TOP + ROW * position, colours.get(cell.backend, "#0072B2")))
    if floor is not None:
        x = scale(floor.value)
        parts.append(
            f'<line class="floor" data-mark="floor" x1="{x:.1f}" y1="{TOP:.1f}" x2="{x:.1f}" y2="{bottom:.1f}" '
            f"{data_attrs(floor)}><title>physics floor: its minimal bytes at {esc(floor_source(run))} take "
            f"{floor.value:.4g} ms</title></line>"
        )
    return "".join(parts) + "</svg>"


def case_notes(group: CaseGroup, run: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """Per (backend, flag or "speed-up"): why a speed-up is missing, what a degenerate flag asks."""
    config = run.get("config")
    config = config if isinstance(config, Mapping) else {}
    notes: dict[tuple[str, str], str] = {}
    for cell in (c for c in group.cells if c.timed):
        if reason := group.speedup(cell)[1]:
            notes[(cell.backend, "speed-up")] = reason
        facts = FlagFacts.of_record(cell.record, config)
        for flag in cell.flags:
            if text := flag_note(flag, facts):
                notes[(cell.backend, flag)] = text
        metadata = cell.record.get("metadata")
        if isinstance(metadata, Mapping) and metadata.get("integrity_unconfirmed"):
            notes[(cell.backend, "unconfirmed")] = UNCONFIRMED_NOTE
    return notes


def _note_refs(keys: list[tuple[str, str]], *wanted: tuple[str, str]) -> str:
    return "".join(f" [{keys.index(w) + 1}]" for w in wanted if w in keys)


def notes_list(notes: dict[tuple[str, str], str]) -> str:
    if not notes:
        return ""
    items = "".join(f"<li>{esc(backend)}: {esc(text)}</li>" for (backend, _), text in notes.items())
    return f'<ol class="note case-notes">{items}</ol>'


TABLE_HEAD = ("backend", "status", "p50 ms", "p5 ms", "p95 ms", "samples", "speed-up", "host ms", "timing",
              "flags")


def numbers_table(group: CaseGroup, notes: dict[tuple[str, str], str]) -> str:
    rows, keys = [], list(notes)
    for cell in group.cells:
        flags = ", ".join(FLAG_TEXT.get(f, f) for f in cell.flags)
        values = (
            esc(cell.backend), esc(cell.status), number(cell.stat("p50_ms")), number(cell.percentile(5)),
            number(cell.stat("p95_ms")), number(cell.stat("n")),
            number(group.speedup(cell)[0], "x") + _note_refs(keys, (cell.backend, "speed-up")),
            number(cell.field("host_ms")), esc(cell.record.get("timing_method") or "–"),
            esc(flags or "–") + _note_refs(keys, *((cell.backend, f) for f in cell.flags),
                                           (cell.backend, "unconfirmed")),
        )
        rows.append("<tr>" + "".join(f"<td>{v}</td>" for v in values) + "</tr>")
    return sortable_table(TABLE_HEAD, rows)


def case_section(group: CaseGroup, run: Mapping[str, Any], colours: Mapping[str, str]) -> str:
    """The whole view of one case: bars, distributions and the table."""
    timed = [c for c in group.cells if c.timed]
    parts = [
        f'<section class="case" id="{esc(group.anchor)}"><h3>{esc(group.title)}</h3>',
        f'<div class="figure">{bar_plot(group, run, colours)}</div>',
    ]
    if timed:
        parts.append(
            '<p class="caption">Where each backend\'s samples fell: a histogram per cell (min to p99, '
            "samples above p99 counted at the right) and the ECDF of all of them on one axis. Two humps "
            "or a long flat step mean a bimodal or disturbed cell.</p>"
        )
        hists = "".join(histogram(c, colours.get(c.backend, "#0072B2")) for c in timed)
        parts.append(f'<div class="hists">{hists}</div><div class="figure">{ecdf_plot(group, colours)}</div>')
    notes = case_notes(group, run)
    parts.append(numbers_table(group, notes) + notes_list(notes) + "</section>")
    return "".join(parts)
