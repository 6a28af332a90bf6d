"""The built-in workloads and their torch references.

Each module holds one workload class (registered through the ``apex_bench.workloads``
entry-point group in ``pyproject.toml``) plus the plain function its reference calls.
The modules are imported by the registry on demand, never from here.
"""
