"""The built-in workloads in ``jax.numpy``: one module each, imported only when a cell needs it.

Each module ports its workload's torch reference (``apex_core/workloads/<name>.py``, the
single source of truth) and exposes ``build(case) -> fn``, where ``fn`` maps the cell's
inputs (JAX arrays, keyed like the workload's inputs) to its outputs (keyed like the
reference's) and is pure, so that ``jax.jit`` can trace it once per cell. Nothing here
imports jax at import time: the registry loads the backend without it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

# workload name -> module implementing it (names as registered in pyproject.toml)
MODULES: Mapping[str, str] = {
    "tilepack": "adapters.jax_workloads.tilepack",
    "tileunpack": "adapters.jax_workloads.tileunpack",
    "fusiongate": "adapters.jax_workloads.fusiongate",
    "tilessm-scan": "adapters.jax_workloads.tilessm_scan",
    "tile-stage1": "adapters.jax_workloads.tile_stage1",
    "ff-infer": "adapters.jax_workloads.ff_infer",
}


def build(workload: str, case: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The pure JAX function of one case of ``workload`` (a KeyError when there is none)."""
    return importlib.import_module(MODULES[workload]).build(case)
