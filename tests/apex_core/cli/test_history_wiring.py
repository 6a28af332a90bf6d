"""A run records itself in the history; compare --against builds its baseline from the history."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli

SMALL = ["--device", "cpu", "--profile", "smoke", "--backends", "torch-reference", "--workloads", "tilepack"]


def _run(tmp_path, name, *extra):
    return run_cli([*SMALL, "--output-json", f"{name}.json", "--output-md", f"{name}.md", *extra], cwd=tmp_path)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    where = tmp_path_factory.mktemp("history-runs")
    for name, tag in (("r1", "before"), ("r2", "after")):
        done = _run(where, name, "--history", "h.sqlite", "--tag", tag)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"tagged {tag}" in done.stdout
    return where


def test_runs_are_recorded_with_their_tags(two_runs):
    listed = run_cli(["history", "--history", "h.sqlite"], cwd=two_runs)
    assert listed.returncode == 0, listed.stderr
    rows = [line for line in listed.stdout.splitlines() if line.strip().endswith(("before", "after"))]
    assert len(rows) == 2


@pytest.mark.parametrize("spec", ["latest", "before"])
def test_compare_against_the_history_needs_no_baseline_file(two_runs, spec):
    done = run_cli(["compare", "--current", "r2.json", "--against", spec, "--history", "h.sqlite",
                    "--summary", f"s-{spec}.json"], cwd=two_runs)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((two_runs / f"s-{spec}.json").read_text())
    # latest is the newest run other than the current one: r1, tagged before
    assert summary["status"] == "pass" and "run 1 of " in summary["baseline"]
    assert summary["checks"] and all(c["metric"].startswith("tilepack/") for c in summary["checks"])
    # the terminal says which run the verdict is about: its number, time and tags
    (said,) = [line for line in done.stdout.splitlines() if line.startswith("apex-bench compare: against ")]
    assert "run 1 of 20" in said and " tagged before" in said


def test_against_naming_nothing_lists_the_nearest(two_runs):
    done = run_cli(["compare", "--current", "r2.json", "--against", "befor", "--history", "h.sqlite"],
                   cwd=two_runs)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "nearest tags: before" in done.stderr


def test_against_only_the_current_run_is_refused(tmp_path):
    assert _run(tmp_path, "only", "--history", "h.sqlite").returncode == 0
    done = run_cli(["compare", "--current", "only.json", "--against", "latest", "--history", "h.sqlite"],
                   cwd=tmp_path)
    assert done.returncode == 2 and "other than the current one" in done.stderr


def test_no_history_writes_no_file_and_a_bad_one_keeps_the_report(tmp_path):
    assert _run(tmp_path, "quiet", "--no-history", "--history", "none.sqlite").returncode == 0
    assert not (tmp_path / "none.sqlite").exists()
    (tmp_path / "bad.sqlite").write_text("not a database\n")
    done = _run(tmp_path, "kept", "--history", "bad.sqlite")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("apex-bench: error")]
    assert len(errors) == 1 and "bad.sqlite: is not an SQLite database" in errors[0]
    assert json.loads((tmp_path / "kept.json").read_text())["status"] == "complete"


@pytest.mark.parametrize(("args", "fragment"), [
    (["compare", "--current", "x.json", "--baseline", "b.json", "--history", "h.sqlite"], "--history needs"),
    (["compare", "--current", "x.json", "--baseline", "b.json", "--against", "latest"], "not allowed with"),
    ([*SMALL, "--tag", ""], "--tag"),
])
def test_bad_history_arguments_are_usage_errors(tmp_path, args, fragment):
    done = run_cli(args, cwd=tmp_path)
    assert done.returncode == 2 and fragment in done.stderr and len(done.stderr.strip().splitlines()) == 1
