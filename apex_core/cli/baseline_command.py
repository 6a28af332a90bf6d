"""``apex-bench baseline emit``: write a baseline template from a JSON report."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from apex_core.baseline.emit import DEFAULT_ABS_MS, DEFAULT_RATIOS, emit_baseline
from apex_core.baseline.io import SMALLEST_NORMAL, load_report, write_baseline
from apex_core.cli.args import OneLineParser
from apex_core.report.writer import check_writable

# the baseline schema's bounds: beyond them a limit lets any slowdown pass
# (the other statistics' ratios are scaled up to 2.7x the first's: 1e5 stays under the schema's 1e6)
MAX_RATIO, MAX_LIMIT = 1e5, 1e9


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
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
    value = _non_negative_float(text)
    if value > MAX_RATIO:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_RATIO:g}, got {text!r}")
    return value


def _defaults_text() -> str:
    parts = []
    for device, table in DEFAULT_RATIOS.items():
        ratios = ", ".join(f"{stat} {r} (end-to-end {e2e})" for stat, (r, e2e) in table.items())
        parts.append(f"{device}: {ratios}, abs-ms {DEFAULT_ABS_MS[device]}")
    return "Defaults: " + "; ".join(parts) + "."


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="apex-bench baseline",
                           description="Manage baseline files for 'apex-bench compare'.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=OneLineParser)
    emit = commands.add_parser(
        "emit", help="write a baseline template from one or more reports",
        description="Write a baseline with one metric per statistic of the device's table per ok cell; "
        "given several reports of one build, each value is the median over them. A metric may "
        "regress to value * (1 + ratio) + abs-ms. " + _defaults_text() + " See docs/baselines.md.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    emit.add_argument("--from", dest="sources", required=True, nargs="+", metavar="REPORT",
                      help="apex-bench JSON report(s) of one build and environment")
    emit.add_argument("--output", required=True, metavar="FILE", help="baseline file to write")
    emit.add_argument("--ratio", type=_ratio, help="max_regression_ratio of the first "
                      "statistic; the others are scaled alike")
    emit.add_argument("--abs-ms", type=_non_negative_float, help="max_regression_abs_ms of every metric")
    emit.add_argument("--notes", help="baseline_notes (default: where and how it was emitted)")
    return parser


def main(argv: list[str]) -> int:
    """``apex-bench baseline emit ...``; returns 0 (usage and file errors raise, exit 2)."""
    args = build_parser().parse_args(argv)
    output = Path(args.output)
    check_writable(output, "--output")
    reports = [load_report(source) for source in args.sources]
    baseline = emit_baseline(reports, ratio=args.ratio, abs_ms=args.abs_ms, notes=args.notes)
    write_baseline(output, baseline)
    print(f"apex-bench baseline: wrote {output} ({len(baseline.metrics)} metrics from "
          f"{len(reports)} report(s))")
    return 0
