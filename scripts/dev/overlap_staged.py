"""Overlap's streaming pass with each band's tiles staged on chip (exploration, not in the tree).

The tree's streaming pass (``winner_map._unpack_winner_map_kernel``) reads every winning tile
element with a 2-byte gather from global memory; unaligned tile rows allow no vectors, and ncu
put it at 85 % SM and 84 % L1 throughput on an H200 (docs/kernels-tile.md). Here one program
owns T pixel rows (one band) x BW columns: it loads the rows of its band's listed tiles that lie
in the band, for the tiles that meet its columns, as whole 16-byte tile rows (masked loads fetch
nothing for the others), and takes each pixel's winning element from that block with
``tl.gather`` (on chip) instead of from memory. For this the winner map keeps the band-list
index (``j * T*T + dy * T + dx``, its ``LIST_INDEX``) instead of the tile's k. A band whose
list is longer than NB lanes takes the global gather in that program.

Checked against the workload's reference first (``--device cpu`` under ``TRITON_INTERPRET=1``:
check only, with ``--nb 2`` forcing the long-list branch too); on a GPU each variant is timed
with ``triton.testing.do_bench`` (L2 flushed, median) beside the tree's launcher. The perf
notes' numbers come from apex-bench itself; this decides whether the variant is worth one.

    python scripts/dev/overlap_staged.py [--profile large] [--nb 64] [--bw 128,256,512]

Not run on a GPU yet, and not worth it as written: compiled for sm_90a on the CPU (Triton 3.9,
``tests/apex_kernels/compile_layouts.py overlap_staged:_staged_stream_kernel ... --registers``
with ``PYTHONPATH=scripts/dev``, the large profile's sizes, BW 512, NB 64, one channel, 8 warps),
the ``tl.gather`` over the staged [1, 4096] block lowers to warp shuffles (16384 SHFL.IDX in the
SASS) and ptxas reports 127580 bytes of spill stores, where a gather through shared memory was
meant. Staging on chip needs shared memory addressed explicitly (Triton's Gluon, for example).
The interpreter check passes (fixed profile, NB 64 and 2, BW 128 and 16).
"""

import argparse
import json

import torch
import triton
import triton.language as tl
import triton.testing

from adapters import triton_ops
from apex_core.correctness import compare_outputs, upcast_inputs
from apex_core.workloads.tileunpack import TileUnpack
from apex_kernels.tileunpack import winner_map


@triton.jit
def _staged_stream_kernel(base, packed, origins, run_k, run_start, run_end, winners, out,
                          C, H, W, HW, K, bands, T: tl.constexpr, TP: tl.constexpr, BW: tl.constexpr,
                          NB: tl.constexpr, BLOCK_C: tl.constexpr, CB: tl.constexpr):
    """Override from the band-list winner map, the band's tiles staged on chip."""
    TT: tl.constexpr = T * T
    PIX: tl.constexpr = TP * BW
    col_blocks = tl.cdiv(W, BW)
    pid = tl.program_id(0)
    cb = pid % col_blocks
    band = (pid // col_blocks) % bands
    b = pid // col_blocks // bands
    row = b.to(tl.int64) * bands
    start = tl.load(run_start + row + band)
    count = tl.load(run_end + row + band) - start
    runs = run_k + b.to(tl.int64) * 2 * K + start
    tiles = packed + b.to(tl.int64) * K * C * TT
    yr = tl.arange(0, TP)
    y = band * T + yr
    x = cb * BW + tl.arange(0, BW)
    pmask = tl.reshape(((yr < T) & (y < H))[:, None] & (x < W)[None, :], (PIX,))
    p = tl.reshape((y * W)[:, None] + x[None, :], (PIX,))
    code = tl.load(winners + b.to(tl.int64) * HW + p, mask=pmask, other=-1)
    covered = code >= 0
    j = tl.where(covered, code // TT, 0)
    within = tl.where(covered, code % TT, 0)
    m_pix = pmask[None, :]
    cov = covered[None, :]
    if count <= NB:
        # the band's list, each tile's rows inside the band, for the tiles meeting these columns
        lane = tl.arange(0, NB)
        listed = lane < count
        k = tl.load(runs + lane, mask=listed, other=0)
        oy = tl.load(origins + (b * K + k) * 2, mask=listed, other=0)
        ox = tl.load(origins + (b * K + k) * 2 + 1, mask=listed, other=0)
        meets = listed & (ox < cb * BW + BW) & (ox + T > cb * BW)
        dy = tl.arange(0, TP)
        dx = tl.arange(0, TP)
        ty = oy[:, None] + dy[None, :]
        rows_in = (ty >= band * T) & (ty < band * T + T) & (dy < T)[None, :]
        smask = (meets[:, None] & rows_in)[:, :, None] & (dx < T)[None, None, :]
        in_tile = (k.to(tl.int64) * C * TT)[:, None, None] + (dy * T)[None, :, None] + dx[None, None, :]
        # each pixel's place in the staged [NB, TP, TP] block
        at = j * (TP * TP) + (within // T) * TP + within % T
        at2 = tl.broadcast_to(at[None, :], (BLOCK_C, PIX))
        for i in range(CB):
            c = (tl.program_id(1) * CB + i) * BLOCK_C + tl.arange(0, BLOCK_C)
            cm = c < C
            staged = tl.load(tiles + (c.to(tl.int64) * TT)[:, None, None, None] + in_tile[None, :, :, :],
                             mask=cm[:, None, None, None] & smask[None, :, :, :], other=0.0)
            tile_val = tl.gather(tl.reshape(staged, (BLOCK_C, NB * TP * TP)), at2, 1)
            offs = ((b.to(tl.int64) * C + c) * HW)[:, None] + p[None, :]
            m2 = cm[:, None] & m_pix
            base_val = tl.load(base + offs, mask=m2)
            tl.store(out + offs, tl.where(cov, tile_val, base_val), mask=m2)
    else:
        # a long list: each winning element read from memory, as the tree's pass does
        k_pix = tl.load(runs + j, mask=covered, other=0)
        win = k_pix.to(tl.int64) * C * TT + within
        for i in range(CB):
            c = (tl.program_id(1) * CB + i) * BLOCK_C + tl.arange(0, BLOCK_C)
            cm = c < C
            m2 = cm[:, None] & m_pix
            tile_val = tl.load(tiles + (c.to(tl.int64) * TT)[:, None] + win[None, :], mask=m2 & cov)
            offs = ((b.to(tl.int64) * C + c) * HW)[:, None] + p[None, :]
            base_val = tl.load(base + offs, mask=m2)
            tl.store(out + offs, tl.where(cov, tile_val, base_val), mask=m2)


def staged_call(launcher, nb: int, bw: int, block_c: int, cb: int, warps: int):
    """The tree's row-band prepass, then the band-list map and the staged pass; returns a callable."""
    runs_launch, map_launch, main = launcher.launches
    base, packed, _, out, c, hw, k = main.args
    origins, run_k, run_start, run_end, winners, h, w, _, _, bands = map_launch.args
    t = packed.shape[-1]
    tp = triton.next_power_of_2(t)
    bw = min(bw, triton.next_power_of_2(w))
    rb, map_bw = map_launch.meta["RB"], map_launch.meta["BW"]
    map_grid = (base.shape[0] * bands * triton.cdiv(t, rb) * triton.cdiv(w, map_bw),)
    grid = (base.shape[0] * bands * triton.cdiv(w, bw), triton.cdiv(c, block_c * cb))

    def call():
        runs_launch()
        winner_map._winner_map_kernel[map_grid](*map_launch.args, **map_launch.meta, LIST_INDEX=True)
        _staged_stream_kernel[grid](base, packed, origins, run_k, run_start, run_end, winners, out,
                                    c, h, w, hw, k, bands, T=t, TP=tp, BW=bw, NB=nb, BLOCK_C=block_c,
                                    CB=cb, num_warps=warps)
        return {"out": out}

    return call


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", default="large")
    parser.add_argument("--device", default="cuda", help="cpu: check only (TRITON_INTERPRET=1)")
    parser.add_argument("--nb", default="64", help="list lanes staged, comma-separated")
    parser.add_argument("--bw", default="128,256,512", help="columns a program, comma-separated")
    parser.add_argument("--shapes", default="1,1,4;2,1,4;1,2,8;1,1,8",
                        help="BLOCK_C,CB,warps;... for the staged pass")
    args = parser.parse_args()
    winner_map.OVERLAP_RUNS_MIN_K = 0  # the map at every K, so the fixed profile can be checked too
    workload = TileUnpack()
    case = next(c for c in workload.cases(workload.make_params(args.profile, {})) if c.name == "overlap")
    inputs = workload.make_inputs(case, args.device, torch.float16, 0)
    reference = workload.reference(case, upcast_inputs(inputs, torch.float32))
    launcher = triton_ops.TILEUNPACK.bind(workload, case, inputs)
    minimal = workload.work(case, "fp16").bytes_moved
    tolerance = workload.tolerance("fp16")
    if args.device != "cpu":
        us = triton.testing.do_bench(launcher.run, warmup=20, rep=200, return_mode="median") * 1e3
        print(json.dumps({"variant": "tree", "us": round(us, 2), "gbps": round(minimal / us / 1e3, 1)}),
              flush=True)
    for nb in (int(v) for v in args.nb.split(",")):
        for bw in (int(v) for v in args.bw.split(",")):
            for shape in args.shapes.split(";"):
                block_c, cb, warps = (int(v) for v in shape.split(","))
                call = staged_call(launcher, nb, bw, block_c, cb, warps)
                launcher.outputs["out"].fill_(float("nan"))
                accuracy = compare_outputs(call(), reference, tolerance, "staged")
                row = {"variant": "staged", "NB": nb, "BW": bw, "BLOCK_C": block_c, "CB": cb,
                       "warps": warps, "ok": accuracy.passed}
                if args.device != "cpu" and accuracy.passed:
                    us = triton.testing.do_bench(call, warmup=20, rep=200, return_mode="median") * 1e3
                    row.update(us=round(us, 2), gbps=round(minimal / us / 1e3, 1))
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
