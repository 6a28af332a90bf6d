"""``apex-bench baseline emit|promote``: write a baseline from reports, or replace one with agreeing runs."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from apex_core.baseline.emit import DEFAULT_ABS_MS, DEFAULT_MIN_EFFECT, DEFAULT_RATIOS, emit_baseline
from apex_core.baseline.extra_metrics import EXTRA_METRICS, parse_metric_list
from apex_core.baseline.io import SMALLEST_NORMAL, load_baseline, load_report, write_baseline
from apex_core.baseline.model import Baseline
from apex_core.baseline.promote import MIN_RUNS, MetricChange, PromotionRefused, promote
from apex_core.cli.values import OneLineParser, number
from apex_core.errors import plural
from apex_core.files import check_writable

# the baseline schema's bounds: beyond them a limit lets any slowdown pass
# (the other statistics' ratios are scaled up to 2.7x the first's: 1e5 stays under the schema's 1e6)
MAX_RATIO, MAX_LIMIT = 1e5, 1e9


def _non_negative_float(text: str) -> float:
    value = number(text, float, "a number >= 0")
    if not value >= 0 or not math.isfinite(value):  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    if 0 < value < SMALLEST_NORMAL:  # compare would refuse the baseline it is written into
        raise argparse.ArgumentTypeError(f"is subnormal (below {SMALLEST_NORMAL:.4g}): give 0 or a "
                                         f"normal number, got {text!r}")
    if value > MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_LIMIT:g} (the baseline schema's bound), "
                                         f"got {text!r}")
    return value


def _ratio(text: str) -> float:
    """A ratio or fraction of a time: >= 0 and at most MAX_RATIO."""
    value = _non_negative_float(text)
    if value > MAX_RATIO:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_RATIO:g}, got {text!r}")
    return value


def _extra_metric_list(text: str) -> tuple[str, ...]:
    try:
        names = parse_metric_list(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return tuple(n for n in names if n != "time")


def _defaults_text() -> str:
    parts = []
    for device, table in DEFAULT_RATIOS.items():
        rules = ", ".join(f"{stat} {v}" for stat, v in DEFAULT_MIN_EFFECT[device].items())
        ratios = ", ".join(f"{stat} {r} (end-to-end {e2e})" for stat, (r, e2e) in table.items())
        parts.append(f"{device}: min-effect {rules}; cap ratio {ratios}, abs-ms {DEFAULT_ABS_MS[device]}")
    return "Defaults: " + "; ".join(parts) + "."


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="apex-bench baseline",
                           description="Manage baseline files for 'apex-bench compare'.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=OneLineParser)
    emit = commands.add_parser(
        "emit", help="write a baseline template from one or more reports",
        description="Write a baseline with one metric per statistic of the device's table per ok cell; "
        "given several reports of one build (three or more is the documented way), each value is the "
        "median over them. A metric fails when the bootstrap interval of current/baseline lies above "
        "1 + min-effect (never below what the runs' own spread allows: 3 x spread / d2(runs)), or beyond "
        "the hard cap value * (1 + ratio) + abs-ms. " + _defaults_text() + " See docs/baselines.md.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    emit.add_argument("--from", dest="sources", required=True, nargs="+", metavar="REPORT",
                      help="apex-bench JSON report(s) of one build and environment")
    emit.add_argument("--output", required=True, metavar="FILE", help="baseline file to write")
    emit.add_argument("--ratio", type=_ratio, help="max_regression_ratio of the first "
                      "statistic; the others are scaled alike")
    emit.add_argument("--abs-ms", type=_non_negative_float, help="max_regression_abs_ms of every metric")
    emit.add_argument("--min-effect", type=_ratio, metavar="FRACTION",
                      help="min_effect of the first statistic's rule (0.05: 5 %%); the others scale alike")
    emit.add_argument("--extra-metrics", type=_extra_metric_list, default=(), metavar="NAMES",
                      help="also gate these per cell, comma-separated: " + ", ".join(
                          f"{m.name} ({m.description})" for m in EXTRA_METRICS.values()))
    emit.add_argument("--allow-partial", action="store_true", help="take the cells an interrupted "
                      "run recorded (its other cells get no metric; the ones used are listed)")
    emit.add_argument("--notes", help="baseline_notes (default: where and how it was emitted)")
    prom = commands.add_parser(
        "promote", help="replace a baseline with new runs, only when they agree among themselves",
        description=f"Replace --baseline with one emitted from --runs (at least {MIN_RUNS} reports of one "
        "build and environment) when every metric's spread over them, (max - min) / median, is within "
        "its min-effect (or its cap ratio where it has no rule), for three runs; more runs may span as much "
        "more as their range is expected to (d2(n) / d2(3)); caps tuned in the old baseline carry "
        "over. Prints each metric's change; disagreeing runs are refused (exit 2), nothing written.")
    prom.add_argument("--baseline", required=True, metavar="FILE", help="the baseline to replace")
    prom.add_argument("--runs", required=True, nargs="+", metavar="REPORT", help="reports of the new build")
    prom.add_argument("--output", metavar="FILE", help="write here instead of replacing --baseline")
    prom.add_argument("--max-spread", type=_ratio, metavar="FRACTION",
                      help="one allowance for every metric instead of its own")
    prom.add_argument("--dry-run", action="store_true", help="report what would change; write nothing")
    return parser


def _change_line(change: MetricChange) -> str:
    old = "-" if change.old_ms is None else f"{change.old_ms:.4g}"
    new = "-" if change.new_ms is None else f"{change.new_ms:.4g}"
    if change.old_ms is None:
        what = "added"
    elif change.new_ms is None:
        what = "dropped (no ok cell in the runs)"
    else:
        verdict = change.verdict.label if change.verdict is not None else ""
        what = f"{change.change:+.1%} {verdict}".rstrip() if change.change is not None else ""
        if change.old_scale != 1.0:
            what += f" (the old time x{change.old_scale:.3f}, scaled to the new runs' card)"
    return f"  {change.metric}: {old} -> {new} ms  {what}"


def _one_card_note(baseline: Baseline, runs: int) -> None:
    """A GPU baseline whose runs all came from one card (its pooled fingerprint keeps the UUID) says so:
    against a baseline from several machines' runs the gate across hosts held better (docs/baselines.md)."""
    uuid = (baseline.fingerprint or {}).get("uuid")
    if uuid:
        print(f"apex-bench baseline: note: {plural(runs, 'run')}, all on one card ({uuid}); a gate on other "
              "machines holds better against runs from several (docs/baselines.md, \"GPU baselines\")")


def _promote(args: argparse.Namespace) -> int:
    output = Path(args.output or args.baseline)
    if not args.dry_run:
        check_writable(output, "--output")
    old = load_baseline(args.baseline)
    runs = [load_report(source) for source in args.runs]
    try:
        new, changes = promote(old, args.baseline, runs, max_spread=args.max_spread)
    except PromotionRefused as refused:
        for d in refused.disagreements:
            spread = "" if d.spread is None else f"spread {d.spread:.1%} > {d.allowed:.1%}, "
            print(f"  {d.metric}: {spread}{d.detail}", file=sys.stderr)
        raise
    for change in changes:
        print(_change_line(change))
    if args.dry_run:
        print(f"apex-bench baseline: dry run, {args.baseline} unchanged")
        return 0
    write_baseline(output, new)
    _one_card_note(new, len(runs))
    print(f"apex-bench baseline: promoted {len(runs)} agreeing runs into {output} ({len(new.metrics)} metrics)")
    return 0


def main(argv: list[str]) -> int:
    """``apex-bench baseline emit|promote ...``; returns 0 (usage and file errors raise, exit 2)."""
    args = build_parser().parse_args(argv)
    if args.command == "promote":
        return _promote(args)
    output = Path(args.output)
    check_writable(output, "--output")
    reports = [load_report(source) for source in args.sources]
    baseline = emit_baseline(reports, ratio=args.ratio, abs_ms=args.abs_ms, notes=args.notes,
                             min_effect=args.min_effect, extra_metrics=args.extra_metrics,
                             allow_partial=args.allow_partial)
    for report in reports:
        if report.status != "complete":
            cells = sorted({f"{c.workload}/{c.case}/{c.backend}/{c.dtype}" for c in report.cells
                            if c.status == "ok"})
            print(f"apex-bench baseline: {report.path} is {report.status}; took its {len(cells)} ok cell(s): "
                  f"{', '.join(cells) or 'none'}")
    write_baseline(output, baseline)
    _one_card_note(baseline, len(reports))
    print(f"apex-bench baseline: wrote {output} ({len(baseline.metrics)} metrics from "
          f"{len(reports)} report(s))")
    return 0
