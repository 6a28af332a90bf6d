"""``apex-bench history`` and ``apex-bench leaderboard`` on a history of ten synthetic runs, and bad files."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from apex_core.cli.main import main
from apex_core.history import HistoryStore
from apex_core.history.schema import SCHEMA_VERSION
from tests.apex_core.history.conftest import commit_of, ten_run_reports
from tests.conftest import run_cli


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_history_lists_the_runs_newest_first(ten_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = cli(capsys, "history", "--history", str(ten_runs))
    assert (code, err) == (0, "")
    assert lines[0].split()[:4] == ["run", "recorded", "(UTC)", "commit"]
    assert [line.split()[0] for line in lines[1:]] == [str(i) for i in range(10, 0, -1)]
    assert lines[1].split()[2] == commit_of(9)[:10] and "main" in lines[1]
    assert (lines[7].split()[0], lines[7].split()[-1]) == ("4", "v1.0")
    assert (lines[8].split()[0], lines[8].split()[-1]) == ("3", "nightly")
    code, lines, _ = cli(capsys, "history", "list", "--history", str(ten_runs), "--tag", "nightly",
                         "--limit", "2")
    assert [line.split()[0] for line in lines[1:]] == ["9", "7"]


def test_history_show_a_tag_and_a_run_as_json(ten_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = cli(capsys, "history", "show", "v1.0", "--history", str(ten_runs))
    assert code == 0
    assert lines[0].startswith("run 4 ")
    assert f"commit {commit_of(3)} (branch main, clean)  tags: v1.0" in lines[1]
    assert lines[2].startswith("environment ") and "profile smoke" in lines[2]
    rows = {line.split()[0]: line.split() for line in lines[4:]}
    assert rows["tilepack/default/torch-compile/fp32/cpu"][1] == "ok"
    assert rows["fusiongate/default/triton/fp32/cpu"][1:3] == ["skipped", "-"]
    assert lines[-1].endswith("no CUDA device")
    code, lines, _ = cli(capsys, "history", "show", "3", "--json", "--history", str(ten_runs))
    assert json.loads("\n".join(lines)) == ten_run_reports()[2]


def test_trend_finds_the_planted_step(ten_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = cli(capsys, "history", "trend", "p50", "--workload", "tilepack", "--backend",
                         "torch-compile", "--history", str(ten_runs))
    assert code == 0
    assert lines[0].startswith("p50_ms of tilepack/default/torch-compile/fp32/cpu in environment ")
    assert lines[0].endswith("(10 runs)")
    marked = [line.split()[0] for line in lines if line.rstrip().endswith("<- change")]
    assert marked == ["7"]  # slowed from run index 6, i.e. run id 7
    (change,) = [line for line in lines if line.startswith("  change at run")]
    assert f"change at run 7 (commit {commit_of(6)[:10]})" in change and "(+3" in change


def test_trend_of_flat_series_and_filters(ten_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = cli(capsys, "history", "trend", "gbps", "--backend", "torch-reference",
                         "--history", str(ten_runs))
    assert code == 0
    headers = [line for line in lines if " of " in line and "environment" in line]
    assert len(headers) == 2  # fusiongate and tilepack
    assert sum("no change point" in line for line in lines) == 2
    code, lines, _ = cli(capsys, "history", "trend", "energy", "--history", str(ten_runs))
    assert (code, lines) == (0, [f"no ok cell with a energy_j_per_call matches in {ten_runs}"])


def test_leaderboard_ranks_the_backends(ten_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = cli(capsys, "leaderboard", "--history", str(ten_runs))
    assert code == 0
    text = "\n".join(lines)
    tilepack = lines[lines.index("tilepack/default fp32") + 2:][:3]
    assert [line.split()[1] for line in tilepack] == ["torch-compile", "triton", "torch-reference"]
    assert tilepack[0].split()[4] == "1.00x"
    overall = lines[lines.index(next(x for x in lines if x.startswith("overall"))) + 2:]
    assert [line.split()[1] for line in overall] == ["torch-compile", "triton", "torch-reference"]
    assert overall[1].split()[-2:] == ["1/2", "groups"]
    assert "10 runs; a backend's p50 is the median of its last 5 ok runs" in text
    code, lines, _ = cli(capsys, "leaderboard", "--workload", "fusiongate", "--last", "2",
                         "--history", str(ten_runs))
    assert code == 0 and "tilepack/default fp32" not in lines and "fusiongate/default fp32" in lines


@pytest.mark.parametrize("args", [["history", "trend", "p5"], ["history", "show", "nightli"],
                                  ["leaderboard", "--workload", "nope"],
                                  ["leaderboard", "--environment", "ff"]])
def test_names_that_match_nothing(ten_runs: Path, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    code, lines, err = cli(capsys, *args, "--history", str(ten_runs))
    assert code == 2 and lines == []
    assert err.count("\n") == 1 and err.startswith("apex-bench: error: ")


def bad_file(kind: str, path: Path) -> None:
    if kind == "not-sqlite":
        path.write_text("not a database\n")
    elif kind == "newer-schema":
        HistoryStore.open(path).close()
        conn = sqlite3.connect(path)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        conn.close()


@pytest.mark.parametrize(("kind", "expected"), [
    ("not-sqlite", "is not an SQLite database"),
    ("newer-schema", f"has history schema version {SCHEMA_VERSION + 1}, newer than this apex-bench knows"),
    ("missing", "no history file here"),
])
@pytest.mark.parametrize("command", [["history"], ["history", "show", "latest"], ["history", "trend", "p50"],
                                     ["leaderboard"]])
def test_bad_history_files(tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, expected: str,
                           command: list[str]) -> None:
    path = tmp_path / "history.sqlite"
    bad_file(kind, path)
    code, lines, err = cli(capsys, *command, "--history", str(path))
    assert code == 2 and lines == []
    assert err == f"apex-bench: error: {path}: " + err.split(f"{path}: ", 1)[1]
    assert expected in err and err.count("\n") == 1


def test_a_history_locked_past_the_timeout(ten_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    holder = sqlite3.connect(ten_runs, isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")  # keeps readers out too, even in WAL mode
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("UPDATE runs SET status = status")
    try:
        code, lines, err = cli(capsys, "history", "--history", str(ten_runs), "--timeout", "0.3")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == 2 and lines == []
    assert err.startswith(f"apex-bench: error: {ten_runs}: ") and "locked" in err and "0.3 s" in err
    assert err.count("\n") == 1


def test_the_console_command_end_to_end(ten_runs: Path, tmp_path: Path) -> None:
    done = run_cli(["leaderboard", "--history", str(ten_runs)], cwd=tmp_path, timeout=120)
    assert done.returncode == 0 and "overall: geometric mean" in done.stdout
    not_sqlite = tmp_path / "report.json"
    not_sqlite.write_text("{}")
    done = run_cli(["history", "list", "--history", str(not_sqlite)], cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"apex-bench: error: {not_sqlite}: is not an SQLite database (an apex-bench history "
                           "is one); name another file with --history or $APEX_BENCH_HISTORY\n")
    done = run_cli(["history"], cwd=tmp_path, timeout=120, env={"APEX_BENCH_HISTORY": str(ten_runs)})
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 11
