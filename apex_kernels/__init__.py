"""Our Triton kernels, one module per operation, each with its launch wrapper.

``KERNELS`` maps a workload name to the dotted path of a factory
``make_launcher(case, inputs) -> (callable, outputs, metadata)``; each module also
has ``supports(case, dtype_name) -> reason | None``. Modules are imported only when
the triton backend checks or prepares a cell, so importing this package never
imports triton.
"""

KERNELS: dict[str, str] = {
    "tilepack": "apex_kernels.tilepack:make_launcher",
    "tileunpack": "apex_kernels.tileunpack:make_launcher",
    "tile-stage1": "apex_kernels.tile_stage1:make_launcher",
    "fusiongate": "apex_kernels.fusiongate:make_launcher",
    "tilessm-scan": "apex_kernels.tilessm_scan:make_launcher",
    "ff-infer": "apex_kernels.ff_infer:make_launcher",
}
