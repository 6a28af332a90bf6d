"""The clocks the harness times with, as they were when apex_core was imported.

Every timer reads these references, never ``time.perf_counter`` or ``torch.cuda.Event``
at call time: a plugin loads after apex_core (its entry point imports apex_core first),
so a backend that replaces a clock in its ``prepare`` or at import changes what it would
read, not what the harness reads. ``apex_core.measure.integrity`` reports such a replacement and
puts the original back (docs/anti-cheat.md).
"""

from __future__ import annotations

import time
import types

import torch

perf_counter = time.perf_counter
perf_counter_ns = time.perf_counter_ns
# a second clock for the wall-clock cross-check of a timing window (integrity.window_problem)
monotonic_ns = time.monotonic_ns
CudaEvent = torch.cuda.Event
elapsed_ms = torch.cuda.Event.elapsed_time


def replaced_before_import() -> str:
    """Which clock was no longer the interpreter's own when apex_core was imported ("" if none):
    code that runs before any import (a ``.pth`` file a package installed) could replace it."""
    for name, clock in (("perf_counter", perf_counter), ("perf_counter_ns", perf_counter_ns),
                        ("monotonic_ns", monotonic_ns)):
        if not isinstance(clock, types.BuiltinFunctionType) or getattr(clock, "__self__", None) is not time:
            return f"time.{name} was already replaced when apex-bench started (by {origin(clock)})"
    return ""


def origin(value: object) -> str:
    """Where a function came from, for a reason a person can act on: its module, else its file."""
    module = getattr(value, "__module__", None)
    if module:
        return f"module {module}"
    code = getattr(value, "__code__", None)
    return f"file {code.co_filename}" if code is not None else f"a {type(value).__name__}"
