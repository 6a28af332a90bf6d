"""Tilepack at the large profile under each L2 fetch granularity the driver takes (exploration).

A t = 8 fp16 tile row is 16 bytes; the L2 fetches DRAM in sectors of 32 bytes and, by
default, may fetch up to 64 at once (``cudaLimitMaxL2FetchGranularity``). Setting that
limit per granularity and timing the same launch (``triton.testing.do_bench``, L2 flushed,
median) tells how much of tilepack's distance to the copy is the fetch size. With
``--ncu`` each granularity runs the launch twice and nothing is timed: run it under
``ncu --metrics dram__bytes_read.sum,dram__bytes_write.sum -k regex:tilepack``. With
``--sorted`` every granularity is timed again with each image's tile ids in ascending order
(the same bytes, the output in another order): whether reading the tiles in raster order,
so that the tile rows sharing a DRAM page are read close in time, changes the time.

    python scripts/dev/tilepack_fetch.py [--profile large] [--ncu]
"""

import argparse
import ctypes
import json

import torch
import triton.testing

from adapters import triton_ops
from apex_core.workloads.tilepack import TilePack

MAX_L2_FETCH_GRANULARITY = 0x05  # cudaLimitMaxL2FetchGranularity


def cudart() -> ctypes.CDLL:
    """The CUDA runtime torch loaded (its path from this process's maps)."""
    with open("/proc/self/maps") as maps:
        paths = sorted({line.split()[-1] for line in maps if "libcudart" in line})
    return ctypes.CDLL(paths[0] if paths else "libcudart.so")


parser = argparse.ArgumentParser()
parser.add_argument("--profile", default="large")
parser.add_argument("--ncu", action="store_true")
parser.add_argument("--sorted", action="store_true")
args = parser.parse_args()
workload = TilePack()
case = next(iter(workload.cases(workload.make_params(args.profile, {}))))
inputs = workload.make_inputs(case, "cuda", torch.float16, 0)
launcher = triton_ops.TILEPACK.bind(workload, case, inputs)
launcher.run()
packed = launcher.outputs["packed"]
expected = packed.clone()
minimal = workload.work(case, "fp16").bytes_moved
copy_src = torch.empty(minimal // 4, dtype=torch.float16, device="cuda")
copy_dst = torch.empty_like(copy_src)
copy_us = triton.testing.do_bench(lambda: copy_dst.copy_(copy_src), warmup=20, rep=200,
                                  return_mode="median") * 1e3
print(json.dumps({"copy_us": round(copy_us, 2), "copy_gbps": round(minimal / copy_us / 1e3, 1)}))
rt = cudart()
value = ctypes.c_size_t()
rt.cudaDeviceGetLimit(ctypes.byref(value), MAX_L2_FETCH_GRANULARITY)
default = value.value  # None below: back to the driver's own value
orders = ("as made", "sorted") if args.sorted else ("as made",)
for order in orders:
    if order == "sorted":  # the same ids in raster order: the output's order changes with them
        inputs["idx"].copy_(inputs["idx"].sort(dim=1).values)
        launcher.run()
        expected = packed.clone()
    for granularity in (None, 32, 64, 128, 32):
        status = rt.cudaDeviceSetLimit(MAX_L2_FETCH_GRANULARITY, ctypes.c_size_t(granularity or default))
        got = rt.cudaDeviceGetLimit(ctypes.byref(value), MAX_L2_FETCH_GRANULARITY)
        packed.fill_(float("nan"))
        launcher.run()
        row = {"order": order, "asked": granularity, "set_status": status, "get_status": got,
               "limit": value.value, "same": bool(torch.equal(packed, expected))}
        if args.ncu:
            launcher.run()
            torch.cuda.synchronize()
        else:
            us = triton.testing.do_bench(launcher.run, warmup=20, rep=200, return_mode="median") * 1e3
            row.update(us=round(us, 2), gbps=round(minimal / us / 1e3, 1),
                       of_copy=round(copy_us / us, 3))
        print(json.dumps(row), flush=True)
