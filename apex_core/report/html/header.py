"""The report's header: what ran where (card, driver, clocks, versions, commit, tags) and how it went."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from apex_core.report.html.cells import Cell
from apex_core.report.html.numbers import Q, number
from apex_core.report.html.svg import esc

STATUS_ORDER = ("ok", "skipped", "incorrect", "suspect", "error", "crashed", "timeout")


def _text(value: Any) -> str:
    if value is None or value == "":
        return '<span class="none">–</span>'
    if isinstance(value, list):
        return esc(", ".join(str(v) for v in value))
    return esc(value)


def _texts(source: Mapping[str, Any], *names: str) -> str:
    """``a / b``: several fields of one table row."""
    return " / ".join(_text(source.get(name)) for name in names)


def _clock_range(cells: Sequence[Cell], name: str) -> str:
    """The lowest and highest NVML reading of a clock over every timed cell, each pointing at its cell."""
    readings = [
        (cell, c)
        for cell in cells
        for c in [cell.record.get("telemetry") or {}]
        if isinstance(c.get(name), list) and len(c[name]) == 3
    ]
    if not readings:
        reasons = {str((cell.record.get("telemetry") or {}).get("unavailable") or "") for cell in cells} - {""}
        return f'<span class="none">not read{": " + esc(sorted(reasons)[0]) if reasons else ""}</span>'
    low_cell = min(readings, key=lambda r: r[1][name][0])[0]
    high_cell = max(readings, key=lambda r: r[1][name][2])[0]
    return (
        f"{number(low_cell.field('telemetry', name, 0))} to {number(high_cell.field('telemetry', name, 2))} "
        f'MHz <span class="note">(NVML, lowest and highest reading over {len(readings)} cells)</span>'
    )


def _throttling(cells: Sequence[Cell]) -> str:
    throttled = [c for c in cells if "throttled" in c.flags]
    read = [c for c in cells if (c.record.get("telemetry") or {}).get("readings")]
    if not read:
        return '<span class="none">not read (no NVML readings)</span>'
    if not throttled:
        return "none: no power or thermal limit held the clocks down while a cell was timed"
    names = ", ".join(esc(c.name) for c in throttled)
    return f'<span class="bad">throttled while timing {names}</span>'


def status_chips(record: Mapping[str, Any], doc: str) -> str:
    summary = record.get("summary") or {}
    names = [s for s in STATUS_ORDER if s in summary] + sorted(set(summary) - {*STATUS_ORDER, "cells"})
    chips = [f'<span class="chip total">{number(Q.at(record, doc, "summary", "cells"))} cells</span>']
    chips += [
        f'<span class="chip status-{esc(s)}">{number(count)} {esc(s)}</span>'
        for s in names
        if (count := Q.at(record, doc, "summary", s)) is not None
    ]
    return '<div class="chips">' + "".join(chips) + "</div>"


def header_section(
    record: Mapping[str, Any], doc: str, label: str, cells: Sequence[Cell], tags: Sequence[str]
) -> str:
    env = record.get("environment") or {}
    config = record.get("config") or {}
    timing = config.get("timing") or {}
    git = env.get("git") or {}
    dirty = "" if git.get("dirty") is None else " (dirty: uncommitted changes)" if git["dirty"] else " (clean)"
    sizes = (
        f' <span class="note">({number(Q.at(record, doc, "environment", "sm_count"))} SMs, '
        f'{number(Q.at(record, doc, "environment", "gpu_memory_gb"))} GB)</span>'
    )
    copy = Q.at(record, doc, "environment", "device_facts", "copy_gbps")
    copy_text = number(copy, "GB/s") if copy else _text((env.get("device_facts") or {}).get("cuda_unavailable"))
    rows = {
        "card": _text(env.get("gpu") or env.get("cpu")) + (sizes if env.get("gpu") else ""),
        "driver / CUDA": _texts(env, "driver", "cuda"),
        "SM clock while timed": _clock_range(cells, "sm_clock_mhz"),
        "memory clock while timed": _clock_range(cells, "mem_clock_mhz"),
        "throttling": _throttling(cells),
        "copy bandwidth (measured)": copy_text,
        "torch / triton / tensorrt": _texts(env, "torch", "triton", "tensorrt"),
        "python / platform": _texts(env, "python", "platform"),
        "commit": f"<code>{_text(git.get('commit'))}</code>{esc(dirty)}",
        "tags": _text(list(tags)) if tags else '<span class="none">– (tags live in the history)</span>',
        "profile / dtypes": _texts(config, "profile", "dtypes"),
        "timing": f"{_text(timing.get('timer'))} timer, {_text(timing.get('cache'))} L2"
        f"{', CUDA graphs' if timing.get('graph') else ''}, noise target "
        f"{number(Q.at(record, doc, 'config', 'timing', 'noise_target'))}",
    }
    table = "".join(f"<tr><th>{esc(name)}</th><td>{value}</td></tr>" for name, value in rows.items())
    return (
        f'<header id="top"><h1>{esc(record.get("suite", "apex-bench"))} report</h1>'
        f'<p class="subtitle">Run of {esc(record.get("timestamp_utc", "?"))} UTC, status '
        f"<b>{esc(record.get('status', '?'))}</b>, from <code>{esc(label)}</code></p>"
        f'{status_chips(record, doc)}<table class="env">{table}</table></header>'
    )
