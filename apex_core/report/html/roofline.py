"""The roofline view: each cell's achieved GB/s and TFLOP/s against what this device can do.

The bandwidth roof is the copy bandwidth the run measured on this device
(``environment.device_facts.copy_gbps``), not a datasheet figure. No run measures the
compute peak, so the compute roof is drawn only when one is given (``apex-bench report
--peak-tflops``, or ``device_facts.peak_tflops`` where a future run records it). A run without a
copy bandwidth (a CPU run) has no bandwidth roof, and the captions say only what is drawn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from apex_core.report.html.cells import Cell
from apex_core.report.html.header import on_gpu
from apex_core.report.html.numbers import Q, data_attrs, number, svg_number
from apex_core.report.html.svg import Scale, esc, legend, open_plot, polyline, sortable_table, x_axis, y_axis

WIDTH = 900
Rated = list[tuple[Cell, Q]]  # cells with their achieved GB/s


def _rated(cells: Sequence[Cell]) -> Rated:
    """The cells timed as speeds that report achieved GB/s over a positive byte count, with that rate."""
    return [(c, gbps) for c in cells if c.comparable and (gbps := c.field("gbps")) is not None
            and (c.field("bytes_moved") or Q(0.0, "")).value > 0]


def bandwidth_plot(rated: Rated, copy: Q | None, colours: Mapping[str, str]) -> str:
    """Achieved GB/s per cell as bars, with the measured copy bandwidth as the line no cell should cross."""
    row, top, left, right = 18, 24, 340, WIDTH - 70
    scale = Scale.fit([gbps.value for _, gbps in rated] + ([copy.value] if copy else []), left, right)
    bottom = top + row * len(rated)
    parts = [
        open_plot("bandwidth", WIDTH, bottom + 40,
                  "achieved GB/s per cell" + (" against the copy bandwidth" if copy else "")),
        x_axis(scale, bottom, "achieved GB/s (minimal bytes / p50)", top),
    ]
    for position, (cell, gbps) in enumerate(rated):
        y = top + row * position
        over = copy is not None and gbps.value > copy.value
        parts.append(
            f'<text class="label" x="{left - 6}" y="{y + 13:.1f}" text-anchor="end">{esc(cell.name)}</text>'
            f'<rect data-mark="bar" class="{"bar over" if over else "bar"}" x="{left}" y="{y + 3:.1f}" '
            f'width="{max(scale(gbps.value) - left, 1.0):.1f}" height="12" '
            f'fill="{"#D55E00" if over else colours.get(cell.backend, "#0072B2")}" {data_attrs(gbps)}>'
            f"<title>{esc(cell.name)}: {gbps.value:.4g} GB/s</title></rect>"
            + svg_number(gbps, scale(gbps.value) + 4, y + 13, css="tick")
        )
    if copy is not None:
        x = scale(copy.value)
        parts.append(
            f'<line class="roof" data-mark="roof" x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" '
            f'y2="{bottom:.1f}" {data_attrs(copy)}/><text class="roof-label" x="{x:.1f}" y="{top - 9}" '
            f'text-anchor="middle">copy bandwidth</text>'
        )
    return "".join(parts) + "</svg>"


def roofline_plot(rated: Rated, copy: Q | None, peak: Q | None, colours: Mapping[str, str]) -> str:
    """TFLOP/s against arithmetic intensity (FLOP per byte), log-log, with the roofs this device has."""
    points = [
        (c, intensity, tflops)
        for c, _ in rated
        for flops, moved, tflops in [(c.field("flops"), c.field("bytes_moved"), c.field("tflops"))]
        if flops and moved and tflops and flops.value > 0 and tflops.value > 0
        for intensity in [flops / moved]
    ]
    if not points:
        return ""
    width, height, left, bottom, top = WIDTH, 330, 70, 290, 20
    xs = Scale.fit([p[1].value for p in points], left, width - 20, log=True)
    ys_values = [p[2].value for p in points] + ([peak.value] if peak else [])
    if copy is not None:
        ys_values += [copy.value * xs.lo / 1e3, copy.value * xs.hi / 1e3]
    ys = Scale.fit(ys_values, bottom, top, log=True)
    parts = [
        open_plot("roofline", width, height + 10, "roofline: TFLOP/s against FLOP per byte"),
        x_axis(xs, bottom, "arithmetic intensity, FLOP per minimal byte", top),
        y_axis(ys, left, "achieved TFLOP/s", width - 20),
    ]
    if copy is not None:
        roof = [(xs.lo, copy.value * xs.lo / 1e3), (xs.hi, copy.value * xs.hi / 1e3)]
        if peak is not None:
            knee = peak.value * 1e3 / copy.value
            roof = [(xs.lo, copy.value * xs.lo / 1e3), (knee, peak.value), (xs.hi, peak.value)]
        parts.append(polyline([(xs(x), ys(min(y, ys.hi))) for x, y in roof], "#D55E00", css="roof"))
    elif peak is not None:  # no bandwidth roof: the compute roof alone
        flat = [(xs(xs.lo), ys(peak.value)), (xs(xs.hi), ys(peak.value))]
        parts.append(polyline(flat, "#D55E00", css="roof"))
    for cell, intensity, tflops in points:
        parts.append(
            f'<circle data-mark="point" cx="{xs(intensity.value):.1f}" cy="{ys(tflops.value):.1f}" r="5" '
            f'fill="{colours.get(cell.backend, "#0072B2")}" {data_attrs(tflops)}><title>{esc(cell.name)}: '
            f"{tflops.value:.4g} TFLOP/s at {intensity.value:.4g} FLOP/B</title></circle>"
        )
    backends = list(dict.fromkeys(c.backend for c, _, _ in points))
    parts.append(legend([(b, colours.get(b, "#0072B2")) for b in backends], left + 10, top + 14))
    return "".join(parts) + "</svg>"


def rates_table(rated: Rated, copy: Q | None) -> str:
    """The plotted rates as numbers, per cell (the Markdown's ``--output-roofline`` table says the
    same): p50, GB/s, the share of the copy bandwidth, the floor (bytes over it) and p50 / floor."""
    rows = []
    for cell, gbps in rated:
        p50_ms, moved = cell.stat("p50_ms"), cell.field("bytes_moved")
        p50_us = p50_ms.scaled(1e3) if p50_ms is not None else None
        # bytes / (GB/s) is ns; the floor in us
        floor_us = (moved / copy).scaled(1e-3) if copy is not None and moved is not None else None
        share = (gbps / copy).scaled(100.0) if copy is not None else None
        ratio = p50_us / floor_us if p50_us is not None and floor_us is not None else None
        rows.append(f"<tr><td>{esc(cell.name)}</td><td>{number(p50_us)}</td><td>{number(gbps)}</td>"
                    f"<td>{number(share, '%')}</td><td>{number(floor_us)}</td><td>{number(ratio)}</td></tr>")
    return sortable_table(("cell", "p50 us", "GB/s", "share of copy", "floor us", "p50 / floor"), rows)


def roofline_section(record: Mapping[str, Any], doc: str, cells: Sequence[Cell], colours: Mapping[str, str],
                     peak_tflops: float | None) -> str:
    copy = Q.at(record, doc, "environment", "device_facts", "copy_gbps")
    peak = Q.at(record, doc, "environment", "device_facts", "peak_tflops")
    if peak is None and peak_tflops:
        peak = Q(float(peak_tflops), "arg#peak_tflops")
    rated = _rated(cells)
    if not rated:
        return (
            '<section id="roofline"><h2>Roofline</h2><p class="none">No timed cell reports achieved '
            "bandwidth over a positive byte count (the Triton interpreter's times are no speeds).</p></section>"
        )
    if copy:
        copy_text = (f", against the copy bandwidth this run measured on this device, {number(copy, 'GB/s')}. "
                     "A bar past the line is faster than physics allows: it skipped work or counts bytes it "
                     "need not move.")
    else:
        copy_text = (". No bandwidth roof: this run measured no copy bandwidth"
                     + (" (a CPU run)." if not on_gpu(record) else "."))
    plot = roofline_plot(rated, copy, peak, colours)
    if peak:
        peak_text = f" The compute roof is {number(peak, 'TFLOP/s')}." if plot else ""
    else:
        peak_text = (" No compute roof: runs do not measure the peak FLOP rate; <code>apex-bench report "
                     "RUN.json --peak-tflops X</code> draws it." if plot else "")
    return (
        f'<section id="roofline"><h2>Roofline</h2><p class="caption">Achieved rates from each cell\'s '
        f"minimal bytes and FLOPs over its p50{copy_text}{peak_text}</p>"
        f'<div class="figure">{bandwidth_plot(rated, copy, colours)}</div>'
        f'<div class="figure">{plot}</div>{rates_table(rated, copy)}</section>'
    )
