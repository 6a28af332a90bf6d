"""In-memory workloads and backends for tests of the core (no entry points involved)."""

from __future__ import annotations

import attrs
import torch

from apex_core.interfaces import Backend, Prepared, Workload
from apex_core.results import Availability, Support, Work


@attrs.frozen(kw_only=True)
class AxpyParams:
    n: int = 64
    height: int = 8
    tile_size: int = 4

    def __attrs_post_init__(self) -> None:
        if self.height % self.tile_size:
            raise ValueError(f"height {self.height} is not divisible by tile_size {self.tile_size}")


class Axpy(Workload):
    """y = a * x + b with 0-d a and b."""

    name = "axpy"
    description = "y = a*x + b"
    params_type = AxpyParams
    case_names = ("small", "large")

    def make_inputs(self, case, device, dtype, seed):
        gen = torch.Generator().manual_seed(seed)
        return {
            "x": (torch.rand(case.params.n, generator=gen) + 0.5).to(device, dtype),
            "a": (torch.rand((), generator=gen) + 0.5).to(device, dtype),
        }

    def reference(self, case, inputs):
        return {"y": inputs["a"] * inputs["x"] + 1.0}

    def work(self, case, dtype_name):
        return Work(4 * case.params.n, 2 * case.params.n, "elements", case.params.n)


class Eager(Backend):
    name = "eager"
    description = "reference"

    def probe(self, device):
        return Availability.yes()

    def prepare(self, workload, case, inputs):
        return Prepared(lambda: workload.reference(case, inputs))


class Preallocated(Backend):
    """Writes into one output buffer; ``skip`` leaves the last element unwritten."""

    name = "prealloc"
    description = "writes into a buffer"

    def __init__(self, skip: bool = False) -> None:
        self.skip = skip

    def probe(self, device):
        return Availability.yes()

    def prepare(self, workload, case, inputs):
        out = torch.empty_like(inputs["x"])

        def run():
            y = workload.reference(case, inputs)["y"]
            if self.skip:
                out[:-1].copy_(y[:-1])
            else:
                out.copy_(y)
            return {"y": out}

        return Prepared(run, outputs={"y": out})


class Flaky(Backend):
    """Right on its first two calls, wrong afterwards (like an autotuner picking a bad config)."""

    name = "flaky"
    description = "goes wrong after warm-up"

    def probe(self, device):
        return Availability.yes()

    def prepare(self, workload, case, inputs):
        calls = {"n": 0}

        def run():
            calls["n"] += 1
            y = workload.reference(case, inputs)["y"]
            return {"y": y if calls["n"] <= 2 else y * 1.5}

        return Prepared(run)


class Raising(Backend):
    name = "raising"
    description = "raises"

    def __init__(self, where: str = "prepare") -> None:
        self.where = where

    def probe(self, device):
        return Availability.yes()

    def prepare(self, workload, case, inputs):
        if self.where == "prepare":
            raise RuntimeError("compiler exploded")

        def run():
            raise ValueError("bad launch")

        return Prepared(run)


class Unavailable(Eager):
    name = "unavail"

    def probe(self, device):
        return Availability.no("libfoo missing")


class Picky(Eager):
    name = "picky"

    def supports(self, workload, case, dtype_name):
        return Support.no("only small") if case.name != "small" else Support.yes()


class Cheating(Backend):
    """Wrong in form rather than in value: ``how`` picks the trick.

    ``mutate``: scales its input ``x`` in place and answers from it (right for the changed
    input, wrong for the one it was given); ``float64``: answers in float64 whatever the
    cell's dtype; ``not_tensor``: answers with a list; ``not_mapping``: answers with a tensor.
    """

    name = "cheat"
    description = "cheats"

    def __init__(self, how: str = "mutate") -> None:
        self.how = how

    def probe(self, device):
        return Availability.yes()

    def prepare(self, workload, case, inputs):
        def run():
            if self.how == "mutate":
                inputs["x"].mul_(0.5)
                return workload.reference(case, inputs)
            y = workload.reference(case, inputs)["y"]
            if self.how == "float64":
                return {"y": y.double()}
            if self.how == "not_tensor":
                return {"y": y.tolist()}
            return y

        return Prepared(run)


class StateChanging(Eager):
    """Changes the process's state in its call, as careless backends do (``how``: which part)."""

    name = "state"
    description = "changes process state"

    def __init__(self, how: str, where: str = "") -> None:
        self.how, self.where = how, where

    def prepare(self, workload, case, inputs):
        import os
        import resource

        other_threads = 1 if torch.get_num_threads() > 1 else 2

        def run():
            if self.how == "dtype":
                torch.set_default_dtype(torch.float64)
            elif self.how == "threads":
                torch.set_num_threads(other_threads)
            elif self.how == "deterministic":
                torch.use_deterministic_algorithms(True)
            elif self.how == "grad":
                torch.set_grad_enabled(False)
            elif self.how == "cwd":
                os.chdir(self.where)
            elif self.how == "environ":
                os.environ["APEX_LEAKED"] = "1"
            elif self.how == "rlimit":
                soft, hard = resource.getrlimit(resource.RLIMIT_AS)
                resource.setrlimit(resource.RLIMIT_AS, (2**40 if soft == resource.RLIM_INFINITY else soft - 1,
                                                        hard))
            return workload.reference(case, inputs)

        return Prepared(run)
