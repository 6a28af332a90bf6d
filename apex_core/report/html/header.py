"""The report's header: what ran where (the card or the CPU, driver, clocks, versions, commit, tags) and how
it went. Its words follow the run's device (``environment.device``): a CPU run is told of its CPU and
its host timer, with none of the card's rows (driver, clocks, NVML, copy bandwidth)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from apex_core.measure.device_fingerprint import ecc_words
from apex_core.report.flags import cut_short_words, flush_caveat
from apex_core.report.html.cells import Cell
from apex_core.report.html.numbers import Q, number
from apex_core.report.html.svg import esc

STATUS_ORDER = ("ok", "skipped", "incorrect", "suspect", "error", "crashed", "timeout")
# what each timing method is (docs/timing.md "Timers")
TIMER_WORDS = {
    "cpu_perf_counter": "perf_counter around each call",
    "cuda_event_held": "CUDA events around each call, stream held",
    "cuda_graph_held": "CUDA events around a graph replay, stream held",
    "cuda_event": "CUDA events around each call, not held",
    "cuda_graph": "CUDA events around a graph replay, not held",
    "kernel_profiler": "kernel timer, CUPTI profiler",
    "triton_interpreter": "perf_counter around the Triton interpreter, correctness only",
    "jax_block_until_ready": "perf_counter around the call and block_until_ready",
}
CACHE_WORDS = {"cold": "cold L2 (flushed before each sample)", "warm": "warm L2 (not flushed)"}


def on_gpu(record: Mapping[str, Any]) -> bool:
    """Whether the run timed a CUDA device (``environment.device``; a record without one: ``gpu``)."""
    env = record.get("environment") or {}
    device = env.get("device") or (record.get("config") or {}).get("device")
    return str(device).startswith("cuda") if device else bool(env.get("gpu"))


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
    aside = sum(int(((c.record.get("telemetry") or {}).get("batches") or {}).get("set_aside") or 0)
                for c in cells)
    if not throttled and aside:
        return (f"none flagged: {aside} samples of throttled batches set aside, fewer than the flag's share "
                "in every cell (telemetry.batches)")
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
    planned, cells = Q.at(record, doc, "config", "cells_planned"), Q.at(record, doc, "summary", "cells")
    if record.get("status") != "complete" and planned is not None and cells is not None \
            and planned.value > cells.value:  # the rest never started
        chips.append(f'<span class="chip status-skipped">of {number(planned)} planned: '
                     f'{cut_short_words(str(record.get("status")))} before the rest started</span>')
    return '<div class="chips">' + "".join(chips) + "</div>"


def _timing(record: Mapping[str, Any], doc: str, cells: Sequence[Cell]) -> str:
    """The timers the cells used and, where a cell flushed or kept a cache, which; the noise target."""
    gpu = on_gpu(record)
    timing = (record.get("config") or {}).get("timing") or {}
    methods = list(dict.fromkeys(str(c.record["timing_method"]) for c in cells
                                 if c.record.get("timing_method")))
    caches = list(dict.fromkeys(str(c.record.get("cache")) for c in cells if c.status == "ok"))
    if not methods:  # no cell timed: the timer the run was set to use
        kernel = timing.get("timer") == "kernel"
        methods = ["kernel_profiler" if kernel else "cuda_event_held"] if gpu else ["cpu_perf_counter"]
    if gpu and not any(c in CACHE_WORDS for c in caches) and timing.get("cache") in CACHE_WORDS:
        caches = [str(timing["cache"])]  # a record older than the cells' own cache field
    words = [f"<code>{esc(m)}</code> ({esc(TIMER_WORDS.get(m, 'timer'))})" for m in methods]
    words += [esc(CACHE_WORDS[c]) for c in caches if c in CACHE_WORDS]
    if "cold" in caches and (caveat := flush_caveat(record.get("environment") or {})):
        words.append(esc(caveat))
    words += ["CUDA graphs"] if gpu and timing.get("graph") else []
    return ", ".join(words) + f", noise target {number(Q.at(record, doc, 'config', 'timing', 'noise_target'))}"


def _device_rows(record: Mapping[str, Any], doc: str, cells: Sequence[Cell]) -> dict[str, str]:
    """The card's rows for a CUDA run; the CPU's for a CPU run."""
    env = record.get("environment") or {}
    if not on_gpu(record):
        cores = Q.at(record, doc, "environment", "cpu_count")
        threads = Q.at(record, doc, "environment", "torch_threads")
        detail = ""
        if cores is not None:
            used = f", torch uses {number(threads)} threads" if threads is not None else ""
            detail = f' <span class="note">({number(cores)} cores{used})</span>'
        return {
            "CPU": _text(env.get("cpu")) + detail,
            "torch / triton / onnxruntime": _texts(env, "torch", "triton", "onnxruntime"),
        }
    sizes = (
        f' <span class="note">({number(Q.at(record, doc, "environment", "sm_count"))} SMs, '
        f'{number(Q.at(record, doc, "environment", "gpu_memory_gb"))} GB)</span>'
    )
    copy = Q.at(record, doc, "environment", "device_facts", "copy_gbps")
    copy_text = number(copy, "GB/s") if copy else _text((env.get("device_facts") or {}).get("cuda_unavailable"))
    return {
        "card": _text(env.get("gpu")) + (sizes if env.get("gpu") else ""),
        "driver / CUDA": _texts(env, "driver", "cuda"),
        "SM clock while timed": _clock_range(cells, "sm_clock_mhz"),
        "memory clock while timed": _clock_range(cells, "mem_clock_mhz"),
        "throttling": _throttling(cells),
        "copy bandwidth (measured)": copy_text,
        **_fingerprint_row(record, doc),
        "torch / triton / tensorrt": _texts(env, "torch", "triton", "tensorrt"),
    }


def _fingerprint_row(record: Mapping[str, Any], doc: str) -> dict[str, str]:
    """What sets this card apart from another of its model (apex_core/measure/device_fingerprint.py);
    no row for a run recorded before the fingerprint was."""
    found = ((record.get("environment") or {}).get("device_facts") or {}).get("fingerprint")
    if not isinstance(found, Mapping):
        return {}
    where = ("environment", "device_facts", "fingerprint")
    clock = number(Q.at(record, doc, *where, "sm_clock_under_load_mhz"), "MHz")
    power = number(Q.at(record, doc, *where, "power_limit_w"), "W")
    parts = [f"SM clock under load {clock}", f"power limit {power}", f"ECC {ecc_words(found)}",
             f"PCIe {_text(found.get('pcie'))}", f"VBIOS {_text(found.get('vbios'))}"]
    return {"card fingerprint": ", ".join(parts)}


def header_section(
    record: Mapping[str, Any],
    doc: str,
    label: str,
    cells: Sequence[Cell],
    tags: Sequence[str],
    history: str = "",
) -> str:
    """``history``: the history the page read, shown beside the run's source ("" for none)."""
    env = record.get("environment") or {}
    config = record.get("config") or {}
    git = env.get("git") or {}
    dirty = "" if git.get("dirty") is None else " (dirty: uncommitted changes)" if git["dirty"] else " (clean)"
    rows = {
        **_device_rows(record, doc, cells),
        "python / platform": _texts(env, "python", "platform"),
        "commit": f"<code>{_text(git.get('commit'))}</code>{esc(dirty)}",
        "tags": _text(list(tags)) if tags else '<span class="none">– (tags live in the history)</span>',
        "profile / dtypes": _texts(config, "profile", "dtypes"),
        "timing": _timing(record, doc, cells),
    }
    table = "".join(f"<tr><th>{esc(name)}</th><td>{value}</td></tr>" for name, value in rows.items())
    read = f", history <code>{esc(history)}</code>" if history else ""
    return (
        f'<header id="top"><h1>{esc(record.get("suite", "apex-bench"))} report</h1>'
        f'<p class="subtitle">Run of {esc(record.get("timestamp_utc", "?"))} UTC, status '
        f"<b>{esc(record.get('status', '?'))}</b>, from <code>{esc(label)}</code>{read}</p>"
        f'{status_chips(record, doc)}<table class="env">{table}</table></header>'
    )
