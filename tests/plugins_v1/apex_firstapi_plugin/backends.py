"""Backends in the first API's terms: ``probe``, ``supports``, ``prepare`` returning ``Prepared``
built positionally (fn, outputs, metadata, timing_note, timing_method)."""

from __future__ import annotations

import torch

from apex_core.interfaces import Backend, Prepared
from apex_core.results import Availability, Support


class EagerBackend(Backend):
    """The workload's reference, called eagerly."""

    name = "v1-eager"
    description = "eager reference (first API)"

    def probe(self, device):
        return Availability.yes()

    def prepare(self, workload, case, inputs):
        return Prepared(lambda: workload.reference(case, inputs), None, {"api": "1.0"}, "", None)


class BufferedBackend(Backend):
    """Writes into an output buffer allocated once, and says so through ``outputs``."""

    name = "v1-buffered"
    description = "writes into a preallocated buffer (first API)"

    def probe(self, device):
        return Availability.yes()

    def prepare(self, workload, case, inputs):
        first = workload.reference(case, inputs)["y"]
        out = torch.empty_like(first)

        def run():
            torch.mul(inputs["a"] - inputs["b"], inputs["w"], out=out)
            out.add_(inputs["b"])
            if case.name == "square":
                out.mul_(out)
            return {"y": out}

        return Prepared(run, {"y": out}, {"buffered": True}, "writes in place")


class UnavailableBackend(EagerBackend):
    name = "v1-unavailable"
    description = "its stack is missing (first API)"

    def probe(self, device):
        return Availability.no("libv1 is not installed: pip install v1-runtime")


class PickyBackend(EagerBackend):
    name = "v1-picky"
    description = "implements the default case only (first API)"

    def supports(self, workload, case, dtype_name):
        if case.name != "default":
            return Support.no("only the default case is implemented")
        return Support.yes()


class WrongBackend(EagerBackend):
    name = "v1-wrong"
    description = "answers off by one (first API)"

    def prepare(self, workload, case, inputs):
        return Prepared(lambda: {"y": workload.reference(case, inputs)["y"] + 1})


class RaisingBackend(EagerBackend):
    name = "v1-raises"
    description = "raises inside the timed call (first API)"

    def prepare(self, workload, case, inputs):
        calls = []

        def run():
            calls.append(1)
            if len(calls) > 1:
                raise RuntimeError("v1 kernel failed")
            return workload.reference(case, inputs)

        return Prepared(run)
