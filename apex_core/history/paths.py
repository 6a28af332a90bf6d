"""Where the history lives by default, and the git commit and branch a run is recorded under."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import attrs

# The history sits next to the default reports (artifacts/apex-bench.json), so one checkout
# keeps one history; the variable points several checkouts or CI jobs at one shared file.
HISTORY_ENV_VAR = "APEX_BENCH_HISTORY"
DEFAULT_HISTORY_PATH = Path("artifacts") / "history.sqlite"

GIT_TIMEOUT_S = 10.0


def default_history_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$APEX_BENCH_HISTORY`` when set and not empty, else ``artifacts/history.sqlite`` (relative to cwd)."""
    value = (os.environ if environ is None else environ).get(HISTORY_ENV_VAR, "")
    return Path(value) if value.strip() else DEFAULT_HISTORY_PATH


@attrs.frozen
class GitRevision:
    """The commit and branch of a checkout; None where git is absent, fails, or it is no repository."""

    commit: str | None = None
    branch: str | None = None


def _git(args: list[str], cwd: Path | str | None) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):  # no git binary, no such folder, a hung git
        return None
    text = done.stdout.strip()
    return text if done.returncode == 0 and text else None


def git_revision(cwd: Path | str | None = None) -> GitRevision:
    """``git rev-parse`` of the checkout at ``cwd`` (default: the current directory, the project benchmarked).

    A detached HEAD has no branch (None), as in most CI checkouts of a pull request.
    """
    commit = _git(["rev-parse", "HEAD"], cwd)
    if commit is None:
        return GitRevision()
    branch = _git(["rev-parse", "--abbrev-ref", "HEAD"], cwd)
    return GitRevision(commit=commit, branch=None if branch in (None, "HEAD") else branch)
