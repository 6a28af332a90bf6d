"""``apex-bench compare``: gate a finished report against a baseline (also used by ``--compare`` runs).

Every input is read and validated, and every output path checked, before any artifact is
written, so a bad input leaves nothing half-written behind.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

import attrs
from rich.console import Console
from rich.table import Table

from apex_core.baseline.artifacts import (
    normalization_lines,
    render_markdown,
    render_rows,
    right_aligned,
    summary_record,
    table_columns,
    trend_record,
)
from apex_core.baseline.compare import COMBINE, check_environment, compare
from apex_core.baseline.emit import emit_baseline
from apex_core.baseline.io import gate_environment_key, load_baseline, load_report, write_json
from apex_core.baseline.model import Baseline, CompareSummary
from apex_core.baseline.normalize import Card, median_floor_ms
from apex_core.cli.history_args import baseline_reports_from_history
from apex_core.cli.values import OneLineParser
from apex_core.errors import UsageError
from apex_core.files import atomic_write_text, check_writable
from apex_core.history import HistoryError, HistoryStore, check_history_path
from apex_core.history.cards import standing

EXIT_CODES = """\
exit codes:
  0  every baseline metric passed the rule
  1  a metric failed, or is missing from the report (unless --allow-missing)
  2  usage or file error (unreadable, malformed or mismatched baseline or report)
"""


def _optional_path(value: str | Path | None) -> Path | None:
    return None if value is None else Path(value)


@attrs.frozen(kw_only=True)
class GateOptions:
    """What one comparison needs besides the report: the baseline and where the artifacts go."""

    baseline: Baseline
    baseline_path: Path
    summary: Path | None = attrs.field(default=None, converter=_optional_path)
    trend: Path | None = attrs.field(default=None, converter=_optional_path)
    markdown: Path | None = attrs.field(default=None, converter=_optional_path)
    allow_missing: bool = False
    force: bool = False
    normalize: bool = True  # scale the baseline's times to the current card (baseline/across_cards.py)
    combine: str = "best"  # how several --current reports give each metric its cell (baseline/compare.py)
    # the history the current card is judged in against its model's other cards; None: the default one
    history: str | None = None
    judge_card: bool = True

    def check_outputs(self, markdown_flag: str = "--markdown") -> None:
        """Fail before any work when an artifact path cannot be written."""
        for path, flag in ((self.summary, "--summary"), (self.trend, "--trend-output"),
                           (self.markdown, markdown_flag)):
            if path is not None:
                check_writable(path, flag)


def _print_table(summary: CompareSummary, out: TextIO) -> None:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in table_columns(summary):
        table.add_column(column, justify="right" if right_aligned(column) else "left")
    for row in render_rows(summary):
        table.add_row(*row, style=None if row[1] == "pass" else "red")
    # A pipe or file gets a wide table rather than rich's 80-column default.
    Console(file=out, width=None if out.isatty() else 200, soft_wrap=False).print(table)


def run_gate(options: GateOptions, report_paths: Path | list[Path], *, quiet: bool = False) -> int:
    """Compare the report(s) with the baseline, write the artifacts, then print the table (unless
    quiet) and the one-line outcome; returns 0 pass, 1 fail."""
    paths = report_paths if isinstance(report_paths, list) else [report_paths]
    reports = [load_report(path) for path in paths]
    summary = compare(options.baseline, options.baseline_path, reports, allow_missing=options.allow_missing,
                      force=options.force, normalize=options.normalize, combine=options.combine)
    floor = median_floor_ms(c.timer_floor_ms for r in reports for c in r.cells)
    summary = _with_card_standing(summary, options, floor)
    # Every input is valid from here on: only now do artifacts appear.
    if options.summary is not None:
        write_json(options.summary, summary_record(summary))
    if options.trend is not None:
        write_json(options.trend, trend_record(summary))
    if options.markdown is not None:
        atomic_write_text(options.markdown, render_markdown(summary))
    if not quiet:
        _print_table(summary, sys.stdout)
        for difference in summary.environment_differences:
            print(f"note: environment differs: {difference}")
        for line in normalization_lines(summary):
            print(f"note: {line}")
    failed = summary.failed_checks
    forced = " (forced across differing environments)" if summary.forced else ""
    names = f": {', '.join(c.metric for c in failed)}" if failed else ""
    print(f"apex-bench compare: {summary.status.upper()}{forced}, {len(failed)} of {len(summary.checks)} "
          f"metrics failed{names}", flush=True)
    for check in failed:  # even under --quiet: it changes what the failure means
        if check.contention:
            print(f"apex-bench compare: note: {check.metric} {check.contention}", flush=True)
    return 1 if failed else 0


def card_standing(history: str | None, card: Card, timer_floor_ms: float | None = None) -> str:
    """The current card (its run's median cell floor ``timer_floor_ms``, where known) against its model's
    other cards in the history (history/cards.py), in one line; a history that is missing or unreadable
    costs the judgement, never the gate."""
    name = card.uuid or "this card"
    try:
        path = check_history_path(history)
        if not path.exists():
            return f"{name}: not enough runs of this model to judge (no history at {path})"
        with HistoryStore.open(path, create=False) as store:
            return standing(card, store.cards(card.model), timer_floor_ms).text
    except HistoryError as exc:
        return f"{name}: not judged against its model ({exc})"


def _with_card_standing(summary: CompareSummary, options: GateOptions,
                        timer_floor_ms: float | None) -> CompareSummary:
    done = summary.normalization
    if done is None or done.current is None or not options.judge_card:
        return summary
    judged = card_standing(options.history, done.current, timer_floor_ms)
    return attrs.evolve(summary, normalization=attrs.evolve(done, outlier=judged))


def gate_from_run_args(args: Any, json_path: Path) -> GateOptions | None:
    """The gate a run asked for with ``--compare``, validated before any cell runs (None without it)."""
    flags = {"--baseline": args.baseline, "--allow-missing": args.allow_missing, "--force": args.force,
             "--summary": args.summary, "--trend-output": args.trend_output,
             "--compare-md": args.compare_md}
    if not args.compare:
        given = [flag for flag, value in flags.items() if value]
        if given:
            raise UsageError(f"{given[0]} needs --compare")
        return None
    if args.baseline is None:
        raise UsageError("--compare needs --baseline FILE")
    stem = json_path.with_suffix("")
    options = GateOptions(
        baseline=load_baseline(args.baseline), baseline_path=Path(args.baseline),
        summary=args.summary or f"{stem}.compare.json", trend=args.trend_output or f"{stem}.trend.json",
        markdown=args.compare_md or f"{stem}.compare.md", allow_missing=args.allow_missing, force=args.force,
        history=getattr(args, "history", None), judge_card=not getattr(args, "no_history", False))
    options.check_outputs("--compare-md")
    return options


def precheck_environment(options: GateOptions, environment: dict[str, Any], config: dict[str, Any]) -> None:
    """Refuse a run whose environment cannot match the baseline, before any cell runs.

    The timing methods are known only once cells have run; the full check follows the run.
    """
    key = gate_environment_key({"environment": environment, "config": config, "benchmarks": []})
    check_environment(options.baseline, options.baseline_path, key, "this run", force=options.force,
                      skip=("timing_methods",))


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="apex-bench compare",
        description="Check every metric of a baseline against a JSON report: a metric fails when its "
        "statistical rule finds it slower with confidence by more than its min_effect (the bootstrap "
        "interval of current/baseline on the raw samples lies above 1 + min_effect), or when "
        "current_ms > value_ms * (1 + max_regression_ratio) + max_regression_abs_ms (the hard cap). "
        "The verdict (faster/same/slower/inconclusive) is printed beside the rules.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    against = parser.add_mutually_exclusive_group(required=True)
    against.add_argument("--baseline", metavar="FILE", help="baseline JSON file")
    against.add_argument("--against", metavar="SPEC", help="build the baseline from the run history: "
                         "latest (the newest other run), a tag, a commit prefix or a run id, in the "
                         "current report's environment, by the rules of 'baseline emit'")
    parser.add_argument("--history", metavar="PATH", help="history file for --against, also where the "
                        "current card is judged against its model's other cards (default "
                        "$APEX_BENCH_HISTORY, else artifacts/history.sqlite)")
    parser.add_argument("--current", required=True, nargs="+", metavar="REPORT",
                        help="apex-bench JSON report; several runs of one build (a retry) give each "
                        "metric its best run (see --combine)")
    parser.add_argument("--combine", choices=tuple(COMBINE), default="best",
                        help="with several --current reports, each metric's cell comes from its best run "
                        "(default: contention only slows a run) or its median run (a GPU gate's "
                        "confirmation: one fresh process can read a short cell several %% off either "
                        "way; docs/baselines.md)")
    parser.add_argument("--summary", metavar="OUT", help="write the compare summary JSON here")
    parser.add_argument("--trend-output", metavar="OUT", help="write the normalized trend JSON here")
    parser.add_argument("--markdown", metavar="OUT", help="write the Markdown table here")
    parser.add_argument("--allow-missing", action="store_true",
                        help="metrics absent from the report do not fail the gate")
    parser.add_argument("--force", action="store_true", help="compare even when the report was measured "
                        "in another environment (GPU/CPU class, dtype, profile, timing method); the "
                        "summary is marked forced")
    parser.add_argument("--no-normalize", dest="normalize", action="store_false",
                        help="compare the baseline's times as measured, even when it names another card of "
                        "the current run's GPU model (by default they are scaled to the current card by copy "
                        "bandwidth or SM clock, per cell's bound; docs/baselines.md)")
    parser.add_argument("--quiet", action="store_true", help="print only the outcome line")
    return parser


def main(argv: list[str]) -> int:
    """``apex-bench compare ...``; returns 0 pass, 1 fail (usage errors raise, exit 2)."""
    args = build_parser().parse_args(argv)
    if args.against is None:
        if args.history is not None:
            raise UsageError("--history needs --against (the current card is judged in the default history: "
                             "$APEX_BENCH_HISTORY, else artifacts/history.sqlite)")
        baseline, where = load_baseline(args.baseline), args.baseline
    else:
        # the baseline emitted on the fly from the history's matching runs
        currents = [load_report(path) for path in args.current]
        with tempfile.TemporaryDirectory(prefix="apex-bench-against-") as work:
            runs, described = baseline_reports_from_history(args.history, args.against, currents, Path(work))
            baseline = emit_baseline(runs)
        where = f"history {args.history or 'default'} --against {args.against} ({described})"
    options = GateOptions(baseline=baseline, baseline_path=Path(where), summary=args.summary,
                          trend=args.trend_output, markdown=args.markdown, allow_missing=args.allow_missing,
                          force=args.force, normalize=args.normalize, history=args.history,
                          combine=args.combine)
    options.check_outputs()
    if args.against is not None:
        print(f"apex-bench compare: against {where}", flush=True)  # which runs the verdict is about
    return run_gate(options, [Path(path) for path in args.current], quiet=args.quiet)
