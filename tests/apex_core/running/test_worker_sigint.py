"""A Ctrl-C that reaches a worker still starting up: blocked until it has its own group, then dropped.

A terminal's Ctrl-C goes to its whole foreground group, the run's workers included until
each calls setsid(); before this, one caught mid-start died with a KeyboardInterrupt
traceback on the run's stderr (test_parallel_build's interrupt test saw it now and then).
"""

import multiprocessing
import os
import signal

from apex_core.running.worker_process import take_back_sigint
from apex_core.running.workers import start_shielded


def _report_mask_then_take_a_ctrl_c(conn):
    blocked_at_start = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C arriving while the worker starts: pending, not delivered
    try:
        take_back_sigint()
        dropped = True
    except KeyboardInterrupt:
        dropped = False
    unblocked = signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    handler_kept = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    conn.send((blocked_at_start, dropped, unblocked, handler_kept))


def test_a_worker_starts_with_sigint_blocked_and_drops_the_one_that_came_meanwhile():
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=_report_mask_then_take_a_ctrl_c, args=(child,), daemon=True)
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    # a suite started in the background by a script inherits SIGINT ignored, and so would the child
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        start_shielded(process)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before  # the starting thread's mask is back
    assert parent.poll(60), "the child reported nothing"
    assert parent.recv() == (True, True, True, True)
    process.join(30)
    assert process.exitcode == 0
