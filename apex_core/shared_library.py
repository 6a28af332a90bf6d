"""Where a shared library named on the command line loads from.

Resolved in the process the user started, against the folder they started it in, so a
worker that runs elsewhere loads the same file. Used by the command line (``--trt-plugin-lib``)
and by the backends that load libraries.
"""

from __future__ import annotations

import os


def is_bare_library_name(entry: str) -> bool:
    """True for a name the dynamic loader searches for (no slash), False for a path."""
    return os.sep not in entry and (os.altsep is None or os.altsep not in entry)


def resolve_library(entry: str) -> str:
    """Where ``entry`` loads from: a path made absolute, a bare name left to the dynamic loader.

    dlopen searches LD_LIBRARY_PATH and the system folders for a name without a slash, never
    the current folder: ``myplugin.so`` that is a file here becomes its absolute path, while a
    name that is no file here (``libapexx.so``) stays bare for the loader's search. A path with
    a slash is made absolute too, so a worker started in another folder loads the same file.
    """
    expanded = os.path.expanduser(entry.strip())
    if is_bare_library_name(expanded) and not os.path.isfile(expanded):
        return expanded
    return os.path.abspath(expanded)
