"""Our Triton kernels as a library: plain functions of tensors and sizes.

Each operation has a function that runs it and returns its outputs, and a ``*_launcher``
form that checks and binds the tensors once and returns a ``Launcher``: calling it runs
the operation on the tensors' current contents into outputs allocated once, with no
per-call checks or bookkeeping (what a benchmark loop or a CUDA graph capture wants).

==================  ======================================================================
module              functions
==================  ======================================================================
``tilepack``        ``tilepack(features, indices, tile_size, out=None)``
``tileunpack``      ``tileunpack(base, packed, origins, levels, mode, alpha, *,
                    aligned_origins=False, out=None)``
``tile_stage1``     ``tile_stage1(x, indices, value_scale, value_bias, gate_scale,
                    gate_bias, tile_size, out=None)``
``fusiongate``      ``fusiongate(boundary, uncertainty, base, detail, wb, wu, bias)``
``tilessm_scan``    ``tilessm_scan(tokens, decay, input_gain, output_gain, state_bias, *,
                    direction, merge, gate, init_state, clamp)``
``ff_infer``        ``ff_infer(features, boundary, uncertainty, util0, split_util,
                    level_weights, wb, wu, bias, *, tile_size, level0_tiles, split_parents)``
==================  ======================================================================

Nothing here imports a benchmark harness; importing this package does not import
triton (each module does, when it is imported). ``docs/kernels.md`` has an example.
"""
