"""The default history path and the git commit and branch a run is recorded under."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from apex_core.history import DEFAULT_HISTORY_PATH, GitRevision, default_history_path, git_revision


def test_default_path_and_the_variable() -> None:
    assert default_history_path({}) == DEFAULT_HISTORY_PATH == Path("artifacts/history.sqlite")
    assert default_history_path({"APEX_BENCH_HISTORY": "/shared/h.sqlite"}) == Path("/shared/h.sqlite")
    assert default_history_path({"APEX_BENCH_HISTORY": "  "}) == DEFAULT_HISTORY_PATH


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_commit_and_branch_of_a_repository(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        identity = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                    "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(tmp_path)}
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True,
                              env={**os.environ, **identity}).stdout.strip()

    git("init", "-q", "-b", "perf/x")
    git("commit", "-q", "--allow-empty", "-m", "first")
    head = git("rev-parse", "HEAD")
    assert git_revision(tmp_path) == GitRevision(commit=head, branch="perf/x")
    git("checkout", "-q", "--detach")
    assert git_revision(tmp_path) == GitRevision(commit=head, branch=None)


def test_outside_a_repository_or_without_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert git_revision(tmp_path) == GitRevision(None, None)
    assert git_revision(tmp_path / "missing") == GitRevision(None, None)
    monkeypatch.setenv("PATH", str(tmp_path))  # no git binary at all
    assert git_revision() == GitRevision(None, None)
