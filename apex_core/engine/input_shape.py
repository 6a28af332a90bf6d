"""``--input-shape NAME=AxBxC``: one model input's shape per flag, for models not named like a workload.

The flag is repeatable on the main run (with ``--model``) and on ``apex-bench sweep``. Its
values fill the model's open dimensions; the checks against the model (unknown input, fixed
dimension, rank, an open input left without a shape) are ``resolve_case``'s, run with the
flag's name so every error starts with ``--input-shape``.

Unlike a shape case, the value has no label and no ``;``: the name is everything before the
last ``=``, so ``input:0=1x3x224x224`` (a TensorFlow export's name) needs no escaping.
"""

from __future__ import annotations

from collections.abc import Sequence

from apex_core.engine.shape_case import Shape, ShapeCase, parse_dims
from apex_core.errors import UsageError

FLAG = "--input-shape"
ALIAS = "--trt-input-shape"

InputShape = tuple[str, Shape]


def parse_input_shape(text: str, where: str | None = None) -> InputShape:
    """One ``--input-shape`` value as ``(name, shape)``; a ``UsageError`` quotes the value otherwise.

    ``where`` starts the error (default ``--input-shape 'VALUE'``; argparse names the flag itself).
    """
    where = where or f"{FLAG} {text!r}"
    name, eq, dims = text.rpartition("=")
    if not eq:
        raise UsageError(f"{where}: expected NAME=AxBxC, e.g. input_ids=1x128")
    name = name.strip()
    if not name:
        raise UsageError(f"{where}: the input name is missing (expected NAME=AxBxC)")
    return name, parse_dims(name, dims.strip(), where)


def input_shapes_case(shapes: Sequence[InputShape]) -> ShapeCase:
    """The flags' shapes as one unlabelled case; an input given twice is a ``UsageError``."""
    seen: set[str] = set()
    for name, _shape in shapes:
        if name in seen:
            raise UsageError(f"{FLAG} gives input {name!r} more than once")
        seen.add(name)
    return ShapeCase(tuple(shapes))


def with_input_shapes(cases: Sequence[ShapeCase], shapes: Sequence[InputShape]) -> list[ShapeCase]:
    """Each case with the ``--input-shape`` entries added (shared by every case).

    Without cases the entries are the one case (with no entries at all: the case of a fully
    static model). An input named both in a case and by the flag is a ``UsageError``: which
    one was meant cannot be told.
    """
    common = input_shapes_case(shapes)
    if not cases:
        return [common]
    combined = []
    for case in cases:
        both = sorted(set(case.shapes) & set(common.shapes))
        if both:
            raise UsageError(f"input {both[0]!r} is given both by {FLAG} and in shape case {case.text!r}; "
                             "give it in one place")
        combined.append(ShapeCase(case.inputs + common.inputs, case.label))
    return combined
