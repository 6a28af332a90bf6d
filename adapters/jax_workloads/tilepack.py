"""tilepack in ``jax.numpy`` (apex_core/workloads/tilepack.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jax import Array

from adapters.jax_workloads.tiles import tilepack


def build(case: Any) -> Callable[[dict[str, Array]], dict[str, Array]]:
    tile_size = case.params.tile_size

    def fn(inputs: dict[str, Array]) -> dict[str, Array]:
        return {"packed": tilepack(inputs["features"], inputs["idx"], tile_size)}

    return fn
