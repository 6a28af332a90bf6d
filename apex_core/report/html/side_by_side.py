"""Two runs side by side: per cell, A's and B's p50, the ratio B / A and the gate's verdict on the samples.

The verdict is ``apex_core.baseline.verdict.judge(A's samples, B's samples)``, the same seeded
bootstrap the gate uses: ``slower`` or ``faster`` only when the whole 95 % interval of the
ratio lies beyond 1 +- 2 %, ``inconclusive`` when it cannot tell.
"""

from __future__ import annotations

from collections.abc import Sequence

from apex_core.baseline.compare import refused_differences
from apex_core.baseline.io import gate_environment_key
from apex_core.baseline.model import metric_name
from apex_core.baseline.verdict import judge, metric_seed
from apex_core.report.html.cells import Cell, report_cells
from apex_core.report.html.inputs import RunInput
from apex_core.report.html.numbers import Q, data_attrs, judged, number
from apex_core.report.html.svg import Scale, esc, open_plot, sortable_table, x_axis

VERDICT_CSS = {"slower": "bad", "faster": "good", "same": "same", "inconclusive": "unclear"}


def _metric(cell: Cell) -> str:
    """The gate's name of the cell's p50 metric, which also seeds the verdict's bootstrap."""
    return metric_name(*cell.key[:4], "p50_ms")


def _judge_src(a: Cell, b: Cell, field: str) -> str:
    return judged(a.src("samples_ms"), b.src("samples_ms"), _metric(b), field)


def _verdict(a: Cell, b: Cell) -> tuple[str, Q | None, Q | None, Q | None, str]:
    """(label, ratio, ci_low, ci_high, reason) of B against A on the p50."""
    verdict = judge(a.samples, b.samples, 50.0, seed=metric_seed(_metric(b)))
    ratio, low, high = (
        None if (value := getattr(verdict, field)) is None else Q(value, _judge_src(a, b, field))
        for field in ("ratio", "ci_low", "ci_high")
    )
    return verdict.label, ratio, low, high, verdict.reason


def _ratio_plot(shown: list[tuple[Cell, Q, Q | None, Q | None, str]], name: str) -> str:
    """B / A per cell on a log axis around 1, with the verdict's interval as the whisker."""
    if not shown:
        return ""
    row, top, left, right, width = 18, 20, 340, 880, 900
    values = [v.value for r in shown for v in r[1:4] if v is not None] + [1.0]
    scale = Scale.fit(values, left, right, log=True)
    bottom = top + row * len(shown)
    parts = [
        open_plot(f"ratio:{name}", width, bottom + 40, "B / A p50 ratio per cell"),
        x_axis(scale, bottom, "B p50 / A p50 (below 1: B is faster)", top),
        f'<line class="roof" x1="{scale(1.0):.1f}" y1="{top}" x2="{scale(1.0):.1f}" y2="{bottom:.1f}"/>',
    ]
    for position, (cell, ratio, low, high, label) in enumerate(shown):
        y = top + row * position + 9
        whisker = "" if low is None or high is None else (
            f'<line class="whisker" x1="{scale(low.value):.1f}" y1="{y:.1f}" x2="{scale(high.value):.1f}" '
            f'y2="{y:.1f}"/>'
        )
        parts.append(
            f'<text class="label" x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{esc(cell.name)}</text>'
            f'{whisker}<circle data-mark="point" class="verdict-{esc(label)}" cx="{scale(ratio.value):.1f}" '
            f'cy="{y:.1f}" r="4" {data_attrs(ratio)}><title>{esc(cell.name)}: {ratio.value:.4g} '
            f"({esc(label)})</title></circle>"
        )
    return "".join(parts) + "</svg>"


def side_by_side_section(a: RunInput, b: RunInput, cells_b: Sequence[Cell]) -> str:
    """Run ``a`` against ``b``, the report's subject, whose cells (``report_cells``) the page has already."""
    cells_a = {c.key: c for c in report_cells(a.doc, a.record)}
    rows_html, plotted = [], []
    for cell in cells_b:
        other = cells_a.get(cell.key)
        if other is None:
            continue
        p50_a, p50_b = other.stat("p50_ms"), cell.stat("p50_ms")
        if other.timed and cell.timed:
            label, ratio, low, high, reason = _verdict(other, cell)
            if ratio is not None:
                plotted.append((cell, ratio, low, high, label))
            interval = f"[{number(low)}, {number(high)}]" if low and high else esc(reason)
            css = VERDICT_CSS.get(label, "")
            verdict = (
                f'<span class="verdict {css}" data-verdict="{esc(label)}" '
                f'data-judge="{esc(_judge_src(other, cell, "label"))}">{esc(label)}</span>'
            )
        else:
            ratio, interval = None, ""
            verdict = f'<span class="none">{esc(other.status)} / {esc(cell.status)}</span>'
        rows_html.append(
            f"<tr><td>{esc(cell.name)}</td><td>{number(p50_a)}</td><td>{number(p50_b)}</td>"
            f"<td>{number(ratio, 'x')}</td><td>{verdict}</td><td>{interval}</td></tr>"
        )
    only = sorted(set(cells_a) - {c.key for c in cells_b})
    differences = refused_differences(gate_environment_key(a.record), gate_environment_key(b.record))
    warn = (f'<p class="bad">Not like for like: {esc("; ".join(differences))}. The ratios compare different '
            "setups.</p>" if differences else "")
    head = ("cell", "A p50 ms", "B p50 ms", "B / A", "verdict", "95 % interval of B / A")
    name = f"{a.doc}-vs-{b.doc}"
    return (
        f'<section class="compare" id="compare-{name}"><h2>A vs B</h2><p class="caption">A is '
        f"<code>{esc(a.label)}</code> ({esc(a.record.get('timestamp_utc', '?'))}), B is <code>{esc(b.label)}"
        f"</code> ({esc(b.record.get('timestamp_utc', '?'))}). The verdict bootstraps the p50 ratio from both "
        f"runs' raw samples, as the gate does.</p>{warn}"
        f'<div class="figure">{_ratio_plot(plotted, name)}</div>'
        + sortable_table(head, rows_html)
        + (f'<p class="note">Only in A: {esc(", ".join("/".join(k) for k in only))}</p>' if only else "")
        + "</section>"
    )
