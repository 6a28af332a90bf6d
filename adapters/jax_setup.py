"""Import JAX for a worker without letting it take the GPU, and say why it cannot run.

XLA preallocates 75 % of the GPU's memory when its GPU client starts unless
``XLA_PYTHON_CLIENT_PREALLOCATE`` is false; next to torch's caching allocator (inputs,
references, the L2 flush buffer) that starves one of them. The variable is read when
the client starts (the first ``jax.devices()``), so ``load_jax`` sets it for that moment
and puts the environment back: the cell's process state stays as it was.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from types import ModuleType

from apex_core.lazy_import import try_import

PREALLOCATE = "XLA_PYTHON_CLIENT_PREALLOCATE"
INSTALL_HINT = "pip install 'apex-bench[jax]'; for CUDA: pip install 'jax[cuda12]'"
_OFF = ("false", "0")

# Whether this module started JAX's backends itself (with preallocation off); None until it tried.
_started_here: bool | None = None


@contextlib.contextmanager
def _preallocation_off() -> Iterator[None]:
    """``XLA_PYTHON_CLIENT_PREALLOCATE=false`` for the block unless the user set it."""
    if PREALLOCATE in os.environ:
        yield
        return
    os.environ[PREALLOCATE] = "false"
    try:
        yield
    finally:
        os.environ.pop(PREALLOCATE, None)


def _backends_started(jax: ModuleType) -> bool:
    """True when JAX's clients already exist in this process (someone ran JAX before us)."""
    try:
        from jax._src import xla_bridge  # private, so read defensively

        return bool(getattr(xla_bridge, "_backends", {}))
    except Exception:
        return False


def load_jax() -> tuple[ModuleType | None, str]:
    """``(jax, "")`` with its backends started (preallocation off), or ``(None, why not)``."""
    global _started_here
    with _preallocation_off():
        jax, reason = try_import("jax", INSTALL_HINT)
        if jax is None:
            return None, reason
        if _started_here is None:
            _started_here = not _backends_started(jax)
        try:
            jax.devices()  # starts the clients while the variable is set
        except Exception as exc:
            return None, f"jax {jax.__version__} cannot start a backend: {type(exc).__name__}: {exc}"
    return jax, ""


def preallocation_reason() -> str:
    """Why JAX holds most of the GPU in this process ("" when it does not)."""
    value = os.environ.get(PREALLOCATE)
    if value is not None and value.lower() not in _OFF:
        return (f"{PREALLOCATE}={value}: JAX would preallocate 75% of the GPU and starve torch's "
                f"allocator; unset it or set {PREALLOCATE}=false")
    if not _started_here and value is None:
        return ("JAX's GPU client was started in this process before apex-bench could turn memory "
                f"preallocation off; set {PREALLOCATE}=false before starting it")
    return ""


def gpu_reason(jax: ModuleType) -> str:
    """Why JAX cannot run on a CUDA device here ("" when it can)."""
    try:
        gpus = jax.devices("gpu")
    except Exception:
        gpus = []
    if not gpus:
        platforms = sorted({d.platform for d in jax.devices()})
        return (f"jax {jax.__version__} has no GPU platform (platforms: {', '.join(platforms)}); "
                "install a CUDA jaxlib: pip install 'jax[cuda12]'")
    return preallocation_reason()
