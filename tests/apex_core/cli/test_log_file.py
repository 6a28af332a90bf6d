"""What a run's libraries print goes to its log file; apex-bench's own lines reach the terminal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import os, sys, warnings
from pathlib import Path
from apex_core.cli.log_file import configure_logging, library_output_to

log = Path(sys.argv[1])
configure_logging(log)
with library_output_to(log):
    os.write(2, b"ERROR: External init callback must run in same thread as registerClient\\n")
    warnings.warn("Profiler clears events at the end of each cycle", UserWarning)
    print("apex-bench: error: our own line", file=sys.stderr, flush=True)
print("apex-bench: after the run", file=sys.stderr, flush=True)
os.write(2, b"fd 2 is the terminal again\\n")
"""


def test_library_output_goes_to_the_log_and_ours_to_the_terminal(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text("the previous run's log\n")
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(log)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == ["apex-bench: error: our own line", "apex-bench: after the run",
                                          "fd 2 is the terminal again"]
    text = log.read_text()
    assert "the previous run's log" not in text
    assert "External init callback must run in same thread" in text
    assert "UserWarning: Profiler clears events" in text
    assert "our own line" not in text
