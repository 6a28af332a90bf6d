"""``apex-bench attest``: hashes, PASS/FAIL/N/A, gates, strict exit codes and bad input."""

import hashlib
import json
import os
from pathlib import Path

import pytest

from apex_core.cli import main as cli_main
from tests.conftest import run_cli

MANIFEST = "ab" * 32


def cell(name, status):
    return {"name": name, "status": status}


def write_json(path, record):
    path.write_text(json.dumps(record))
    return path


def report(path, status="complete", cells=("ok", "skipped")):
    return write_json(path, {
        "schema_version": 1, "suite": "apex-bench", "status": status,
        "benchmarks": [cell(f"w/default/b{i}/fp32/cpu", s) for i, s in enumerate(cells)],
        "replay": {"manifest_sha256": MANIFEST},
    })


def summary(path, status="pass", failing=()):
    checks = [{"metric": "w/default/b/p50_ms", "status": "pass"}]
    checks += [{"metric": m, "status": "fail"} for m in failing]
    return write_json(path, {"suite": "apex-bench", "status": status, "checks": checks,
                             "failing_metrics": list(failing)})


def attest(tmp_path, *args):
    """Run ``apex-bench attest`` in-process; returns (exit code, JSON record, Markdown)."""
    out_json, out_md = tmp_path / "att.json", tmp_path / "att.md"
    code = cli_main.main(["attest", *map(str, args), "--output-json", str(out_json),
                          "--output-md", str(out_md)])
    if not out_json.exists():
        return code, None, None
    return code, json.loads(out_json.read_text()), out_md.read_text()


def by_path(record):
    return {a["path"]: a for a in record["artifacts"]}


def test_lists_each_artifact_with_hash_size_and_status(tmp_path):
    good = report(tmp_path / "good.json")
    gate = summary(tmp_path / "gate.json")
    plain = tmp_path / "notes.txt"
    plain.write_bytes(b"release notes\n")
    code, record, markdown = attest(tmp_path, "--report", good, "--summary", gate, "--artifact", plain)
    assert code == 0
    rows = by_path(record)
    for path in (good, gate, plain):
        row = rows[str(path)]
        assert row["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert row["size_bytes"] == path.stat().st_size and row["exists"]
    assert [rows[str(p)]["status"] for p in (good, gate, plain)] == ["PASS", "PASS", "N/A"]
    assert rows[str(good)]["manifest_sha256"] == MANIFEST
    assert record["gates"] == [{"suite": "apex-bench", "status": "pass", "source": str(gate),
                                "checks": 1, "failing_metrics": []}]
    assert record["status"] == "pass" and record["schema_version"] == 1
    assert f"| PASS | report | `{good}` |" in markdown
    assert hashlib.sha256(plain.read_bytes()).hexdigest() in markdown
    assert "| PASS | apex-bench | 1 | - |" in markdown


@pytest.mark.parametrize(("status", "cells", "why"), [
    ("complete", ("ok", "incorrect"), "1 cell(s) failed: w/default/b1/fp32/cpu (incorrect)"),
    ("complete", ("error", "crashed", "timeout"), "3 cell(s) failed"),
    ("interrupted", ("ok",), "report status is 'interrupted'"),
    ("running", (), "report status is 'running'"),
])
def test_a_report_fails_when_incomplete_or_a_cell_failed(tmp_path, status, cells, why):
    path = report(tmp_path / "r.json", status, cells)
    code, record, _ = attest(tmp_path, "--report", path)
    row = by_path(record)[str(path)]
    assert row["status"] == "FAIL" and why in row["reason"]
    assert code == 0 and record["status"] == "fail"  # not strict: recorded, not fatal


def test_failed_gate_names_its_metrics(tmp_path):
    gate = summary(tmp_path / "gate.json", "fail", failing=("tilepack/default/triton/p50_ms",))
    code, record, markdown = attest(tmp_path, "--summary", gate)
    assert code == 0
    assert by_path(record)[str(gate)]["status"] == "FAIL"
    assert record["gates"][0]["status"] == "fail"
    assert record["gates"][0]["failing_metrics"] == ["tilepack/default/triton/p50_ms"]
    assert "| FAIL | apex-bench | 2 | `tilepack/default/triton/p50_ms` |" in markdown


def test_missing_artifacts_fail_unless_optional(tmp_path):
    missing = [tmp_path / n for n in ("r.json", "s.json", "a.bin", "opt.bin")]
    code, record, _ = attest(tmp_path, "--report", missing[0], "--summary", missing[1],
                             "--artifact", missing[2], "--optional-artifact", missing[3])
    rows = by_path(record)
    assert [rows[str(p)]["status"] for p in missing] == ["FAIL", "FAIL", "FAIL", "N/A"]
    assert all(rows[str(p)]["sha256"] is None and not rows[str(p)]["exists"] for p in missing)
    assert rows[str(missing[0])]["reason"] == "missing"
    assert code == 0 and record["gates"] == []


def test_strict_exit_codes(tmp_path):
    good, passing = report(tmp_path / "good.json"), summary(tmp_path / "pass.json")
    failing = summary(tmp_path / "fail.json", "fail", failing=("m/p50_ms",))
    assert attest(tmp_path, "--strict", "--report", good, "--summary", passing)[0] == 0
    assert attest(tmp_path, "--strict", "--report", good, "--summary", failing)[0] == 1
    assert attest(tmp_path, "--strict", "--report", good, "--artifact", tmp_path / "gone")[0] == 1
    assert attest(tmp_path, "--strict", "--report", good,
                  "--optional-artifact", tmp_path / "gone")[0] == 0
    bad_run = report(tmp_path / "bad.json", cells=("incorrect",))
    assert attest(tmp_path, "--strict", "--report", bad_run)[0] == 1
    # without --strict the same failures are written down and the exit code stays 0
    assert attest(tmp_path, "--report", good, "--summary", failing)[0] == 0


@pytest.mark.parametrize(("flag", "content", "fragment"), [
    ("--report", "{not json", "malformed JSON at line 1 column 2"),
    ("--report", "[" * 100_000 + "]" * 100_000, "malformed JSON: nested too deeply"),
    ("--summary", "[" * 100_000 + "]" * 100_000, "malformed JSON: nested too deeply"),
    ("--report", "[1, 2]", "expected a JSON object, got list"),
    ("--report", '{"status": "complete"}', "field 'benchmarks' is missing or not a list"),
    ("--summary", '{"suite": "s", "status": "maybe", "checks": []}', "field 'status' is 'maybe'"),
    ("--summary", '{"suite": "s", "status": "pass"}', "field 'checks' is missing"),
])
def test_unreadable_files_are_usage_errors_naming_the_file(tmp_path, capsys, flag, content, fragment):
    path = tmp_path / "input.json"
    path.write_text(content)
    code, record, _ = attest(tmp_path, flag, path)
    assert code == 2 and record is None  # nothing half-written
    assert not (tmp_path / "att.md").exists()
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and f"{flag} {path}" in lines[0] and fragment in lines[0]


def test_usage_errors_from_the_command_line(tmp_path):
    result = run_cli(["attest", "--report", "r.json", "--output-json", "missing/a.json",
                      "--output-md", "a.md"], cwd=tmp_path)
    assert result.returncode == 2 and "--output-json missing/a.json" in result.stderr
    result = run_cli(["attest", "--output-json", "a.json", "--output-md", "a.md"], cwd=tmp_path)
    assert result.returncode == 2 and "nothing to attest" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    result = run_cli(["attest", "--help"], cwd=tmp_path)
    assert result.returncode == 0 and "--strict" in result.stdout and "exit codes" in result.stdout


@pytest.mark.parametrize("kind", ["fifo", "zero", "folder"])
@pytest.mark.parametrize("flag", ["--report", "--summary", "--artifact"])
def test_what_is_not_a_regular_file_is_one_line_exit_2_never_a_blocked_read(tmp_path, kind, flag):
    if kind == "fifo":
        target = tmp_path / "pipe.json"
        os.mkfifo(target)  # no writer: reading it would block for ever
    elif kind == "folder":
        target = tmp_path / "folder.json"
        target.mkdir()
    else:
        target = Path("/dev/zero")  # never ends
    result = run_cli(["attest", flag, str(target), "--output-json", "a.json", "--output-md", "a.md"],
                     cwd=tmp_path, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"apex-bench: error: {flag} {target}: not a regular file"
    assert not (tmp_path / "a.json").exists()


def test_a_large_artifact_is_hashed_as_it_is_read(tmp_path):
    big = tmp_path / "engine.plan"
    big.write_bytes(b"x" * (3 * 2**20 + 5))  # more than one read's chunk
    code, record, _ = attest(tmp_path, "--artifact", big)
    assert code == 0
    row = by_path(record)[str(big)]
    assert row["sha256"] == hashlib.sha256(big.read_bytes()).hexdigest()
    assert row["size_bytes"] == big.stat().st_size
