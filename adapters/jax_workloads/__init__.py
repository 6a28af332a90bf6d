"""The built-in workloads in ``jax.numpy``: one module each, imported only when a cell needs it.

Each module ports its workload's torch reference (``apex_core/workloads/<name>.py``, the
single source of truth) and exposes ``build(case) -> fn``, where ``fn`` maps the cell's
inputs (JAX arrays, keyed like the workload's inputs) to its outputs (keyed like the
reference's) and is pure, so that ``jax.jit`` can trace it once per cell. Each workload names
its module's ``build`` in ``Workload.implementations["jax"]``. Nothing here imports jax at
import time: the registry loads the backend without it.
"""
