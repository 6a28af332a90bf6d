"""The layouts Triton's coalescing gives kernels' loads, compiled for Hopper on the CPU.

No interpreter test sees a layout, and a kernel's speed can hinge on one: ff-infer's depthwise
kernel read 8 adjacent pixels a thread as scalar loads, neighbouring threads 16 bytes apart,
while W was specialised (L1-bound; with its loads coalesced and its taps as a row loop the large
cell took 0.71x the time: docs/perf.md, 2026-11-29). Each case compiles in its own process
(compile_layouts.py): under TRITON_INTERPRET the kernels are not JIT functions.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import triton

from apex_kernels.ff_infer import kernels

# compile_layouts.py passes specialisations as Triton 3.3+ takes them (a dict keyed by argument
# index, as triton/tools/compile.py does); earlier releases took another form
TRITON = tuple(int(part) for part in triton.__version__.split(".")[:2])
pytestmark = pytest.mark.skipif(TRITON < (3, 3), reason=f"compile_layouts.py needs Triton 3.3 or later, "
                                                       f"not {triton.__version__}")

SCRIPT = Path(__file__).with_name("compile_layouts.py")
DEPTHWISE = "apex_kernels.ff_infer.kernels:_modulate_dw_kernel"
DEPTHWISE_VEC = "apex_kernels.ff_infer.kernels:_modulate_dw_vec_kernel"
POINTERS = {"src_ptr": "*fp16", "ids_ptr": "*i32", "gb_ptr": "*fp16", "dw_ptr": "*fp16", "d_ptr": "*fp16"}


def load_layouts(kernel: str, arguments: dict, tmp_path: Path) -> list[dict]:
    env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, str(SCRIPT), kernel, json.dumps(arguments)], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


# the large profile's two levels: 16 x 16 tiles (k0 = 320) and 8 x 8 tiles (4j = 512)
@pytest.mark.parametrize(("side", "tiles"), [(16, 320), (8, 512)])
@pytest.mark.parametrize("config", kernels.DW_CONFIGS, ids=str)
def test_depthwise_taps_load_neighbouring_pixels_in_neighbouring_threads(side, tiles, config, tmp_path):
    block_c, pixels = config.kwargs["BLOCK_C"], side * side
    arguments = {**POINTERS, "C": 256, "H": 512, "W": 512, "K": tiles, "S": side, "SSP": pixels,
                 "BLOCK_C": block_c, "PDL": 0, "num_warps": config.num_warps}
    taps = [load for load in load_layouts(DEPTHWISE, arguments, tmp_path)
            if load["shape"] == f"{block_c}x{pixels}" and load["dtype"] == "f16"]
    assert taps, "no [BLOCK_C, pixels] load of src found in the TTGIR"
    # one pixel a thread along the row: a warp's load spans 2-4 sectors (16 x 16 tiles), not 16
    assert all(load["size_per_thread"][1] == 1 for load in taps), taps


@pytest.mark.parametrize(("side", "tiles"), [(16, 320), (8, 512)])
@pytest.mark.parametrize("config", kernels.DW_CONFIGS, ids=str)
def test_vector_depthwise_loads_four_adjacent_pixels_a_thread(side, tiles, config, tmp_path):
    block_c, groups = config.kwargs["BLOCK_C"], side * side // 4
    arguments = {**POINTERS, "C": 256, "H": 512, "W": 512, "K": tiles, "S": side, "SGP": groups,
                 "BLOCK_C": block_c, "PDL": 0, "num_warps": config.num_warps}
    rows = [load for load in load_layouts(DEPTHWISE_VEC, arguments, tmp_path)
            if load["shape"] == f"{block_c}x{groups}x4" and load["dtype"] == "f16"]
    # a row's group, its left and its right neighbour: one layout, a whole group a thread (8 bytes)
    assert len(rows) == 3, rows
    assert all(load["size_per_thread"] == [1, 1, 4] for load in rows), rows
