"""The engine path: ONNX export, shape cases and the engine shape sweep.

Nothing here imports onnx, onnxruntime or tensorrt at module level.
"""
