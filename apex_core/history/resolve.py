"""Turn ``latest | RUN-ID | TAG | COMMIT`` into runs, or say what was meant when nothing matches."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Protocol

from apex_core.history.errors import HistoryError
from apex_core.history.model import RunSummary


class HistoryStore(Protocol):
    """What resolving reads of apex_core.history.store.HistoryStore, which calls it."""

    path: Path

    def runs(self, environment_key: str | None = None, tag: str | None = None, commit: str | None = None,
             limit: int | None = None, run_id: int | None = None) -> tuple[RunSummary, ...]: ...

    def tags(self) -> tuple[str, ...]: ...

    def commits(self) -> tuple[str, ...]: ...

_COMMIT_PREFIX = re.compile(r"[0-9a-fA-F]{4,40}")
_SHOWN = 5  # suggestions in an error message


def _nearest_commits(spec: str, commits: tuple[str, ...]) -> list[str]:
    """Commits (12 digits) whose first ``len(spec)`` digits look like ``spec``; else the newest."""
    short = tuple(dict.fromkeys(c[:12] for c in commits))
    by_prefix: dict[str, str] = {}
    for commit in short:
        by_prefix.setdefault(commit[:max(len(spec), 4)], commit)
    near = difflib.get_close_matches(spec.lower(), list(by_prefix), n=_SHOWN, cutoff=0.5)
    return [by_prefix[n] for n in near] or list(short[:_SHOWN])


def _nothing_matches(store: HistoryStore, spec: str, environment_id: str | None) -> HistoryError:
    tags = store.tags()
    near_tags = difflib.get_close_matches(spec, tags, n=_SHOWN, cutoff=0.5) or list(tags[:_SHOWN])
    near_commits = _nearest_commits(spec, store.commits())
    where = f" in environment {environment_id}" if environment_id else ""
    newest = store.runs(limit=1)
    ids = f"run ids 1 to {newest[0].run_id}" if newest else "no runs yet"
    return HistoryError(store.path, f"{spec!r} names no run, tag or commit{where} ({ids}; "
                                    f"nearest tags: {', '.join(near_tags) or '(none)'}; "
                                    f"nearest commits: {', '.join(near_commits) or '(none)'})")


def _by_commit(store: HistoryStore, prefix: str, environment_id: str | None) -> tuple[RunSummary, ...]:
    found = store.runs(environment_key=environment_id, commit=prefix)
    commits = tuple(dict.fromkeys(r.commit for r in found if r.commit))
    if len(commits) > 1:
        shown = ", ".join(c[:12] for c in commits[:_SHOWN])
        raise HistoryError(store.path, f"commit prefix {prefix!r} is ambiguous: it matches {shown}"
                                       f"{' ...' if len(commits) > _SHOWN else ''}; give more digits")
    return found


def resolve_spec(store: HistoryStore, spec: str, environment_id: str | None) -> tuple[RunSummary, ...]:
    """See ``HistoryStore.resolve``."""
    text = spec.strip()
    if not text:
        raise HistoryError(store.path, "an empty name names no run (use latest, a run id, a tag or a commit)")
    if text == "latest":
        found = store.runs(environment_key=environment_id, limit=1)
        if not found:
            where = f" in environment {environment_id}" if environment_id else ""
            raise HistoryError(store.path, f"'latest': the history holds no runs{where}")
        return found
    if text.isdigit() and not text.startswith("0"):  # a run id; "0123" can only be a commit prefix
        found = store.runs(run_id=int(text))
        if found:
            return found
    found = store.runs(environment_key=environment_id, tag=text)
    if found:
        return found
    if _COMMIT_PREFIX.fullmatch(text):
        found = _by_commit(store, text, environment_id)
        if found:
            return found
    raise _nothing_matches(store, text, environment_id)
