"""How an external command's program is found and started."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from adapters.external.process import resolve_executable, run_command


@pytest.mark.parametrize("name", ["python", "python3"])
def test_python_is_the_interpreter_running_apex_bench_not_the_first_on_path(tmp_path: Path, name: str) -> None:
    # a PATH whose only python is someone else's
    (tmp_path / name).write_text("#!/bin/sh\necho wrong python\n")
    (tmp_path / name).chmod(0o755)
    assert resolve_executable(name, None, str(tmp_path)) == (sys.executable, "")
    request = tmp_path / "request.json"
    request.write_text("{}")
    finished = run_command([name, "-c", "import json, sys; print(json.dumps(sys.executable))"], request,
                           cwd=str(tmp_path), extra_env={"PATH": str(tmp_path)})
    assert json.loads(finished.stdout.strip().splitlines()[-1]) == sys.executable


def test_another_bare_name_is_searched_on_path(tmp_path: Path) -> None:
    path, why = resolve_executable("no-such-tool-here", None, str(tmp_path))
    assert path is None and why == "'no-such-tool-here' not found on PATH (install it, or give its path)"


def test_a_ctrl_c_while_the_program_runs_ends_it_too(tmp_path: Path) -> None:
    # a SIGTERM sent to the run alone reaches no program an --inline run started: it goes with the run
    pid_file = tmp_path / "pid"
    request = tmp_path / "request.json"
    request.write_text("{}")
    program = ["python", "-c", f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
                               "time.sleep(60)"]
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        def interrupt_once_it_runs() -> None:
            for _ in range(300):
                if pid_file.exists() and pid_file.read_text():
                    break
                threading.Event().wait(0.05)
            os.kill(os.getpid(), signal.SIGINT)

        threading.Thread(target=interrupt_once_it_runs, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            run_command(program, request, cwd=str(tmp_path), extra_env={})
    finally:
        signal.signal(signal.SIGINT, previous)
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(int(pid_file.read_text()), 0)
