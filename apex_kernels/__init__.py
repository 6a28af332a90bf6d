"""Our Triton kernels, one module per operation, each with its launch wrapper.

``KERNELS`` maps a workload name to the dotted path of a factory
``make_launcher(case, inputs) -> (callable, outputs, metadata)``; each module also
has ``supports(case, dtype_name) -> reason | None``. Modules are imported only when
the triton backend checks or prepares a cell, so importing this package never
imports triton.
"""

KERNELS: dict[str, str] = {
    "fusiongate": "apex_kernels.fusiongate:make_launcher",
    "tilessm-scan": "apex_kernels.tilessm_scan:make_launcher",
}
