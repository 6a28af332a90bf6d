"""Import optional stacks on demand and say precisely why one is missing (core and backends alike).

Tells "not installed" from "installed but fails to import", so a probe's
reason says what to do about it.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

import torch

from apex_core.errors import first_line


def try_import(module: str, install_hint: str) -> tuple[ModuleType | None, str]:
    """Return (module, "") or (None, reason) without raising."""
    if importlib.util.find_spec(module.split(".")[0]) is None:
        return None, f"{module} not installed ({install_hint})"
    try:
        return importlib.import_module(module), ""
    except Exception as exc:  # installed but broken: a missing shared library, ABI mismatch...
        return None, f"{module} is installed but fails to import: {type(exc).__name__}: {first_line(exc)}"


def cuda_reason() -> str:
    """Empty when a CUDA device is usable, else why not."""
    if not torch.cuda.is_available():
        if torch.version.cuda is None:
            return "no CUDA device (this torch build has no CUDA support)"
        return "no CUDA device"
    return ""
