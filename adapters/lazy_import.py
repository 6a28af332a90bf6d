"""The backends' lazy imports: ``try_import`` and ``cuda_reason`` live in ``apex_core.lazy_import``.

Kept so adapters (and third-party code) that import them from here keep working; the core
owns them because the engine path needs the same reasons and must not import ``adapters``.
"""

from apex_core.lazy_import import cuda_reason, try_import

__all__ = ["cuda_reason", "try_import"]
