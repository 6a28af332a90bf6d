"""A one-layer TensorRT network around an ``apexx`` plugin from a library the user brings.

Libraries come from ``--trt-plugin-lib`` (repeatable) or ``APEXX_TRT_PLUGIN_LIB``
(an os.pathsep-separated list). Skip reasons, in the order they are checked:
tensorrt not importable, no CUDA device, no library given, a library fails to load
(``probe``); a workload no plugin implements, creator not registered (``supports``);
engine build failed (``prepare``). A workload names the ``PluginSpec`` of its layer in
``Workload.implementations["tensorrt-plugin"]``; the built-in ones below are the contract a
library must meet, and docs/tensorrt.md spells it out for plugin authors.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from adapters.tensorrt_common import (
    EngineBuildError,
    EngineLoadError,
    PluginFieldValue,
    PluginLibraryError,
    build_plugin_engine,
    cell_dtype_name,
    dtype_name_of_torch,
    engine_model_from_bytes,
    find_plugin_creator,
    load_plugin_libraries,
    plugin_library_paths,
    tensorrt_reason,
)
from apex_core.backend_options import BackendOption
from apex_core.errors import UsageError
from apex_core.interfaces import Backend, CellSkipped, Inputs, Prepared, Workload
from apex_core.plugin_api import implementation
from apex_core.results import Availability, Case, Support

PLUGIN_VERSION = "1"
PLUGIN_NAMESPACE = "apexx"
NO_LIBRARY = ("no plugin library given: pass --trt-plugin-lib PATH (repeatable) or set "
              f"APEXX_TRT_PLUGIN_LIB (an {os.pathsep!r}-separated list of shared libraries)")

# INT32 codes of the string-valued choices, as the plugins read them
DIRECTION_CODES = {"forward": 0, "backward": 1, "bidirectional": 2}
MERGE_CODES = {"sum": 0, "avg": 1, "gated": 2}
MODE_CODES = {"override": 0, "blend": 1, "overlap": 0}  # overlap: override with free (unaligned) origins


@attrs.frozen
class PluginSpec:
    """How one workload maps onto one plugin layer: inputs in order, outputs by case, fields by case."""

    plugin: str
    inputs: tuple[str, ...]
    outputs: Callable[[Case], tuple[str, ...]]
    fields: Callable[[Case], tuple[PluginFieldValue, ...]]


def _int32(name: str, value: int) -> PluginFieldValue:
    return PluginFieldValue(name, "INT32", (value,))


def _scan_outputs(case: Case) -> tuple[str, ...]:
    return ("y", "state_fwd", "state_bwd") if case.name == "bidirectional" else ("y", "state")


# the built-in workloads' layers, each named by its workload's Workload.implementations
TILEPACK = PluginSpec(
    "TilePack", ("features", "idx"), lambda case: ("packed",),
    lambda case: (_int32("tile_size", case.params.tile_size),))
TILEUNPACK = PluginSpec(
    "TileUnpackFusion", ("base", "packed", "origins", "levels", "alpha"), lambda case: ("out",),
    lambda case: (_int32("tile_size", case.params.tile_size), _int32("mode", MODE_CODES[case.name])))
TILESSM_SCAN = PluginSpec(
    "TileSSMScan", ("tokens", "decay", "input_gain", "output_gain", "state_bias", "gate", "init_state"),
    _scan_outputs,
    lambda case: (_int32("direction", DIRECTION_CODES[case.name]),
                  _int32("merge", MERGE_CODES[case.params.merge]),
                  PluginFieldValue("clamp_value", "FLOAT32", (float(case.params.clamp),))))


def plugin_unsupported_reason(workload: Workload) -> str:
    """Empty when the workload brings a plugin layer, else why it cannot run here."""
    if "tensorrt-plugin" in workload.implementations:
        return ""
    return (f"{workload.name} brings no TensorRT plugin layer (its Workload.implementations has no "
            "'tensorrt-plugin'); a whole network runs under tensorrt-engine instead")


def creator_missing_reason(spec: PluginSpec, libraries: list[str]) -> str:
    return (f"plugin creator not registered: {spec.plugin} version {PLUGIN_VERSION} in namespace "
            f"{PLUGIN_NAMESPACE} (libraries loaded: {', '.join(libraries)})")


class TensorRTPluginBackend(Backend):
    """Builds and times a one-plugin engine per cell; inputs bound by name, outputs by the table."""

    name = "tensorrt-plugin"
    description = "TensorRT plugin layers (namespace apexx) from --trt-plugin-lib or APEXX_TRT_PLUGIN_LIB"
    option_specs = (
        BackendOption("plugin_libs", "path", "a shared library registering the apexx plugins "
                      "(alias --trt-plugin-lib)", repeatable=True),
    )
    aliases = ("trt",)

    def __init__(self) -> None:
        self.given_libraries: tuple[str, ...] = ()

    def configure(self, options: Mapping[str, Any]) -> None:
        unknown = sorted(set(options) - {"plugin_libs"})
        if unknown:
            raise UsageError(f"tensorrt-plugin: unknown option {unknown[0]!r}; valid options: plugin_libs")
        libraries = options.get("plugin_libs", [])
        if isinstance(libraries, str) or not all(isinstance(p, str) for p in libraries):
            raise UsageError("tensorrt-plugin: plugin_libs is a list of paths")
        self.given_libraries = tuple(libraries)

    def libraries(self) -> list[str]:
        """The libraries to load: the option's, else the environment variable's."""
        return plugin_library_paths(self.given_libraries, os.environ)

    def probe(self, device: str) -> Availability:
        reason = tensorrt_reason(device)
        if reason:
            return Availability.no(reason)
        libraries = self.libraries()
        if not libraries:
            return Availability.no(NO_LIBRARY)
        try:
            load_plugin_libraries(libraries)
        except PluginLibraryError as exc:
            return Availability.no(str(exc))
        return Availability.yes()

    def supports(self, workload: Workload, case: Case, dtype_name: str) -> Support:
        reason = plugin_unsupported_reason(workload)
        if reason:
            return Support.no(reason)
        spec = implementation(workload, "tensorrt-plugin")
        if find_plugin_creator(spec.plugin, PLUGIN_VERSION, PLUGIN_NAMESPACE) is None:
            return Support.no(creator_missing_reason(spec, self.libraries()))
        return Support.yes()

    def prepare(self, workload: Workload, case: Case, inputs: Inputs) -> Prepared:
        spec = implementation(workload, "tensorrt-plugin")
        libraries = self.libraries()
        load_plugin_libraries(libraries)  # once per process; the probe did it in the planning one
        creator = find_plugin_creator(spec.plugin, PLUGIN_VERSION, PLUGIN_NAMESPACE)
        if creator is None:
            raise CellSkipped(creator_missing_reason(spec, libraries))
        precision = cell_dtype_name({n: inputs[n] for n in spec.inputs})
        network_inputs = [(name, dtype_name_of_torch(inputs[name].dtype), tuple(inputs[name].shape))
                          for name in spec.inputs]
        try:
            data = build_plugin_engine(creator, layer_name=spec.plugin, inputs=network_inputs,
                                       outputs=spec.outputs(case), fields=spec.fields(case),
                                       precision=precision)
        except EngineBuildError as exc:
            raise CellSkipped(f"engine build failed: {exc}") from None
        device = str(inputs[spec.inputs[0]].device)
        try:
            model = engine_model_from_bytes(data, device, f"the {spec.plugin} engine")
        except EngineLoadError as exc:
            raise CellSkipped(f"engine build failed: {exc}") from None
        bound = model.bind({s.name: inputs[s.name] for s in model.inputs})
        metadata = {"plugin": f"{PLUGIN_NAMESPACE}::{spec.plugin} v{PLUGIN_VERSION}",
                    "fields": {f.name: list(f.values) for f in spec.fields(case)},
                    "libraries": libraries, "precision": precision}
        return Prepared(bound.fn, outputs=bound.outputs, metadata=metadata)
