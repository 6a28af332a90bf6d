"""Shape cases of the engine sweep: parse ``[label:]name=AxBxC[;name=AxB...]`` and check it against a model.

Grammar (whitespace around the separators is ignored):

- ``case  := [label ":"] entry (";" entry)*``
- ``entry := name "=" dims``, ``dims := dim ("x" dim)*``, ``dim`` a positive decimal integer.
- ``label`` is letters, digits and ``_ . + -``; it names the case in the report. Without one, the
  case is named by its canonical text (``a=1x3x128x128;b=1024x2``). A ``:`` before the first
  ``=`` always ends a label, so an input whose own name holds a ``:`` needs a label first; an
  empty one (``:input:0=1x3``) leaves the case unlabelled.
- ``name`` is any text without ``=`` or ``;``; each input appears at most once per case.

Every problem is one ``UsageError`` line that quotes the offending text.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence

import attrs

from apex_core.engine.tensor_spec import DYNAMIC, TensorSpec
from apex_core.errors import UsageError

LABEL_PATTERN = re.compile(r"[A-Za-z0-9_.+\-]+")
_DIM_PATTERN = re.compile(r"[0-9]+")
# The largest dimension any runtime can hold (ONNX and TensorRT 10 use int64 dimensions).
MAX_DIM = 2**63 - 1
# Characters a report key (workload/case/backend/dtype) and a baseline metric name cannot hold.
_KEY_UNSAFE = re.compile(r"[/\s]")

Shape = tuple[int, ...]
# Up to this many fixed inputs are named in an unknown-input error; more are only counted.
_LISTED_FIXED = 8


def key_safe(text: str) -> str:
    """``text`` with the characters a report key or metric name cannot hold (``/``, spaces) as ``_``."""
    return _KEY_UNSAFE.sub("_", text)


def format_shape(shape: Sequence[int]) -> str:
    """``1x3x64x64``; dynamic dimensions print as ``-1``; a scalar as ``()``."""
    return "x".join(str(d) for d in shape) if len(shape) else "()"


@attrs.frozen
class ShapeCase:
    """One parsed shape case: the shapes given per input, in the order given, and an optional label."""

    inputs: tuple[tuple[str, Shape], ...]
    label: str | None = None

    @property
    def shapes(self) -> dict[str, Shape]:
        return dict(self.inputs)

    @property
    def body(self) -> str:
        """The canonical ``name=AxB;...`` text, without the label."""
        return ";".join(f"{name}={format_shape(shape)}" for name, shape in self.inputs)

    @property
    def text(self) -> str:
        """The canonical case text; ``parse_shape_case(case.text) == case``.

        Without a label, a body whose first name holds a ``:`` starts with an empty label
        (``:input:0=1x3``), so the name is not read as a label when parsed again.
        """
        if self.label:
            return f"{self.label}:{self.body}"
        return f":{self.body}" if ":" in self.body.partition("=")[0] else self.body

    @property
    def name(self) -> str:
        """The case's name in the report: the label, else the canonical text made key-safe."""
        return self.label or key_safe(self.body)


def parse_dims(name: str, text: str, where: str) -> Shape:
    """``AxBxC`` as positive integers; ``where`` starts every error (``shape case entry 'x=1x'``)."""
    if not text:
        raise UsageError(f"{where}: input {name!r} has no dimensions (expected e.g. {name}=1x3x64x64)")
    dims = []
    for part in text.split("x"):
        part = part.strip()
        if not _DIM_PATTERN.fullmatch(part):
            raise UsageError(f"{where}: dimension {part!r} of input {name!r} is not a positive integer")
        # int() refuses strings of thousands of digits with its own error; no dimension needs 20.
        value = int(part) if len(part.lstrip("0")) <= 19 else MAX_DIM + 1
        if value < 1:
            raise UsageError(f"{where}: dimension {part!r} of input {name!r} must be >= 1")
        if value > MAX_DIM:
            raise UsageError(f"{where}: dimension {part!r} of input {name!r} is larger than {MAX_DIM}")
        dims.append(value)
    return tuple(dims)


def _split_label(text: str) -> tuple[str | None, str]:
    """A ``:`` before the first ``=`` ends the label; an empty label (``:in:0=1x3``) is no label."""
    if ":" not in text.partition("=")[0]:
        return None, text
    if text.lstrip().startswith(":"):
        return None, text.lstrip()[1:]
    label, _, rest = text.partition(":")
    label = label.strip()
    if not LABEL_PATTERN.fullmatch(label):
        raise UsageError(f"shape case {text!r}: label {label!r} may hold only letters, digits and _ . + - "
                         "(an input name with ':' needs a label first, e.g. small:in:0=1x3)")
    if not rest.strip():
        raise UsageError(f"shape case {text!r}: no input shapes after the label {label!r}")
    return label, rest


def parse_shape_case(text: str) -> ShapeCase:
    """Parse one ``--shape-case`` value; raises ``UsageError`` naming the offending text."""
    if not isinstance(text, str) or not text.strip():
        raise UsageError(f"shape case {text!r} is empty; expected name=AxBxC or a=1x3x128x128;b=1024x2")
    label, body = _split_label(text)
    entries: list[tuple[str, Shape]] = []
    for entry in body.split(";"):
        name, eq, dims = entry.partition("=")
        name = name.strip()
        if not entry.strip():
            raise UsageError(f"shape case {text!r} has an empty entry (a stray ';')")
        if not eq:
            hint = " (a ':' ends the case label: write name=AxBxC, not name:AxBxC)" if label else ""
            raise UsageError(f"shape case entry {entry.strip()!r} in {text!r}: expected name=AxBxC{hint}")
        if not name:
            raise UsageError(f"shape case entry {entry.strip()!r} in {text!r}: the input name is missing")
        if any(name == seen for seen, _ in entries):
            raise UsageError(f"shape case {text!r} gives input {name!r} more than once")
        entries.append((name, parse_dims(name, dims.strip(), f"shape case entry {entry.strip()!r}")))
    return ShapeCase(tuple(entries), label)


def _inputs_text(inputs: Sequence[TensorSpec]) -> str:
    """The engine's inputs for an error line: those with open dimensions in full, fixed ones by name."""
    open_ = [f"{s.name} ({format_shape(s.shape)} {s.dtype})" for s in inputs if s.is_dynamic]
    fixed = [s.name for s in inputs if not s.is_dynamic]
    if not fixed:
        return ", ".join(open_) or "none"
    names = f": {', '.join(fixed)}" if len(fixed) <= _LISTED_FIXED else ""
    return ", ".join([*open_, f"{len(fixed)} fixed{names}"])


def _unknown_input(case: ShapeCase, where: str, name: str, inputs: Sequence[TensorSpec]) -> UsageError:
    names = [s.name for s in inputs]
    close = difflib.get_close_matches(name, names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    if case.label and f"{case.label}:{name}" in names:
        hint = f" (read {case.label!r} as the case label; give a label first, e.g. c1:{case.label}:{name}=...)"
    return UsageError(f"{where}: unknown input {name!r}{hint}; the engine's inputs: {_inputs_text(inputs)}")


def _check_fixed_dims(where: str, spec: TensorSpec, shape: Shape) -> None:
    if len(shape) != spec.rank:
        raise UsageError(f"{where}: input {spec.name!r}: rank {len(shape)} given "
                         f"({format_shape(shape)}), the engine expects rank {spec.rank} "
                         f"({format_shape(spec.shape)})")
    for axis, (given, fixed) in enumerate(zip(shape, spec.shape, strict=True)):
        if fixed != DYNAMIC and given != fixed:
            raise UsageError(f"{where}: input {spec.name!r}: dimension {axis} is {given} in "
                             f"{format_shape(shape)}, the engine fixes it at {fixed} "
                             f"({format_shape(spec.shape)})")


def resolve_case(case: ShapeCase, inputs: Sequence[TensorSpec], *, flag: str | None = None) -> dict[str, Shape]:
    """The concrete shape of every model input for ``case``, in the model's input order.

    An input may be left out when its shape is known: fully static, or every dynamic dimension
    named (ONNX ``dim_param``) and given a value by another input of the case. Raises
    ``UsageError`` for an unknown input, a wrong rank, a fixed dimension given another value,
    dimensions named alike given different values, a shape outside the input's optimization
    profile, or a dynamic input whose shape stays open. Errors start with ``flag`` when the
    shapes came from a flag (``--input-shape``), else with the case's name.
    """
    where = flag or f"case {case.name!r}"
    names = {spec.name for spec in inputs}
    given = case.shapes
    for name in given:
        if name not in names:
            raise _unknown_input(case, where, name, inputs)
    named: dict[str, tuple[str, int]] = {}  # dim name -> (input that gave it, value)
    for spec in inputs:
        if spec.name in given:
            _check_fixed_dims(where, spec, given[spec.name])
            _collect_named_dims(where, spec, given[spec.name], named)
    resolved: dict[str, Shape] = {}
    for spec in inputs:
        shape = given[spec.name] if spec.name in given else _inferred_shape(where, flag, spec, named)
        if spec.profile is not None and not spec.profile.contains(shape):
            raise UsageError(f"{where}: input {spec.name!r} shape {format_shape(shape)} is outside "
                             f"the engine's optimization profile min {format_shape(spec.profile.min)} "
                             f"max {format_shape(spec.profile.max)}")
        resolved[spec.name] = shape
    return resolved


def _dim_name(spec: TensorSpec, axis: int) -> str | None:
    return spec.dim_names[axis] if axis < len(spec.dim_names) else None


def _collect_named_dims(where: str, spec: TensorSpec, shape: Shape, named: dict[str, tuple[str, int]]) -> None:
    """Dimensions the model names alike must get one value across the inputs of a case."""
    for axis, value in enumerate(shape):
        dim_name = _dim_name(spec, axis)
        if dim_name is None:
            continue
        first = named.setdefault(dim_name, (spec.name, value))
        if first[1] != value:
            raise UsageError(f"{where}: input {spec.name!r}: dimension {axis} ({dim_name}) is "
                             f"{value}, but input {first[0]!r} gives {dim_name} = {first[1]}; the engine "
                             "expects them equal")


def _inferred_shape(where: str, flag: str | None, spec: TensorSpec,
                    named: Mapping[str, tuple[str, int]]) -> Shape:
    """The shape of an input the case leaves out: its fixed dims, and named dims known from other inputs."""
    dims = []
    for axis, fixed in enumerate(spec.shape):
        dim_name = _dim_name(spec, axis)
        if fixed != DYNAMIC:
            dims.append(fixed)
        elif dim_name is not None and dim_name in named:
            dims.append(named[dim_name][1])
        else:
            add = f"pass {flag} {spec.name}=..." if flag else f"add {spec.name}=... to the case"
            raise UsageError(f"{where}: input {spec.name!r} has dynamic dimensions "
                             f"({format_shape(spec.shape)}) and no shape; {add}")
    return tuple(dims)
