"""The run history on the command line: ``--history``, ``--tag``, ``--no-history`` and ``--against``.

A run records its finished report in the history (docs/history.md) after the JSON is
written, so a history that cannot be opened costs one line and exit 2, never the report;
a path that can never be a history file (a folder, a FIFO) is refused before any cell runs.
``compare --against SPEC`` builds its baseline on the fly from the history's runs that match
SPEC (``latest``, a tag, a commit prefix or a run id) in the current report's environment,
with the same rules as ``baseline emit``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from apex_core.baseline.io import load_report
from apex_core.errors import UsageError
from apex_core.history import (
    HistoryError,
    HistoryStore,
    check_history_path,
    check_tag,
    environment_identity,
    git_revision,
)


def _tag(text: str) -> str:
    try:
        return check_tag(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_history_args(parser: argparse.ArgumentParser) -> None:
    """``--history PATH``, ``--tag NAME`` (repeatable) and ``--no-history`` for a run."""
    group = parser.add_argument_group(
        "run history", "every run is recorded in an SQLite history (docs/history.md)")
    group.add_argument("--history", metavar="PATH", help="history file (default $APEX_BENCH_HISTORY, "
                       "else artifacts/history.sqlite)")
    group.add_argument("--tag", dest="tags", action="append", type=_tag, default=[], metavar="NAME",
                       help="tag this run in the history (repeatable)")
    group.add_argument("--no-history", action="store_true", help="do not record this run")


def check_history_target(args: Any) -> None:
    """Before any cell runs: a ``--history`` (or $APEX_BENCH_HISTORY) that names a folder or a
    device is a usage error now, not a failure after the whole run (``HistoryError``, exit 2)."""
    if not getattr(args, "no_history", False):
        check_history_path(args.history)


def record_run(args: Any, json_path: Path) -> int:
    """Record the finished report; 0, or 2 with one line when the history cannot take it."""
    if getattr(args, "no_history", False):
        return 0
    try:
        record = json.loads(json_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"apex-bench: error: history: cannot read the report {json_path}: {exc}", file=sys.stderr)
        return 2
    revision = git_revision()
    try:
        with HistoryStore.open(args.history) as history:
            run_id = history.record(record, tags=args.tags, commit=revision.commit, branch=revision.branch)
            where = history.path
    except HistoryError as exc:
        print(f"apex-bench: error: {exc} (the report {json_path} is written)", file=sys.stderr, flush=True)
        return 2
    if not getattr(args, "quiet", False):
        tags = f" tagged {', '.join(args.tags)}" if args.tags else ""
        print(f"apex-bench: recorded as run {run_id}{tags} in {where}", flush=True)
    return 0


def baseline_reports_from_history(history_path: str | None, spec: str, currents: Sequence[Any],
                                  work_dir: Path) -> tuple[list[Any], str]:
    """The complete runs of the history matching ``spec`` in the environment of ``currents`` (the
    current runs themselves left out), loaded as the gate loads report files (each is written
    under ``work_dir`` so that any error names a file), and which runs they are in words."""
    first = json.loads(Path(currents[0].path).read_text(encoding="utf-8"))
    key, _ = environment_identity(first)
    ours = {(c.suite, c.timestamp_utc) for c in currents}
    with HistoryStore.open(history_path, create=False) as history:
        latest = spec == "latest"
        found = history.runs(environment_key=key) if latest else history.resolve(spec, environment_key=key)
        usable = [r for r in found if (r.suite, r.timestamp_utc) not in ours and r.status == "complete"]
        if latest:
            usable = usable[:1]
        if not usable:
            raise HistoryError(history.path, f"--against {spec}: no complete run in this environment "
                                             "other than the current one")
        stored = [history.run(r.run_id) for r in usable]
    loaded = []
    for run in stored:
        path = work_dir / f"history-run-{run.summary.run_id}.json"
        path.write_text(json.dumps(run.report), encoding="utf-8")
        loaded.append(load_report(path))
    return loaded, describe_runs([run.summary for run in stored])


def describe_runs(runs: Sequence[Any]) -> str:
    """``run 12 of 2026-11-27T10:00:00Z tagged nightly at commit 0123456789ab, ...``: the history runs
    a baseline was built from, each with its time, tags and commit, so a reader knows what was
    compared with."""
    return ", ".join(f"run {r.run_id} of {r.timestamp_utc}" + (f" tagged {', '.join(r.tags)}" if r.tags else "")
                     + (f" at commit {r.commit[:12]}" if r.commit else "") for r in runs)
