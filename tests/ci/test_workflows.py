"""The GitHub workflows: triggers, permissions, the fork guard and the jobs they must run."""

import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import ROOT

yaml = pytest.importorskip("yaml", reason="pyyaml is in the test extra")

WORKFLOWS = ROOT / ".github" / "workflows"
GPU_LABELS = ["self-hosted", "linux", "x64", "gpu"]
FORK_CHECK = "github.event.pull_request.head.repo.full_name == github.repository"


def load(name):
    return yaml.safe_load((WORKFLOWS / name).read_text())


def triggers(workflow):
    # YAML 1.1 reads the bare key `on` as the boolean True
    return workflow[True] if True in workflow else workflow["on"]


def steps(job):
    return job.get("steps", [])


def scripts(job):
    return "\n".join(step.get("run", "") for step in steps(job))


def uploads(job):
    return [s["with"]["path"] for s in steps(job) if str(s.get("uses", "")).startswith(
        "actions/upload-artifact@")]


def condition(job):
    return " ".join(str(job.get("if", "")).split())


@pytest.fixture(scope="module", params=sorted(p.name for p in WORKFLOWS.glob("*.yml")))
def workflow(request):
    return request.param, load(request.param)


def test_the_three_workflows_exist():
    assert {p.name for p in WORKFLOWS.glob("*.yml")} == {"ci.yml", "perf_gpu.yml",
                                                          "perf_trend_weekly.yml"}


def test_every_workflow_reads_only_and_has_a_concurrency_group(workflow):
    name, wf = workflow
    assert wf["permissions"] == {"contents": "read"}, name
    assert wf["concurrency"]["group"], name
    for job_name, job in wf["jobs"].items():
        # a job may narrow permissions, never widen them
        assert job.get("permissions", {}) in ({}, {"contents": "read"}), (name, job_name)


def test_no_workflow_uses_pull_request_target(workflow):
    name, wf = workflow
    assert "pull_request_target" not in triggers(wf), name
    assert "pull_request_target" not in (WORKFLOWS / name).read_text(), name


def test_scripts_never_interpolate_event_data(workflow):
    # ${{ github.event.* }} or ${{ inputs.* }} inside run: is a script-injection hole; use env:
    name, wf = workflow
    for job_name, job in wf["jobs"].items():
        for expr in re.findall(r"\$\{\{(.*?)\}\}", scripts(job)):
            assert not re.search(r"github\.event|inputs\.|github\.head_ref", expr), (name, job_name)


def test_schedules_are_valid_cron(workflow):
    _, wf = workflow
    for entry in triggers(wf).get("schedule") or []:
        assert len(entry["cron"].split()) == 5


def test_ci_runs_the_readme_tests_and_the_cpu_perf_gate():
    wf = load("ci.yml")
    on = triggers(wf)
    assert "push" in on and "pull_request" in on
    jobs = wf["jobs"]
    assert "bash .ci/run" in scripts(jobs["tests"])
    readme_install = 'pip install torch==2.13.0 -e ".[test]" && pytest'
    assert readme_install in (ROOT / "README.md").read_text()
    assert readme_install in (ROOT / ".ci" / "run").read_text()
    gate = jobs["perf-regression-cpu"]
    assert "bash scripts/ci_perf_gate.sh" in scripts(gate)
    assert uploads(gate) == ["artifacts/perf-gate/"]
    upload = next(s for s in steps(gate) if "upload-artifact" in str(s.get("uses")))
    assert upload.get("if") == "always()"  # the artifacts matter most when the gate fails


def test_gpu_workflow_triggers():
    on = triggers(load("perf_gpu.yml"))
    assert set(on) == {"pull_request", "workflow_dispatch", "schedule"}
    assert sorted(on["pull_request"]["paths"]) == ["adapters/**", "apex_core/**", "apex_kernels/**"]
    inputs = on["workflow_dispatch"]["inputs"]
    assert len(inputs) == 1
    (choice,) = inputs.values()
    assert choice["default"] == "skip" and "skip" in choice["options"]


def test_gpu_job_needs_the_fork_guard_and_the_switches():
    wf = load("perf_gpu.yml")
    jobs = wf["jobs"]
    guard = jobs["guard"]
    assert "self-hosted" not in str(guard["runs-on"])  # fork code must not reach the GPU host
    guard_env = guard["steps"][0]["env"]
    assert guard_env["HEAD_REPO"] == "${{ github.event.pull_request.head.repo.full_name }}"
    assert guard_env["THIS_REPO"] == "${{ github.repository }}"
    assert '"$HEAD_REPO" = "$THIS_REPO"' in scripts(guard)
    (dispatch_input,) = triggers(wf)["workflow_dispatch"]["inputs"]
    self_hosted = [n for n, j in jobs.items() if "self-hosted" in str(j["runs-on"])]
    assert self_hosted == ["gpu-perf"]
    gpu = jobs["gpu-perf"]
    assert gpu["runs-on"] == GPU_LABELS
    assert gpu["needs"] in ("guard", ["guard"])
    cond = condition(gpu)
    assert "needs.guard.outputs.run == 'true'" in cond
    assert FORK_CHECK in cond
    assert "vars.APEX_GPU_SCHEDULE == 'true'" in cond
    assert f"inputs.{dispatch_input} == 'run'" in cond


def test_gpu_job_runs_the_fixed_profile_gated_and_uploads():
    gpu = load("perf_gpu.yml")["jobs"]["gpu-perf"]
    script = scripts(gpu)
    words = shlex.split(script.replace("\\\n", " "), comments=True)
    assert {"--device", "cuda", "--profile", "fixed", "--compare", "--baseline"} <= set(words)
    backends = words[words.index("--backends") + 1].split(",")
    assert "triton" in backends and "torch-reference" in backends
    assert "APEX_GPU_BASELINE" in gpu["env"] and gpu["env"]["APEX_GPU_BASELINE"].strip()
    assert "apex-bench attest" in script
    assert uploads(gpu) == ["artifacts/perf-gpu/"]
    checkout = next(s for s in steps(gpu) if str(s.get("uses", "")).startswith("actions/checkout@"))
    assert checkout["with"]["persist-credentials"] is False


def test_weekly_trend_writes_and_uploads_the_trend_artifact():
    wf = load("perf_trend_weekly.yml")
    on = triggers(wf)
    assert set(on) == {"schedule", "workflow_dispatch"}
    (cron,) = [entry["cron"] for entry in on["schedule"]]
    minute, hour, day_of_month, month, day_of_week = cron.split()
    assert day_of_month == "*" and month == "*" and day_of_week not in ("*", "?")  # weekly
    (job,) = wf["jobs"].values()
    script = scripts(job)
    assert "apex-bench compare" in script and "--trend-output" in script
    assert "--baseline baselines/cpu-smoke.json" in script
    assert uploads(job) == ["artifacts/perf-trend/"]


def test_the_scripts_the_workflows_call_exist():
    for name in ("ci.yml", "perf_gpu.yml", "perf_trend_weekly.yml"):
        for ref in re.findall(r"bash ([^-\s][^\s)\"']*)", (WORKFLOWS / name).read_text()):
            assert Path(ROOT / ref).is_file(), f"{name} calls {ref}, which is not in the repository"


def gpu_steps():
    return steps(load("perf_gpu.yml")["jobs"]["gpu-perf"])


def test_only_the_gpu_job_runs_on_a_self_hosted_runner(workflow):
    # the GitHub-hosted jobs may install into the runner's Python: their machine is thrown away
    name, wf = workflow
    for job_name, job in wf["jobs"].items():
        if (name, job_name) != ("perf_gpu.yml", "gpu-perf"):
            assert str(job["runs-on"]).startswith("ubuntu-"), (name, job_name)


def test_gpu_job_installs_only_into_a_per_job_virtual_environment():
    gpu = load("perf_gpu.yml")["jobs"]["gpu-perf"]
    script = scripts(gpu)
    assert 'job_dir="$RUNNER_TEMP/' in script  # the job's temp folder, not the workspace
    assert 'python3 -m venv --system-site-packages "$job_dir/venv"' in script
    installs = [line.strip() for line in script.splitlines() if "pip install" in line]
    assert installs == ['"$job_dir/venv/bin/python" -m pip install -e .']
    assert not re.search(r"\bsudo\b|--user\b|python3 -m pip", script)
    assert 'echo "$job_dir/venv/bin" >> "$GITHUB_PATH"' in script
    assert gpu["env"]["PYTHONNOUSERSITE"] == "1"  # nor ~/.local's site-packages
    # caches a branch could poison for a later job live in the job folder too
    for cache in ("PIP_CACHE_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR"):
        assert f'echo "{cache}=$job_dir/' in script, cache
    last = gpu_steps()[-1]
    assert last.get("if") == "always()"
    assert 'rm -rf -- "$JOB_DIR"' in last["run"]


def test_gpu_job_waits_for_reviewers_unless_it_is_the_nightly_schedule():
    gpu = load("perf_gpu.yml")["jobs"]["gpu-perf"]
    name = " ".join(gpu["environment"]["name"].split())
    match = re.fullmatch(r"\$\{\{ github\.event_name == 'schedule' && '([\w-]+)' \|\| '([\w-]+)' \}\}",
                         name)
    assert match, name
    assert match.groups() == ("gpu-nightly", "gpu-review")  # dispatch and pull requests: reviewed
    # reviewers are a repository setting, not YAML: the docs must say which environment
    docs = " ".join((ROOT / "docs" / "ci.md").read_text().split())
    assert "`gpu-review`" in docs and "required reviewers" in docs


def test_gpu_job_runs_in_tagged_sessions_and_stops_them_afterwards():
    job_steps = gpu_steps()
    assert job_steps[1]["run"].strip() == "bash scripts/gpu_job_cleanup.sh"  # an earlier job's orphans
    (bench,) = [i for i, s in enumerate(job_steps) if "--profile fixed" in s.get("run", "")]
    commands = [line.strip() for line in job_steps[bench]["run"].splitlines()
                if re.match(r'\s*(in_job_session )?("\$\{suite\[@\]\}"|apex-bench )', line)]
    assert len(commands) == 3 and all(c.startswith("in_job_session ") for c in commands), commands
    # a failed gate's confirmation runs apex-bench too, in a session of its own
    confirm = 'in_job_session bash scripts/gpu_gate_confirm.sh "$OUT" "$APEX_GPU_BASELINE"'
    assert confirm in job_steps[bench]["run"]
    stop = job_steps[bench + 1]
    assert stop.get("if") == "always()"
    assert stop["run"].strip() == 'bash scripts/gpu_job_cleanup.sh "${JOB_DIR:-}/sessions"'
    (upload,) = [i for i, s in enumerate(job_steps) if "upload-artifact" in str(s.get("uses"))]
    assert bench < upload < len(job_steps) - 1
    assert 'bash scripts/gpu_job_cleanup.sh "${JOB_DIR:-}/sessions"' in job_steps[-1]["run"]


USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>\S+)(?P<comment>.*)$")
PINNED = re.compile(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}")


def uses_lines(text):
    return [m for m in map(USES.match, text.splitlines()) if m]


def test_every_action_is_pinned_by_a_commit_sha_with_its_tag_in_a_comment(workflow):
    # a tag can be moved to other code; a commit cannot (local ./ actions come with the checkout)
    name, wf = workflow
    found = uses_lines((WORKFLOWS / name).read_text())
    parsed = [s["uses"] for job in wf["jobs"].values() for s in steps(job) if "uses" in s]
    assert [m["ref"] for m in found] == parsed, name  # the line scan saw every uses:
    for m in found:
        if m["ref"].startswith("./"):
            continue
        assert PINNED.fullmatch(m["ref"]), f"{name}: {m['ref']} is not pinned by a full commit SHA"
        assert re.fullmatch(r"\s+# v\d+(\.\d+)*\s*", m["comment"]), f"{name}: {m['ref']} names no tag"


def test_one_action_is_pinned_to_one_commit_everywhere():
    pins = {}
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for m in uses_lines(path.read_text()):
            action, _, sha = m["ref"].partition("@")
            pins.setdefault(action, set()).add((sha, m["comment"].strip()))
    assert {action: len(p) for action, p in pins.items() if len(p) > 1} == {}


@pytest.mark.parametrize("line", ["- uses: actions/checkout@v4",
                                  "  uses: actions/checkout@11bd719 # v4.2.2",
                                  "- uses: actions/checkout@main # v4"])
def test_the_pin_check_refuses_a_tag_a_short_sha_or_a_branch(line):
    (m,) = uses_lines(line)
    assert not PINNED.fullmatch(m["ref"])
