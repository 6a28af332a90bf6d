"""The ``apex_bench`` pytest fixture and its options (the ``pytest11`` entry point; docs/pytest.md).

``apex_bench(fn, *args, reference=None, atol=None, rtol=None, **kwargs)`` times ``fn(*args, **kwargs)``
as the CLI times a cell, checks it against ``reference`` before and after timing, fails the test
when it is wrong (or, with ``--apex-bench-compare``, slower than the baseline) and returns fn's
output. Under pytest-xdist each worker sends its cells to the controller, which writes the one
report; a lock per device keeps two workers from timing on one device at once.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from apex_core.errors import ApexBenchError
from apex_core.files import prepare_output
from apex_core.history.store import check_history_path
from apex_core.pytest_plugin.call_cell import function_name
from apex_core.pytest_plugin.gate import CellGate
from apex_core.pytest_plugin.session import CallSite, Session
from apex_core.timing import TimingOptions

SESSION = pytest.StashKey[Session]()
WORKER_OUTPUT = "apex_bench_cells"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("apex-bench", "apex-bench: time and check kernels with the apex_bench fixture")
    group.addoption("--apex-bench-json", metavar="PATH", type=Path,
                    help="write one report of every timed call, in apex-bench's JSON schema")
    group.addoption("--apex-bench-history", metavar="PATH", type=Path,
                    help="record the test run in this apex-bench history file")
    group.addoption("--apex-bench-compare", metavar="BASELINE", type=Path,
                    help="fail each test whose call is slower than in BASELINE (a baseline file, or "
                         "the --apex-bench-json report of an earlier run)")
    group.addoption("--apex-bench-force", action="store_true",
                    help="compare with a baseline taken where it does not apply (another CPU or GPU model)")
    group.addoption("--apex-bench-disable", action="store_true",
                    help="call each function once and check it, without timing")
    defaults = TimingOptions()
    group.addoption("--apex-bench-min-time", metavar="SECONDS", type=float, default=defaults.min_time_s,
                    help=f"least seconds of samples per call ({defaults.min_time_s})")
    group.addoption("--apex-bench-max-time", metavar="SECONDS", type=float, default=defaults.max_time_s,
                    help=f"most seconds of samples per call ({defaults.max_time_s})")


def pytest_configure(config: pytest.Config) -> None:
    option = config.option
    try:
        timing = TimingOptions(min_time_s=option.apex_bench_min_time, max_time_s=option.apex_bench_max_time)
    except ValueError as exc:
        raise pytest.UsageError(f"--apex-bench-min-time/--apex-bench-max-time: {exc}") from None
    try:  # a path that cannot take the report is refused before any test runs
        if option.apex_bench_json is not None and not hasattr(config, "workerinput"):
            prepare_output(option.apex_bench_json, "--apex-bench-json")
        if option.apex_bench_history is not None:
            check_history_path(option.apex_bench_history)
    except ApexBenchError as exc:
        raise pytest.UsageError(str(exc)) from None
    gate = CellGate(option.apex_bench_compare, option.apex_bench_force) if option.apex_bench_compare else None
    config.stash[SESSION] = Session(timing=timing, disabled=option.apex_bench_disable, gate=gate)


@pytest.fixture
def apex_bench(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """Time and check ``fn(*args, **kwargs)``; returns fn's output (docs/pytest.md)."""
    session = request.config.stash[SESSION]
    calls: dict[str, int] = {}

    def bench(fn: Callable[..., Any], *args: Any, reference: Callable[..., Any] | None = None,
              atol: float | None = None, rtol: float | None = None, **kwargs: Any) -> Any:
        name = function_name(fn)
        __tracebackhide__ = True  # a failure shows the test's frames and fn's, not the harness's
        calls[name] = calls.get(name, 0) + 1
        site = CallSite(request.node.nodeid, name, calls[name], reference, atol, rtol)
        output, failures = session.measure(site, fn, args, kwargs)
        if failures:
            pytest.fail("\n".join(failures), pytrace=False)
        return output

    yield bench


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = config.stash.get(SESSION, None)
    if state is None:
        return
    if hasattr(config, "workeroutput"):  # an xdist worker: the controller writes the report
        config.workeroutput[WORKER_OUTPUT] = pickle.dumps((state.environment, state.cells))
        return
    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
    state.finish(config.option.apex_bench_json, config.option.apex_bench_history, interrupted)
    if state.failed_writes and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist: a worker finished; its cells join the controller's report."""
    sent = getattr(node, "workeroutput", {}).get(WORKER_OUTPUT)
    if sent is not None:
        environment, cells = pickle.loads(sent)
        node.config.stash[SESSION].add(environment, cells)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(SESSION, None)
    if state is None or hasattr(config, "workerinput"):
        return
    lines = state.summary_lines()
    if lines:
        terminalreporter.write_sep("-", "apex-bench")
        for line in lines:
            terminalreporter.write_line(line)

