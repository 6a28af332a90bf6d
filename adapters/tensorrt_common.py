"""What the TensorRT backends and the engine sweep share: availability, dtypes, engines, builds.

Written against the TensorRT 10 Python API (named I/O tensors, ``set_input_shape`` /
``set_tensor_address`` / ``execute_async_v3``). ``tensorrt`` is imported only inside the
functions that need it, never at import time. The plugin libraries and the one-plugin
network are ``tensorrt_plugin``'s.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import torch

from apex_core.engine.runtime import BoundModel
from apex_core.engine.tensor_spec import DYNAMIC, ProfileRange, TensorSpec
from apex_core.errors import ApexBenchError, UsageError, one_line
from apex_core.lazy_import import cuda_reason, try_import

log = logging.getLogger(__name__)

TENSORRT_HINT = "pip install tensorrt; needs NVIDIA's package index"

# TensorRT DataType member name -> our dtype name; others (FP8, INT4, FP4...) cannot be fed.
_TRT_DTYPES = {"FLOAT": "fp32", "HALF": "fp16", "BF16": "bf16", "INT8": "int8", "INT32": "int32",
               "INT64": "int64", "BOOL": "bool", "UINT8": "uint8"}
FEEDABLE_DTYPES = frozenset(_TRT_DTYPES.values())
# our dtype name -> its attribute name, the same in torch and in tensorrt (torch.float16, trt.float16)
DTYPE_ATTRS = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "int8": "int8",
               "int32": "int32", "int64": "int64", "bool": "bool", "uint8": "uint8"}
_PRECISION_FLAGS = {"fp32": None, "fp16": "FP16", "bf16": "BF16"}


class TensorRTUnavailableError(UsageError):
    """tensorrt cannot be imported here, or there is no CUDA device for it."""


class EngineLoadError(UsageError):
    """A serialized engine is missing or TensorRT cannot deserialize it."""


class EngineBuildError(ApexBenchError):
    """TensorRT rejected a network (ONNX parse, optimization profile, builder)."""


def tensorrt_reason(device: str) -> str:
    """Empty when TensorRT can run on ``device`` here, else the first reason it cannot."""
    _trt, reason = try_import("tensorrt", TENSORRT_HINT)
    if reason:
        return reason
    if not device.startswith("cuda"):
        return "TensorRT runs on CUDA devices only (use --device cuda)"
    return cuda_reason()


def import_tensorrt(device: str = "cuda") -> Any:
    """``import tensorrt`` or raise ``TensorRTUnavailableError`` with the probe's reason."""
    reason = tensorrt_reason(device)
    if reason:
        raise TensorRTUnavailableError(reason)
    import tensorrt

    return tensorrt


def dtype_name_of_trt(trt_dtype: Any) -> str:
    """Our dtype name of a TensorRT ``DataType`` (its lower-cased name when we have none)."""
    member = getattr(trt_dtype, "name", None) or str(trt_dtype).rsplit(".", 1)[-1]
    return _TRT_DTYPES.get(member.upper(), member.lower())


def dtype_name_of_torch(dtype: torch.dtype) -> str:
    text = str(dtype).removeprefix("torch.")
    return next((name for name, attr in DTYPE_ATTRS.items() if attr == text), text)


def cell_dtype_name(tensors: Mapping[str, torch.Tensor]) -> str:
    """A cell's dtype as its data tensors carry it: the lowest floating precision among them."""
    names = {dtype_name_of_torch(t.dtype) for t in tensors.values() if t.is_floating_point()}
    return next((name for name in ("bf16", "fp16") if name in names), "fp32")


@functools.cache
def recording_logger(trt: Any) -> Any:
    """The one TensorRT logger of the process (TensorRT wants one for every builder and runtime).

    It keeps the error messages for our reasons: ``drain()`` returns the last three and forgets them.
    """

    class Recording(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.errors: list[str] = []

        def log(self, severity: Any, msg: str) -> None:
            if severity in (trt.ILogger.Severity.INTERNAL_ERROR, trt.ILogger.Severity.ERROR):
                self.errors.append(msg)
                log.error("tensorrt: %s", msg)
            elif severity == trt.ILogger.Severity.WARNING:
                log.warning("tensorrt: %s", msg)

        def drain(self) -> str:
            text, self.errors = "; ".join(self.errors[-3:]), []
            return one_line(text)

    return Recording()


def new_network(trt: Any) -> tuple[Any, Any, bool]:
    """A builder and an empty network, strongly typed where this TensorRT has the flag:
    ``(builder, network, strongly_typed)``; errors logged before it are forgotten.

    A strongly typed network takes each layer's precision from its tensors' dtypes (the
    ONNX export's, the plugin inputs'), so no FP16/BF16 builder flag is needed; TensorRT
    deprecated those weak-typing flags in 10.12 and removed them in 11.
    """
    logger = recording_logger(trt)
    logger.drain()
    builder = trt.Builder(logger)
    flag = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
    if flag is None:
        return builder, builder.create_network(0), False  # explicit batch is the only mode since TensorRT 10
    return builder, builder.create_network(1 << int(flag)), True


def _spec_of(engine: Any, trt: Any, name: str) -> TensorSpec:
    is_input = engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
    shape = tuple(int(d) for d in engine.get_tensor_shape(name))
    profile = None
    if is_input and engine.num_optimization_profiles > 0:
        lo, opt, hi = (tuple(int(d) for d in dims) for dims in engine.get_tensor_profile_shape(name, 0))
        # TensorRT answers Dims{-1} where it has no profile shape (e.g. shape-tensor inputs)
        if len(lo) == len(opt) == len(hi) == len(shape):
            profile = ProfileRange(lo, opt, hi)
    return TensorSpec(name, is_input, dtype_name_of_trt(engine.get_tensor_dtype(name)),
                      tuple(DYNAMIC if d < 0 else d for d in shape), (None,) * len(shape), profile)


def describe(spec: TensorSpec) -> str:
    """``name dtype [d0, ?, ...]`` plus the profile range of an input, for messages."""
    dims = ", ".join("?" if d == DYNAMIC else str(d) for d in spec.shape)
    text = f"{spec.name} {spec.dtype} [{dims}]"
    if spec.profile is not None and spec.is_dynamic:
        text += f" (profile {list(spec.profile.min)} .. {list(spec.profile.max)})"
    return text


def feed_metas(tensors: Mapping[str, torch.Tensor]) -> dict[str, tuple[str, tuple[int, ...]]]:
    """``{name: (dtype name, shape)}`` of tensors, as ``feed_problem`` takes them."""
    return {name: (dtype_name_of_torch(t.dtype), tuple(t.shape)) for name, t in tensors.items()}


def feed_problem(inputs: Sequence[TensorSpec], feeds: Mapping[str, tuple[str, tuple[int, ...]]]) -> str:
    """Empty when ``feeds`` ({name: (dtype name, shape)}) fit the engine's inputs, else the first misfit."""
    names = [spec.name for spec in inputs]
    unknown = sorted(set(feeds) - set(names))
    if unknown:
        return f"unknown input(s) {', '.join(unknown)}; the engine expects: {'; '.join(map(describe, inputs))}"
    for spec in inputs:
        if spec.name not in feeds:
            if spec.is_dynamic:
                return f"dynamic dimension with no shape given: input {describe(spec)} has no tensor"
            return f"missing input {describe(spec)}"
        dtype, shape = feeds[spec.name]
        if dtype != spec.dtype:
            return f"input {spec.name!r} is {dtype}, the engine expects {describe(spec)}"
        if len(shape) != spec.rank or any(w != DYNAMIC and g != w for g, w in zip(shape, spec.shape,
                                                                                      strict=False)):
            return f"input {spec.name!r} has shape {list(shape)}, the engine expects {describe(spec)}"
        if spec.profile is not None and not spec.profile.contains(shape):
            return f"input {spec.name!r} has shape {list(shape)}, outside the profile: {describe(spec)}"
    return ""


@attrs.frozen
class TensorRTEngineModel:
    """A deserialized engine on one CUDA device, described by name (an ``EngineModel``)."""

    label: str
    device: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    engine: Any = attrs.field(repr=False)
    trt_runtime: Any = attrs.field(repr=False)  # the engine must not outlive its runtime
    runtime: str = "tensorrt"

    def bind(self, feeds: Mapping[str, torch.Tensor]) -> BoundModel:
        """Set input shapes, allocate outputs once and bind every address; ``fn`` only enqueues."""
        problem = feed_problem(self.inputs, feed_metas(feeds))
        if problem:
            raise UsageError(problem)
        for name, tensor in feeds.items():
            if not tensor.is_cuda or not tensor.is_contiguous():
                raise UsageError(f"input {name!r} must be a contiguous CUDA tensor for TensorRT")
        device = next(iter(feeds.values())).device
        context = self.engine.create_execution_context()
        if context is None:
            raise RuntimeError(f"TensorRT could not create an execution context for {self.label}")
        for spec in self.inputs:
            if not context.set_input_shape(spec.name, tuple(feeds[spec.name].shape)):
                raise UsageError(f"TensorRT rejected shape {list(feeds[spec.name].shape)} for {describe(spec)}")
        if not context.all_binding_shapes_specified:
            raise UsageError(f"{self.label}: not every input shape is specified")
        unresolved = context.infer_shapes()
        if unresolved:
            raise UsageError(f"{self.label}: TensorRT cannot infer the shapes of {', '.join(unresolved)}")
        outputs: dict[str, torch.Tensor] = {}
        for spec in self.outputs:
            if spec.dtype not in DTYPE_ATTRS:
                raise UsageError(f"unsupported dtype: output {describe(spec)} has no torch dtype to "
                                 "allocate it with")
            shape = tuple(int(d) for d in context.get_tensor_shape(spec.name))
            if any(d < 0 for d in shape):
                raise UsageError(f"output {spec.name!r} has a data-dependent shape {list(shape)}; "
                                 "apex-bench needs output shapes that follow from the input shapes")
            dtype = getattr(torch, DTYPE_ATTRS[spec.dtype])
            outputs[spec.name] = torch.empty(shape, dtype=dtype, device=device)
        for name, tensor in {**feeds, **outputs}.items():
            if not context.set_tensor_address(name, tensor.data_ptr()):
                raise RuntimeError(f"TensorRT refused the address of {name!r} in {self.label}")
        held = (self, context, dict(feeds))  # keep engine, context and fed tensors alive with fn

        def run() -> dict[str, torch.Tensor]:
            # the caller's current stream (the timer's stream while timing); no host sync here
            if not held[1].execute_async_v3(torch.cuda.current_stream(device).cuda_stream):
                raise RuntimeError(f"TensorRT execute_async_v3 failed for {self.label}")
            return outputs

        return BoundModel(fn=run,
                          input_shapes={s.name: tuple(feeds[s.name].shape) for s in self.inputs},
                          output_shapes={n: tuple(t.shape) for n, t in outputs.items()},
                          outputs=outputs)


def engine_model_from_bytes(data: bytes, device: str = "cuda", label: str = "engine") -> TensorRTEngineModel:
    """Deserialize an engine on ``device``; raises ``EngineLoadError`` saying why it failed."""
    trt = import_tensorrt(device)
    logger = recording_logger(trt)
    logger.drain()
    with torch.cuda.device(torch.device(device)):
        trt_runtime = trt.Runtime(logger)
        engine = trt_runtime.deserialize_cuda_engine(data)
    if engine is None:
        why = logger.drain() or "not an engine of this TensorRT version and GPU"
        raise EngineLoadError(f"deserialization failed: TensorRT cannot load {label}: {why}")
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    specs = [_spec_of(engine, trt, name) for name in names]
    return TensorRTEngineModel(label, device, tuple(s for s in specs if s.is_input),
                               tuple(s for s in specs if not s.is_input), engine, trt_runtime)


def load_engine_model(path: str | os.PathLike[str], device: str = "cuda") -> TensorRTEngineModel:
    """Load a serialized engine (``.engine``/``.plan``) as an ``EngineModel`` (runtime "tensorrt")."""
    engine_path = Path(path)
    import_tensorrt(device)  # not installed / no CUDA come before any question about the file
    if not engine_path.is_file():
        raise EngineLoadError(f"engine file not found: {engine_path}")
    return engine_model_from_bytes(engine_path.read_bytes(), device, str(engine_path))


def profile_around(shape: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(min, opt, max) around one input shape: half to double each dim, optimized for the shape itself."""
    opt = tuple(int(d) for d in shape)
    return tuple(max(1, d // 2) for d in opt), opt, tuple(max(1, 2 * d) for d in opt)


def network_profile(network_inputs: Sequence[tuple[str, tuple[int, ...]]],
                    profile_shapes: Mapping[str, tuple[Sequence[int], Sequence[int], Sequence[int]]]
                    ) -> dict[str, tuple[tuple[int, ...], ...]]:
    """The profile entries of a network's dynamic inputs; the dims the network fixes stay fixed."""
    entries: dict[str, tuple[tuple[int, ...], ...]] = {}
    for name, shape in network_inputs:
        if all(d >= 0 for d in shape):
            continue
        if name not in profile_shapes:
            dims = ", ".join("?" if d < 0 else str(d) for d in shape)
            raise EngineBuildError(f"dynamic dimension with no shape given: input {name!r} [{dims}]")
        ranges = [tuple(int(d) for d in dims) for dims in profile_shapes[name]]
        if any(len(r) != len(shape) for r in ranges):
            raise EngineBuildError(f"profile of input {name!r} has rank {len(ranges[0])}, the network's "
                                   f"input has rank {len(shape)}")
        entries[name] = tuple(tuple(d if d >= 0 else r[i] for i, d in enumerate(shape)) for r in ranges)
    return entries


def configured_build(trt: Any, builder: Any, network: Any, precision: str, label: str,
                     profile: Mapping[str, tuple[tuple[int, ...], ...]] | None = None,
                     strongly_typed: bool = False) -> bytes:
    """Set the precision flag (weakly typed networks only) and profile, build, return the engine."""
    if precision not in _PRECISION_FLAGS:
        raise EngineBuildError(f"unknown precision {precision!r}; valid: {', '.join(_PRECISION_FLAGS)}")
    config = builder.create_builder_config()
    flag = None if strongly_typed else getattr(trt.BuilderFlag, _PRECISION_FLAGS[precision] or "", None)
    if flag is not None:
        config.set_flag(flag)
    if profile:
        optimization_profile = builder.create_optimization_profile()
        for name, (lo, opt, hi) in profile.items():
            try:  # the binding raises on an inconsistent min/opt/max
                optimization_profile.set_shape(name, lo, opt, hi)
            except (RuntimeError, TypeError, ValueError) as exc:
                raise EngineBuildError(f"profile of input {name!r} ({list(lo)} .. {list(hi)}, opt "
                                       f"{list(opt)}) rejected: {one_line(str(exc))}") from None
        if config.add_optimization_profile(optimization_profile) < 0:
            raise EngineBuildError(f"TensorRT rejected the optimization profile of {label}: "
                                   f"{recording_logger(trt).drain() or 'no reason logged'}")
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        why = recording_logger(trt).drain() or "no reason logged"
        raise EngineBuildError(f"TensorRT could not build {label}: {why}")
    return bytes(serialized)


def build_engine_from_onnx(onnx_path: str | os.PathLike[str], *, precision: str,
                           profile_shapes: Mapping[str, tuple[Sequence[int], Sequence[int], Sequence[int]]]
                           ) -> bytes:
    """Parse an ONNX file, add one optimization profile over its dynamic inputs, build with the flag."""
    trt = import_tensorrt()
    builder, network, strongly_typed = new_network(trt)
    logger = recording_logger(trt)
    parser = trt.OnnxParser(network, logger)
    name = Path(onnx_path).name  # a temporary folder's path would make every reason unique
    if not parser.parse_from_file(os.fspath(onnx_path)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise EngineBuildError(f"TensorRT's ONNX parser rejected {name}: {one_line(errors) or logger.drain()}")
    inputs = [network.get_input(i) for i in range(network.num_inputs)]
    profile = network_profile([(t.name, tuple(int(d) for d in t.shape)) for t in inputs], profile_shapes)
    return configured_build(trt, builder, network, precision, f"an engine from {name}", profile,
                            strongly_typed)
