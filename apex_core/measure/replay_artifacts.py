"""What a cell pins for replay: its inputs' sha256 and its CPU reference's fingerprint.

Computed where the cell runs (``cell.execute_cell``) and carried in its result, so a report
is written from records alone: the process that writes it never loads a plugin or builds a
tensor. The inputs are made on the CPU at the cell's seed, whatever device the cell ran on,
and hashed bit for bit (sorted by name, as dtype, shape and raw bytes); the reference runs
on them upcast to float64 on one thread and is summarised by ``fingerprint.py`` (another
CPU's BLAS moves its last bits, so it is compared with a tolerance). docs/replay.md.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import logging
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from apex_core.correctness import DTYPES, reference_dtype, upcast_inputs
from apex_core.interfaces import Workload
from apex_core.measure.fingerprint import tensors_fingerprint
from apex_core.results import Case, ReplayArtifact

log = logging.getLogger(__name__)

# Bumped when the way tensors are hashed changes (not when a workload changes).
HASH_FORMAT = "apex-replay-2"
# Above this many input elements the float64 CPU reference costs seconds and gigabytes
# (the large profile), so it is not fingerprinted; 4x the fixed profile's largest input.
REFERENCE_ELEMENT_LIMIT = 8 * 2**20

# (workload object, case, params JSON, dtype, seed) -> its artifact: once per process, since
# a worker runs one (workload, case, dtype) on several backends
_CACHE: dict[tuple[Any, str, str, str, int], ReplayArtifact] = {}


def clear_cache() -> None:
    """Forget computed artifacts (tests)."""
    _CACHE.clear()


def _update_with_tensor(hasher: Any, section: str, name: str, tensor: torch.Tensor) -> None:
    """Feed one tensor as a ``section name dtype shape`` header, then its raw bytes."""
    cpu = tensor.detach().to("cpu").contiguous()
    dtype = str(cpu.dtype).removeprefix("torch.")
    hasher.update(f"{section}\0{name}\0{dtype}\0{list(cpu.shape)}\0".encode())
    # raw bytes in native order (little-endian wherever torch runs), without needing numpy
    hasher.update(ctypes.string_at(cpu.data_ptr(), cpu.numel() * cpu.element_size()))


def tensors_sha256(inputs: Mapping[str, torch.Tensor], outputs: Mapping[str, torch.Tensor]) -> str:
    """sha256 over the inputs then the outputs, each sorted by name, as dtype, shape and bytes."""
    hasher = hashlib.sha256(HASH_FORMAT.encode())
    for section, tensors in (("input", inputs), ("output", outputs)):
        for name in sorted(tensors):
            _update_with_tensor(hasher, section, name, tensors[name])
    return hasher.hexdigest()


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """Run torch on one thread: float64 reductions split across threads differ in the last bit."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def case_from_record(workload: Workload, case_name: str, params: Mapping[str, Any]) -> Case:
    """A cell record's case, rebuilt from its name and the ``params`` the record carries."""
    return Case(workload.name, case_name, workload.params_type(**params))


def reference_outputs(workload: Workload, case: Case, inputs: Mapping[str, torch.Tensor]
                      ) -> dict[str, torch.Tensor]:
    """The reference as the checks run it on the CPU: on the inputs upcast to float64."""
    with single_thread(), torch.no_grad():
        return dict(workload.reference(case, upcast_inputs(inputs, reference_dtype("cpu"))))


def generate_artifacts(workload: Workload, case_name: str, params: Mapping[str, Any], dtype: str,
                       seed: int) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """One cell's timed inputs for ``seed`` (made on the CPU) and the CPU reference outputs."""
    case = case_from_record(workload, case_name, params)
    inputs = workload.make_inputs(case, "cpu", DTYPES[dtype], seed)
    return inputs, reference_outputs(workload, case, inputs)


def artifact(workload: Workload, case_name: str, params: Mapping[str, Any], dtype: str,
             seed: int) -> ReplayArtifact:
    """The :class:`ReplayArtifact` of one (workload, case, dtype) at ``seed``, once per process."""
    key = (workload, case_name, json.dumps(dict(params), sort_keys=True, default=str), dtype, seed)
    if key not in _CACHE:
        try:
            case = case_from_record(workload, case_name, params)
            # a dtype outside DTYPES is an engine file's own: its inputs take the model's dtypes anyway
            inputs = workload.make_inputs(case, "cpu", DTYPES.get(dtype, torch.float32), seed)
            # a workload with no reference (an engine file) has only its inputs to pin
            inputs_only = (sum(t.numel() for t in inputs.values()) > REFERENCE_ELEMENT_LIMIT
                           or bool(workload.unchecked_reason(case)))
            reference = None if inputs_only else tensors_fingerprint(
                reference_outputs(workload, case, inputs))
            _CACHE[key] = ReplayArtifact(tensors_sha256(inputs, {}), reference, inputs_only, hash_platform())
        except Exception:  # the cell itself says why its data could not be made
            log.debug("replay hash of %s/%s/%s failed", workload.name, case_name, dtype, exc_info=True)
            _CACHE[key] = ReplayArtifact(None)
    return _CACHE[key]


def hash_platform() -> dict[str, Any]:
    """What the inputs' bits depend on besides the code: torch and its CPU kernel level."""
    return {"torch": torch.__version__.split("+")[0],
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "threads": 1}
