"""apex-bench core: interfaces, registry, planning, the cell runner, timing and reports.

Library use::

    import apex_core

    report = apex_core.run(["tilepack"], ["torch-reference"], device="cpu", profile="smoke")
    for cell in report.cells:
        print(cell.key, cell.status, cell.timing.stats.p50 if cell.timing else cell.reason)
"""

import logging

from apex_core.api import run
from apex_core.errors import ApexBenchError, ParamError, PluginError, UsageError
from apex_core.interfaces import Backend, CellSkipped, Prepared, Workload
from apex_core.plan import Plan, build_plan
from apex_core.plugin_api import PLUGIN_API
from apex_core.registry import Registry
from apex_core.results import (
    Accuracy,
    Availability,
    Case,
    CellResult,
    Report,
    SkipKind,
    Stats,
    Status,
    Support,
    Tolerance,
    Work,
)
from apex_core.running.runner import run_plan
from apex_core.timing import TimingOptions

__all__ = [
    "Accuracy",
    "ApexBenchError",
    "Availability",
    "Backend",
    "Case",
    "CellResult",
    "CellSkipped",
    "ParamError",
    "PLUGIN_API",
    "Plan",
    "PluginError",
    "Prepared",
    "Registry",
    "Report",
    "SkipKind",
    "Stats",
    "Status",
    "Support",
    "TimingOptions",
    "Tolerance",
    "UsageError",
    "Work",
    "Workload",
    "build_plan",
    "run",
    "run_plan",
]

# A library configures no logging of its own; without this, Python's last-resort handler
# would print the tracebacks of failed cells to the caller's stderr (the CLI adds its file).
logging.getLogger("apex_core").addHandler(logging.NullHandler())
