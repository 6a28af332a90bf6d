"""The raw samples as distributions: a histogram per cell and one ECDF per case.

A p50 and its whiskers hide a bimodal cell (two clock states, a cache that sometimes
stays warm) and a host-bound one (a floor with a long right tail); the shapes show them.
The histogram spans min to p99 so one stray sample cannot squash the rest into one bin;
what lies above p99 is counted at the right. The ECDF draws at most ``ECDF_POINTS`` points
per cell (order statistics at even steps), which keeps a 5,000-sample cell small.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping

from apex_core.report.html.cells import CaseGroup, Cell
from apex_core.report.html.numbers import svg_number
from apex_core.report.html.svg import Scale, esc, legend, open_plot, polyline, x_axis, y_axis

BINS = 40
ECDF_POINTS = 200
HIST_WIDTH, HIST_HEIGHT = 280, 96


def bin_counts(samples: tuple[float, ...], low: float, high: float, bins: int = BINS) -> list[int]:
    """Counts of sorted ``samples`` in ``bins`` equal bins over [low, high] (the last one closed)."""
    if high <= low:
        return [sum(1 for s in samples if s <= high)] + [0] * (bins - 1)
    edges = [low + (high - low) * i / bins for i in range(bins + 1)]
    positions = [bisect.bisect_left(samples, e) for e in edges[:-1]] + [bisect.bisect_right(samples, high)]
    return [positions[i + 1] - positions[i] for i in range(bins)]


def histogram(cell: Cell, colour: str) -> str:
    """One cell's samples from min to p99, and how many lay above."""
    low, p99 = cell.stat("min_ms"), cell.stat("p99_ms")
    if low is None or p99 is None:
        return ""
    counts = bin_counts(cell.samples, low.value, p99.value)
    above = len(cell.samples) - bisect.bisect_right(cell.samples, p99.value)
    left, right, top, bottom = 8.0, HIST_WIDTH - 8.0, 18.0, HIST_HEIGHT - 20.0
    tallest = max(counts) or 1
    width = (right - left) / len(counts)
    parts = [
        open_plot(f"hist:{cell.name}", HIST_WIDTH, HIST_HEIGHT, f"samples of {cell.name}"),
        f'<text class="hist-title" x="{left}" y="12">{esc(cell.backend)} · {len(cell.samples)} samples</text>',
    ]
    span = p99.value - low.value
    for i, count in enumerate(counts):
        h = (bottom - top) * count / tallest
        if count:
            parts.append(
                f'<rect data-mark="bin" x="{left + i * width:.1f}" y="{bottom - h:.1f}" '
                f'width="{max(width - 0.5, 0.5):.1f}" height="{h:.1f}" fill="{colour}">'
                f"<title>{count} samples from {low.value + span * i / len(counts):.4g} ms</title></rect>"
            )
    parts.append(f'<line class="axis" x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}"/>')
    parts.append(svg_number(low, left, bottom + 13, css="tick", unit="ms"))
    parts.append(svg_number(p99, right, bottom + 13, css="tick", anchor="end", unit="ms (p99)"))
    if above:
        parts.append(f'<text class="tick" x="{right}" y="12" text-anchor="end">+{above} above p99</text>')
    return '<div class="hist">' + "".join(parts) + "</svg></div>"


def ecdf_points(samples: tuple[float, ...], count: int = ECDF_POINTS) -> list[tuple[float, float]]:
    """(value, cumulative share) at up to ``count`` evenly spaced ranks of sorted ``samples``."""
    n = len(samples)
    if n <= count:
        return [(s, (i + 1) / n) for i, s in enumerate(samples)]
    ranks = sorted({round(i * (n - 1) / (count - 1)) for i in range(count)})
    return [(samples[r], (r + 1) / n) for r in ranks]


def ecdf_plot(group: CaseGroup, colours: Mapping[str, str]) -> str:
    """Every timed backend's samples as an ECDF on one (log when needed) time axis."""
    timed = [c for c in group.cells if c.timed]
    values = [v for c in timed for v in (c.samples[0], c.samples[-1])]
    width, height = 900, 230
    xs = Scale.fit(values, 60, width - 20, zero=False)
    ys = Scale(0.0, 1.0, height - 40, 24)
    parts = [
        open_plot(f"ecdf:{group.anchor}", width, height, f"ECDF of the samples, {group.title}"),
        x_axis(xs, height - 40, "ms per call", 24),
        y_axis(ys, 60, "share of samples", width - 20),
    ]
    for cell in timed:
        points = [(xs(v), ys(share)) for v, share in ecdf_points(cell.samples)]
        steps = [points[0]] + [p for a, b in zip(points, points[1:], strict=False) for p in ((b[0], a[1]), b)]
        parts.append(
            polyline(steps, colours.get(cell.backend, "#0072B2"), extra=f'data-cell="{esc(cell.name)}"')
        )
    parts.append(legend([(c.backend, colours.get(c.backend, "#0072B2")) for c in timed], 70, 14))
    return "".join(parts) + "</svg>"
