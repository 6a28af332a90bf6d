"""``--input-shape NAME=AxBxC``: parsing, combining with shape cases, and the checks against a model."""

import pytest

from apex_core.engine.input_shape import input_shapes_case, parse_input_shape, with_input_shapes
from apex_core.engine.shape_case import ShapeCase, parse_shape_case, resolve_case
from apex_core.engine.tensor_spec import DYNAMIC, TensorSpec
from apex_core.errors import UsageError

INPUTS = (TensorSpec("pixel_values:0", True, "fp32", (DYNAMIC, 4), ("N", None)),
          TensorSpec("Mask", True, "int64", (DYNAMIC, 4)))


def test_the_name_is_everything_before_the_last_equals_sign():
    assert parse_input_shape("pixel_values:0=2x4") == ("pixel_values:0", (2, 4))
    assert parse_input_shape(" Mask = 2 x 4 ") == ("Mask", (2, 4))


@pytest.mark.parametrize(("text", "fragment"), [
    ("Mask", "expected NAME=AxBxC"),
    ("=2x4", "the input name is missing"),
    ("Mask=", "input 'Mask' has no dimensions"),
    ("Mask=2xx4", "dimension '' of input 'Mask' is not a positive integer"),
    ("Mask=2x0", "dimension '0' of input 'Mask' must be >= 1"),
    ("Mask=-2x4", "dimension '-2' of input 'Mask' is not a positive integer"),
    ("Mask=2.5x4", "dimension '2.5' of input 'Mask' is not a positive integer"),
])
def test_malformed_values_name_the_flag_and_the_value(text, fragment):
    with pytest.raises(UsageError, match="^--input-shape ") as info:
        parse_input_shape(text)
    assert fragment in str(info.value) and repr(text) in str(info.value)


def test_the_entries_make_one_case_that_parses_back_even_with_a_colon_in_a_name():
    case = input_shapes_case([("pixel_values:0", (2, 4)), ("Mask", (2, 4))])
    assert case.label is None and case.text == ":pixel_values:0=2x4;Mask=2x4"
    assert case.name == "pixel_values:0=2x4;Mask=2x4"
    assert parse_shape_case(case.text) == case
    with pytest.raises(UsageError, match="--input-shape gives input 'Mask' more than once"):
        input_shapes_case([("Mask", (2, 4)), ("Mask", (3, 4))])


def test_entries_join_every_shape_case_and_may_not_repeat_one_of_its_inputs():
    cases = [parse_shape_case("a:pixel_values:0=1x4"), parse_shape_case("b:pixel_values:0=3x4")]
    joined = with_input_shapes(cases, [("Mask", (2, 4))])
    assert [c.text for c in joined] == ["a:pixel_values:0=1x4;Mask=2x4", "b:pixel_values:0=3x4;Mask=2x4"]
    assert with_input_shapes([], []) == [ShapeCase(())]  # a fully static model needs no shape
    with pytest.raises(UsageError, match="input 'Mask' is given both by --input-shape and in shape case"):
        with_input_shapes([parse_shape_case("c:Mask=1x4")], [("Mask", (2, 4))])


@pytest.mark.parametrize(("shapes", "message"), [
    ([("Nope", (2,)), ("Mask", (2, 4))], "--input-shape: unknown input 'Nope'; the engine's inputs: "
     "pixel_values:0 (-1x4 fp32), Mask (-1x4 int64)"),
    ([("pixel_values:0", (2, 4))], "--input-shape: input 'Mask' has dynamic dimensions (-1x4) and no shape; "
     "pass --input-shape Mask=..."),
    ([("pixel_values:0", (2, 4)), ("Mask", (2, 5))], "--input-shape: input 'Mask': dimension 1 is 5 in 2x5, "
     "the engine fixes it at 4 (-1x4)"),
    ([("pixel_values:0", (2, 4, 1)), ("Mask", (2, 4))], "--input-shape: input 'pixel_values:0': rank 3 given "
     "(2x4x1), the engine expects rank 2 (-1x4)"),
])
def test_checks_against_the_model_start_with_the_flag(shapes, message):
    with pytest.raises(UsageError) as info:
        resolve_case(input_shapes_case(shapes), INPUTS, flag="--input-shape")
    assert str(info.value) == message


def test_open_dimensions_are_filled_and_fixed_ones_kept():
    case = input_shapes_case([("pixel_values:0", (3, 4)), ("Mask", (3, 4))])
    assert resolve_case(case, INPUTS, flag="--input-shape") == {"pixel_values:0": (3, 4), "Mask": (3, 4)}
