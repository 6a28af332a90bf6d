"""``ext:NAME``: a backend that is a configured command, run per call, timed by itself.

Each call of the prepared callable writes the cell's current inputs and a request with one
iteration, runs the command and returns the outputs it wrote, so the cell's usual checks
(fresh inputs, before and after timing) judge them like any backend's. The timing is one
more invocation with the cell's warm-up and iteration counts, through ``Prepared.measure``:
the numbers are the command's own (method ``external``), since no timer of ours sees inside
another process; the wall time of that whole invocation is recorded beside them.
"""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path
from typing import Any

import attrs
import torch

from adapters.external.config import ExternalCommand
from adapters.external.contract import (
    CONTRACT_VERSION,
    ExternalCommandError,
    excerpt,
    parse_result,
    read_outputs,
    timing_from_result,
    write_inputs,
    write_request,
)
from adapters.external.process import Finished, resolve_executable, run_command
from apex_core.interfaces import Backend, CellSkipped, Inputs, Prepared, Workload
from apex_core.results import Availability, Case, Support, Timing
from apex_core.timing import TimingOptions


class ExternalBackend(Backend):
    """One configured command (``adapters.external.config.ExternalCommand``) as a backend."""

    name = "external"  # the registry names each instance ext:NAME
    description = "an external command that reads the inputs, writes the outputs and prints its timings"

    def __init__(self, command: ExternalCommand) -> None:
        self.command = command
        self.name = command.backend_name  # type: ignore[misc]  # an instance's name, per command
        self.description = (command.description  # type: ignore[misc]
                            or f"external command {' '.join(command.argv)} (from {command.origin})")
        self.devices = frozenset(command.devices)  # type: ignore[misc]

    def probe(self, device: str) -> Availability:
        if device == "cuda" and not torch.cuda.is_available():
            return Availability.no("no CUDA device (the inputs are made on the cell's device)")
        path_env = dict(self.command.env).get("PATH", os.environ.get("PATH"))
        _path, why = resolve_executable(self.command.argv[0], self.command.cwd, path_env)
        if why:
            return Availability.no(f"command {why} (configured in {self.command.origin})")
        return Availability.yes()

    def supports(self, workload: Workload, case: Case, dtype_name: str) -> Support:
        listed = self.command.workloads
        if listed is not None and workload.name not in listed:
            return Support.no(f"{self.name} lists only {', '.join(listed)} "
                              f"(configured in {self.command.origin})")
        if dtype_name not in self.command.dtypes:
            why = ("the .npz exchange has no bfloat16 (numpy has none)" if dtype_name == "bf16"
                   else f"{self.name} is configured for {', '.join(self.command.dtypes)}")
            return Support.no(f"{dtype_name}: {why}")
        return Support.yes()

    def prepare(self, workload: Workload, case: Case, inputs: Inputs) -> Prepared:
        session = _Session(self.command, workload, case, inputs)
        return Prepared(
            session.call,
            metadata={"command": list(self.command.argv), "contract_version": CONTRACT_VERSION},
            measure=session.measure,
            report_metadata=session.metadata,
        )


class _Session:
    """The invocations of one cell: a scratch folder, the request, the last numbers reported."""

    def __init__(self, command: ExternalCommand, workload: Workload, case: Case, inputs: Inputs) -> None:
        self.command = command
        self.label = command.backend_name
        self.workload, self.case, self.inputs = workload, case, inputs
        self.device = next(iter(inputs.values())).device.type
        self.dtype = _cell_dtype(inputs)
        # removed when the cell's Prepared is dropped (or at exit); a killed worker leaves it in TMPDIR
        self.scratch = tempfile.TemporaryDirectory(prefix="apex-bench-ext-")
        self.folder = Path(self.scratch.name)
        self.calls = 0
        self.timed: dict[str, Any] = {}

    def _invoke(self, warmup: int, iterations: int) -> tuple[dict[str, Any], Finished]:
        write_inputs(self.folder / "inputs.npz", self.inputs)
        (self.folder / "outputs.npz").unlink(missing_ok=True)  # stale outputs must never pass as new
        request = write_request(self.folder, workload=self.workload.name, case=self.case.name,
                                params=self.case.params_dict(), dtype=self.dtype, device=self.device,
                                warmup=warmup, iterations=iterations)
        try:
            finished = run_command(self.command.argv, request, cwd=self.command.cwd,
                                   extra_env=dict(self.command.env))
        except OSError as exc:  # vanished or lost its execute bit since the probe
            raise ExternalCommandError(f"{self.label}: cannot start {self.command.argv[0]!r}: "
                                       f"{exc.strerror or exc}") from None
        self.calls += 1
        if finished.returncode != 0:
            printed = excerpt(finished.stderr or finished.stdout)
            raise ExternalCommandError(f"{self.label} {_exit_text(finished.returncode)}"
                                       + (f"; it printed: {printed}" if printed else "; it printed nothing"))
        result = parse_result(finished.stdout, self.label)
        if result["status"] == "skipped":
            raise CellSkipped(f"{self.label}: {result['reason']}")
        if result["status"] == "error":
            raise ExternalCommandError(f"{self.label} reported an error: {excerpt(result['reason'])}")
        return result, finished

    def call(self) -> dict[str, Any]:
        """One iteration on the current inputs; its outputs for the correctness check."""
        self._invoke(0, 1)
        return read_outputs(self.folder / "outputs.npz", self.device, self.label)

    def measure(self, options: TimingOptions) -> Timing:
        """The cell's warm-up and iterations in one invocation; the command's own numbers."""
        result, finished = self._invoke(options.warmup, options.min_iters)
        self.timed = {
            "external_wall_s": round(finished.wall_s, 6),
            "external_reported": {key: result.get(key) for key in
                                  ("latency_ms", "throughput_tokens_per_sec", "peak_memory_bytes",
                                   "iterations", "info") if key in result},
        }
        timing = timing_from_result(result, options.min_iters)
        note = (f"{timing.note}; the timed invocation took {finished.wall_s:.3f} s wall "
                "(process start, loading, warm-up and iterations)")
        return attrs.evolve(timing, note=note)

    def metadata(self) -> dict[str, Any]:
        return {"external_invocations": self.calls, **self.timed}


def _exit_text(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


def _cell_dtype(inputs: Inputs) -> str:
    """The cell's dtype: data inputs take it; indices and always-float32 values keep theirs."""
    names = {torch.float16: "fp16", torch.bfloat16: "bf16"}
    found = sorted({names[t.dtype] for t in inputs.values() if t.dtype in names})
    return found[0] if found else "fp32"
