"""Persistent compile caches (Triton's and Inductor's), kept between runs in one documented folder.

Compiling is most of a fresh run's time (torch.compile code generation, Triton kernels):
kept on disk, a second run loads what the first one built. The folder is
``$APEX_BENCH_CACHE``, else ``$XDG_CACHE_HOME/apex-bench``, else ``~/.cache/apex-bench``;
``triton/`` and ``inductor/`` under it become ``TRITON_CACHE_DIR`` and
``TORCHINDUCTOR_CACHE_DIR`` of every worker. A cache variable the user set himself wins.
``--fresh`` points both at a new empty folder that the run removes when it ends, so
every build is timed from scratch (docs/scale.md).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from apex_core.errors import UsageError

CACHE_ENV = "APEX_BENCH_CACHE"
# cache variable -> sub-folder of the cache root
CACHE_VARIABLES = {"TRITON_CACHE_DIR": "triton", "TORCHINDUCTOR_CACHE_DIR": "inductor"}


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """The folder the compile caches live in, from the environment (not created here)."""
    environ = os.environ if environ is None else environ
    if environ.get(CACHE_ENV):
        return Path(environ[CACHE_ENV]).expanduser()
    xdg = environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path(environ.get("HOME") or Path.home()) / ".cache"
    return base / "apex-bench"


@attrs.frozen
class CompileCaches:
    """Where one run's workers keep their compile caches; ``env`` is what they get."""

    root: str
    fresh: bool
    env: dict[str, str]

    def describe(self) -> dict[str, Any]:
        """The report's record of it (environment.compile_cache)."""
        return {"root": self.root, "fresh": self.fresh, "dirs": dict(self.env)}

    def cleanup(self) -> None:
        """Remove a ``--fresh`` run's temporary folder (persistent caches stay)."""
        if self.fresh:
            shutil.rmtree(self.root, ignore_errors=True)


def compile_caches(fresh: bool = False, environ: Mapping[str, str] | None = None) -> CompileCaches:
    """The caches of a run: the persistent folder (created), or with ``fresh`` a new empty one."""
    environ = os.environ if environ is None else environ
    if fresh:
        root = Path(tempfile.mkdtemp(prefix="apex-bench-fresh-cache-"))
        return CompileCaches(str(root), True, {var: str(root / sub) for var, sub in CACHE_VARIABLES.items()})
    root = cache_root(environ)
    # a variable the user set is not in it: the worker inherits it unchanged
    env = {var: str(root / sub) for var, sub in CACHE_VARIABLES.items() if not environ.get(var)}
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if environ.get(CACHE_ENV):
            raise UsageError(f"{CACHE_ENV}={environ[CACHE_ENV]}: cannot create the cache folder "
                             f"({exc.strerror})") from None
        # an unwritable home: each stack then keeps its own default folder
        return CompileCaches(str(root), False, {})
    return CompileCaches(str(root), False, env)
