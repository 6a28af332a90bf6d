"""The run history: every run's report in one SQLite file, with tags, git state and per-cell metrics.

``HistoryStore.open(path)`` opens (creating and migrating) a history; ``record`` stores a
JSON report; ``runs``, ``run``, ``resolve``, ``series`` and ``leaderboard`` read it back.
``change_points`` finds steps in a series. See docs/history.md.
"""

from apex_core.history.changepoints import ChangePoint, change_points
from apex_core.history.connection import DEFAULT_TIMEOUT_S
from apex_core.history.errors import HistoryError
from apex_core.history.model import (
    BackendTime,
    CellMetrics,
    Leaderboard,
    LeaderboardGroup,
    OverallRank,
    RunSummary,
    SeriesPoint,
    StoredRun,
)
from apex_core.history.paths import (
    DEFAULT_HISTORY_PATH,
    HISTORY_ENV_VAR,
    GitRevision,
    default_history_path,
    git_revision,
)
from apex_core.history.rows import check_tag, environment_identity
from apex_core.history.schema import SCHEMA_VERSION
from apex_core.history.store import HistoryStore, check_history_path

__all__ = [
    "DEFAULT_HISTORY_PATH",
    "DEFAULT_TIMEOUT_S",
    "HISTORY_ENV_VAR",
    "SCHEMA_VERSION",
    "BackendTime",
    "CellMetrics",
    "ChangePoint",
    "GitRevision",
    "HistoryError",
    "HistoryStore",
    "Leaderboard",
    "LeaderboardGroup",
    "OverallRank",
    "RunSummary",
    "SeriesPoint",
    "StoredRun",
    "change_points",
    "check_tag",
    "check_history_path",
    "default_history_path",
    "environment_identity",
    "git_revision",
]
