"""Our Triton kernels, one module per operation, each with its launch wrapper.

``KERNELS`` maps a workload name to the dotted path of a factory
``make_launcher(case, inputs) -> (callable, outputs, metadata)``. Modules are
imported only when the triton backend prepares a cell, so importing this
package never imports triton.
"""

KERNELS: dict[str, str] = {}
