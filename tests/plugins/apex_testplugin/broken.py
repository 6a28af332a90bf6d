"""A backend module that fails to import, as one with a missing dependency would."""

import apex_testplugin_missing_dependency  # noqa: F401  (deliberately absent)


class BrokenBackend:
    """Never reached: the import above fails."""
