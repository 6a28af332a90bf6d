"""Backends that behave well and badly, so the tests can show how each lands in a report."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time

from apex_core.interfaces import Backend, Prepared
from apex_core.results import Availability


def _delay() -> float:
    return float(os.environ.get("APEX_TESTPLUGIN_DELAY_S", "0"))


class WorkingBackend(Backend):
    """The workload's reference, plus an optional fixed delay per call (to plant a slowdown)."""

    name = "test-working"
    description = "third-party backend that works"

    def probe(self, device):
        return Availability.yes()

    def prepare(self, workload, case, inputs):
        delay = _delay()

        def run():
            if delay:
                time.sleep(delay)
            return workload.reference(case, inputs)

        return Prepared(run, metadata={"delay_s": delay})


class UnavailableBackend(Backend):
    """A backend whose stack is missing."""

    name = "test-unavailable"
    description = "third-party backend whose probe says no"

    def probe(self, device):
        return Availability.no("libexample.so not found (set EXAMPLE_HOME)")

    def prepare(self, workload, case, inputs):
        raise AssertionError("never prepared: the probe said unavailable")


class RaisingBackend(WorkingBackend):
    """Prepares fine, then raises inside the timed call."""

    name = "test-raises"
    description = "third-party backend that raises when called"

    def prepare(self, workload, case, inputs):
        def run():
            raise ValueError("kernel launch failed: invalid configuration")

        return Prepared(run)


class WrongBackend(WorkingBackend):
    """Returns an answer that is off by one."""

    name = "test-wrong"
    description = "third-party backend with a wrong answer"

    def prepare(self, workload, case, inputs):
        def run():
            return {k: v + 1 for k, v in workload.reference(case, inputs).items()}

        return Prepared(run)


class CrashingBackend(WorkingBackend):
    """Kills its own process with a segmentation fault while preparing."""

    name = "test-crash"
    description = "third-party backend that segfaults"

    def prepare(self, workload, case, inputs):
        ctypes.string_at(0)  # reads address 0: SIGSEGV
        raise AssertionError("unreachable")


class HangingBackend(WorkingBackend):
    """Never returns from the timed call."""

    name = "test-hang"
    description = "third-party backend that hangs"

    def prepare(self, workload, case, inputs):
        def run():
            while True:
                time.sleep(1)

        return Prepared(run)


class SkipsWorkBackend(WorkingBackend):
    """Cheats: recomputes only when an input changed in place, so timed calls do no work.

    The correctness checks refresh the inputs in place (their version counters move), so
    it passes them; between checks it hands back the cached answer. The report's
    faster-than-physics flag is what catches it.
    """

    name = "test-skips-work"
    description = "third-party backend that skips the work while it is timed"

    def prepare(self, workload, case, inputs):
        cache = {}

        def run():
            versions = tuple(t._version for t in inputs.values())
            if cache.get("versions") != versions:
                cache["versions"] = versions
                cache["outputs"] = {k: v.clone() for k, v in workload.reference(case, inputs).items()}
            return cache["outputs"]

        return Prepared(run)


class SyncingBackend(WorkingBackend):
    """Synchronizes the host with the GPU inside every call, as a careless wrapper does."""

    name = "test-syncs"
    description = "third-party backend that synchronizes the device inside the timed call"

    def prepare(self, workload, case, inputs):
        import torch

        def run():
            outputs = workload.reference(case, inputs)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            return outputs

        return Prepared(run)


# The probe faults below are opt-in, so listings and bare runs of other tests stay fast:
# without this variable the two backends say they are unavailable. "1" turns both on, a
# comma list names those to turn on ("hangs": an inline listing, which a segfault would end).
PROBE_FAULTS = "APEX_TESTPLUGIN_PROBE_FAULTS"


def _probe_faults_on(fault: str) -> bool:
    value = os.environ.get(PROBE_FAULTS, "")
    return value == "1" or fault in value.split(",")


class ProbeSegfaultBackend(WorkingBackend):
    """Kills its process with a segmentation fault in probe() (with APEX_TESTPLUGIN_PROBE_FAULTS=1)."""

    name = "test-probe-segfault"
    description = "third-party backend whose probe segfaults"

    def probe(self, device):
        if not _probe_faults_on("segfault"):
            return Availability.no(f"misbehaves only with {PROBE_FAULTS}=1")
        ctypes.string_at(0)  # reads address 0: SIGSEGV
        raise AssertionError("unreachable")


class ProbeHangsBackend(WorkingBackend):
    """Never returns from probe() (with APEX_TESTPLUGIN_PROBE_FAULTS=1)."""

    name = "test-probe-hangs"
    description = "third-party backend whose probe hangs"

    def probe(self, device):
        if not _probe_faults_on("hangs"):
            return Availability.no(f"misbehaves only with {PROBE_FAULTS}=1")
        while True:
            time.sleep(1)


def _start_helper(backend):
    """A helper process, as a backend that drives a server or a compiler daemon would start;
    its pid goes to stderr, where the worker's output keeps it."""
    helper = subprocess.Popen(["sleep", "1000"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    print(f"{backend}: started helper {helper.pid}", file=sys.stderr, flush=True)
    return helper


class SpawnsHelperBackend(WorkingBackend):
    """Starts a helper process while preparing, then hangs in the timed call."""

    name = "test-spawns-helper"
    description = "third-party backend that starts a helper process and then hangs"

    def prepare(self, workload, case, inputs):
        _start_helper(self.name)

        def run():
            while True:
                time.sleep(1)

        return Prepared(run)


class SpawnsHelperCrashBackend(WorkingBackend):
    """Starts a helper process while preparing, then segfaults."""

    name = "test-spawns-helper-crash"
    description = "third-party backend that starts a helper process and then segfaults"

    def prepare(self, workload, case, inputs):
        _start_helper(self.name)
        ctypes.string_at(0)  # reads address 0: SIGSEGV
        raise AssertionError("unreachable")


class WarmHelperBackend(WorkingBackend):
    """Works when run; its cache-warming hook starts a helper process and then never returns."""

    name = "test-warm-helper"
    description = "third-party backend whose warm_caches hook starts a helper process and then hangs"

    def warm_caches(self, workload, case, inputs):
        _start_helper(self.name)
        while True:
            time.sleep(1)


WARM_MARKS_ENV = "APEX_TESTPLUGIN_WARM_MARKS"


class WarmMarkBackend(WorkingBackend):
    """Works when run; its cache-warming hook writes a mark that its ``prepare`` reads back.

    The marks go to the folder ``$APEX_TESTPLUGIN_WARM_MARKS`` names (one per case and dtype,
    holding the pid that wrote it), so a test sees which process built a cell before its
    measuring worker prepared it.
    """

    name = "test-warm-mark"
    description = "third-party backend whose warm_caches hook leaves a mark that prepare reads back"

    @staticmethod
    def _mark(case, inputs):
        folder = os.environ.get(WARM_MARKS_ENV)
        dtype = next(iter(inputs.values())).dtype
        return os.path.join(folder, f"{case.workload}-{case.name}-{dtype}") if folder else None

    def warm_caches(self, workload, case, inputs):
        mark = self._mark(case, inputs)
        if mark is None:
            return f"no {WARM_MARKS_ENV} folder to write the mark to"
        with open(mark, "w") as handle:
            handle.write(str(os.getpid()))
        return None

    def prepare(self, workload, case, inputs):
        prepared = super().prepare(workload, case, inputs)
        mark = self._mark(case, inputs)
        warmed_by = None
        if mark is not None and os.path.exists(mark):
            with open(mark) as handle:
                warmed_by = int(handle.read())
        prepared.metadata["warmed_by"] = warmed_by
        prepared.metadata["worker"] = os.getpid()
        return prepared
