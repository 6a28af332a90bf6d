"""Replay manifests: hashes that pin a run's seed, configuration and generated data.

A report's ``replay`` block answers "would a rerun see the same problem?" without
storing a tensor: ``config_sha256`` pins the settings, ``artifact_hashes`` pin bit for
bit the inputs each (workload, case, dtype) was timed on, ``reference_fingerprints``
summarise the CPU reference outputs the checks compare against (compared with a
tolerance, since another CPU's BLAS moves their last bits: fingerprint.py), and
``manifest_sha256`` folds seed, config and inputs into one value that never depends on
file paths, the time of the run or the CPU's floating-point paths (docs/replay.md).

The block is written from the cells' records alone: each cell carries its artifact,
computed where it ran (``apex_core/measure/replay_artifacts.py``). A (workload, case, dtype) none of
whose cells ran (every backend skipped it, or each timed out) has a null hash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from apex_core.measure.replay_artifacts import HASH_FORMAT
from apex_core.results import CellResult, ReplayArtifact


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: one text per value, for hashing."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False, default=str)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# Config keys that say how a run was carried out, or follow from the rest, not what it measured:
# left out of the hash, so a run with builders replays as the same problem as one without, and
# reports from before cells_planned hash as they did.
RUN_ONLY_CONFIG = ("build_workers", "cells_planned")


def config_sha256(config: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of a report's ``config`` (less ``RUN_ONLY_CONFIG``)."""
    return sha256_text(canonical_json({k: v for k, v in config.items() if k not in RUN_ONLY_CONFIG}))


def artifact_key(workload: str, case: str, dtype: str) -> str:
    """The key of one artifact: the data depend on neither the backend nor the device."""
    return f"{workload}/{case}/{dtype}"


def artifacts(cells: Iterable[CellResult]) -> dict[str, ReplayArtifact]:
    """``{workload/case/dtype: artifact}`` over the cells, sorted by key: the first cell of a
    key that carries one (they agree: the same data at the same seed), else a null one."""
    found: dict[str, ReplayArtifact] = {}
    for cell in cells:
        key = artifact_key(cell.workload, cell.case, cell.dtype)
        if found.get(key, ReplayArtifact(None)).inputs_sha256 is None:
            found[key] = cell.replay or ReplayArtifact(None)
    return dict(sorted(found.items()))


def manifest_sha256(seed: int, config_hash: str, artifact_hash: str) -> str:
    """sha256 of the seed, the config hash and the inputs' hash, and of nothing else."""
    return sha256_text(canonical_json(
        {"seed": seed, "config_sha256": config_hash, "artifact_sha256": artifact_hash}))


def replay_block(config: Mapping[str, Any], cells: Iterable[CellResult]) -> dict[str, Any]:
    """The report's ``replay`` block: seed, config and input hashes, reference fingerprints."""
    seed = int(config.get("seed", 0))
    found = artifacts(cells)
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
        # where the cells made their data ({} when none did): the writer's own platform is not theirs
        "platform": next((a.platform for a in found.values() if a.platform), {}),
    }
