"""Replay manifests: hashes that pin a run's seed, configuration and generated data.

A report's ``replay`` block answers "would a rerun see the same problem?" without
storing a tensor: ``config_sha256`` pins the settings, ``artifact_hashes`` pin bit for
bit the inputs each (workload, case, dtype) was timed on, ``reference_fingerprints``
summarise the CPU reference outputs the checks compare against (compared with a
tolerance, since another CPU's BLAS moves their last bits: fingerprint.py), and
``manifest_sha256`` folds seed, config and inputs into one value that never depends on
file paths, the time of the run or the CPU's floating-point paths (docs/replay.md).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import torch

from apex_core.correctness import DTYPES, reference_dtype, upcast_inputs
from apex_core.report.fingerprint import tensors_fingerprint
from apex_core.results import Case, CellResult

if TYPE_CHECKING:
    from apex_core.interfaces import Workload

log = logging.getLogger(__name__)

# Bumped when the way tensors are hashed changes (not when a workload changes).
HASH_FORMAT = "apex-replay-2"
# Above this many input elements the float64 CPU reference costs seconds and gigabytes
# (the large profile), so it is not fingerprinted; 4x the fixed profile's largest input.
REFERENCE_ELEMENT_LIMIT = 8 * 2**20

# workload name -> installed instance (None: not installed in this process)
_INSTALLED: dict[str, Workload | None] = {}
# (workload object, case, params JSON, dtype, seed) -> the artifact's hash and fingerprint
_ARTIFACT_CACHE: dict[tuple[Any, str, str, str, int], Artifact] = {}


def clear_caches() -> None:
    """Forget computed hashes and looked-up workloads (tests; a newly installed plugin)."""
    _INSTALLED.clear()
    _ARTIFACT_CACHE.clear()


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: one text per value, for hashing."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False, default=str)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# Config keys that say how a run was carried out, not what it measured: left out of the hash,
# so a run with builders replays as the same problem as one without.
RUN_ONLY_CONFIG = ("build_workers",)


def config_sha256(config: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of a report's ``config`` (less ``RUN_ONLY_CONFIG``)."""
    return sha256_text(canonical_json({k: v for k, v in config.items() if k not in RUN_ONLY_CONFIG}))


def artifact_key(workload: str, case: str, dtype: str) -> str:
    """The key of one artifact: the data depend on neither the backend nor the device."""
    return f"{workload}/{case}/{dtype}"


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


def case_from_record(workload: Workload, case_name: str, params: Mapping[str, Any]) -> Any:
    """A cell record's case, rebuilt from its name and the ``params`` the record carries."""
    return Case(workload.name, case_name, workload.params_type(**params))


def reference_outputs(workload: Workload, case: Any, inputs: Mapping[str, torch.Tensor]
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


@attrs.frozen
class Artifact:
    """One (workload, case, dtype) at a seed: the inputs' sha256 and the reference's fingerprint.

    ``inputs_sha256`` is ``None`` when the data cannot be generated (the cell itself says
    why); ``reference`` is ``None`` then, and when the inputs are too large for the float64
    CPU reference (``inputs_only``).
    """

    inputs_sha256: str | None
    reference: dict[str, Any] | None = None
    inputs_only: bool = False


def artifact(workload: Workload, case_name: str, params: Mapping[str, Any], dtype: str,
             seed: int) -> Artifact:
    """The :class:`Artifact` of one (workload, case, dtype) at ``seed``, computed once per process."""
    key = (workload, case_name, canonical_json(dict(params)), dtype, seed)
    if key not in _ARTIFACT_CACHE:
        try:
            case = case_from_record(workload, case_name, params)
            # a dtype outside DTYPES is an engine file's own: its inputs take the model's dtypes anyway
            inputs = workload.make_inputs(case, "cpu", DTYPES.get(dtype, torch.float32), seed)
            # a workload with no reference (an engine file) has only its inputs to pin
            inputs_only = (sum(t.numel() for t in inputs.values()) > REFERENCE_ELEMENT_LIMIT
                           or bool(workload.unchecked_reason(case)))
            reference = None if inputs_only else tensors_fingerprint(
                reference_outputs(workload, case, inputs))
            _ARTIFACT_CACHE[key] = Artifact(tensors_sha256(inputs, {}), reference, inputs_only)
        except Exception:
            log.debug("replay hash of %s/%s/%s failed", workload.name, case_name, dtype,
                      exc_info=True)
            _ARTIFACT_CACHE[key] = Artifact(None)
    return _ARTIFACT_CACHE[key]


def installed_workloads(names: Iterable[str]) -> dict[str, Workload | None]:
    """The installed workload of each name (None when no entry point provides it here)."""
    wanted = set(names)
    if wanted - set(_INSTALLED):
        from apex_core.registry import WORKLOAD_GROUP, Registry, load_entry_points

        # workloads only: constructing every backend is not needed to make inputs
        found = Registry.discover(
            loader=lambda group: load_entry_points(group) if group == WORKLOAD_GROUP else []
        ).workloads
        for name in wanted - set(_INSTALLED):
            _INSTALLED[name] = found.get(name)
    return {name: _INSTALLED[name] for name in wanted}


def artifacts(cells: Iterable[CellResult], seed: int,
              workloads: Mapping[str, Workload | None] | None = None) -> dict[str, Artifact]:
    """``{workload/case/dtype: Artifact}`` over the cells' distinct artifacts, sorted by key."""
    wanted: dict[str, tuple[str, str, dict[str, Any], str]] = {}
    for cell in cells:
        key = artifact_key(cell.workload, cell.case, cell.dtype)
        wanted.setdefault(key, (cell.workload, cell.case, dict(cell.params), cell.dtype))
    if workloads is None:
        workloads = installed_workloads(name for name, *_ in wanted.values())
    found: dict[str, Artifact] = {}
    for key, (name, case_name, params, dtype) in sorted(wanted.items()):
        workload = workloads.get(name)
        found[key] = (artifact(workload, case_name, params, dtype, seed)
                      if workload is not None else Artifact(None))
    return found


def manifest_sha256(seed: int, config_hash: str, artifact_hash: str) -> str:
    """sha256 of the seed, the config hash and the inputs' hash, and of nothing else."""
    return sha256_text(canonical_json(
        {"seed": seed, "config_sha256": config_hash, "artifact_sha256": artifact_hash}))


def hash_platform() -> dict[str, Any]:
    """What the inputs' bits depend on besides the code: torch and its CPU kernel level."""
    return {"torch": torch.__version__.split("+")[0],
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "threads": 1}


def replay_block(config: Mapping[str, Any], cells: Iterable[CellResult],
                 workloads: Mapping[str, Workload | None] | None = None) -> dict[str, Any]:
    """The report's ``replay`` block: seed, config and input hashes, reference fingerprints."""
    seed = int(config.get("seed", 0))
    found = artifacts(cells, seed, workloads)
    hashes = {key: a.inputs_sha256 for key, a in found.items()}
    config_hash = config_sha256(config)
    artifact_hash = sha256_text(canonical_json(hashes))
    return {
        "seed": seed,
        "config_sha256": config_hash,
        "artifact_hashes": hashes,
        "artifact_sha256": artifact_hash,
        "manifest_sha256": manifest_sha256(seed, config_hash, artifact_hash),
        "reference_fingerprints": {key: a.reference for key, a in found.items()
                                   if a.reference is not None},
        "hash_format": HASH_FORMAT,
        "inputs_only": [key for key, a in found.items() if a.inputs_only],
        "platform": hash_platform(),
    }
