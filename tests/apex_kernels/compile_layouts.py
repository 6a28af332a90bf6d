"""Compile one Triton kernel of apex_kernels for Hopper on the CPU and print its loads' layouts.

Run as a script in a process without TRITON_INTERPRET (under it the kernels are not JIT
functions): ``python compile_layouts.py MODULE:KERNEL ARGS_JSON``, where ARGS_JSON maps every
argument to its launch value (an int, a float, a constexpr, or ``"*fp16"``-style pointer type) plus
``"num_warps"``. Arguments are specialised as Triton's launcher would for aligned tensors and
int32 values other than 1: every pointer is taken as 16-byte aligned, and an int that is a
multiple of 16 as 16-divisible unless the kernel names it in ``do_not_specialize``. What this
does not mirror is refused: an int equal to 1 (the launcher makes it a constant), outside int32
(i64 there), or a bool. Prints one JSON line per ``tt.load`` of a pointer tensor of two or more
dimensions: its shape, element type and the layout's ``sizePerThread``.
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import get_ptxas  # the ptxas Triton compiles with
from triton.compiler import ASTSource

HOPPER = GPUTarget("cuda", 90, 32)


def main() -> None:
    module_name, kernel_name = sys.argv[1].split(":")
    values = json.loads(sys.argv[2])  # a third argument, --registers, adds ptxas's count
    num_warps = values.pop("num_warps")
    kernel = getattr(importlib.import_module(module_name), kernel_name)
    fn = kernel.fn if hasattr(kernel, "configs") else kernel  # an autotuner wraps the JIT function
    unspecialized = {fn.arg_names[i] if isinstance(i, int) else i for i in fn.do_not_specialize}
    signature, constexprs, attrs = {}, {}, {}
    for index, name in enumerate(fn.arg_names):
        value = values.get(name)
        if isinstance(value, str):  # a pointer
            signature[name] = value
            attrs[(index,)] = [["tt.divisibility", 16]]
        elif index in fn.constexprs:
            signature[name] = "constexpr"
            constexprs[name] = value
        elif isinstance(value, float):
            signature[name] = "fp32"
        else:
            if isinstance(value, bool) or not isinstance(value, int) or value == 1 \
                    or not -2**31 <= value < 2**31:
                raise SystemExit(f"{name}={value!r}: only int32 values other than 1 are mirrored")
            signature[name] = "i32"
            if value % 16 == 0 and name not in unspecialized:
                attrs[(index,)] = [["tt.divisibility", 16]]
    compiled = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=HOPPER,
                              options={"num_warps": num_warps})
    ttgir = compiled.asm["ttgir"]
    layouts = dict(re.findall(r"^(#blocked\d*) = #ttg\.blocked<\{sizePerThread = \[([\d, ]+)\]", ttgir, re.M))
    for shape, dtype, layout in re.findall(
            r"= tt\.load .*: tensor<(\d+(?:x\d+)+)x!tt\.ptr<(\w+)>, (#blocked\d*)>", ttgir):
        print(json.dumps({"shape": shape, "dtype": dtype,
                          "size_per_thread": [int(x) for x in layouts[layout].split(",")]}))
    if "--registers" in sys.argv:
        print(json.dumps(ptxas_usage(compiled.asm["ptx"])))


def ptxas_usage(ptx: str) -> dict:
    """Registers and spill bytes per thread, from Triton's own ptxas (``-v``; no GPU needed)."""
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder, "kernel.ptx")
        source.write_text(ptx)
        report = subprocess.run([get_ptxas(HOPPER.arch).path, "-v", f"-arch=sm_{HOPPER.arch}a", str(source),
                                 "-o", str(Path(folder, "kernel.cubin"))],
                                capture_output=True, text=True, check=True).stderr
    registers = re.search(r"Used (\d+) registers", report)
    spills = re.search(r"(\d+) bytes spill stores", report)
    return {"registers": int(registers.group(1)) if registers else None,
            "spill_store_bytes": int(spills.group(1)) if spills else None}


if __name__ == "__main__":
    main()
