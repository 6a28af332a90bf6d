"""Deprecated since plugin API 1.5: the engine workload lives in ``apex_core.engine.workload``.

Kept so that a plugin importing this module keeps running (docs/plugin-api.md, deprecation
policy); it goes in 2.0. Nothing in apex-bench imports it.
"""

import warnings

from apex_core.engine.workload import *  # noqa: F403  (every public name, as 1.4 had them here)
from apex_core.engine.workload import EngineParams, EngineWorkload  # noqa: F401  (named for readers)

warnings.warn("apex_core.workloads.engine_file is deprecated since plugin API 1.5 and goes in 2.0: "
              "import from apex_core.engine.workload", DeprecationWarning, stacklevel=2)
