"""The GPU job's cleanup: every process the job started is gone from the process table after it.

The workflow's own `in_job_session` (read from perf_gpu.yml) starts a process tree the way a
killed benchmark leaves it: a worker that keeps the job's tag, one that cleared its
environment, one that left the session for a new one, one that ignores SIGTERM.
scripts/gpu_job_cleanup.sh must stop all of them and nothing else. No GPU is needed: the
script only warns about GPU holders when nvidia-smi exists.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

yaml = pytest.importorskip("yaml", reason="pyyaml is in the test extra")

CLEANUP = ROOT / "scripts" / "gpu_job_cleanup.sh"
pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
    pytest.mark.skipif(shutil.which("setsid") is None, reason="setsid (util-linux) is not installed"),
]

# the benchmark's stand-in: each worker writes its pid, then waits to be killed
WORKERS = r"""
sleep 300 & echo $! > "$PIDS/tagged"
env -u APEX_GPU_JOB_TAG sleep 301 & echo $! > "$PIDS/untagged"
setsid sleep 302 & echo $! > "$PIDS/new_session"
bash -c 'trap "" TERM; echo $$ > "$PIDS/stubborn"; while :; do sleep 0.1; done' &
wait
"""


def in_job_session_function() -> str:
    job = yaml.safe_load((ROOT / ".github/workflows/perf_gpu.yml").read_text())["jobs"]["gpu-perf"]
    script = "\n".join(step.get("run", "") for step in job["steps"])
    match = re.search(r"^ *in_job_session\(\) \{\n.*?^ *\}\n", script, re.S | re.M)
    assert match, "perf_gpu.yml defines no in_job_session function"
    return match.group(0)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie holds no memory and no GPU


def wait_for(paths: list[Path], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not all(p.is_file() and p.read_text().strip() for p in paths):
        assert time.monotonic() < deadline, f"the workers did not start: {paths}"
        time.sleep(0.05)


def run_cleanup(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(CLEANUP), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "APEX_GPU_CLEANUP_GRACE_S": "1", **(env or {})})


def test_cleanup_stops_every_process_the_job_started_and_nothing_else(tmp_path):
    job_dir, pids = tmp_path / "job", tmp_path / "pids"
    job_dir.mkdir()
    pids.mkdir()
    unrelated = subprocess.Popen(["sleep", "303"])
    env = {**os.environ, "JOB_DIR": str(job_dir), "PIDS": str(pids),
           "GITHUB_RUN_ID": "42", "GITHUB_RUN_ATTEMPT": "1"}
    step = subprocess.Popen(["bash", "-c", in_job_session_function() + 'in_job_session bash -c "$0"',
                             WORKERS], env=env)
    try:
        names = ["tagged", "untagged", "new_session", "stubborn"]
        wait_for([pids / n for n in names])
        workers = {n: int((pids / n).read_text()) for n in names}
        (session,) = (job_dir / "sessions").read_text().split()
        assert os.getsid(workers["untagged"]) == int(session)
        assert os.getsid(workers["new_session"]) != int(session)
        # the step itself is cancelled: its shell dies, the session lives on (the orphan case)
        step.kill()
        step.wait(timeout=10)
        assert all(alive(pid) for pid in workers.values())

        done = run_cleanup(str(job_dir / "sessions"))

        assert done.returncode == 0, done.stdout + done.stderr
        assert [n for n, pid in workers.items() if alive(pid)] == []
        assert alive(unrelated.pid)
        assert "stopping" in done.stdout and "killing" in done.stdout  # the stubborn one
    finally:
        unrelated.kill()
        unrelated.wait()
        run_cleanup(str(job_dir / "sessions"))


def test_cleanup_at_the_start_finds_an_earlier_jobs_tagged_orphan(tmp_path):
    # an earlier job whose cleanup never ran: no sessions file, only the tag
    orphan = subprocess.Popen(["sleep", "304"], env={**os.environ, "APEX_GPU_JOB_TAG": "41-1"},
                              start_new_session=True)
    try:
        done = run_cleanup()
        assert done.returncode == 0, done.stdout + done.stderr
        orphan.wait(timeout=10)
        assert orphan.returncode == -15
    finally:
        if orphan.poll() is None:
            orphan.kill()


def test_cleanup_with_nothing_to_do_is_quiet_and_succeeds(tmp_path):
    done = run_cleanup(str(tmp_path / "no-such-sessions-file"))
    assert done.returncode == 0
    assert "stopping" not in done.stdout and done.stderr == ""


def test_cleanup_started_with_the_tag_does_not_stop_itself():
    done = run_cleanup(env={"APEX_GPU_JOB_TAG": "42-1"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stopping" not in done.stdout
