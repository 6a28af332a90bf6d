"""A one-layer TensorRT network around an ``apexx`` plugin from a library the user brings.

Libraries come from ``--trt-plugin-lib`` (repeatable) or ``APEXX_TRT_PLUGIN_LIB``
(an os.pathsep-separated list). Skip reasons, in the order they are checked:
tensorrt not importable, no CUDA device, no library given, a library fails to load
(``probe``); a workload no plugin implements, creator not registered (``supports``);
engine build failed (``prepare``). A workload names the ``PluginSpec`` of its layer in
``Workload.implementations["tensorrt-plugin"]``; the built-in ones below are the contract a
library must meet, and docs/tensorrt.md spells it out for plugin authors. Creators are
looked up with TensorRT 10's ``IPluginRegistry.get_creator``.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from adapters.tensorrt_common import (
    DTYPE_ATTRS,
    TENSORRT_HINT,
    EngineBuildError,
    EngineLoadError,
    cell_dtype_name,
    configured_build,
    dtype_name_of_torch,
    engine_model_from_bytes,
    import_tensorrt,
    new_network,
    recording_logger,
    tensorrt_reason,
)
from apex_core.backend_options import BackendOption
from apex_core.errors import UsageError, one_line
from apex_core.interfaces import Backend, CellSkipped, Inputs, Prepared, Workload
from apex_core.lazy_import import try_import
from apex_core.plugin_api import implementation
from apex_core.results import Availability, Case, Support
from apex_core.shared_library import is_bare_library_name, resolve_library

PLUGIN_LIB_ENV = "APEXX_TRT_PLUGIN_LIB"
PLUGIN_VERSION = "1"
PLUGIN_NAMESPACE = "apexx"
NO_LIBRARY = ("no plugin library given: pass --trt-plugin-lib PATH (repeatable) or set "
              f"APEXX_TRT_PLUGIN_LIB (an {os.pathsep!r}-separated list of shared libraries)")

# INT32 codes of the string-valued choices, as the plugins read them
DIRECTION_CODES = {"forward": 0, "backward": 1, "bidirectional": 2}
MERGE_CODES = {"sum": 0, "avg": 1, "gated": 2}
MODE_CODES = {"override": 0, "blend": 1, "overlap": 0}  # overlap: override with free (unaligned) origins


class PluginLibraryError(UsageError):
    """A plugin library is missing, is not a shared library, or fails to load."""


@attrs.frozen
class PluginFieldValue:
    """One plugin field: its name, TensorRT ``PluginFieldType`` member name, and values."""

    name: str
    kind: str  # "INT32" or "FLOAT32"
    values: tuple[float, ...]


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


def plugin_library_paths(given: Sequence[str] = (), environ: Mapping[str, str] | None = None) -> list[str]:
    """The plugin libraries, each resolved with ``resolve_library``: ``given`` (--trt-plugin-lib), else
    APEXX_TRT_PLUGIN_LIB split on os.pathsep."""
    entries = given or (os.environ if environ is None else environ).get(PLUGIN_LIB_ENV, "").split(os.pathsep)
    return [resolve_library(p) for p in entries if p.strip()]


_ELF_KINDS = {0: "of no type", 1: "a relocatable object", 2: "an executable", 4: "a core dump"}


def shared_library_problem(path: str) -> str:
    """Empty when ``path`` looks like a loadable shared library, else why not (naming the path).

    A bare name is the dynamic loader's to find: only loading it can tell.
    """
    if is_bare_library_name(path):
        return ""
    file = Path(path)
    if not file.exists():
        return f"plugin library not found: {path}"
    if not file.is_file():
        return f"plugin library {path} is not a file"
    try:
        with file.open("rb") as handle:
            header = handle.read(18)
    except OSError as exc:
        return f"plugin library {path} cannot be read: {exc.strerror or exc}"
    if sys.platform.startswith("linux"):
        if header[:4] != b"\x7fELF":
            return f"plugin library {path} is not a shared library (no ELF header)"
        e_type = int.from_bytes(header[16:18], "little" if header[5] == 1 else "big")
        if e_type != 3:  # ET_DYN
            kind = _ELF_KINDS.get(e_type, f"of type {e_type}")
            return f"plugin library {path} is not a shared library (an ELF file, but {kind})"
    return ""


_LOADED_LIBRARIES: dict[str, ctypes.CDLL] = {}


def load_plugin_libraries(paths: Sequence[str]) -> list[str]:
    """Load each library once per process; raises ``PluginLibraryError`` naming the first that fails.

    Creators register themselves when their library loads (static registration, e.g.
    ``REGISTER_TENSORRT_PLUGIN``). RTLD_GLOBAL lets one plugin library use another's symbols.
    """
    # a plugin library links against libnvinfer, which pip's TensorRT keeps off the loader
    # path until ``import tensorrt`` has loaded it; without TensorRT the checks below still run
    try_import("tensorrt", TENSORRT_HINT)
    for path in paths:
        key = _library_key(path)
        if key in _LOADED_LIBRARIES:
            continue
        problem = shared_library_problem(path)
        if problem:
            raise PluginLibraryError(problem)
        try:
            _LOADED_LIBRARIES[key] = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as exc:
            raise PluginLibraryError(f"plugin library {path} failed to load: {one_line(str(exc))}") from None
    return [_library_key(p) for p in paths]


def _library_key(path: str) -> str:
    # a bare name is the loader's search, not a file in the current folder
    return path if is_bare_library_name(path) else os.path.realpath(path)


def find_plugin_creator(name: str, version: str, namespace: str) -> Any | None:
    """The registered creator (IPluginV3 or IPluginV2) of ``name``/``version`` in ``namespace``, or None."""
    trt = import_tensorrt()
    registry = trt.get_plugin_registry()
    if not hasattr(registry, "get_creator"):  # before TensorRT 10: IPluginV2 creators only
        return registry.get_plugin_creator(name, version, namespace)
    # TensorRT >= 10 returns IPluginCreator (V2), IPluginCreatorV3One or IPluginCreatorV3Quick;
    # a one-layer network is built here for the first two only
    creator = registry.get_creator(name, version, namespace)
    usable = tuple(t for t in (getattr(trt, "IPluginCreator", None), getattr(trt, "IPluginCreatorV3One", None))
                   if t is not None)
    if creator is not None and usable and not isinstance(creator, usable):
        return None
    return creator


def build_plugin_engine(creator: Any, *, layer_name: str, inputs: Sequence[tuple[str, str, tuple[int, ...]]],
                        outputs: Sequence[str], fields: Sequence[PluginFieldValue], precision: str) -> bytes:
    """A network of one plugin layer: ``inputs`` (name, dtype, shape) in order, ``outputs`` named in order."""
    trt = import_tensorrt()
    builder, network, strongly_typed = new_network(trt)
    tensors = [network.add_input(name, getattr(trt, DTYPE_ATTRS[d]), shape) for name, d, shape in inputs]
    numpy_types = {"INT32": np.int32, "FLOAT32": np.float32}
    # a PluginField points at its array's memory and the collection copies only the pointers:
    # both lists stay referenced here until the plugin has been created and added
    arrays = [np.array(f.values, dtype=numpy_types[f.kind]) for f in fields]
    plugin_fields = [trt.PluginField(f.name, array, getattr(trt.PluginFieldType, f.kind))
                     for f, array in zip(fields, arrays, strict=True)]
    collection = trt.PluginFieldCollection(plugin_fields)
    v3_creator: Any = getattr(trt, "IPluginCreatorV3One", None)  # absent before TensorRT 10
    if v3_creator is not None and isinstance(creator, v3_creator):
        plugin = creator.create_plugin(layer_name, collection, trt.TensorRTPhase.BUILD)
        layer = network.add_plugin_v3(tensors, [], plugin) if plugin is not None else None
    else:
        plugin = creator.create_plugin(layer_name, collection)
        layer = network.add_plugin_v2(tensors, plugin) if plugin is not None else None
    if layer is None:
        why = recording_logger(trt).drain() or "the creator returned no plugin"
        raise EngineBuildError(f"{layer_name}: {why} (fields {', '.join(f.name for f in fields)})")
    if layer.num_outputs != len(outputs):
        raise EngineBuildError(f"{layer_name} has {layer.num_outputs} outputs, expected {len(outputs)}: "
                               f"{', '.join(outputs)}")
    for index, name in enumerate(outputs):
        tensor = layer.get_output(index)
        tensor.name = name
        network.mark_output(tensor)
    engine = configured_build(trt, builder, network, precision, f"the {layer_name} network",
                              strongly_typed=strongly_typed)
    del plugin_fields, arrays  # not before the build: the plugin may read its fields until then
    return engine


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
        device = str(inputs[spec.inputs[0]].device)
        try:
            data = build_plugin_engine(creator, layer_name=spec.plugin, inputs=network_inputs,
                                       outputs=spec.outputs(case), fields=spec.fields(case),
                                       precision=precision)
            model = engine_model_from_bytes(data, device, f"the {spec.plugin} engine")
        except (EngineBuildError, EngineLoadError) as exc:
            raise CellSkipped(f"engine build failed: {exc}") from None
        bound = model.bind({s.name: inputs[s.name] for s in model.inputs})
        metadata = {"plugin": f"{PLUGIN_NAMESPACE}::{spec.plugin} v{PLUGIN_VERSION}",
                    "fields": {f.name: list(f.values) for f in spec.fields(case)},
                    "libraries": libraries, "precision": precision}
        return Prepared(bound.fn, outputs=bound.outputs, metadata=metadata)
