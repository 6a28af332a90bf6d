"""``apex-bench leaderboard``: backends ranked by p50 per workload and dtype in one environment."""

from __future__ import annotations

from apex_core.cli.history_command import add_history_options, open_history
from apex_core.cli.values import OneLineParser, positive_int
from apex_core.history import text as render
from apex_core.history.queries import one_environment


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="apex-bench leaderboard",
        description="Rank the backends by p50 per workload, case and dtype over the recorded runs of one "
        "environment (default: the newest run's), and overall by the geometric mean of each backend's "
        "p50 / the fastest p50 over the groups it ran with another backend. See docs/history.md.")
    add_history_options(parser)
    parser.add_argument("--workload", help="only this workload")
    parser.add_argument("--environment", metavar="ID", help="the environment (an id prefix, from 'history "
                        "list'; default: the newest run's)")
    parser.add_argument("--last", type=positive_int, default=5,
                        help="a backend's p50 in a group is the median over its last N ok runs (5)")
    parser.add_argument("--normalize", action="store_true", help="first scale every p50 to the card of the "
                        "newest run (cards of one model: copy bandwidth or SM clock by the cell's bound; "
                        "docs/history.md); a p50 the rule cannot scale stays as measured")
    return parser


def main(argv: list[str]) -> int:
    """``apex-bench leaderboard ...``; 0 on success (usage errors and unusable files raise: exit 2)."""
    args = build_parser().parse_args(argv)
    with open_history(args) as store:
        environment = one_environment(store, args.environment)
        board = store.leaderboard(environment, workload=args.workload, last=args.last, normalize=args.normalize)
        key = store.runs(environment_key=environment, limit=1)[0].environment_key
        for line in render.leaderboard(board, key):
            print(line)
    return 0
