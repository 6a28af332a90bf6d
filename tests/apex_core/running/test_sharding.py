"""Cells sharded over GPUs: card selection, the shared queue, and the rotation (fakes: no GPU here)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from apex_core.errors import UsageError
from apex_core.plan import PlannedCell
from apex_core.report.markdown import render_markdown
from apex_core.report.records import report_record
from apex_core.report.schema import validate_report
from apex_core.results import Case, CellResult, DeviceInfo, Report, Status
from apex_core.running import sharding
from apex_core.running.autotune import summarize_autotune
from apex_core.running.caches import CACHE_ENV, cache_root, compile_caches
from apex_core.running.devices import FAKE_GPUS_ENV, host_gpus, parse_devices, pinning_env, select_devices
from apex_core.running.sharding import MAX_START_FAILURES, CellBook, Slot, retired_reason, run_slots
from apex_core.running.workers import WorkerStartError

H100 = "NVIDIA H100 80GB HBM3"
CARDS = (DeviceInfo(0, H100, "GPU-aaa"), DeviceInfo(1, H100, "GPU-bbb"),
         DeviceInfo(2, "NVIDIA A100", "GPU-ccc"))


def test_devices_parse_all_or_distinct_indices():
    assert parse_devices("all") is None
    assert parse_devices(" 1, 0 ") == (1, 0)
    for bad in ("", "0,,1", "x", "-1", "0,0"):
        with pytest.raises(UsageError, match="--devices"):
            parse_devices(bad)


def test_a_card_that_does_not_exist_is_refused_naming_the_valid_ones():
    with pytest.raises(UsageError, match=r"no GPU 7 on this host; valid: all, 0, 1, 2"):
        select_devices((0, 7), CARDS)
    with pytest.raises(UsageError, match="no GPU found"):
        select_devices(None, ())


def test_cards_of_different_models_are_refused():
    assert select_devices((1, 0), CARDS) == (CARDS[1], CARDS[0])
    with pytest.raises(UsageError, match="different models"):
        select_devices(None, CARDS)


def test_a_worker_is_pinned_by_uuid_in_pci_bus_order():
    assert pinning_env(CARDS[1]) == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "GPU-bbb"}


def test_the_fake_card_list_replaces_the_hosts(monkeypatch):
    monkeypatch.setenv(FAKE_GPUS_ENV, "Fake X|GPU-x0;Fake X|GPU-x1")
    assert host_gpus() == (DeviceInfo(0, "Fake X", "GPU-x0"), DeviceInfo(1, "Fake X", "GPU-x1"))


def _cells(n: int) -> list[PlannedCell]:
    return [PlannedCell(Case("w", f"c{i}", None), "b", "fp32", "cpu") for i in range(n)]


def _ok(cell: PlannedCell) -> CellResult:
    return CellResult(cell.case.workload, cell.case.name, cell.backend, cell.dtype, cell.device, Status.OK)


def test_two_slots_share_one_queue_never_overlap_on_a_card_and_keep_plan_order():
    book = CellBook(_cells(12))
    states = [Slot(card) for card in CARDS[:2]]
    busy: dict[int, int] = {0: 0, 1: 0}
    overlapped = threading.Event()
    lock = threading.Lock()
    concurrent = []

    def run_cell(state, cell):
        index = state.device.index
        with lock:
            busy[index] += 1
            if busy[index] > 1:
                overlapped.set()
            concurrent.append(sum(busy.values()))
        time.sleep(0.05)
        with lock:
            busy[index] -= 1
        return _ok(cell)

    run_slots(states, book, run_cell)
    results = book.results()
    assert [r.case for r in results] == [f"c{i}" for i in range(12)]  # plan order, whoever ran them
    assert not overlapped.is_set()
    assert max(concurrent) == 2  # the two cards did run at once
    assert {r.device_info.index for r in results} == {0, 1}
    assert sum(state.cells for state in states) == 12 and all(state.cells for state in states)
    assert all(r.wait_time_s is not None and r.wait_time_s >= 0 for r in results)


def test_a_free_slot_takes_a_ready_cell_before_one_still_being_built_and_results_keep_plan_order():
    book = CellBook(_cells(4))
    building = {0, 2}  # cells a builder has still to finish
    book.defer = lambda index: index in building
    ran = []

    def run_cell(state, cell):
        ran.append(cell.case.name)
        building.discard(3 - len(ran))  # builds finish as the run goes on: cell 2 after the first cell
        return _ok(cell)

    run_slots([Slot(CARDS[0])], book, run_cell)
    # c1 was ready; then c2's build was done; c0 (still deferred) and c3 follow in plan order
    assert ran == ["c1", "c2", "c3", "c0"]
    assert [r.case for r in book.results()] == ["c0", "c1", "c2", "c3"]


def test_when_every_queued_cell_is_still_being_built_the_first_is_taken():
    book = CellBook(_cells(3))
    book.defer = lambda index: True
    assert [book.take(), book.take(), book.take(), book.take()] == [0, 1, 2, None]


def test_a_card_whose_worker_keeps_failing_to_start_leaves_the_rotation_and_its_cells_move_on():
    book = CellBook(_cells(6))
    good, bad = (Slot(card) for card in CARDS[:2])

    def run_cell(state, cell):
        if state is bad:
            raise WorkerStartError("the GPU failed the worker's self-test: CUDA error: ECC")
        time.sleep(0.01)
        return _ok(cell)

    run_slots([good, bad], book, run_cell)
    assert len(book.results()) == 6 and all(r.device_info == CARDS[0] for r in book.results())
    assert bad.start_failures == MAX_START_FAILURES
    assert bad.retired.startswith(f"taken out of the rotation after {MAX_START_FAILURES} failed worker starts")
    assert "ECC" in bad.retired and good.retired == ""
    assert bad.use().cells == 0 and good.use().cells == 6


def test_one_good_start_resets_the_count():
    state = Slot(CARDS[0])
    assert not state.start_failed(WorkerStartError("x"))
    state.start_failures = 0  # what serve() does after a cell ran
    assert not state.start_failed(WorkerStartError("y"))
    assert state.retired == ""


def test_when_every_card_is_out_the_cells_left_say_why():
    book = CellBook(_cells(3))
    states = [Slot(card) for card in CARDS[:2]]

    def run_cell(state, cell):
        raise WorkerStartError(f"no start on {state.label}")

    run_slots(states, book, run_cell)
    assert book.results() == () and len(book.drain()) == 3
    reason = retired_reason(states)
    assert reason.startswith("not run: every GPU of the run was taken out of the rotation")
    assert "cuda:0" in reason and "cuda:1" in reason and "no start on cuda:1" in reason


def test_an_interruption_stops_every_slot_and_keeps_what_finished():
    book = CellBook(_cells(8))
    states = [Slot(card) for card in CARDS[:2]]
    calls = []

    def run_cell(state, cell):
        calls.append(cell)
        if len(calls) == 3:
            book.stopping.set()  # what Ctrl-C does (run_slots' stop)
        time.sleep(0.02)
        return _ok(cell)

    run_slots(states, book, run_cell)
    assert len(book.results()) <= 2 and len(calls) <= 4


class _KillablePool:
    """What a slot's thread drives: killed by the run's stop, let go by its thread once discarded."""

    def __init__(self) -> None:
        self.killed = threading.Event()
        self.let_go = threading.Event()

    def kill(self, for_good: bool = False) -> None:
        self.killed.set()


def test_a_ctrl_c_while_the_run_waits_for_its_slots_waits_until_each_has_let_go_of_its_worker(monkeypatch):
    # Thread.join, interrupted by the Ctrl-C, marked a running slot's thread ended (Python 3.11):
    # the run went on to close the workers while the slots still discarded theirs
    seen_at_stop: list[list[bool]] = []
    kill_and_join = sharding.kill_and_join

    def watched(pools, threads, **kwargs):
        seen_at_stop.append([thread.is_alive() for thread in threads])
        kill_and_join(pools, threads, **kwargs)

    monkeypatch.setattr(sharding, "kill_and_join", watched)
    book = CellBook(_cells(4))
    slots = [Slot(card, pool=_KillablePool()) for card in CARDS[:2]]
    started = threading.Semaphore(0)

    def run_cell(slot, cell):
        started.release()
        assert slot.pool.killed.wait(30)
        time.sleep(0.3)  # discarding the dead worker: reaping it, closing its pipe
        slot.pool.let_go.set()
        return _ok(cell)

    def interrupt_once_both_run():
        for _ in slots:
            started.acquire(timeout=30)
        time.sleep(0.2)  # the main thread is back in its wait for the slots
        os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt_once_both_run, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            run_slots(slots, book, run_cell)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert seen_at_stop == [[True, True]]  # both were still discarding their workers
    assert [slot.pool.let_go.is_set() for slot in slots] == [True, True]
    assert book.results() == ()  # nothing finished before the interruption


def test_the_report_names_each_cells_card_and_the_retired_ones():
    from apex_core.results import DeviceUse

    cell = CellResult("w", "c", "b", "fp16", "cuda", Status.ERROR, reason="boom", device_info=CARDS[1],
                      wait_time_s=1.5, build_time_s=2.0)
    report = Report("apex-bench", "2026-11-27T00:00:00Z", {"device": "cuda", "cpu": "x", "python": "3",
                                                             "torch": "2", "gpu": H100,
                                                             "git": {"commit": None, "dirty": None}},
                    {"backends": ["b"], "workloads": ["w"], "device": "cuda", "dtypes": ["fp16"],
                     "profile": "fixed", "seed": 0, "timing": {}}, "complete", (cell,),
                    triton_autotune=summarize_autotune(()),
                    devices=(DeviceUse(CARDS[0], 0, "taken out of the rotation after 2 failed worker starts"),
                             DeviceUse(CARDS[1], 1)))
    record = report_record(report)
    validate_report(record)
    row = record["benchmarks"][0]
    assert (row["device_index"], row["device_name"], row["device_uuid"], row["wait_time_s"]) == \
        (1, H100, "GPU-bbb", 1.5)
    assert record["devices"][0] == {"index": 0, "name": H100, "uuid": "GPU-aaa", "host": "", "cells": 0,
                                    "retired": "taken out of the rotation after 2 failed worker starts"}
    text = render_markdown(report)
    assert "error [1] @cuda:1" in text
    assert f"- cuda:0: {H100} (GPU-aaa), 0 cells; taken out of the rotation" in text
    assert "the last cell started 1.5 s into the run" in text


def test_caches_live_in_one_documented_folder_and_fresh_is_new_and_removed(tmp_path, monkeypatch):
    assert cache_root({CACHE_ENV: str(tmp_path / "c")}) == tmp_path / "c"
    assert cache_root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "apex-bench"
    assert cache_root({"HOME": str(tmp_path)}) == tmp_path / ".cache" / "apex-bench"
    kept = compile_caches(environ={CACHE_ENV: str(tmp_path / "c")})
    assert kept.env == {"TRITON_CACHE_DIR": str(tmp_path / "c" / "triton"),
                        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "c" / "inductor")}
    assert (tmp_path / "c").is_dir() and not kept.fresh
    mine = compile_caches(environ={CACHE_ENV: str(tmp_path / "c"), "TRITON_CACHE_DIR": "/mine"})
    assert "TRITON_CACHE_DIR" not in mine.env  # the user's own setting is inherited unchanged
    fresh = compile_caches(fresh=True, environ={"TRITON_CACHE_DIR": "/mine"})
    assert fresh.fresh and fresh.env["TRITON_CACHE_DIR"].startswith(fresh.root)
    assert Path(fresh.root).is_dir() and not any(Path(fresh.root).iterdir())
    fresh.cleanup()
    assert not Path(fresh.root).exists()
    kept.cleanup()
    assert (tmp_path / "c").is_dir()  # persistent caches stay


def test_an_unwritable_cache_folder_named_by_the_user_is_a_usage_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UsageError, match=f"{CACHE_ENV}="):
        compile_caches(environ={CACHE_ENV: str(blocker / "sub")})


def test_each_slot_gets_ready_once_before_its_first_cell():
    book = CellBook(_cells(4))
    states = [Slot(card) for card in CARDS[:2]]
    events = []
    lock = threading.Lock()

    def before_first(state):
        with lock:
            events.append(("ready", state.device.index))

    def run_cell(state, cell):
        with lock:
            events.append(("cell", state.device.index))
        time.sleep(0.01)
        return _ok(cell)

    book.before_first = before_first
    run_slots(states, book, run_cell)
    for card in (0, 1):
        mine = [kind for kind, index in events if index == card]
        assert mine[0] == "ready" and mine.count("ready") == 1
    assert len(book.results()) == 4
