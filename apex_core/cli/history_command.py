"""``apex-bench history [list | show RUN | trend METRIC | cards]``: read the run history (docs/history.md)."""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

from apex_core.baseline.normalize import Scaling, card_of_report, timer_floor_of_report
from apex_core.cli.values import OneLineParser, number, positive_int, positive_seconds
from apex_core.history import (
    DEFAULT_TIMEOUT_S,
    HISTORY_ENV_VAR,
    HistoryStore,
    change_points,
    default_history_path,
)
from apex_core.history import text as render
from apex_core.history.cards import MIN_PEERS, OUTLIER_DEVIATION, scaled_series, standing
from apex_core.history.changepoints import MIN_RELATIVE_STEP, MIN_SEGMENT
from apex_core.history.model import SeriesPoint
from apex_core.history.queries import METRIC_ALIASES, metric_column
from apex_core.history.rows import METRIC_COLUMNS


def _fraction(text: str) -> float:
    value = number(text, float, "a fraction such as 0.05")
    if not (0 <= value < 10):
        raise argparse.ArgumentTypeError(f"must be >= 0 and < 10, got {text!r}")
    return value


def add_history_options(parser: argparse.ArgumentParser) -> None:
    """``--history`` and ``--timeout``, shared by the history commands and ``leaderboard``."""
    parser.add_argument("--history", metavar="PATH",
                        help=f"the history file (default: ${HISTORY_ENV_VAR}, else {default_history_path({})})")
    parser.add_argument("--timeout", type=positive_seconds, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help=f"seconds to wait for another process's lock on the file ({DEFAULT_TIMEOUT_S:g})")


def open_history(args: argparse.Namespace) -> HistoryStore:
    """The history the command names, which must exist (reading never creates one)."""
    return HistoryStore.open(args.history, create=False, timeout_s=args.timeout)


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="apex-bench history", description="List, show and trend the recorded runs. "
                           "See docs/history.md.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=OneLineParser)
    listing = commands.add_parser("list", help="the runs, newest first (the default)")
    listing.add_argument("--limit", type=positive_int, default=20, help="at most N runs (20)")
    listing.add_argument("--tag", help="only runs with this tag")
    listing.add_argument("--commit", help="only runs at this commit (a prefix)")
    listing.add_argument("--environment", metavar="ID", help="only runs in this environment (an id prefix)")
    show = commands.add_parser("show", help="one run: git state, environment, every cell")
    show.add_argument("run", metavar="RUN", help="latest, a run id, a tag or a commit (the newest match)")
    show.add_argument("--json", action="store_true", help="print the run's whole JSON report instead")
    trend = commands.add_parser(
        "trend", help="a metric across runs, with its change points",
        description="Print each matching cell's series of METRIC over the runs, oldest first, and its "
        "change points: binary segmentation on the median, a step of at least --min-step held for "
        "--min-segment runs on each side and standing out of the noise (docs/history.md).")
    trend.add_argument("metric", metavar="METRIC",
                       help=f"one of {', '.join(METRIC_COLUMNS)} (or {', '.join(METRIC_ALIASES)})")
    for name in ("workload", "case", "backend", "dtype", "device"):
        trend.add_argument(f"--{name}", help=f"only cells of this {name}")
    trend.add_argument("--environment", metavar="ID", help="only runs in this environment (an id prefix)")
    trend.add_argument("--limit", type=positive_int, default=200, help="each series' last N runs (200)")
    trend.add_argument("--min-step", type=_fraction, default=MIN_RELATIVE_STEP,
                       help=f"smallest relative step reported ({MIN_RELATIVE_STEP:g})")
    trend.add_argument("--min-segment", type=positive_int, default=MIN_SEGMENT,
                       help=f"runs a level must hold on each side of a step ({MIN_SEGMENT})")
    trend.add_argument("--normalize", action="store_true", help="scale each run's time to the card of the "
                       "series' newest run (cards of one model: copy bandwidth or SM clock by the cell's "
                       "bound; docs/history.md); a time the rule cannot scale stays as measured and says why")
    cards = commands.add_parser(
        "cards", help="the GPU cards the runs used, and which lie outside their model's usual spread",
        description="List every card (GPU UUID) the recorded runs name, with its measured copy bandwidth and "
        f"SM clock under load (medians over its runs); a card is an outlier when a figure lies more than "
        f"{OUTLIER_DEVIATION:.0%} from the median of its model's other cards and outside their range, judged "
        f"against at least {MIN_PEERS} other cards (docs/history.md).")
    cards.add_argument("--model", help="only cards of this GPU model (as the runs name it)")
    for command in (listing, show, trend, cards):
        add_history_options(command)
    return parser


def _list(store: HistoryStore, args: argparse.Namespace) -> None:
    runs = store.runs(environment_key=args.environment, tag=args.tag, commit=args.commit, limit=args.limit)
    for line in render.run_list(runs):
        print(line)


def _show(store: HistoryStore, args: argparse.Namespace) -> None:
    matches = store.resolve(args.run)
    run = store.run(matches[0].run_id)
    if args.json:
        print(json.dumps(run.report, indent=2))
        return
    if len(matches) > 1:
        print(f"{args.run!r} names {len(matches)} runs; showing the newest, run {matches[0].run_id}")
    card = card_of_report(run.report)
    floor = timer_floor_of_report(run.report)
    judged = () if card is None else (f"{card.model}, {card.describe()}",
                                      standing(card, store.cards(card.model), floor).text)
    for line in render.run_details(run, judged):
        print(line)


def _trend(store: HistoryStore, args: argparse.Namespace) -> None:
    column = metric_column(args.metric)
    points = store.series(column, workload=args.workload, case=args.case, backend=args.backend,
                          dtype=args.dtype, device=args.device, environment_key=args.environment,
                          limit=args.limit)
    if not points:
        print(f"no ok cell with a {column} matches in {store.path}")
        return
    series: dict[tuple[str, ...], list[SeriesPoint]] = defaultdict(list)
    for point in points:
        series[point.cell_key].append(point)
    method = (f"binary segmentation on the median; a step needs >= {args.min_step * 100:g} % and "
              f"{args.min_segment} runs each side")
    if args.normalize and not column.endswith("_ms"):
        print(f"not normalized: --normalize scales times (the *_ms metrics), not {column}")
    for index, key in enumerate(sorted(series)):
        values, scalings = series[key], list[Scaling]()
        if args.normalize and column.endswith("_ms"):
            values, scalings = scaled_series(values)
        changes = change_points([p.value for p in values], min_segment=args.min_segment,
                                min_relative_step=args.min_step)
        for line in ([""] if index else []) + render.trend(column, values, changes, method, scalings):
            print(line)


def _cards(store: HistoryStore, args: argparse.Namespace) -> None:
    found = store.cards(args.model)
    for line in render.cards(found, [standing(c.card, found, c.timer_floor_ms) for c in found]):
        print(line)


def main(argv: list[str]) -> int:
    """``apex-bench history ...``; 0 on success (usage errors and unusable files raise: exit 2)."""
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = ["list", *argv]  # a bare 'history' lists the runs
    args = build_parser().parse_args(argv)
    with open_history(args) as store:
        {"list": _list, "show": _show, "trend": _trend, "cards": _cards}[args.command](store, args)
    return 0
