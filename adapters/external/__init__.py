"""External-command backends (``ext:NAME``): a backend family configured without writing Python.

``config`` reads the configured commands, ``contract`` the files and the JSON a command
exchanges with apex-bench, ``process`` starts a command, ``backend`` is the backend and
``provider`` the entry point that makes one backend per command. docs/external.md and
examples/external/README.md describe the contract.
"""
