"""Bad input gets one clear line on stderr and exit code 2, before any cell runs."""

import os
from pathlib import Path

import pytest

from tests.conftest import run_cli


def assert_usage_error(result, *fragments):
    assert result.returncode == 2, result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--backends", "nope"], ["unknown backend 'nope'", "torch-reference", "trt"]),
        (["--workloads", "gemm"], ["unknown workload 'gemm'", "tilepack"]),
        (["--set", "colour=red"], ["--set colour: unknown parameter", "height"]),
        (["--set", "height=abc"], ["height=abc: expected int"]),
        (["--workloads", "tilepack", "--set", "height=130"], ["130", "tile_size 8"]),
        (["--iters", "0"], ["--iters", ">= 1"]),
        (["--dtype", "fp64"], ["unknown dtype 'fp64'"]),
        (["--device", "cuda"], ["no CUDA device"]),
        (["--graph"], ["--graph needs --device cuda"]),
        (["--timer", "kernel"], ["--timer kernel cannot run here", "use --device cuda"]),
        (["--timer", "wall"], ["invalid choice: 'wall'"]),
        (["--floor-sampling", "once"], ["invalid choice: 'once'", "rounds", "interleaved", "pooled"]),
        (["--placements", "0"], ["--placements", ">= 1"]),
        (["--placements", "17"], ["placements must be 1 to 16, got 17"]),
        # numbers no timer or queue can hold
        (["--min-time", "nan"], ["--min-time", "finite"]),
        (["--max-time", "inf"], ["--max-time", "finite"]),
        (["--max-time", "1e309"], ["--max-time", "finite"]),
        (["--timeout", "inf"], ["--timeout", "finite"]),
        (["--timeout", "1e300"], ["--timeout", "at most 604800 s"]),
        (["--noise", "2"], ["--noise", "below 1"]),
        (["--set", "height=" + "1" + "0" * 30], ["--set height=", "64-bit integer range"]),
        (["--seed", "1" + "0" * 23], ["--seed", "below 2**63"]),
        # empty names are not "everything"
        (["--backends", ""], ["--backends", "empty list"]),
        (["--workloads", ""], ["--workloads", "empty list"]),
        (["--backends", "triton,,torch-reference"], ["--backends", "empty name"]),
        # control characters are escaped, not echoed to the terminal
        (["--backends", "\x1b[31mred"], ["unknown backend", "\\x1b[31mred"]),
        (["--profile", "huge"], ["unknown profile 'huge'; valid profiles: fixed, smoke, large"]),
    ],
)
def test_usage_errors(tmp_path, args, fragments):
    result = run_cli(["--device", "cpu", *args] if "--device" not in args else args, cwd=tmp_path)
    assert_usage_error(result, *fragments)
    assert not (tmp_path / "artifacts" / "apex-bench.json").exists()


def test_output_in_a_missing_folder_makes_the_folder_as_the_default_one_is(tmp_path):
    result = run_cli(["--device", "cpu", "--profile", "smoke", "--workloads", "tilepack", "--backends",
                      "torch-reference", "--fixed-iters", "2", "--no-history", "--quiet",
                      "--output-json", "results/run1.json", "--output-md", "results/run1.md",
                      "--output-csv", "tables/run1.csv"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr + result.stdout
    assert (tmp_path / "results" / "run1.json").is_file() and (tmp_path / "tables" / "run1.csv").is_file()


def test_output_under_a_file(tmp_path):
    (tmp_path / "plain").write_text("x")
    result = run_cli(["--device", "cpu", "--output-md", str(tmp_path / "plain" / "r.md")],
                     cwd=tmp_path)
    assert_usage_error(result, "--output-md", "cannot make its folder")


def _read_only_folder(tmp_path):
    """A folder this user cannot write to: chmod 500 for users, /proc for root."""
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        (locked / "probe").touch()
    except PermissionError:
        return locked
    (locked / "probe").unlink()
    return Path("/proc/1")  # root ignores mode bits; procfs refuses new files to everyone


def test_output_in_read_only_folder(tmp_path):
    folder = _read_only_folder(tmp_path)
    result = run_cli(["--device", "cpu", "--output-json", str(folder / "r.json")], cwd=tmp_path)
    assert_usage_error(result, "cannot write in folder")


def test_doctor_on_the_cpu_answers_in_a_few_lines(tmp_path):
    result = run_cli(["doctor", "--device", "cpu", "--json", str(tmp_path / "facts.json")], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "perf_counter steps of" in result.stdout and "no CUDA device" in result.stdout
    assert (tmp_path / "facts.json").exists()
    assert_usage_error(run_cli(["doctor", "--device", "cuda"], cwd=tmp_path), "no CUDA device")


def test_an_internal_error_is_one_line_exit_3_with_the_traceback_in_a_file(monkeypatch, capsys):
    from apex_core.cli.main import EXIT_INTERNAL, main
    from apex_core.measure import doctor

    def broken(device):
        raise RuntimeError("a bug in apex-bench")

    monkeypatch.setattr(doctor, "device_facts", broken)
    assert main(["doctor", "--device", "cpu"]) == EXIT_INTERNAL == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "internal error: RuntimeError: a bug in apex-bench" in err[0]
    log = Path(err[0].rsplit("traceback in ", 1)[1].rstrip(")"))
    assert "Traceback" in log.read_text() and "a bug in apex-bench" in log.read_text()
    log.unlink()


@pytest.mark.parametrize("case", ["symlink_json", "symlink_log", "device_md", "same_file", "empty_json",
                                  "folder_json", "long_name"])
def test_outputs_that_would_clobber_or_cannot_be_files_are_refused(tmp_path, case):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / "link.json").symlink_to(victim)
    (tmp_path / "link.log").symlink_to(victim)
    args, fragment = {
        "symlink_json": (["--output-json", "link.json"], "symbolic link"),
        # the log sits next to the JSON by default: r.json -> r.log
        "symlink_log": (["--output-json", "link.json".replace("link", "r"), "--log-file", "link.log"],
                        "symbolic link"),
        "device_md": (["--output-md", "/dev/null"], "not a regular file"),
        "same_file": (["--output-json", "r.json", "--output-md", "r.json"], "name the same file"),
        "empty_json": (["--output-json", ""], "empty path"),
        "folder_json": (["--output-json", str(tmp_path)], "is a folder"),
        "long_name": (["--output-json", "x" * 300 + ".json"], "too long"),
    }[case]
    result = run_cli(["--device", "cpu", "--workloads", "tilepack", *args], cwd=tmp_path)
    assert_usage_error(result, fragment)
    assert victim.read_text() == "precious"
    assert Path("/dev/null").is_char_device()


def test_a_write_that_fails_mid_run_keeps_the_last_report_and_is_reported(tmp_path, monkeypatch):
    import errno

    from apex_core.report import writer as writer_module
    from apex_core.results import Report

    report = Report(suite="s", timestamp_utc="2026-11-26T00:00:00Z", environment={"device": "cpu"},
                    config={}, status="running", cells=())
    out = writer_module.ReportWriter({"markdown": tmp_path / "r.md"})
    out.write(report)
    assert out.failure == ""

    def full_disk(path, text):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(writer_module, "atomic_write_text", full_disk)
    out.write(report)
    assert "No space left on device" in out.failure and (tmp_path / "r.md").read_text().startswith("# s")


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_history_that_cannot_be_a_file_is_refused_before_any_cell_runs(tmp_path, kind):
    target = tmp_path / "hist"
    target.mkdir() if kind == "folder" else os.mkfifo(target)
    result = run_cli(["--device", "cpu", "--workloads", "tilepack", "--history", str(target),
                      "--output-json", "r.json", "--output-md", "r.md"], cwd=tmp_path, timeout=120)
    assert_usage_error(result, str(target), "directory" if kind == "folder" else "not a regular file")
    assert not (tmp_path / "r.json").exists()  # refused before any cell ran
    listing = run_cli(["history", "list", "--history", str(target)], cwd=tmp_path, timeout=60)
    assert_usage_error(listing, str(target))  # a FIFO's header is never read: no hang


def test_doctor_json_naming_a_folder_is_a_usage_error(tmp_path):
    result = run_cli(["doctor", "--device", "cpu", "--json", str(tmp_path)], cwd=tmp_path, timeout=120)
    assert_usage_error(result, "--json", "is a folder")


@pytest.mark.parametrize(("args", "hint"), [
    (["--backends", "tritn"], "unknown backend 'tritn' (did you mean 'triton'?)"),
    (["--backnds", "triton"], "unrecognized arguments: --backnds triton (did you mean '--backends'?)"),
    (["--workloads", "tileunpack:blnd"], "unknown case 'blnd' of tileunpack (did you mean 'blend'?)"),
    (["--workloads", "tilepak"], "unknown workload 'tilepak' (did you mean 'tilepack'?)"),
    (["--set", "heigth=3"], "--set heigth: unknown parameter (did you mean 'height'?)"),
    (["--backend-opt", "tritn.retune=1"], "unknown backend 'tritn' (did you mean 'triton'?)"),
])
def test_a_near_miss_is_one_line_that_says_what_was_meant(tmp_path, args, hint):
    result = run_cli(["--device", "cpu", "--no-history", *args], cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert hint in line, line


def test_no_guess_when_nothing_is_close():
    from apex_core.errors import did_you_mean

    assert did_you_mean("zzzz", ["triton", "jax"]) == ""
    assert did_you_mean("jaxx", ["triton", "jax"]) == " (did you mean 'jax'?)"
