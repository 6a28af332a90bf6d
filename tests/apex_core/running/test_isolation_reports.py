"""Failures explain themselves: crashes and timeouts say where, a named broken plugin fails the run."""

from __future__ import annotations

import pytest

from apex_core.running.worker_output import WorkerOutput, where
from tests.apex_core.isolation_helpers import FAST, load
from tests.conftest import run_cli

SEGFAULT_DUMP = """\
Fatal Python error: Segmentation fault

Thread 0x00007f48ca73e6c0 (most recent call first):
  File "/x/apex_core/running/worker_process.py", line 64 in poll
  File "/usr/lib/python3.11/threading.py", line 982 in run

Current thread 0x00007f48eca37b80 (most recent call first):
  File "/usr/lib/python3.11/ctypes/__init__.py", line 519 in string_at
  File "/site/apex_testplugin/backends.py", line 91 in prepare
  File "/x/apex_core/measure/cell.py", line 172 in _run_steps
  File "/x/apex_core/running/worker_process.py", line 97 in worker_main
"""


def test_where_names_the_plugin_frame_of_the_worker_main_thread(monkeypatch):
    import apex_core.running.worker_output as worker_output

    monkeypatch.setattr(worker_output, "_STDLIB", ("/usr/lib/python3.11",))
    assert where(SEGFAULT_DUMP) == "prepare (apex_testplugin/backends.py:91)"
    assert where("no dump here\n") == ""


def test_the_output_tail_keeps_the_last_lines_without_the_parent_watch_stack():
    output = WorkerOutput()
    try:
        with open(output.path, "a", encoding="utf-8") as stream:
            stream.write("".join(f"noise {i}\n" for i in range(500)) + SEGFAULT_DUMP)
        tail = output.tail(max_lines=12, max_bytes=4096)
        assert "in poll" not in tail and "Current thread" in tail and "line 91 in prepare" in tail
        assert tail.splitlines()[-1].endswith("in worker_main") and len(tail.splitlines()) == 12
        assert len(output.tail(max_lines=1000, max_bytes=300).encode()) <= 300
        output.clear()
        assert output.tail() == ""
    finally:
        output.close()


@pytest.mark.slow
def test_crashed_and_timed_out_cells_carry_the_workers_last_output(tmp_path, plugin_on_path):
    result = run_cli(["--device", "cpu", "--workloads", "test-scale", "--backends",
                      "test-crash,test-spawns-helper", "--timeout", "3", *FAST,
                      "--output-json", "r.json", "--output-md", "r.md"], cwd=tmp_path, timeout=120)
    assert result.returncode == 1, result.stderr + result.stdout
    rows = {b["backend"]: b for b in load(tmp_path / "r.json")["benchmarks"]}
    crash, hang = rows["test-crash"], rows["test-spawns-helper"]
    assert crash["status"] == "crashed"
    assert crash["reason"].startswith("worker killed by signal SIGSEGV in prepare "
                                      "(apex_testplugin/backends.py:")
    assert "Fatal Python error: Segmentation fault" in crash["worker_output"]
    assert hang["status"] == "timeout"
    assert hang["reason"].startswith("cell ran past the 3 s timeout in run (apex_testplugin/backends.py:")
    assert "test-spawns-helper: started helper" in hang["worker_output"]  # what it printed to stderr
    log = (tmp_path / "r.log").read_text()
    assert "Fatal Python error: Segmentation fault" in log and "test-spawns-helper: started helper" in log
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.parametrize(("args", "fragment"), [
    (["--workloads", "test-broken-workload", "--backends", "test-working"],
     "workload plugin 'test-broken-workload' failed: RuntimeError: test-broken-workload: a bug at import"),
    (["--workloads", "test-scale", "--backends", "test-broken"],
     "backend plugin 'test-broken' failed: ModuleNotFoundError"),
])
def test_a_broken_plugin_named_on_the_command_line_is_an_error_row_and_exit_1(tmp_path, plugin_on_path,
                                                                              args, fragment):
    result = run_cli(["--device", "cpu", *args, *FAST, "--output-json", "r.json", "--output-md", "r.md"],
                     cwd=tmp_path, timeout=120)
    assert result.returncode == 1, result.stderr + result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    cells = load(tmp_path / "r.json")["benchmarks"]
    assert len(cells) == 1 and cells[0]["status"] == "error", cells
    assert fragment in cells[0]["reason"]
    assert "1 cell(s) failed" in result.stdout
