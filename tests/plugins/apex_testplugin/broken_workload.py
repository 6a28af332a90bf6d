"""A workload module with a bug that raises at import."""

raise RuntimeError("test-broken-workload: a bug at import time")


class BrokenWorkload:
    """Never reached: the module raises above."""
