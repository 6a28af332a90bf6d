"""``--lock-clocks`` on the command line (and ``lock_clocks`` of the library): usage errors, the note
where the driver refuses, the report's record, and the reset when the run ends or is stopped (a fake
NVML and fake cards: no GPU here)."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from apex_core import api
from apex_core.cli import run_command
from apex_core.cli.main import main
from apex_core.cli.signals import Terminated, handle_stop_signals
from apex_core.errors import UsageError
from apex_core.measure.clock_lock import locked_clocks
from apex_core.results import Report
from apex_core.running.devices import FAKE_GPUS_ENV
from tests.apex_core.cli.cli_helpers import one_line_error
from tests.apex_core.measure.clock_nvml import NO_PERMISSION, TDP, TOP_SM_MHZ, install_clock_nvml
from tests.conftest import run_cli

SMOKE = ["--profile", "smoke", "--backends", "torch-reference", "--workloads", "tilepack", "--no-history",
         "--warmup", "1", "--min-time", "0.02", "--max-time", "0.2"]


def outputs(tmp_path):
    return ["--output-json", str(tmp_path / "r.json"), "--output-md", str(tmp_path / "r.md")]


def fake_card_run(tmp_path, monkeypatch, *extra):
    """A CPU run sharded over one fake card (APEX_BENCH_FAKE_GPUS), with --lock-clocks base."""
    monkeypatch.setenv(FAKE_GPUS_ENV, "Fake GPU|GPU-fake-0")
    monkeypatch.chdir(tmp_path)
    return main(["--device", "cpu", "--devices", "0", "--lock-clocks", "base", *SMOKE, *outputs(tmp_path),
                 *extra])


def test_a_value_other_than_base_max_or_mhz_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--lock-clocks", "fast"])
    assert done.value.code == 2
    assert "argument --lock-clocks: expected base, max or a whole number of MHz, got 'fast'" in \
        one_line_error(capsys)


@pytest.mark.parametrize(("extra", "message"), [
    ([], "--lock-clocks locks GPU clocks: it needs --device cuda (got --device cpu)"),
    (["--executor", "ray"], "--lock-clocks and --executor ray exclude each other"),
])
def test_where_no_clock_can_be_locked_it_is_a_usage_error(tmp_path, capsys, extra, message):
    code = main(["--device", "cpu", "--lock-clocks", "base", *SMOKE, *outputs(tmp_path), *extra])
    assert code == 2
    assert message in one_line_error(capsys)
    assert not (tmp_path / "r.json").exists()


def test_sigterm_under_the_cli_handler_resets_the_clocks(monkeypatch, restored_handlers):
    nvml = install_clock_nvml(monkeypatch)
    handle_stop_signals()
    with pytest.raises(Terminated), locked_clocks("base"):
        assert nvml.sm == {"GPU-0": (TDP, TDP)}
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)  # the handler raises at the next bytecode
    assert nvml.sm == nvml.mem == {}


def test_a_stopped_run_resets_the_clocks_and_its_report_says_they_were_locked(
        tmp_path, monkeypatch, capsys, restored_handlers):
    nvml = install_clock_nvml(monkeypatch)
    during = []

    def stopped_run(*args, **kwargs):
        during.append(dict(nvml.sm))
        raise Terminated

    monkeypatch.setattr(run_command, "run_plan", stopped_run)
    assert fake_card_run(tmp_path, monkeypatch) == 143
    assert during == [{"GPU-fake-0": (TDP, TDP)}] and nvml.sm == nvml.mem == {}
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["status"] == "interrupted"
    lock = record["environment"]["clock_lock"]
    assert lock["requested"] == "base" and lock["locked"] is True
    assert [card["uuid"] for card in lock["cards"]] == ["GPU-fake-0"]
    assert "clocks not locked" not in capsys.readouterr().err


@pytest.mark.parametrize("quiet", [False, True])
def test_without_permission_one_line_says_why_and_the_run_goes_on(tmp_path, monkeypatch, capsys,
                                                                   restored_handlers, quiet):
    nvml = install_clock_nvml(monkeypatch, refuse={"GPU-fake-0": NO_PERMISSION})
    assert fake_card_run(tmp_path, monkeypatch, *(["--quiet"] if quiet else [])) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "clocks not locked" in line]
    if quiet:  # the report says it; the terminal keeps to the summary line
        assert notes == []
    else:
        assert notes == ["apex-bench: clocks not locked: GPU-fake-0: changing GPU clocks needs root "
                         "(NVMLError: Insufficient Permissions); the run goes on at the driver's clocks"]
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["status"] == "complete" and record["benchmarks"][0]["status"] == "ok"
    lock = record["environment"]["clock_lock"]
    assert lock["locked"] is False and lock["cards"] == [] and "needs root" in lock["why_not"]
    assert nvml.sm == {} and nvml.started == 0


@pytest.mark.slow
def test_in_a_process_of_its_own_a_refused_lock_is_a_note_not_a_traceback(tmp_path):
    # no monkeypatching: whatever this host lacks (nvidia-ml-py, a driver, the fake card) is the reason
    result = run_cli(["--device", "cpu", "--devices", "0", "--lock-clocks", "max", *SMOKE, *outputs(tmp_path)],
                     cwd=tmp_path, env={FAKE_GPUS_ENV: "Fake GPU|GPU-fake-0"}, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    notes = [line for line in result.stderr.splitlines() if line.startswith("apex-bench: clocks not locked: ")]
    assert len(notes) == 1 and notes[0].endswith("the run goes on at the driver's clocks")
    lock = json.loads((tmp_path / "r.json").read_text())["environment"]["clock_lock"]
    assert lock["requested"] == "max" and lock["locked"] is False and lock["why_not"]


def test_the_library_locks_around_its_run_and_records_the_verdict(monkeypatch):
    nvml = install_clock_nvml(monkeypatch)
    during = []

    def run_plan(plan, registry, **kwargs):
        during.append(dict(nvml.sm))
        return Report(suite="apex-bench", timestamp_utc="t", environment={"device": "cuda"}, config={},
                      status="complete", cells=())

    monkeypatch.setattr(api, "check_device", lambda device: None)  # no CUDA here; the plan is never run
    monkeypatch.setattr(api, "run_plan", run_plan)
    report = api.run(["tilepack"], ["torch-reference"], device="cuda", profile="smoke", lock_clocks="max")
    assert during == [{"GPU-0": (TOP_SM_MHZ, TOP_SM_MHZ)}] and nvml.sm == {}
    assert report.environment["device"] == "cuda"
    assert report.environment["clock_lock"]["locked"] is True


@pytest.mark.parametrize(("device", "value", "message"), [
    ("cpu", "base", "lock_clocks locks GPU clocks: it needs device='cuda' (got 'cpu')"),
    ("cuda", "fast", "lock_clocks: expected base, max or a whole number of MHz, got 'fast'"),
])
def test_the_librarys_bad_lock_clocks_is_a_usage_error(monkeypatch, device, value, message):
    monkeypatch.setattr(api, "check_device", lambda device: None)
    with pytest.raises(UsageError) as raised:
        api.run(["tilepack"], ["torch-reference"], device=device, profile="smoke", lock_clocks=value)
    assert str(raised.value) == message
