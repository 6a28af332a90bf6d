"""The skip conditions of a ``bench.yaml``: a fixed vocabulary of facts, checked in code, never evaluated.

``requires`` (cuda, cpu: the device a cell must run on), ``min_compute_capability`` (of the
CUDA device; not applicable to CPU cells), ``requires_module`` (importable here, found
without importing it), ``max_memory_gb`` (the most memory the workload may use: a device
with less total memory skips it). Anything else, an expression included, is refused when
the file is read.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Mapping
from typing import Any

import attrs
import torch

CONDITION_KEYS = ("requires", "min_compute_capability", "requires_module", "max_memory_gb")
REQUIREMENTS = ("cuda", "cpu")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_CAPABILITY = re.compile(r"^(\d{1,2})\.(\d)$")


class ConditionError(ValueError):
    """A skip condition that is not in the vocabulary or not of its type; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@attrs.frozen
class SkipConditions:
    """What a workload needs to run; ``unmet`` says which need a cell's device does not meet."""

    requires: tuple[str, ...] = ()
    min_compute_capability: tuple[int, int] | None = None
    requires_module: tuple[str, ...] = ()
    max_memory_gb: float | None = None

    def unmet(self, device: str) -> str:
        """Why a cell on ``device`` cannot run here ("" when every condition holds)."""
        for requirement in self.requires:
            if requirement != device:
                return f"bench.yaml requires {requirement}; this cell runs on {device}"
        for module in self.requires_module:
            if not _importable(module):
                return f"bench.yaml requires module {module!r}, which is not installed here"
        if device == "cuda" and self.min_compute_capability is not None:
            have = torch.cuda.get_device_capability()
            if tuple(have) < self.min_compute_capability:
                need = ".".join(map(str, self.min_compute_capability))
                return f"bench.yaml needs compute capability >= {need}; this device has {have[0]}.{have[1]}"
        if self.max_memory_gb is not None:
            total = _total_memory_bytes(device)
            if total is not None and total < self.max_memory_gb * 2**30:
                return (f"bench.yaml says it uses up to {self.max_memory_gb:g} GB; this {device} has "
                        f"{total / 2**30:.1f} GB")
        return ""


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is missing or broken
        return False


def _total_memory_bytes(device: str) -> int | None:
    if device == "cuda":
        return int(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def parse_conditions(block: Any) -> SkipConditions:
    """The ``skip`` block as ``SkipConditions``; ``ConditionError`` names the bad field."""
    if block is None:
        return SkipConditions()
    if not isinstance(block, Mapping):
        raise ConditionError("skip", f"must be a mapping of conditions ({', '.join(CONDITION_KEYS)})")
    for key in block:
        if key not in CONDITION_KEYS:
            raise ConditionError(f"skip.{key}", "unknown condition; conditions are declarative facts, "
                                 f"never evaluated: {', '.join(CONDITION_KEYS)}")
    requires = _names(block.get("requires"), "skip.requires")
    for requirement in requires:
        if requirement not in REQUIREMENTS:
            raise ConditionError("skip.requires", f"{requirement!r} is not one of {', '.join(REQUIREMENTS)} "
                                 "(conditions are names, not expressions)")
    modules = _names(block.get("requires_module"), "skip.requires_module")
    for module in modules:
        if not _MODULE.match(module):
            raise ConditionError("skip.requires_module", f"{module!r} is not a module name "
                                 "(dotted identifiers)")
    return SkipConditions(requires, _capability(block.get("min_compute_capability")), modules,
                          _memory(block.get("max_memory_gb")))


def _names(value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) and v for v in items):
        raise ConditionError(field, "must be a name or a list of names")
    return tuple(items)


def _capability(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    text = f"{value:.1f}" if isinstance(value, float | int) and not isinstance(value, bool) else value
    match = _CAPABILITY.match(text) if isinstance(text, str) else None
    if match is None:
        raise ConditionError("skip.min_compute_capability", f"{value!r} is not a version such as 8.0 or 9.0")
    return int(match.group(1)), int(match.group(2))


def _memory(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConditionError("skip.max_memory_gb", f"{value!r} is not a positive number of GB")
    return float(value)
