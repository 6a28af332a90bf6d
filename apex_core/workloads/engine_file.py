"""Deprecated since plugin API 1.5: the engine workload lives in ``apex_core.engine.workload``.

Kept so that a plugin importing from this module keeps running (docs/plugin-api.md, deprecation
policy): each name it takes is served from the new module with a DeprecationWarning, and the
report lists the use for that plugin's package. It goes in 2.0. Nothing in apex-bench imports it.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from apex_core.engine import workload as _moved
from apex_core.interfaces import note_deprecated_use

_USE = ("apex_core.workloads.engine_file", "apex_core.engine.workload", "1.5")
__all__ = [name for name in vars(_moved) if not name.startswith("_")]  # what `import *` took in 1.4


def __getattr__(name: str) -> Any:
    """One of the engine workload module's names, noting who took it here (PEP 562)."""
    value = getattr(_moved, name)
    note_deprecated_use(sys._getframe(1).f_globals.get("__name__", ""), _USE)
    warnings.warn("apex_core.workloads.engine_file is deprecated since plugin API 1.5 and goes in 2.0: "
                  "import from apex_core.engine.workload", DeprecationWarning, stacklevel=2)
    return value
