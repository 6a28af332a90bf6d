"""SVG building blocks of the HTML report: scales, ticks, axes and the plot frame.

Plots are inline SVG written here in Python: no JavaScript draws anything, so a report opens
offline, prints as vector graphics and looks the same in every browser (docs/report.md says why).
Every plot is ``<svg class="plot" data-plot=NAME>`` and every drawn datum carries ``data-mark``,
which is what the browser test looks for.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence

import attrs

# Okabe-Ito: told apart by people with the common colour-vision deficiencies, and in grey print
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
REFERENCE_COLOUR = "#777777"
# a spread beyond this (largest over smallest value) is drawn on a log axis
LOG_SPREAD = 20.0


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def sortable_table(headers: Iterable[str], rows: Iterable[str]) -> str:
    """A table the page's script sorts by a click on a header; ``rows`` are whole ``<tr>`` elements."""
    head = "".join(f'<th data-sort="{i}">{esc(h)}</th>' for i, h in enumerate(headers))
    return f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def backend_colours(backends: Iterable[str], reference: str) -> dict[str, str]:
    """One colour per backend, the reference always grey, the others in order of first appearance."""
    others = iter(PALETTE)
    return {name: REFERENCE_COLOUR if name == reference else next(others, "#444444")
            for name in dict.fromkeys(backends)}


_MAX_DECADE = 300


def needs_log(values: Iterable[float]) -> bool:
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    return bool(positive) and max(positive) / min(positive) > LOG_SPREAD


@attrs.frozen
class Scale:
    """Maps a data interval onto a pixel interval, linearly or on a log axis."""

    lo: float
    hi: float
    start: float
    end: float
    log: bool = False

    @classmethod
    def fit(
        cls, values: Iterable[float], start: float, end: float, log: bool | None = None, zero: bool = True
    ) -> Scale:
        """A scale covering ``values`` with a little room; linear ones start at 0 when ``zero``."""
        data = [v for v in values if math.isfinite(v)]
        use_log = needs_log(data) if log is None else log
        if use_log:
            positive = [v for v in data if v > 0] or [1.0]
            # decades clamped so that a subnormal or huge value cannot round a bound to 0 or overflow
            lo = 10.0 ** max(math.floor(math.log10(min(positive))), -_MAX_DECADE)
            hi = 10.0 ** min(math.ceil(math.log10(max(positive))), _MAX_DECADE)
            if hi <= lo:
                hi = lo * 10
            return cls(lo, hi, start, end, True)
        lo = min(0.0, *data) if (zero and data) else min(data, default=0.0)
        hi = max(data, default=1.0)
        if hi <= lo:
            hi = lo + (abs(lo) or 1.0)
        step = nice_step((hi - lo) / 5)
        return cls(math.floor(lo / step) * step, math.ceil(hi / step) * step, start, end, False)

    def __call__(self, value: float) -> float:
        if self.log:
            value = max(value, self.lo * 1e-3)
            share = (math.log10(value) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        else:
            share = (value - self.lo) / (self.hi - self.lo)
        return self.start + share * (self.end - self.start)

    def ticks(self) -> list[float]:
        if self.log:
            low, high = round(math.log10(self.lo)), round(math.log10(self.hi))
            decades = [10.0**k for k in range(low, high + 1)]
            if len(decades) <= 3:  # few decades: 1-2-5 between them
                decades = sorted({d * m for d in decades for m in (1, 2, 5) if self.lo <= d * m <= self.hi})
            return decades
        step = nice_step((self.hi - self.lo) / 5)
        count = int(round((self.hi - self.lo) / step))
        return [self.lo + i * step for i in range(count + 1)]


def nice_step(raw: float) -> float:
    """The 1-2-5 step nearest above ``raw``."""
    if raw <= 0 or not math.isfinite(raw):
        return 1.0
    power = 10 ** math.floor(math.log10(raw))
    return next((multiple * power for multiple in (1, 2, 5) if raw <= multiple * power), 10 * power)


def tick_label(value: float) -> str:
    return "0" if value == 0 else f"{value:.3g}"


def open_plot(name: str, width: float, height: float, title: str) -> str:
    """The start of one plot: a scalable SVG with an accessible title."""
    return (
        f'<svg class="plot" data-plot="{esc(name)}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" role="img" aria-label="{esc(title)}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{esc(title)}</title>'
    )


def x_axis(scale: Scale, y: float, label: str, top: float) -> str:
    """Ticks, grid lines up to ``top`` and the axis label below ``y``."""
    ticks = "".join(
        f'<line class="grid" x1="{x:.1f}" y1="{top:.1f}" x2="{x:.1f}" y2="{y:.1f}"/>'
        f'<text class="tick" x="{x:.1f}" y="{y + 13:.1f}" text-anchor="middle">{tick_label(tick)}</text>'
        for tick in scale.ticks() for x in [scale(tick)]
    )
    middle = (scale.start + scale.end) / 2
    return (
        f'<line class="axis" x1="{scale.start:.1f}" y1="{y:.1f}" x2="{scale.end:.1f}" y2="{y:.1f}"/>{ticks}'
        f'<text class="axis-label" x="{middle:.1f}" y="{y + 28:.1f}" text-anchor="middle">'
        f"{esc(label)}{' (log axis)' if scale.log else ''}</text>"
    )


def y_axis(scale: Scale, x: float, label: str, right: float) -> str:
    """Ticks, grid lines across to ``right`` and the axis label left of ``x``."""
    ticks = "".join(
        f'<line class="grid" x1="{x:.1f}" y1="{y:.1f}" x2="{right:.1f}" y2="{y:.1f}"/>'
        f'<text class="tick" x="{x - 4:.1f}" y="{y + 4:.1f}" text-anchor="end">{tick_label(tick)}</text>'
        for tick in scale.ticks() for y in [scale(tick)]
    )
    middle = (scale.start + scale.end) / 2
    return (
        f'<line class="axis" x1="{x:.1f}" y1="{scale.start:.1f}" x2="{x:.1f}" y2="{scale.end:.1f}"/>{ticks}'
        f'<text class="axis-label" x="12" y="{middle:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 12 {middle:.1f})">{esc(label)}{" (log)" if scale.log else ""}</text>'
    )


def polyline(points: Sequence[tuple[float, float]], colour: str, css: str = "line", extra: str = "") -> str:
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    return f'<polyline class="{css}" data-mark="line" points="{path}" stroke="{colour}" fill="none" {extra}/>'


def legend(items: Sequence[tuple[str, str]], x: float, y: float) -> str:
    """Colour keys in one row from (x, y)."""
    parts = []
    for name, colour in items:
        parts.append(f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="10" height="10" fill="{colour}"/>'
                     f'<text class="legend" x="{x + 14:.1f}" y="{y:.1f}">{esc(name)}</text>')
        x += 24 + 6.5 * len(name)
    return "".join(parts)
