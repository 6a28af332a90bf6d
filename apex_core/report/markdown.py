"""The Markdown summary a person reads in a pull request.

One row per workload, case and dtype; one column per backend with p50 / p95 in
ms and the speed-up against torch-reference; cells that did not produce a time
show their status with a numbered note giving the reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from apex_core.errors import plural
from apex_core.report.flags import (
    NOT_THE_WORK,
    UNCONFIRMED_NOTE,
    FlagFacts,
    cell_flags,
    cut_short_words,
    flag_note,
    flush_caveat,
    is_launch_bound,
)
from apex_core.results import FAILING_STATUSES, CellResult, Report, Status, Telemetry

REFERENCE_BACKEND = "torch-reference"
PHYSICS_NOTE = ("faster than physics: below its minimal bytes over this device's memory bandwidth; it skipped "
                "work, or its work() counts too many bytes (--strict fails the run on it)")
NO_SPEEDUP_NOTE = "no speed-up: the cell's p50 is 0 ms, and a ratio to it means nothing"
NO_REFERENCE_TIME_NOTE = "no speed-up: torch-reference's p50 is 0 ms, and a ratio to it means nothing"
BIMODAL_NOTE = "p50 above 1.5x the fastest sample: a bimodal or disturbed run, see samples_ms"
CONTENDED_NOTE = ("contended: other processes kept at least half a core (a quarter of the cores) busy while it "
                  "sampled (metadata.host_load in the JSON report): its time may be the machine's; measure "
                  "again on a quiet machine")
FAILED_LISTED = 8  # failed cells named in the summary; the table has the rest


def _fmt_ms(value: float) -> str:
    return f"{value:.4g}"


def _throttle_note(telemetry: Telemetry) -> str:
    read = telemetry.batches
    if read is None or not read.batches:
        return (f"throttled ({', '.join(telemetry.throttle_reasons)}) in {telemetry.throttled_share or 0:.0%} "
                "of the NVML readings: a power or thermal limit held the clocks down while it was timed")
    kept = f", {read.kept_throttled} throttled ones kept in its statistics" if read.kept_throttled else ""
    held = (f"; a limit held the clocks for {read.violation_share:.0%} of its sampling window (NVML's "
            "violation counters)" if read.violation_share else "")
    return (f"throttled ({', '.join(read.reasons)}): {read.throttled} of its {read.batches} batches of "
            "samples ran while a limit or a low SM clock held the card down; "
            f"{plural(read.set_aside, 'sample')} set aside{kept}{held} (telemetry.batches in the JSON report)")


def _fmt_j(joules: float) -> str:
    return f"{joules * 1e3:.3g} mJ" if joules >= 1e-3 else f"{joules * 1e6:.3g} uJ"


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _ref(notes: dict[str, int], text: str) -> str:
    """`` [n]``: the number of a reason, shared by identical texts so a table stays compact."""
    return f" [{notes.setdefault(text, len(notes) + 1)}]"


def _speedup_text(cell: CellResult, reference: CellResult | None, notes: dict[str, int]) -> str:
    """`` (2.00x)`` against the reference's p50; `` (– [n])`` with the reason where a ratio means nothing."""
    if cell.timing is None or cell.timing.method == "triton_interpreter":  # interpreted: no speed-up
        return ""
    if cell.backend == REFERENCE_BACKEND or reference is None or reference.status != Status.OK \
            or reference.timing is None:
        return ""
    p50, ref_p50 = cell.timing.stats.p50, reference.timing.stats.p50
    if not p50 > 0:
        return f" (–{_ref(notes, NO_SPEEDUP_NOTE)})"
    if not ref_p50 > 0:
        return f" (–{_ref(notes, NO_REFERENCE_TIME_NOTE)})"
    return f" ({ref_p50 / p50:.2f}x)"


def _cell_text(cell: CellResult | None, reference: CellResult | None, notes: dict[str, int],
               report: Report) -> str:
    if cell is None:
        return "–"
    if cell.status != Status.OK or cell.timing is None:
        label = str(cell.skip_kind) if cell.skip_kind else str(cell.status)
        return label + _ref(notes, cell.reason or str(cell.status)) + _device_mark(cell)
    stats = cell.timing.stats
    flags = cell_flags(cell, report.environment, report.config)
    facts = FlagFacts.of_cell(cell, cell.timing, report.config)
    text = f"{_fmt_ms(stats.p50)} / {_fmt_ms(stats.p95)}" + _speedup_text(cell, reference, notes)
    text += "".join(_ref(notes, note) for flag in flags if (note := flag_note(flag, facts)))
    if "launch_bound" in flags:
        text += " †"
    if "faster_than_physics" in flags:
        text += _ref(notes, PHYSICS_NOTE)
    if "p50_over_min" in flags:
        text += _ref(notes, BIMODAL_NOTE)
    if "throttled" in flags and cell.telemetry is not None:
        text += _ref(notes, _throttle_note(cell.telemetry))
    if "contended" in flags:
        text += _ref(notes, CONTENDED_NOTE)
    if cell.metadata.get("integrity_unconfirmed"):
        text += _ref(notes, UNCONFIRMED_NOTE)
    if cell.timing.note:
        text += _ref(notes, cell.timing.note)
    if cell.unchecked:
        text += " unchecked" + _ref(notes, cell.unchecked)
    return text + _device_mark(cell)


def _device_mark(cell: CellResult) -> str:
    """`` @1``: the card the cell ran on, where the run named cards (the Devices list says which)."""
    return f" @{cell.device_info.label}" if cell.device_info is not None else ""


def _device_lines(report: Report) -> list[str]:
    """The cards of a sharded run, with the cells each ran and why one left the rotation."""
    if not report.devices:
        return []
    lines = ["", "Devices (@cuda:N after a time is the card that cell ran on):", ""]
    for use in report.devices:
        card = use.device
        state = f"; taken out of the rotation: {_escape(use.retired)}" if use.retired else ""
        lines.append(f"- {card.label}: {_escape(card.name)} ({card.uuid}), {plural(use.cells, 'cell')}{state}")
    return lines


def _time_lines(cells: Sequence[CellResult], builders: int = 0) -> list[str]:
    """Build and wait time over the run's cells (each cell's own are in the JSON report)."""
    builds = [c.build_time_s for c in cells if c.build_time_s is not None]
    waits = [c.wait_time_s for c in cells if c.wait_time_s is not None]
    warmed = [c for c in cells if c.warm_time_s is not None]
    if not builds and not waits:
        return []
    parts = []
    if builds:
        parts.append(f"building the backends' cells (compiling, tuning, the first call) took "
                     f"{sum(builds):.1f} s in all, {max(builds):.1f} s at most for one")
    if warmed:
        ahead = sum(1 for c in warmed if c.metadata.get("prebuild", {}).get("state") == "warmed")
        who = plural(builders, "builder") if builders else "builders"
        parts.append(f"{who} warmed {ahead} of {plural(len(warmed), 'cell')} ahead, "
                     f"{sum(c.warm_time_s or 0.0 for c in warmed):.1f} s of their time")
    if waits:
        parts.append(f"the last cell started {max(waits):.1f} s into the run")
    fields = "build_time_s, warm_time_s and wait_time_s" if warmed else "build_time_s and wait_time_s"
    return ["", "Time: " + "; ".join(parts) + f" ({fields} per cell in the JSON report)."]


# how the floor was sampled, where it was not the default (docs/timing.md, "The floor")
FLOOR_SAMPLING_TEXT = {
    "interleaved": "The timer's floor was sampled between each cell's batches (--floor-sampling interleaved).",
    "pooled": "The timer's floor was averaged over every round of its worker (--floor-sampling pooled).",
}


def _placements_text(cells: Iterable[CellResult]) -> str:
    """Which backends' samples came from several input placements, and how many."""
    counts: dict[str, set[int]] = {}
    for cell in cells:
        if cell.timing is not None:
            counts.setdefault(cell.backend, set()).add(cell.timing.placements)
    several = {b: sorted(n) for b, n in counts.items() if max(n) > 1}
    if not several:
        return ""
    who = ", ".join(f"{b} {n[0]}" if len(n) == 1 else f"{b} {n[0]}-{n[-1]}" for b, n in sorted(several.items()))
    others = "; the others one" if len(several) < len(counts) else ""
    return (f" Samples taken in turn from several input placements per cell ({who}{others}), "
            "since a kernel's time depends on where its data lies (docs/timing.md).")


def _autotune_lines(report: Report) -> list[str]:
    """Where the autotuned kernels' configurations came from: shipped for this GPU model, or tuned here."""
    sources = Counter(e.get("selection_source") for e in (report.triton_autotune or {}).get("entries", []))
    shipped, tuned = sources["shipped_picks"], sources["triton_best_config"]
    states = [c.metadata["autotune_picks"] for c in report.cells if c.metadata.get("autotune_picks")]
    if not states or not shipped + tuned:
        return []
    picks = next((s for s in states if s.get("state") == "shipped"), None)
    if picks is not None:
        source = (f"{shipped} from the picks shipped for this GPU model (`{picks.get('file')}`, tuned with "
                  f"Triton {picks.get('triton')}), {tuned} tuned in this run")
    elif any(s.get("state") == "retune" for s in states):
        source = f"{tuned} tuned in this run (--retune)"
    else:
        source = f"{tuned} tuned in this run ({_escape(str(states[0].get('reason')))})"
    return ["", f"Triton configurations per kernel and shape: {source}."]


def _rows(report: Report) -> list[tuple[str, str, str]]:
    return list(dict.fromkeys((c.workload, c.case, c.dtype) for c in report.cells))


def _skipped_everywhere(report: Report, backends: list[str]) -> dict[str, list[CellResult]]:
    """The backends none of whose cells ran (unavailable here, or supporting no workload of the run)."""
    cells = {b: [c for c in report.cells if c.backend == b] for b in backends}
    return {b: found for b, found in cells.items() if all(c.status == Status.SKIPPED for c in found)}


def _never_started_text(report: Report) -> str:
    """'; N of M planned cells never started' for a run cut short, else ''."""
    planned = report.config.get("cells_planned")
    if report.status == "complete" or not isinstance(planned, int) or planned <= len(report.cells):
        return ""
    never = planned - len(report.cells)
    return f"; {never} of {planned} planned cells never started ({cut_short_words(report.status)})"


def _not_run_lines(skipped: dict[str, list[CellResult]]) -> list[str]:
    """One line per backend that ran nowhere, with its reasons, in place of a column of skips."""
    if not skipped:
        return []
    lines = ["", "Not run (every cell skipped; no column above):", ""]
    for backend, cells in skipped.items():
        kind = "/".join(dict.fromkeys(str(c.skip_kind or c.status) for c in cells))
        reasons = list(dict.fromkeys(_escape(c.reason) for c in cells if c.reason))
        more = f"; and {plural(len(reasons) - 2, 'other reason')}" if len(reasons) > 2 else ""
        lines.append(f"- {backend} ({kind}): " + "; ".join(reasons[:2]) + more)
    return lines


def _fastest(report: Report, cells: list[CellResult]) -> CellResult | None:
    """The ok cell of a row with the lowest p50, leaving out times that are not the work's."""
    timed = [c for c in cells if c.status == Status.OK and c.timing is not None
             and c.timing.method != "triton_interpreter"
             and not set(cell_flags(c, report.environment, report.config)) & set(NOT_THE_WORK)]
    return min(timed, key=lambda c: c.timing.stats.p50 if c.timing else 0.0, default=None)


def _summary_lines(report: Report, rows: list[tuple[str, str, str]],
                   by_key: dict[tuple[str, str, str, str], CellResult]) -> list[str]:
    """What a reader wants first: the fastest backend of each row, what failed, what was flagged."""
    lines = ["", "## Summary", "", "Fastest per row (p50; speed-up against torch-reference):", ""]
    for workload, case, dtype in rows:
        cells = [c for (w, k, d, _), c in by_key.items() if (w, k, d) == (workload, case, dtype)]
        best = _fastest(report, cells)
        if best is None or best.timing is None:
            lines.append(f"- {workload} / {case} / {dtype}: no ok cell")
            continue
        reference = by_key.get((workload, case, dtype, REFERENCE_BACKEND))
        ratio = _speedup_text(best, reference, {})
        ratio = "" if "–" in ratio else ratio  # the table's note says why there is none
        lines.append(f"- {workload} / {case} / {dtype}: **{best.backend}** {_fmt_ms(best.timing.stats.p50)} ms"
                     + ratio)
    failed = [c for c in report.cells if c.status in FAILING_STATUSES]
    if failed:
        named = ", ".join(f"{c.backend} on {c.workload}/{c.case} {c.dtype} ({c.status})"
                          for c in failed[:FAILED_LISTED])
        more = f", and {len(failed) - FAILED_LISTED} more in the table" if len(failed) > FAILED_LISTED else ""
        lines += ["", f"Failed: {plural(len(failed), 'cell')}: {named}{more}."]
    flags = Counter(f for c in report.cells for f in cell_flags(c, report.environment, report.config))
    if flags:
        lines += ["", "Flagged: " + ", ".join(f"{flag} {n}" for flag, n in sorted(flags.items()))
                  + " (per cell in the JSON report; docs/timing.md, Sanity flags)."]
    return lines


def _energy_lines(report: Report, rows: list[tuple[str, str, str]],
                  by_key: dict[tuple[str, str, str, str], CellResult]) -> list[str]:
    """Energy per call as a table shaped like the times' (the backends NVML measured)."""
    measured = {(c.workload, c.case, c.dtype, c.backend): c.telemetry for c in report.cells
                if c.telemetry is not None and c.telemetry.energy_j_per_call is not None
                and c.telemetry.average_w is not None}
    if not measured:
        return []
    backends = list(dict.fromkeys(key[3] for key in by_key if key in measured))
    lines = ["", "Energy per call at average power (NVML, back-to-back calls after the timing):", "",
             "| workload | case | dtype | " + " | ".join(backends) + " |",
             "| --- | --- | --- | " + " | ".join("---" for _ in backends) + " |"]
    for row in rows:
        if any((*row, b) in measured for b in backends):
            texts = [f"{_fmt_j(t.energy_j_per_call or 0.0)} at {t.average_w or 0.0:.0f} W"
                     if (t := measured.get((*row, b))) is not None else "–" for b in backends]
            lines.append(f"| {' | '.join(row)} | " + " | ".join(texts) + " |")
    return lines


def render_markdown(report: Report) -> str:
    """The summary first, then the table, the timing method line, and the notes."""
    by_key = {(c.workload, c.case, c.dtype, c.backend): c for c in report.cells}
    rows = _rows(report)
    # the baseline column first: every speed-up is read against it
    backends = sorted(dict.fromkeys(c.backend for c in report.cells), key=lambda b: b != REFERENCE_BACKEND)
    skipped = _skipped_everywhere(report, backends)
    backends = [b for b in backends if b not in skipped]
    notes: dict[str, int] = {}
    env = report.environment
    hardware = env.get("gpu") or env.get("cpu") or "unknown hardware"
    counts = ", ".join(f"{s}: {n}" for s, n in sorted(Counter(str(c.status) for c in report.cells).items()))
    lines = [
        f"# {report.suite} ({report.status})",
        "",
        f"{report.timestamp_utc} on {hardware} ({env.get('device')}), torch {env.get('torch')}, "
        f"profile {report.config.get('profile')}{_fallback_text(report.config)}. Cells: {counts or 'none'}"
        f"{_never_started_text(report)}.",
        *(_summary_lines(report, rows, by_key) if report.cells else []),
        "",
        "## Times",
        "",
        "p50 / p95 in ms; (Nx) is the speed-up of the p50 against torch-reference. "
        + _sampling_text(report.config.get("timing") or {}),
        "",
        "| workload | case | dtype | " + " | ".join(backends) + " |",
        "| --- | --- | --- | " + " | ".join("---" for _ in backends) + " |",
    ]
    for workload, case, dtype in rows:
        reference = by_key.get((workload, case, dtype, REFERENCE_BACKEND))
        texts = [_cell_text(by_key.get((workload, case, dtype, b)), reference, notes, report) for b in backends]
        lines.append(f"| {workload} | {case} | {dtype} | " + " | ".join(texts) + " |")
    lines += _not_run_lines(skipped)
    methods = sorted({f"{c.backend}: {c.timing.method} ({c.timing.cache} cache)"
                      for c in report.cells if c.timing is not None})
    if methods:
        floors = any(c.timing is not None and c.timing.floor_ms is not None for c in report.cells)
        sampling = (report.config.get("timing") or {}).get("floor_sampling")
        floor_text = f" {FLOOR_SAMPLING_TEXT[sampling]}" if floors and sampling in FLOOR_SAMPLING_TEXT else ""
        lines += ["", "Timing: " + "; ".join(methods) + "." + floor_text + _placements_text(report.cells)]
        cold = any(c.timing is not None and c.timing.cache == "cold" for c in report.cells)
        if cold and (caveat := flush_caveat(report.environment)):
            lines[-1] += f" The {caveat}."
    lines += _energy_lines(report, rows, by_key)
    if any(c.timing is not None and is_launch_bound(c.timing) for c in report.cells):
        lines += ["", "† launch-bound: issuing one call costs the host more than the GPU spends on it, "
                      "so its real-world speed is the host's (host_ms in the JSON report)."]
    lines += _device_lines(report) + _time_lines(report.cells, int(report.config.get("build_workers") or 0))
    lines += _autotune_lines(report)
    if report.plugins:
        lines += ["", "Plugins that failed to load:", ""]
        lines += [f"- {r.group} `{r.name}` ({_escape(r.source)}): {_escape(r.reason)}" for r in report.plugins]
    if report.deprecations:
        lines += ["", "Deprecated plugin API the plugins use (served by a shim until its removal; "
                      "docs/plugin-api.md):", ""]
        lines += [f"- {d.group} `{d.plugin}`: {_escape(d.used)}, deprecated since {d.since}; use "
                  f"{_escape(d.instead)} (shim removed in {d.removal})" for d in report.deprecations]
    if notes:
        lines += ["", "Notes:", ""]
        lines += [f"{i}. {_escape(text)}" for text, i in notes.items()]
    return "\n".join(lines) + "\n"


def _fallback_text(config: dict[str, Any]) -> str:
    """Which workloads lacked the run's profile and ran with their defaults (config.profile_fallbacks)."""
    names = config.get("profile_fallbacks") or []
    if not names:
        return ""
    whose = "its" if len(names) == 1 else "their"
    return f" ({', '.join(names)}: no {config.get('profile')} profile, ran with {whose} defaults)"


def _sampling_text(timing: dict) -> str:
    """Which sampling ran (docs/timing.md): the adaptive stop rule, or --fixed-iters' equal counts."""
    if timing.get("mode") == "fixed_iters":
        n = timing.get("fixed_iters")
        return f"Sampling: fixed, {n} warm-up calls and {n} timed samples per cell (--fixed-iters)."
    if not timing:
        return ""
    noise = timing.get("noise_target", 0) * 100
    return (f"Sampling: adaptive, at least {timing.get('min_iters')} samples and {timing.get('min_time_s')} s, "
            f"until the noise is under {noise:g}% or {timing.get('max_time_s')} s.")
