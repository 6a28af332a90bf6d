"""Load an ONNX model into ONNX Runtime and run it on torch tensors, by name.

``load_onnx_model`` turns the session's metadata into ``TensorSpec`` values once;
``OrtModel.bind`` checks the feeds against them and binds the torch tensors' memory to
the session through an I/O binding, so every call reads the feeds' current contents and
writes into output tensors allocated once (no numpy copies, and bf16 works where numpy
has no such type). onnxruntime is imported only when a model is loaded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import torch

from apex_core.engine.runtime import BoundModel, EngineModel
from apex_core.engine.tensor_spec import DYNAMIC, TensorSpec
from apex_core.errors import UsageError, first_line
from apex_core.lazy_import import try_import  # the backends' probe gives the same reasons

# ONNX Runtime type string -> (dtype name, onnx.TensorProto element type). The integer codes
# are the ONNX enum (stable across versions), so the runtime needs no onnx import.
_ORT_TYPES: dict[str, tuple[str, int]] = {
    "tensor(float)": ("fp32", 1),
    "tensor(uint8)": ("uint8", 2),
    "tensor(int8)": ("int8", 3),
    "tensor(int16)": ("int16", 5),
    "tensor(int32)": ("int32", 6),
    "tensor(int64)": ("int64", 7),
    "tensor(bool)": ("bool", 9),
    "tensor(float16)": ("fp16", 10),
    "tensor(double)": ("fp64", 11),
    "tensor(bfloat16)": ("bf16", 16),
}
ELEMENT_TYPES: dict[str, int] = dict(_ORT_TYPES.values())
# TensorSpec dtype name -> torch attribute (a wider set than ONNX Runtime's: TensorRT has fp8)
TORCH_DTYPES: dict[str, str] = {
    "fp64": "float64", "fp32": "float32", "fp16": "float16", "bf16": "bfloat16",
    "fp8": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2",
    "int8": "int8", "uint8": "uint8", "int16": "int16", "int32": "int32", "int64": "int64", "bool": "bool",
}

INSTALL_HINT = "pip install onnxruntime, or onnxruntime-gpu for the CUDA execution provider"


class RuntimeUnavailableError(UsageError):
    """ONNX Runtime (or the execution provider a device needs) is not usable here."""


class UnsupportedModelError(UsageError):
    """The execution provider has no kernel for an operator of the model in its types."""


def torch_dtype(dtype_name: str) -> torch.dtype:
    """The torch dtype of a TensorSpec dtype name (fp16, bf16, fp32, int32, ...)."""
    return getattr(torch, TORCH_DTYPES[dtype_name])


def dtype_name_of(dtype: torch.dtype) -> str:
    """The TensorSpec dtype name of a torch dtype (``str(dtype)`` for those ONNX Runtime lacks)."""
    for name in ELEMENT_TYPES:
        if torch_dtype(name) == dtype:
            return name
    return str(dtype).removeprefix("torch.")


def providers_for(device: str, available: list[str]) -> list[str]:
    """Execution providers for ``device`` (``cpu``, ``cuda`` or ``cuda:N``), or raise why not."""
    if device == "cpu":
        return ["CPUExecutionProvider"]
    if device.split(":")[0] == "cuda":
        if "CUDAExecutionProvider" not in available:
            raise RuntimeUnavailableError(
                "onnxruntime has no CUDAExecutionProvider here (available: "
                f"{', '.join(available) or 'none'}; install onnxruntime-gpu)"
            )
        return ["CUDAExecutionProvider"]
    raise UsageError(f"unknown device {device!r} for onnxruntime; valid devices: cpu, cuda, cuda:N")


def _spec(arg: Any, is_input: bool) -> TensorSpec:
    """A TensorSpec from an onnxruntime NodeArg (str dims are symbolic, None unknown)."""
    if arg.type not in _ORT_TYPES:
        raise UsageError(f"{arg.name!r} has type {arg.type}, which apex-bench cannot feed")
    dims = list(arg.shape or [])
    shape = tuple(d if isinstance(d, int) and d >= 0 else DYNAMIC for d in dims)
    names = tuple(d if isinstance(d, str) else None for d in dims)
    return TensorSpec(arg.name, is_input, _ORT_TYPES[arg.type][0], shape, names)


def describe(spec: TensorSpec) -> str:
    """``name dtype [d0, d1, ...]`` with symbolic names (or ``?``) for open dimensions."""
    names = list(spec.dim_names) + [None] * (spec.rank - len(spec.dim_names))
    dims = [str(d) if d != DYNAMIC else (names[i] or "?") for i, d in enumerate(spec.shape)]
    return f"{spec.name} {spec.dtype} [{', '.join(dims)}]"


def check_feeds(inputs: tuple[TensorSpec, ...], feeds: Mapping[str, torch.Tensor]) -> None:
    """Raise ``UsageError`` unless ``feeds`` names every input once, each with a fitting shape and dtype."""
    expected = [spec.name for spec in inputs]
    missing = [n for n in expected if n not in feeds]
    unknown = sorted(n for n in feeds if n not in expected)
    if missing or unknown:
        parts = [f"missing input(s) {', '.join(missing)}"] if missing else []
        parts += [f"unknown input(s) {', '.join(unknown)}"] if unknown else []
        wanted = "; ".join(describe(spec) for spec in inputs)
        raise UsageError(f"{' and '.join(parts)}; the model expects: {wanted}")
    for spec in inputs:
        tensor = feeds[spec.name]
        shape = tuple(tensor.shape)
        if len(shape) != spec.rank:
            raise UsageError(
                f"input {spec.name!r} has rank {len(shape)} (shape {list(shape)}), "
                f"the model expects rank {spec.rank}: {describe(spec)}"
            )
        for axis, (got, want) in enumerate(zip(shape, spec.shape, strict=True)):
            if want != DYNAMIC and got != want:
                raise UsageError(
                    f"input {spec.name!r} has shape {list(shape)}, the model expects {describe(spec)} "
                    f"(dim {axis} is fixed at {want})"
                )
        got_dtype = dtype_name_of(tensor.dtype)
        if got_dtype != spec.dtype:
            raise UsageError(f"input {spec.name!r} is {got_dtype}, the model expects {describe(spec)}")


@attrs.frozen
class OrtModel:
    """An ONNX model loaded into an ONNX Runtime session on one device."""

    path: Path
    device: str
    session: Any = attrs.field(repr=False)
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    providers: tuple[str, ...]
    runtime: str = "onnxruntime"

    def bind(self, feeds: Mapping[str, torch.Tensor]) -> BoundModel:
        """Check ``feeds``, bind their memory, resolve output shapes by one run, allocate outputs."""
        check_feeds(self.inputs, feeds)
        device = self._device_of(feeds)
        binding = self.session.io_binding()
        staged: list[tuple[torch.Tensor, torch.Tensor]] = []  # (feed, contiguous copy) pairs
        for spec in self.inputs:
            feed = source = feeds[spec.name]
            if not feed.is_contiguous():
                # ORT reads dense memory: refresh a contiguous copy before every run
                source = feed.contiguous()
                staged.append((feed, source))
            binding.bind_input(spec.name, device.type, device.index or 0, ELEMENT_TYPES[spec.dtype],
                               list(source.shape), source.data_ptr())
        for spec in self.outputs:
            binding.bind_output(spec.name, device.type, device.index or 0)
        self._run(binding, device)
        values = binding.get_outputs()
        shapes = {spec.name: tuple(value.shape()) for spec, value in zip(self.outputs, values, strict=True)}
        outputs = {spec.name: torch.empty(shapes[spec.name], dtype=torch_dtype(spec.dtype), device=device)
                   for spec in self.outputs}
        for spec in self.outputs:  # bound again, now to the tensors every run writes into
            binding.bind_output(spec.name, device.type, device.index or 0, ELEMENT_TYPES[spec.dtype],
                                list(shapes[spec.name]), outputs[spec.name].data_ptr())
        # the binding points at the feeds' memory: the closure keeps them (and the copies) alive
        held = (dict(feeds), staged)

        def run() -> dict[str, torch.Tensor]:
            for feed, source in held[1]:
                source.copy_(feed)
            self._run(binding, device)
            return outputs

        return BoundModel(
            fn=run,
            input_shapes={spec.name: tuple(feeds[spec.name].shape) for spec in self.inputs},
            output_shapes=shapes,
            outputs=outputs,
        )

    def _device_of(self, feeds: Mapping[str, torch.Tensor]) -> torch.device:
        """The feeds' device, which must be this model's (one device for all of them)."""
        devices = {t.device for t in feeds.values()} or {torch.device(self.device)}
        device = next(iter(devices))
        wanted = torch.device(self.device)
        same = device.type == wanted.type and (wanted.index is None or device.index in (None, wanted.index))
        if len(devices) > 1 or not same:
            names = ", ".join(sorted(str(d) for d in devices))
            raise UsageError(f"inputs are on {names} but the model was loaded for {self.device}")
        return device

    def _run(self, binding: Any, device: torch.device) -> None:
        if device.type == "cuda":
            # ORT's CUDA provider runs on its own stream: the feeds written on torch's stream
            # must be complete before it reads them (ORT itself syncs when the run ends)
            torch.cuda.current_stream(device).synchronize()
        self.session.run_with_iobinding(binding)


def load_onnx_model(path: str | os.PathLike[str], device: str = "cpu") -> OrtModel:
    """Load ``path`` into an ONNX Runtime session for ``device`` (cpu, cuda, cuda:N)."""
    model_path = Path(path)
    if not model_path.is_file():
        raise UsageError(f"ONNX model file not found: {model_path}")
    ort, reason = try_import("onnxruntime", INSTALL_HINT)
    if ort is None:
        raise RuntimeUnavailableError(reason)
    providers = providers_for(device, list(ort.get_available_providers()))
    options = ort.SessionOptions()
    options.log_severity_level = 4  # fatal only: failures come back as exceptions, not stderr noise
    provider_options: list[dict[str, str]] = [{}]
    if device.startswith("cuda:"):
        provider_options = [{"device_id": device.split(":", 1)[1]}]
    try:
        session = ort.InferenceSession(str(model_path), options, providers=providers,
                                       provider_options=provider_options)
    except Exception as exc:
        first = first_line(exc) or type(exc).__name__
        if "NOT_IMPLEMENTED" in first:
            # e.g. "Could not find an implementation for Where(16)": a bf16 graph on the CPU
            detail = first.split("NOT_IMPLEMENTED :", 1)[-1].strip()
            raise UnsupportedModelError(f"onnxruntime {'/'.join(providers)} cannot run {model_path.name}: "
                                        f"{detail}") from None
        raise UsageError(f"onnxruntime cannot load {model_path}: {first}") from None
    if device.startswith("cuda") and session.get_providers()[0] != "CUDAExecutionProvider":
        # ONNX Runtime falls back to the CPU silently (its log is muted above)
        raise RuntimeUnavailableError(f"onnxruntime did not run {model_path.name} on its CUDA execution "
                                      f"provider (session providers: {', '.join(session.get_providers())})")
    return OrtModel(
        path=model_path,
        device=device,
        session=session,
        inputs=tuple(_spec(arg, True) for arg in session.get_inputs()),
        outputs=tuple(_spec(arg, False) for arg in session.get_outputs()),
        providers=tuple(session.get_providers()),
    )


def _as_engine_model(model: OrtModel) -> EngineModel:
    """Never called: lets mypy check that ``OrtModel`` satisfies the ``EngineModel`` protocol."""
    return model
