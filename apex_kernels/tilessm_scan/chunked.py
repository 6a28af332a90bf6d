"""The one-program walk: one program per (batch row, channel block) walks K in chunks.

A program owns one batch row and ``BLOCK_C`` channels and walks the sequence in chunks
of ``BLOCK_K`` steps, carrying the state from chunk to chunk in registers (``s = B_scan
+ A_scan * carry``). Tokens are read once and y written once.

The backward direction reads the chunk with reversed row indices (row i holds step
``start + BLOCK_K - 1 - i``), so no flipped copy exists anywhere; padding rows are
identity maps and, reversed, they sit before the valid steps. Bidirectional reads each
chunk once and scans it both ways in registers (the backward one a reverse
``associative_scan`` of the same maps) before the merge and the single store of y. When
K spans several chunks, a first sweep stores the forward carry at each chunk start into a
small ``[B, chunks, C]`` scratch; the second, backward sweep rescans each chunk forward
from its stored carry, so tokens are read twice but y is never re-read.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from apex_kernels._dependent import await_previous
from apex_kernels._utils import KernelLaunch, autotune_configs, pin_config
from apex_kernels.tilessm_scan._scan import (
    _channel_params,
    _first_row,
    _last_row,
    _scan_tile,
    _scan_tile_both,
    _store_merged,
    scan_config,
)

# Longest chunk scanned in one piece: at K = 256 (the fixed profile) one chunk holds the
# whole sequence, so the bidirectional path needs no scratch and reads tokens once.
MAX_BLOCK_K = 256
MIN_BLOCK_K = 16  # tiny K still gets a tile the compiler lays out across a warp

# The scan is latency-bound at the fixed profile (B = 1, C = 128: 64 KiB of fp16 tokens),
# so fewer channels per program (more programs on more SMs) beat full 32-byte sectors:
# H100, cold L2, graph replay, forward: BLOCK_C 8 / 4 warps 8.0 us, 4 / 2 warps 8.6 us,
# 16 / 4 warps 10.0 us, 64 / 8 warps 16.9 us; bidirectional holds two scans and a flip in
# registers and falls off faster (4 / 2 warps 11.7 us, 16 / 4 warps 18.4 us, 32 / 4 warps
# 72 us from spills). Wide configs stay for large B * C, where bandwidth matters. The
# first config is what the interpreter runs.
CONFIGS = [
    scan_config(4, 2),
    scan_config(8, 4),
    scan_config(8, 2),
    scan_config(2, 1),
    scan_config(4, 1),
    scan_config(16, 4),
    scan_config(16, 8),
    scan_config(32, 8),
]


@triton.jit
def _one_direction(tok_ptr, y_ptr, state_ptr, offs_c, mask_c, d, gain, sbias, ogain, init,
                   K, C, CLAMP, REVERSE: tl.constexpr, BLOCK_K: tl.constexpr):
    """Forward (or, reading rows reversed, backward) scan of one row of channels."""
    rows = tl.arange(0, BLOCK_K)
    if REVERSE:
        rows = BLOCK_K - 1 - rows
    n_chunks = tl.cdiv(K, BLOCK_K)
    carry = init
    for jj in range(0, n_chunks):
        j = (n_chunks - 1 - jj) if REVERSE else jj
        times = j * BLOCK_K + rows
        valid = times < K
        s = _scan_tile(tok_ptr, times, valid, offs_c, mask_c, d, gain, sbias, carry, C, CLAMP)
        y = ogain[None, :] * s
        tl.store(y_ptr + times[:, None] * C + offs_c[None, :], y.to(y_ptr.dtype.element_ty),
                 mask=valid[:, None] & mask_c[None, :])
        carry = _last_row(s, BLOCK_K)
    tl.store(state_ptr + offs_c, carry, mask=mask_c)



@triton.jit
def _bidirectional(tok_ptr, y_ptr, sf_ptr, sb_ptr, carry_ptr, offs_c, mask_c, d, gain, sbias,
                   ogain, gate, init, K, C, CLAMP, MERGE: tl.constexpr, BLOCK_K: tl.constexpr):
    """Both directions of one row of channels, merged before the single store of y."""
    rows = tl.arange(0, BLOCK_K)
    n_chunks = tl.cdiv(K, BLOCK_K)
    # sweep 1 (only when K spans several chunks): forward carries at each chunk start
    carry_f = init
    for j in range(0, n_chunks - 1):
        tl.store(carry_ptr + j * C + offs_c, carry_f, mask=mask_c)
        times = j * BLOCK_K + rows
        s = _scan_tile(tok_ptr, times, times < K, offs_c, mask_c, d, gain, sbias, carry_f,
                       C, CLAMP)
        carry_f = _last_row(s, BLOCK_K)
    tl.debug_barrier()  # carries stored by one thread are read back by another
    # sweep 2, last chunk first: one read of the chunk, forward rescan and backward scan, merge, store
    carry_b = init
    for jj in range(0, n_chunks):
        j = n_chunks - 1 - jj
        stored = tl.load(carry_ptr + j * C + offs_c, mask=mask_c & (jj > 0), other=0.0)
        start_f = tl.where(jj == 0, carry_f, stored)
        times = j * BLOCK_K + rows
        s_f, s_b = _scan_tile_both(tok_ptr, times, times < K, offs_c, mask_c, d, gain, sbias, start_f,
                                   carry_b, C, CLAMP)
        # the final forward state is the last row of the last chunk, scanned at jj == 0
        tl.store(sf_ptr + offs_c, _last_row(s_f, BLOCK_K), mask=mask_c & (jj == 0))
        carry_b = _first_row(s_b, BLOCK_K)
        _store_merged(y_ptr, times, s_f, s_b, ogain, gate, offs_c, mask_c, K, C, MERGE)
    tl.store(sb_ptr + offs_c, carry_b, mask=mask_c)



@triton.autotune(configs=autotune_configs(CONFIGS),
                 key=["K", "C", "DIRECTION", "MERGE", "BLOCK_K"])
@triton.jit
def _ssm_scan_kernel(
    tok_ptr, decay_ptr, gain_ptr, ogain_ptr, sbias_ptr, gate_ptr, init_ptr,
    y_ptr, sf_ptr, sb_ptr, carry_ptr, K, C, N_CHUNKS, CLAMP, D_MIN, D_MAX,
    DIRECTION: tl.constexpr, MERGE: tl.constexpr, BLOCK_K: tl.constexpr,
    BLOCK_C: tl.constexpr, PDL: tl.constexpr = 0,
):
    await_previous(PDL)  # under a dependent launch: wait for the kernel before
    pid_b = tl.program_id(0).to(tl.int64)  # B * K * C may pass 2**31
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_c = offs_c < C
    d, gain, sbias = _channel_params(decay_ptr, gain_ptr, sbias_ptr, offs_c, mask_c, D_MIN,
                                     D_MAX)
    ogain = tl.load(ogain_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32)
    init = tl.load(init_ptr + pid_b * C + offs_c, mask=mask_c, other=0.0).to(tl.float32)
    tok = tok_ptr + pid_b * K * C
    y = y_ptr + pid_b * K * C
    if DIRECTION == 2:
        gate = tl.load(gate_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32)
        _bidirectional(tok, y, sf_ptr + pid_b * C, sb_ptr + pid_b * C,
                       carry_ptr + pid_b * N_CHUNKS * C, offs_c, mask_c, d, gain, sbias, ogain,
                       gate, init, K, C, CLAMP, MERGE, BLOCK_K)
    else:
        _one_direction(tok, y, sf_ptr + pid_b * C, offs_c, mask_c, d, gain, sbias, ogain, init,
                       K, C, CLAMP, DIRECTION == 1, BLOCK_K)



def block_k_for(steps: int) -> int:
    """Chunk length: the next power of two of K, at least MIN_BLOCK_K, at most MAX_BLOCK_K."""
    return min(MAX_BLOCK_K, max(MIN_BLOCK_K, triton.next_power_of_2(steps)))


def chunked_launches(tokens: torch.Tensor, params: tuple[torch.Tensor, ...],
                     init: torch.Tensor, outputs: dict[str, torch.Tensor], direction: int,
                     merge: int, clamp: float, decay_bounds: tuple[float, float], bucket: str,
                     config: triton.Config | None) -> tuple[list[KernelLaunch], dict[str, Any]]:
    """The walk's one launch over ``tokens [B, K, C]``, with its scratch allocated here.

    ``params`` are decay, input gain, output gain, state bias and gate, each ``[C]``;
    ``direction`` and ``merge`` are codes (forward 0, backward 1, bidirectional 2;
    sum 0, avg 1, gated 2). ``config`` pins one of ``CONFIGS``.
    """
    b, k, c = tokens.shape
    block_k = block_k_for(k)
    n_chunks = triton.cdiv(k, block_k)
    # forward carries at chunk starts, used by the bidirectional multi-chunk path only
    scratch = (b * n_chunks * c) if direction == 2 and n_chunks > 1 else 1
    carries = torch.empty(scratch, dtype=torch.float32, device=tokens.device)
    state_f = outputs["state_fwd" if direction == 2 else "state"]
    state_b = outputs["state_bwd" if direction == 2 else "state"]

    def grid(meta: dict[str, Any]) -> tuple[int, int]:
        # one program per (batch row, channel block) for whichever BLOCK_C is picked
        return (b, triton.cdiv(c, meta["BLOCK_C"]))

    decay, gain, ogain, sbias, gate = params
    args = (tokens, decay, gain, ogain, sbias, gate, init, outputs["y"], state_f, state_b,
            carries, k, c, n_chunks, clamp, *decay_bounds)
    kernel, pinned = pin_config(_ssm_scan_kernel, config)
    meta = {"DIRECTION": direction, "MERGE": merge, "BLOCK_K": block_k}
    launch = KernelLaunch("tilessm-scan", kernel, grid, args, {**meta, **pinned}, bucket,
                          {**meta, **pinned} if pinned else None)
    metadata = {"kernel": "tilessm_chunked_associative_scan", "block_k": block_k,
                "chunks": n_chunks, "configs": 1 if pinned else len(autotune_configs(CONFIGS))}
    return [launch], metadata
