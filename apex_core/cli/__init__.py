"""The ``apex-bench`` command line."""
