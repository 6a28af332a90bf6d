"""A tiny ONNX model named like no workload: ``logits = scale * pixel_values:0 + float(Mask)``.

``pixel_values:0`` (fp32, ``N x 4``, the batch a named ``dim_param``) and ``Mask`` (int64,
``? x 4``, an unnamed open dimension) cover both kinds of open dimension and a name with a
``:`` (TensorFlow exports). Built with ``onnx.helper``, so the tests need no exporter.
"""

from __future__ import annotations

from pathlib import Path

INPUTS = ("pixel_values:0", "Mask")


def build_model(path: Path, scale: float = 2.0, output: str = "logits") -> Path:
    """Write the model to ``path``; another ``scale`` makes a wrong reference, another ``output`` a misfit."""
    import onnx
    from onnx import TensorProto, helper

    pixels = helper.make_tensor_value_info("pixel_values:0", TensorProto.FLOAT, ["N", 4])
    mask = helper.make_tensor_value_info("Mask", TensorProto.INT64, [None, 4])
    logits = helper.make_tensor_value_info(output, TensorProto.FLOAT, ["N", 4])
    nodes = [helper.make_node("Cast", ["Mask"], ["mask_f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["pixel_values:0", "scale"], ["scaled"]),
             helper.make_node("Add", ["scaled", "mask_f"], [output])]
    graph = helper.make_graph(nodes, "foreign", [pixels, mask], [logits],
                              initializer=[helper.make_tensor("scale", TensorProto.FLOAT, [], [scale])])
    # opset 17 and IR 8: old enough for any onnxruntime this project installs
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path
