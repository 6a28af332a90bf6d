"""Helpers the kernel modules share: supported dtypes, input checks, configs, bound launches.

Everything here speaks of tensors, sizes and Triton objects only; nothing knows about a
benchmark harness.

Under ``TRITON_INTERPRET=1`` autotuning would benchmark every configuration in the
interpreter; ``autotune_configs`` then keeps only the first one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

# Loads and stores are typed by the input; fp8 has no arithmetic path in these kernels.
SUPPORTED_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)


def interpreting() -> bool:
    """Whether Triton runs in its CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def autotune_configs(configs: Sequence[Any]) -> list[Any]:
    """The configurations to autotune over: all on a GPU, the first in the interpreter."""
    return list(configs[:1]) if interpreting() else list(configs)


def config_dict(config: Any) -> dict[str, Any]:
    """A triton.Config (or a plain dict of meta-parameters) as a JSON-ready dict."""
    if isinstance(config, dict):
        return dict(config)
    out = dict(getattr(config, "kwargs", {}))
    for name in ("num_warps", "num_stages", "num_ctas"):
        value = getattr(config, name, None)
        if value is not None:
            out[name] = value
    return out


def pin_config(kernel: Any, config: Any | None) -> tuple[Any, dict[str, Any]]:
    """The autotuned kernel as is, or its bare jit function with one config's meta-parameters.

    Tests pin each configuration in turn, since the interpreter only ever runs the first.
    """
    if config is None:
        return kernel, {}
    return kernel.fn, config_dict(config)


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float16`` -> ``float16``."""
    return str(dtype).removeprefix("torch.")


def check_dtype(op_name: str, name: str, tensor: torch.Tensor) -> None:
    """Raise ``ValueError`` unless ``tensor`` is of a dtype the kernels load and store."""
    if tensor.dtype not in SUPPORTED_DTYPES:
        supported = ", ".join(dtype_name(d) for d in SUPPORTED_DTYPES)
        raise ValueError(f"{op_name}: {name} has dtype {dtype_name(tensor.dtype)}; "
                         f"supported: {supported}")


def check_tensors(op_name: str, tensors: Mapping[str, torch.Tensor],
                  shapes: Mapping[str, tuple[int, ...]] | None = None) -> None:
    """Raise ``ValueError`` for a shape, floating dtype or layout the kernel cannot read.

    Checked once when a launch is bound, never per call. Contiguity is required, not
    made: a contiguous copy would not see later in-place updates of the caller's tensor.
    """
    for name, tensor in tensors.items():
        if shapes is not None and name in shapes and tuple(tensor.shape) != tuple(shapes[name]):
            raise ValueError(f"{op_name}: {name} has shape {list(tensor.shape)}, "
                             f"expected {list(shapes[name])}")
        if tensor.is_floating_point() and tensor.dim() > 0:
            check_dtype(op_name, name, tensor)
        if not tensor.is_contiguous():
            raise ValueError(f"{op_name}: {name} must be contiguous")


def output_buffer(out: torch.Tensor | None, name: str, like: torch.Tensor,
                  shape: tuple[int, ...], dtype: torch.dtype | None = None) -> torch.Tensor:
    """``out`` checked against the shape, dtype and device it must have, or a new buffer."""
    dtype = like.dtype if dtype is None else dtype
    if out is None:
        return torch.empty(shape, dtype=dtype, device=like.device)
    if tuple(out.shape) != tuple(shape) or out.dtype != dtype or out.device != like.device:
        raise ValueError(f"{name} must be {list(shape)} {dtype_name(dtype)} on {like.device}, "
                         f"got {list(out.shape)} {dtype_name(out.dtype)} on {out.device}")
    if not out.is_contiguous():
        raise ValueError(f"{name} must be contiguous")
    return out


def shape_bucket(b: int, c: int, h: int, w: int, t: int, k: int) -> str:
    """The shape key of the tile kernels' launches, e.g. ``B1-C128-H128-W128-t8-K32``."""
    return f"B{b}-C{c}-H{h}-W{w}-t{t}-K{k}"


@dataclass(frozen=True)
class KernelLaunch:
    """One Triton launch, bound once to its grid and arguments.

    ``kernel`` is a ``triton.autotune`` Autotuner or a bare jit function; ``meta`` are the
    launch's keyword arguments (constexprs, and ``num_warps`` for a bare jit function).
    ``config`` is the configuration chosen here rather than by an autotuner (a heuristic
    or a pinned config), else None. ``start(*args, **meta)`` launches it: ``kernel[grid]``
    is resolved once, not per call.
    """

    op_name: str
    kernel: Any
    grid: Any
    args: tuple[Any, ...]
    meta: dict[str, Any]
    shape_bucket: str
    config: dict[str, Any] | None = None
    start: Callable[..., Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "start", self.kernel[self.grid])

    def __call__(self) -> None:
        self.start(*self.args, **self.meta)

    @property
    def kernel_name(self) -> str:
        jit = getattr(self.kernel, "fn", self.kernel)
        return str(getattr(jit, "__name__", jit))


@dataclass(frozen=True)
class Launcher:
    """An operation bound to its tensors: ``launcher()`` runs it on their current contents.

    ``outputs`` are the buffers each call writes (allocated once); ``launches`` the
    Triton launches of one call in order (for reports: what ran, and with which
    configuration); ``metadata`` how the work was decomposed.
    """

    run: Callable[[], dict[str, torch.Tensor]]
    outputs: dict[str, torch.Tensor]
    launches: tuple[KernelLaunch, ...]
    metadata: dict[str, Any] = field(default_factory=dict)

    def __call__(self) -> dict[str, torch.Tensor]:
        return self.run()


Step = KernelLaunch | Callable[[], object]  # a Triton launch, or work on another library's kernels


def sequential(steps: Sequence[Step],
               outputs: dict[str, torch.Tensor]) -> Callable[[], dict[str, torch.Tensor]]:
    """A call that issues ``steps`` in order and returns ``outputs``; no per-call bookkeeping."""
    bound = [(s.start, s.args, s.meta) if isinstance(s, KernelLaunch) else (s, (), {}) for s in steps]
    if len(bound) == 1:
        ((start, args, meta),) = bound

        def run_one() -> dict[str, torch.Tensor]:
            start(*args, **meta)
            return outputs

        return run_one

    def run_all() -> dict[str, torch.Tensor]:
        for start, args, meta in bound:
            start(*args, **meta)
        return outputs

    return run_all
