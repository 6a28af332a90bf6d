"""``apex-bench report RUN.json [RUN2.json ...] [--history DB] --html OUT.html``: the HTML report.

One self-contained file (docs/report.md). The subject is the last run given: its environment,
per-case plots, roofline and failures; every earlier run is set beside it (A vs B). The trends of
the subject's environment come from ``--history`` or, where that file exists, the default history
(``$APEX_BENCH_HISTORY``, else artifacts/history.sqlite; ``--no-history`` skips it). ``--run SPEC``
makes a run of the history the subject (with no RUN and no --run, the history's latest run is);
``--baseline`` draws the baseline bands, ``--summary`` lists a comparison's gate verdicts. Every
bad input is one line, exit 2.
"""

from __future__ import annotations

from pathlib import Path

from apex_core.cli.values import OneLineParser, positive_float
from apex_core.files import check_distinct, check_writable
from apex_core.history import DEFAULT_HISTORY_PATH, DEFAULT_TIMEOUT_S, HISTORY_ENV_VAR
from apex_core.report.html import gather, write_html


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="apex-bench report",
        description="Write one self-contained HTML report (plots inline, opens offline) of a run: the "
        "environment, a summary, p50 by backend with p5-p95 whiskers and speed-ups, sample distributions, "
        "flags, a roofline, the cells without a time; with a history (--history, else the default one) the "
        "trends and change points; with two or "
        "more runs, A (each earlier run) vs B (the last) with the gate's verdict. See docs/report.md.",
        epilog="examples: apex-bench report RUN.json --html out.html; apex-bench report --run latest --html "
        "out.html (the default history's newest run); apex-bench report --history runs.sqlite --run nightly "
        "--html out.html; apex-bench report RUN.json --peak-tflops 989 --html out.html",
    )
    parser.add_argument(
        "runs", nargs="*", metavar="RUN.json",
        help="JSON reports; the last one is the report's subject (unless --run)",
    )
    parser.add_argument("--html", required=True, metavar="OUT.html", help="the HTML file to write")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--history",
        metavar="DB",
        help="a run history (apex-bench history): trend lines of the subject's environment; without "
        f"RUN.json its latest run is the subject (default: ${HISTORY_ENV_VAR}, else {DEFAULT_HISTORY_PATH}, "
        "where that file exists)",
    )
    source.add_argument(
        "--no-history", action="store_true", help="read no history, not even the default one"
    )
    parser.add_argument(
        "--run",
        metavar="SPEC",
        help="the subject is this run of the history (--history or the default one): a run id, latest, a "
        "tag or a commit prefix (the newest run it names), as apex-bench compare --against and apex-bench "
        "history show resolve them; RUN.json files given too are set beside it as A",
    )
    parser.add_argument(
        "--baseline",
        metavar="FILE",
        help="a baseline file: its values and allowed maxima are drawn as bands on the trends",
    )
    parser.add_argument(
        "--summary",
        metavar="FILE",
        help="a compare summary (apex-bench compare --summary): the gate verdicts of that comparison",
    )
    parser.add_argument(
        "--peak-tflops",
        type=positive_float,
        metavar="X",
        help="the device's peak TFLOP/s for the roofline's compute roof (runs do not measure it)",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"seconds to wait for a lock on the history ({DEFAULT_TIMEOUT_S:g})",
    )
    return parser


def main(argv: list[str]) -> int:
    """Write the report; 0 on success (bad input raises a UsageError: one line, exit 2)."""
    args = build_parser().parse_args(argv)

    out = Path(args.html)
    check_writable(out, "--html")
    for path in args.runs:  # the report must not overwrite one of its inputs
        check_distinct({"RUN.json": Path(path), "--html": out})
    inputs = gather(
        args.runs,
        history=args.history,
        baseline=args.baseline,
        summary=args.summary,
        peak_tflops=args.peak_tflops,
        timeout_s=args.timeout,
        run_spec=args.run,
        default_history=not args.no_history,
    )
    write_html(out, inputs)
    history = inputs.history
    read = f", history {history.path}{' (default)' if history.default else ''}" if history else ""
    print(f"apex-bench report: {out} ({out.stat().st_size / 1e6:.2f} MB, subject {inputs.subject.label}{read})")
    return 0
