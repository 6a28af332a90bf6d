"""Environment variables set for a while in this process, then put back as they were."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping


@contextlib.contextmanager
def overlaid_environ(variables: Mapping[str, str]) -> Iterator[None]:
    """Set ``variables`` in ``os.environ`` for the block; afterwards each is restored or removed."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
