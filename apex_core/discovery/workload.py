"""A workload made from a ``BenchSpec``: parameters, profiles, inputs, reference, work, tolerance.

The module the file names is loaded only when a cell needs it (after the skip conditions
held), so a kernel that needs a missing stack becomes a skipped cell, not a broken listing.
The computation under test is run by the ``bench-function`` backend; the torch reference
serves the correctness check and the ``torch-reference`` backend as for any workload.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import math
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import torch

from apex_core.correctness import DTYPES
from apex_core.discovery.spec import DTYPE_BYTES, BenchSpec, InputSpec, Size
from apex_core.errors import ParamError
from apex_core.interfaces import DEFAULT_TOLERANCES, CellSkipped, Inputs, Outputs, Workload
from apex_core.results import Case, SkipKind, Tolerance, Work

_INT_DTYPES = {"int32": torch.int32, "int64": torch.int64}


def _params_class(spec: BenchSpec) -> type:
    """A frozen attrs class whose defaults are the file's ``params`` (the fixed profile)."""
    fields = {key: attrs.field(default=value, type=type(value)) for key, value in spec.params.items()}
    return attrs.make_class(f"{spec.name.replace('-', '_')}_params", fields, frozen=True, kw_only=True)


class DiscoveredWorkload(Workload):
    """One ``bench.yaml``'s workload."""

    name = "bench-yaml"  # each instance takes its file's name
    description = "a workload declared by a bench.yaml file"
    params_type = type(None)  # each instance has its own
    case_names = ("default",)

    def __init__(self, spec: BenchSpec) -> None:
        self.spec = spec
        self.name = spec.name  # type: ignore[misc]  # per instance, like the class attributes of a plugin
        self.description = spec.description or f"declared by {spec.path}"  # type: ignore[misc]
        self.params_type = _params_class(spec)  # type: ignore[misc]
        self.profiles = spec.profiles  # type: ignore[misc]  # per instance: the file's profiles
        self._callables: dict[str, Callable[..., Any]] = {}

    def make_params(self, profile: str = "fixed", overrides: Mapping[str, Any] | None = None) -> Any:
        """The file's profile of that name over its ``params``; a profile it lacks runs its defaults."""
        values = {**self.spec.profiles.get(profile, {}),
                  **{k: v for k, v in (overrides or {}).items() if k in self.spec.params}}
        try:
            return self.params_type(**values)  # type: ignore[misc]  # an attrs class made per file
        except (TypeError, ValueError) as exc:
            raise ParamError(f"{self.name}: {exc}") from None

    def make_inputs(self, case: Case, device: str, dtype: torch.dtype, seed: int) -> Inputs:
        """Seeded inputs drawn on the CPU as the file declares them; first, its skip conditions."""
        unmet = self.spec.skip.unmet(device)
        if unmet:
            raise CellSkipped(unmet, SkipKind.UNAVAILABLE)
        dtype_name = next((n for n, d in DTYPES.items() if d == dtype), str(dtype))
        if dtype_name not in self.spec.precisions:
            raise CellSkipped(f"bench.yaml lists precisions {', '.join(self.spec.precisions)}",
                              SkipKind.UNSUPPORTED)
        params = case.params_dict()
        generator = torch.Generator().manual_seed(seed)
        return {s.name: _draw(s, params, generator, dtype).to(device) for s in self.spec.inputs}

    def reference(self, case: Case, inputs: Inputs) -> Outputs:
        """The file's torch reference on ``inputs``."""
        return self.call(self.resolve("reference"), case, inputs)

    def work(self, case: Case, dtype_name: str = "fp16") -> Work:
        """Units and counts from the file's ``work`` (count defaults to the first input's elements);
        ``dtype_bytes`` in a size is the element size of the cell's dtype."""
        params = {**case.params_dict(), DTYPE_BYTES: DTYPES[dtype_name].itemsize}
        first = self.spec.inputs[0]
        count = self.spec.work.get("count", first.shape)
        return Work(bytes_moved=_evaluate(self.spec.work.get("bytes", 0), params),
                    flops=_evaluate(self.spec.work.get("flops", 0), params),
                    units=self.spec.work["units"], count=_evaluate(count, params))

    def tolerance(self, dtype_name: str) -> Tolerance:
        atol, rtol = DEFAULT_TOLERANCES[dtype_name]
        given = self.spec.tolerances.get(dtype_name, {})
        return Tolerance(given.get("atol", atol), given.get("rtol", rtol), given.get("max_mismatch_ratio", 0.0),
                         given.get("reason", f"set in {self.spec.path}" if given else ""))

    def resolve(self, which: str) -> Callable[..., Any]:
        """The file's ``function`` or ``reference`` as a callable (loaded once per process)."""
        if which not in self._callables:
            target = self.spec.function if which == "function" else self.spec.reference
            module_name, _, function = target.rpartition(":")
            module = _load_module(self.spec.folder, module_name or self.spec.module)
            found = getattr(module, function, None)
            if not callable(found):
                raise AttributeError(f"{self.spec.path}: field {which!r}: module {module.__name__!r} has no "
                                     f"function {function!r}")
            self._callables[which] = found
        return self._callables[which]

    def call(self, function: Callable[..., Any], case: Case, inputs: Inputs) -> Outputs:
        """``function`` called with the inputs and the parameters its signature names; outputs by name."""
        params = case.params_dict()
        accepted = inspect.signature(function).parameters
        takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
        extra = {k: v for k, v in params.items() if takes_all or k in accepted}
        with torch.no_grad():
            result = function(**inputs, **extra)
        return _named_outputs(result, self.spec.outputs, self.spec.path)


def _evaluate(size: Size, params: Mapping[str, Any]) -> int:
    factors = size if isinstance(size, tuple) else (size,)
    return math.prod(int(params[f]) if isinstance(f, str) else int(f) for f in factors)


def _draw(spec: InputSpec, params: Mapping[str, Any], generator: torch.Generator,
          dtype: torch.dtype) -> torch.Tensor:
    shape = tuple(_evaluate(s, params) for s in spec.shape)
    low = params[spec.low] if isinstance(spec.low, str) else spec.low
    high = params[spec.high] if isinstance(spec.high, str) else spec.high
    if spec.kind == "integers":
        return torch.randint(int(low), int(high), shape, generator=generator, dtype=_INT_DTYPES[spec.dtype])
    if spec.kind == "uniform":
        values = torch.rand(shape, generator=generator) * (high - low) + low
    else:
        values = torch.randn(shape, generator=generator)
    return values.to(dtype if spec.dtype == "data" else torch.float32)


def _named_outputs(result: Any, names: tuple[str, ...], path: Path) -> Outputs:
    if isinstance(result, Mapping):
        return dict(result)
    values = (result,) if isinstance(result, torch.Tensor) else tuple(result)
    if len(values) != len(names):
        raise ValueError(f"{path}: the function returned {len(values)} value(s), 'outputs' lists {len(names)}")
    return dict(zip(names, values, strict=True))


def _load_module(folder: Path, name: str) -> ModuleType:
    """``name``.py (or package) beside the bench.yaml, under a name unique to its folder; else an import."""
    candidates = [folder / f"{name}.py", folder / name / "__init__.py"]
    path = next((c for c in candidates if c.is_file()), None)
    if path is None:
        return importlib.import_module(name)
    digest = hashlib.sha256(str(folder).encode()).hexdigest()[:12]
    unique = f"apex_bench_discovered_{digest}_{name.replace('.', '_')}"
    if unique in sys.modules:
        return sys.modules[unique]
    locations = [str(path.parent)] if path.name == "__init__.py" else None
    spec = importlib.util.spec_from_file_location(unique, path, submodule_search_locations=locations)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[unique] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(unique, None)
        raise
    return module
