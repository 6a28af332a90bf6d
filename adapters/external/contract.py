"""The exchange with an external command: the request and inputs it reads, the outputs and
the JSON result it writes (``result.schema.json``), turned into tensors and a ``Timing``.

Contract version 1 (examples/external/README.md is the tool author's description):
apex-bench writes ``inputs.npz`` (one array per input, named like the workload's inputs) and
``request.json``; the command reads them, runs the workload ``warmup`` + ``iterations``
times, writes ``outputs.npz`` (one array per output) and prints one JSON object on stdout.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import torch

from apex_core.errors import ApexBenchError, printable
from apex_core.results import Stats, Timing
from apex_core.stats import summarize

CONTRACT_VERSION = 1
TIMING_METHOD = "external"
# how much of what a command printed goes into a cell's reason
EXCERPT_CHARS = 240


class ExternalCommandError(ApexBenchError):
    """The command failed, printed something that is not a result, or broke the contract."""


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The end of ``text`` on one printable line, at most ``limit`` characters."""
    flat = printable(" | ".join(line.strip() for line in text.strip().splitlines() if line.strip()))
    return flat if len(flat) <= limit else "..." + flat[-limit:]


@functools.cache
def result_schema() -> dict[str, Any]:
    """The JSON Schema of the result object (shipped beside this module)."""
    text = resources.files("adapters.external").joinpath("result.schema.json").read_text(encoding="utf-8")
    return dict(json.loads(text))


def write_request(folder: Path, *, workload: str, case: str, params: dict[str, Any], dtype: str,
                  device: str, warmup: int, iterations: int) -> Path:
    """``request.json`` in ``folder``; returns its path."""
    request = {
        "contract_version": CONTRACT_VERSION,
        "workload": workload,
        "case": case,
        "params": params,
        "dtype": dtype,
        "device": device,
        "warmup": warmup,
        "iterations": iterations,
        "inputs": str(folder / "inputs.npz"),
        "outputs": str(folder / "outputs.npz"),
    }
    path = folder / "request.json"
    path.write_text(json.dumps(request, indent=2, default=str), encoding="utf-8")
    return path


def write_inputs(path: Path, inputs: dict[str, Any]) -> None:
    """Every input as a numpy array in one uncompressed ``.npz`` (copied to the host, untimed)."""
    arrays = {name: tensor.detach().to("cpu").contiguous().numpy() for name, tensor in inputs.items()}
    with path.open("wb") as handle:
        np.savez(handle, **arrays)  # type: ignore[arg-type]  # numpy's stubs want str keys positionally


def read_outputs(path: Path, device: str, label: str) -> dict[str, Any]:
    """The arrays of ``outputs.npz`` as tensors on ``device``; the correctness check judges them."""
    if not path.is_file():
        raise ExternalCommandError(f"{label} reported ok but wrote no outputs file ({path.name})")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except Exception as exc:  # a truncated file, object arrays, not a zip
        raise ExternalCommandError(f"{label} wrote an unreadable {path.name}: {type(exc).__name__}: "
                                   f"{excerpt(str(exc))}") from None
    outputs = {}
    for name, array in arrays.items():
        try:
            outputs[name] = torch.from_numpy(np.ascontiguousarray(array)).to(device)
        except TypeError as exc:  # a dtype torch has no tensor of (strings, unsigned 64-bit)
            raise ExternalCommandError(f"{label}: output {name!r} has dtype {array.dtype}, which torch cannot "
                                       f"hold ({excerpt(str(exc))})") from None
    return outputs


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a JSON number")


def parse_result(stdout: str, label: str) -> dict[str, Any]:
    """The result object from stdout (all of it, or its last non-empty line), checked against the schema."""
    text = stdout.strip()
    if not text:
        raise ExternalCommandError(f"{label} printed nothing on stdout (expected one JSON object)")
    for candidate in (text, text.splitlines()[-1].strip()):
        try:
            result = json.loads(candidate, parse_constant=_reject_constant)
            break
        except ValueError:
            pass
    else:
        raise ExternalCommandError(f"{label} printed no JSON object on stdout: {excerpt(text)!r}")
    if not isinstance(result, dict):
        raise ExternalCommandError(f"{label} printed JSON {type(result).__name__}, expected an object: "
                                   f"{excerpt(text)!r}")
    validator = jsonschema.Draft202012Validator(result_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(result))
    if error is not None:
        field = ".".join(str(p) for p in error.absolute_path) or "(the object)"
        raise ExternalCommandError(f"{label} printed a result that breaks the contract at {field}: "
                                   f"{excerpt(error.message)}")
    _check_order(result, label)
    return result


def _check_order(result: dict[str, Any], label: str) -> None:
    """What the schema cannot say: min <= p50 <= p95 <= max and min <= mean <= max."""
    latency = result.get("latency_ms")
    if not latency:
        return
    lo, hi = latency["min"], latency["max"]
    ordered = lo <= latency["p50"] <= latency["p95"] <= hi and lo <= latency["mean"] <= hi
    if not ordered:
        raise ExternalCommandError(f"{label} printed latencies out of order (need min <= p50 <= p95 <= max "
                                   f"and min <= mean <= max): {json.dumps(latency)}")


def timing_from_result(result: dict[str, Any], iterations: int) -> Timing:
    """The command's own numbers as a ``Timing`` with method ``external``.

    With ``samples_ms`` every statistic is ours, from its samples. With the summary only,
    the statistics are its numbers; p90 and p99 hold its p95 and max (upper bounds) and
    std and cv are 0 (unknown), which the timing note says.
    """
    samples = result.get("samples_ms")
    if samples:
        return Timing(TIMING_METHOD, "n/a", tuple(float(s) for s in samples), summarize(samples), "external",
                      "the command's own timer (samples reported by the command)")
    latency = result["latency_ms"]
    n = int(result.get("iterations", iterations))
    stats = Stats(n=n, mean=latency["mean"], std=0.0, min=latency["min"], max=latency["max"],
                  p50=latency["p50"], p90=latency["p95"], p95=latency["p95"], p99=latency["max"], cv=0.0)
    return Timing(TIMING_METHOD, "n/a", (), stats, "external",
                  "the command's own timer, summary only: p90/p99 are its p95/max (upper bounds), "
                  "std and cv unknown (0)")
