"""From the history: one trend line per cell's p50 over the runs, the baseline band, change points,
and the gate verdicts of the latest comparison.

Runs sit at even steps on the x axis (run ids, oldest left), one plot per workload and case,
one line per backend. Change points are ``apex_core.history.change_points`` on each line
(binary segmentation on the median, docs/history.md); each marker carries its index and the
medians either side in ``data-change``. The band is the baseline's value up to the gate's
allowed maximum, when a baseline file is given.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from apex_core.baseline.model import Baseline, metric_name
from apex_core.errors import plural
from apex_core.history import SeriesPoint, change_points
from apex_core.report.html.inputs import DEFAULT_HISTORY_WORDS, HistoryInput
from apex_core.report.html.numbers import Q, data_attrs, history_src, number, pointer
from apex_core.report.html.svg import Scale, esc, legend, open_plot, polyline, sortable_table, y_axis

WIDTH, HEIGHT = 900, 240
LEFT, RIGHT, TOP, BOTTOM = 70, 880, 28, 200
Key = tuple[str, str, str, str]  # workload, case, dtype, device: one plot


def _band(baseline: Baseline | None, name: str) -> tuple[Q, Q] | None:
    if baseline is None or name not in baseline.metrics:
        return None
    limit = baseline.metrics[name]
    return (
        Q(limit.value_ms, pointer("baseline", "metrics", name, "value_ms")),
        Q(limit.allowed_max_ms, f"allowed({pointer('baseline', 'metrics', name)})"),
    )


def _group(points: Sequence[SeriesPoint]) -> dict[Key, dict[str, list[SeriesPoint]]]:
    grouped: dict[Key, dict[str, list[SeriesPoint]]] = defaultdict(lambda: defaultdict(list))
    for p in points:
        grouped[(p.workload, p.case, p.dtype, p.device)][p.backend].append(p)
    return grouped


def trend_plot(key: Key, lines: Mapping[str, list[SeriesPoint]], run_ids: Sequence[int],
               baseline: Baseline | None, colours: Mapping[str, str]) -> str:
    workload, case, dtype, device = key
    title = f"{workload} / {case} ({dtype}, {device})"
    position = {run: i for i, run in enumerate(run_ids)}
    step = (RIGHT - LEFT) / max(len(run_ids) - 1, 1)
    bands = {b: _band(baseline, metric_name(workload, case, b, dtype, "p50_ms")) for b in lines}
    values = [p.value for series in lines.values() for p in series]
    values += [q.value for band in bands.values() if band for q in band]
    ys = Scale.fit(values, BOTTOM, TOP, zero=False)
    parts = [
        open_plot(f"trend:{title}", WIDTH, HEIGHT, f"p50 over the runs, {title}"),
        f'<text class="plot-title" x="{LEFT}" y="14">{esc(title)}</text>',
        y_axis(ys, LEFT, "p50 ms", RIGHT),
    ]
    every = max(1, len(run_ids) // 12)
    parts += [
        f'<text class="tick" x="{LEFT + i * step:.1f}" y="{BOTTOM + 14}" text-anchor="middle">#{run}</text>'
        for run, i in position.items()
        if i % every == 0 or i == len(run_ids) - 1
    ]
    parts.append(
        f'<text class="axis-label" x="{(LEFT + RIGHT) / 2}" y="{BOTTOM + 30}" text-anchor="middle">'
        "history run (oldest left)</text>"
    )
    for backend, series in lines.items():
        colour = colours.get(backend, "#0072B2")
        if band := bands[backend]:
            value, allowed = band
            low, high = ys(value.value), ys(allowed.value)
            parts.append(
                f'<rect class="band" data-mark="band" x="{LEFT}" y="{min(low, high):.1f}" '
                f'width="{RIGHT - LEFT}" height="{max(abs(low - high), 1.0):.1f}" fill="{colour}" '
                f"{data_attrs(allowed)}><title>{esc(backend)} baseline {value.value:.4g} ms, allowed up to "
                f'{allowed.value:.4g} ms</title></rect><line class="band-line" x1="{LEFT}" x2="{RIGHT}" '
                f'y1="{low:.1f}" y2="{low:.1f}" stroke="{colour}" {data_attrs(value)}/>'
            )
        xy = [(LEFT + position[p.run_id] * step, ys(p.value)) for p in series]
        parts.append(polyline(xy, colour))
        first = series[0]  # one line is one cell's series: its key, for every point and change
        cell = f"{first.workload}/{first.case}/{first.backend}/{first.dtype}/{first.device}"
        for p, (x, y) in zip(series, xy, strict=True):
            parts.append(
                f'<circle data-mark="point" cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}" '
                f"{data_attrs(Q(p.value, history_src(p.run_id, cell, 'p50_ms')))}><title>run {p.run_id} "
                f"({esc((p.commit or 'no commit')[:10])}): {p.value:.4g} ms</title></circle>"
            )
        for change in change_points([p.value for p in series]):
            at, x = series[change.index], xy[change.index][0]
            payload = json.dumps({"index": change.index, "before": change.before, "after": change.after})
            direction = "slower" if change.after > change.before else "faster"
            parts.append(
                f'<line class="change" data-mark="change" data-cell="{esc(cell)}" data-change="{esc(payload)}" '
                f'x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{BOTTOM}" stroke="{colour}"><title>{esc(backend)} '
                f"steps {direction} at run {at.run_id} ({esc((at.commit or '')[:10])}): "
                f"{change.relative_change * 100:+.1f} %</title></line>"
            )
    parts.append(legend([(b, colours.get(b, "#0072B2")) for b in lines], LEFT + 30 + 7.5 * len(title), 14))
    return "".join(parts) + "</svg>"


def gate_table(gate: Mapping[str, Any], label: str) -> str:
    rows = []
    for i, check in enumerate(gate.get("checks") or []):

        def shown(field: str, unit: str = "", i: int = i) -> str:
            return number(Q.at(gate, "gate", "checks", i, field), unit)

        status, verdict = esc(check.get("status")), esc(check.get("verdict"))
        rows.append(
            f'<tr class="status-{status}"><td>{esc(check.get("metric"))}</td><td>{status}</td>'
            f"<td>{shown('baseline_ms')}</td><td>{shown('allowed_max_ms')}</td><td>{shown('current_ms')}</td>"
            f'<td><span class="verdict" data-verdict="{verdict}">{verdict}</span> {shown("verdict_ratio", "x")}'
            f'</td><td>[{shown("ci_low")}, {shown("ci_high")}]</td>'
            f'<td class="reason">{esc(check.get("reason") or "")}</td></tr>'
        )
    head = ("metric", "rule", "baseline ms", "allowed max ms", "current ms", "verdict", "95 % interval",
            "reason")
    status = esc(str(gate.get("status", "?")).upper())
    return (
        f"<h3>Gate: {status} (<code>{esc(label)}</code>, {esc(gate.get('timestamp_utc', '?'))})</h3>"
        + _runs_judged(gate) + _differences(gate) + sortable_table(head, rows)
    )


def _differences(gate: Mapping[str, Any]) -> str:
    """What differed between the baseline's environment and the run's (a torch version, another
    kind of machine's timer floor): the verdicts below are read with it."""
    found = [str(d) for d in gate.get("environment_differences") or []]
    if not found:
        return ""
    items = "".join(f"<li>{esc(d)}</li>" for d in found)
    return f'<p class="caption">The environment differs from the baseline\'s:</p><ul>{items}</ul>'


def _runs_judged(gate: Mapping[str, Any]) -> str:
    """Which runs the verdicts come from, when there were several (a confirmed GPU gate judges each metric
    on its median of three runs, where this page's plots show the runs it was given)."""
    current = gate.get("current")
    runs = [str(path) for path in current] if isinstance(current, list) else []
    if len(runs) < 2:
        return ""
    listed = ", ".join(f"<code>{esc(path)}</code>" for path in runs)
    return (f'<p class="caption">Each timing metric is judged on its {esc(str(gate.get("combine") or "best"))} '
            f"run of {len(runs)}: {listed}; \"current ms\" is that run's value. Energy and error metrics "
            "are judged on the first run that has them.</p>")


def history_section(history: HistoryInput | None, baseline: Baseline | None, gate: Mapping[str, Any] | None,
                    gate_label: str, colours: Mapping[str, str], note: str = "") -> str:
    """``note``: why there is no history, where one was looked for ("": none was given)."""
    parts = ['<section id="history"><h2>History</h2>']
    if history is None:
        parts.append(f'<p class="none">{esc(note)} ' if note else '<p class="none">No history given. ')
        parts.append("<code>apex-bench report RUN.json --history DB</code> adds a trend per cell; without "
                     f"--history it reads the default history ({esc(DEFAULT_HISTORY_WORDS)}) where that file "
                     "exists.</p>")
    else:
        run_ids = sorted({p.run_id for p in history.series})
        default = f" (the default history: {esc(DEFAULT_HISTORY_WORDS)})" if history.default else ""
        parts.append(
            f'<p class="caption">Read from <code>{esc(history.path)}</code>{default}: '
            f'{plural(len(history.runs), "run")} of environment '
            f"<code>{esc(history.environment_id)}</code>; this report's "
            f"run is {'#' + str(history.subject_run_id) if history.subject_run_id else 'not among them'}. "
            "Vertical lines mark change points (a step of 5 % or more held for 3 runs each side); "
            "shaded bands run from the baseline to the gate's allowed maximum.</p>"
        )
        for key, lines in sorted(_group(history.series).items()):
            parts.append(f'<div class="figure">{trend_plot(key, lines, run_ids, baseline, colours)}</div>')
        rows = "".join(
            f"<tr><td>#{r.run_id}</td><td>{esc(r.timestamp_utc)}</td><td><code>{esc((r.commit or '–')[:10])}"
            f"</code></td><td>{esc(r.branch or '–')}</td><td>{esc(', '.join(r.tags) or '–')}</td></tr>"
            for r in history.runs[:20]
        )
        parts.append(
            "<details><summary>Recent runs</summary><table><thead><tr><th>run</th><th>started (UTC)</th>"
            f"<th>commit</th><th>branch</th><th>tags</th></tr></thead><tbody>{rows}</tbody></table></details>"
        )
    if gate is not None:
        parts.append(gate_table(gate, gate_label))
    return "".join(parts) + "</section>"
