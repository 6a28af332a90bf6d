"""How an external command's program is found and started."""

from __future__ import annotations

import json
import sys
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
