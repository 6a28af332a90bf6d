"""Two processes writing one history file at once: every run lands, the file stays sound."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from apex_core.history import HistoryStore
from tests.apex_core.history.conftest import make_report, ok_cell

RUNS_PER_WRITER = 50

# Each writer waits for the start file, so both open (create and migrate) the new file at once,
# then for the other's ready file, so both write loops start together, and after its first run for
# the other's first: however late one is woken, the two loops overlap.
WRITER = """
import json, sys, time
from pathlib import Path
from apex_core.history import HistoryStore
path, name, other, folder, count = sys.argv[1:6]
folder = Path(folder)
report = json.loads((folder / "report.json").read_text())
deadline = time.time() + 120  # never outlive a test that gave up
while not (folder / "go").exists():
    time.sleep(0.005)
    if time.time() > deadline:
        sys.exit("no start signal")
with HistoryStore.open(path, timeout_s=60) as store:
    (folder / f"ready-{name}").touch()
    while not (folder / f"ready-{other}").exists():
        time.sleep(0.001)
        if time.time() > deadline:
            sys.exit("the other writer never opened the file")
    began = time.time()
    ids = []
    for _ in range(int(count)):
        ids.append(store.record(report, tags=[name], branch=name))
        if len(ids) == 1:  # the loops overlap for sure: neither goes on past its first run alone
            (folder / f"first-{name}").touch()
            while not (folder / f"first-{other}").exists():
                time.sleep(0.001)
                if time.time() > deadline:
                    sys.exit("the other writer never recorded a run")
    print(json.dumps({"ids": ids, "began": began, "ended": time.time()}))
"""


def test_two_processes_write_fifty_runs_each_into_one_new_file(tmp_path: Path) -> None:
    path = tmp_path / "shared" / "history.sqlite"
    (tmp_path / "report.json").write_text(json.dumps(make_report([ok_cell("tilepack", "torch-reference", 0.2),
                                                                  ok_cell("tilepack", "torch-compile", 0.1)])))
    names = {"writer-a": "writer-b", "writer-b": "writer-a"}
    writers = {name: subprocess.Popen([sys.executable, "-c", WRITER, str(path), name, other, str(tmp_path),
                                       str(RUNS_PER_WRITER)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for name, other in names.items()}
    time.sleep(0.5)
    (tmp_path / "go").touch()  # the history file does not exist yet
    results = {name: proc.communicate(timeout=300) for name, proc in writers.items()}
    for name, proc in writers.items():
        assert proc.returncode == 0, f"{name}: {results[name][1]}"
    done = {name: json.loads(out) for name, (out, _) in results.items()}
    a, b = done["writer-a"], done["writer-b"]
    assert sorted(a["ids"] + b["ids"]) == list(range(1, 2 * RUNS_PER_WRITER + 1))
    assert a["began"] < b["ended"] and b["began"] < a["ended"], "the two write loops did not overlap"

    with HistoryStore.open(path) as store:
        runs = store.runs()
        assert len(runs) == 2 * RUNS_PER_WRITER
        assert len(store.runs(tag="writer-a")) == len(store.runs(tag="writer-b")) == RUNS_PER_WRITER
        assert all(r.cells_total == 2 and r.cells_ok == 2 for r in runs)
        assert store.run(runs[-1].run_id).report == json.loads((tmp_path / "report.json").read_text())
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT count(*) FROM cells").fetchone()[0] == 4 * RUNS_PER_WRITER
    conn.close()


# Each opener waits for round r's start file, then opens the new file h-r and records one run.
OPENER = """
import json, sys, time
from pathlib import Path
from apex_core.history import HistoryError, HistoryStore
folder, rounds, me = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
report = json.loads((folder / "report.json").read_text())
deadline, failures = time.time() + 120, []
(folder / f"ready-{me}").touch()
for r in range(rounds):
    while not (folder / f"go-{r}").exists():
        time.sleep(0.0005)
        if time.time() > deadline:
            sys.exit("no start signal")
    try:
        with HistoryStore.open(folder / f"h-{r}.sqlite", timeout_s=30) as store:
            store.record(report)
    except HistoryError as exc:
        failures.append(str(exc))
print(json.dumps(failures))
"""


def test_three_processes_create_the_same_new_file_again_and_again(tmp_path: Path) -> None:
    """Openers meeting on a new file race to create it, switch it to WAL and migrate it.

    Before the WAL switch was retried, about 1 open in 9 failed at once with "database is locked".
    """
    rounds = 30
    report = make_report([ok_cell("tilepack", "torch-reference", 0.2)])
    (tmp_path / "report.json").write_text(json.dumps(report))
    openers = [subprocess.Popen([sys.executable, "-c", OPENER, str(tmp_path), str(rounds), str(i)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(3)]
    deadline = time.time() + 120
    while len(list(tmp_path.glob("ready-*"))) < len(openers) and time.time() < deadline:
        time.sleep(0.01)  # every opener past its imports, so each round's three opens meet
    for r in range(rounds):
        (tmp_path / f"go-{r}").touch()
        time.sleep(0.08)
    for proc in openers:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert json.loads(out) == []
    for r in range(rounds):
        with HistoryStore.open(tmp_path / f"h-{r}.sqlite") as store:
            assert len(store.runs()) == 3
