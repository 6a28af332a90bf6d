"""Slow, obviously correct versions of the tile workloads: Python loops over Python floats.

Each takes and returns float64 tensors (integers as given) and spells the semantics of
docs/workloads.md out one pixel, tile or token at a time, with no torch arithmetic,
so that the vectorized references in ``apex_core.workloads`` have an independent check.
"""

from __future__ import annotations

import math
import struct

import torch


def _float32(value: float) -> float:
    """``value`` rounded to the nearest float32, as a Python float."""
    return struct.unpack("f", struct.pack("f", value))[0]


def _origin(tile_id: int, width: int, tile_size: int) -> tuple[int, int]:
    per_row = width // tile_size
    return tile_id // per_row * tile_size, tile_id % per_row * tile_size


def tilepack_loop(features: torch.Tensor, idx: torch.Tensor, tile_size: int) -> torch.Tensor:
    """``P[b, k, c, dy, dx] = F[b, c, y0 + dy, x0 + dx]`` for each tile id in ``idx``."""
    f, ids = features.tolist(), idx.tolist()
    b_n, c_n, t = len(f), len(f[0]), tile_size
    out = [[[[[0.0] * t for _ in range(t)] for _ in range(c_n)] for _ in ids[b]] for b in range(b_n)]
    for b in range(b_n):
        for k, tile_id in enumerate(ids[b]):
            y0, x0 = _origin(tile_id, features.shape[3], t)
            for c in range(c_n):
                for dy in range(t):
                    for dx in range(t):
                        out[b][k][c][dy][dx] = f[b][c][y0 + dy][x0 + dx]
    return torch.tensor(out, dtype=torch.float64).reshape(b_n, len(ids[0]), c_n, t, t)


def _covers(origin: list[int], y: int, x: int, tile_size: int) -> bool:
    return origin[0] <= y < origin[0] + tile_size and origin[1] <= x < origin[1] + tile_size


def unpack_override_loop(
    base: torch.Tensor, packed: torch.Tensor, origins: torch.Tensor, levels: torch.Tensor
) -> torch.Tensor:
    """Each pixel takes the covering tile with the highest (level, k); uncovered keep base."""
    out, p, org, lev = base.tolist(), packed.tolist(), origins.tolist(), levels.tolist()
    b_n, c_n, h, w = base.shape
    t = packed.shape[-1]
    for b in range(b_n):
        for y in range(h):
            for x in range(w):
                winner = None
                for k in range(len(org[b])):
                    if _covers(org[b][k], y, x, t) and (
                        winner is None or (lev[b][k], k) > (lev[b][winner], winner)
                    ):
                        winner = k
                if winner is None:
                    continue
                y0, x0 = org[b][winner]
                for c in range(c_n):
                    out[b][c][y][x] = p[b][winner][c][y - y0][x - x0]
    return torch.tensor(out, dtype=torch.float64)


def unpack_blend_loop(
    base: torch.Tensor, packed: torch.Tensor, origins: torch.Tensor, levels: torch.Tensor, alpha: float
) -> torch.Tensor:
    """Tiles in ascending (level, k) order, each pixel ``out = (1 - a) * out + a * P``."""
    out, p, org, lev = base.tolist(), packed.tolist(), origins.tolist(), levels.tolist()
    c_n, t = base.shape[1], packed.shape[-1]
    for b in range(base.shape[0]):
        for k in sorted(range(len(org[b])), key=lambda k: (lev[b][k], k)):
            y0, x0 = org[b][k]
            for c in range(c_n):
                for dy in range(t):
                    for dx in range(t):
                        old = out[b][c][y0 + dy][x0 + dx]
                        out[b][c][y0 + dy][x0 + dx] = (1 - alpha) * old + alpha * p[b][k][c][dy][dx]
    return torch.tensor(out, dtype=torch.float64)


def _sanitize(v: float) -> float:
    if math.isnan(v):
        return 0.0
    if math.isinf(v):
        return 1.0 if v > 0 else 0.0
    return v


def _softplus(v: float) -> float:
    return math.log1p(math.exp(v))


def fusion_gate_loop(boundary, uncertainty, base, detail, wb: float, wu: float, bias: float):
    """Per pixel gate from sanitized proxies; per element ``base + alpha * (detail - base)``."""
    bd, un, ba, de = boundary.tolist(), uncertainty.tolist(), base.tolist(), detail.tolist()
    b_n, c_n, h, w = base.shape
    alpha = [[[[0.0] * w for _ in range(h)]] for _ in range(b_n)]
    fused = [[[[0.0] * w for _ in range(h)] for _ in range(c_n)] for _ in range(b_n)]
    for b in range(b_n):
        for y in range(h):
            for x in range(w):
                z = _softplus(wb) * _sanitize(bd[b][0][y][x])
                z += _softplus(wu) * _sanitize(un[b][0][y][x]) + bias
                a = 1.0 / (1.0 + math.exp(-z))
                alpha[b][0][y][x] = a
                for c in range(c_n):
                    fused[b][c][y][x] = ba[b][c][y][x] + a * (de[b][c][y][x] - ba[b][c][y][x])
    return torch.tensor(alpha, dtype=torch.float64), torch.tensor(fused, dtype=torch.float64)


def _scan_channel(xs: list[float], d: float, gi: float, go: float, sb: float, s: float, clamp: float):
    """One (b, c) sequence: returns the outputs and the final state."""
    d = min(max(d, _float32(1e-6)), _float32(1 - 1e-6))  # the bounds kernels use (float32)
    ys = []
    for x in xs:
        x = 0.0 if math.isnan(x) else min(max(x, -clamp), clamp)
        s = d * s + (1 - d) * (gi * x + sb)
        ys.append(go * s)
    return ys, s


def ssm_scan_loop(
    tokens, decay, input_gain, output_gain, state_bias, init_state, direction, merge, gate, clamp
):
    """Scan each (b, c) sequence; returns ``y [B, K, C]`` and a tuple of final states ``[B, C]``."""
    tok, s0 = tokens.tolist(), init_state.tolist()
    b_n, k_n, c_n = tokens.shape
    params = [decay.tolist(), input_gain.tolist(), output_gain.tolist(), state_bias.tolist()]
    y = [[[0.0] * c_n for _ in range(k_n)] for _ in range(b_n)]
    finals = {"forward": [[0.0] * c_n for _ in range(b_n)], "backward": [[0.0] * c_n for _ in range(b_n)]}
    for b in range(b_n):
        for c in range(c_n):
            seq = [tok[b][k][c] for k in range(k_n)]
            chan = [p[c] for p in params]
            y_f, finals["forward"][b][c] = _scan_channel(seq, *chan, s0[b][c], clamp)
            y_b, finals["backward"][b][c] = _scan_channel(seq[::-1], *chan, s0[b][c], clamp)
            y_b = y_b[::-1]
            for k in range(k_n):
                if direction == "forward":
                    y[b][k][c] = y_f[k]
                elif direction == "backward":
                    y[b][k][c] = y_b[k]
                elif merge == "sum":
                    y[b][k][c] = y_f[k] + y_b[k]
                elif merge == "avg":
                    y[b][k][c] = (y_f[k] + y_b[k]) / 2
                else:
                    g = gate.tolist()[c]
                    y[b][k][c] = g * y_f[k] + (1 - g) * y_b[k]
    names = ("forward", "backward") if direction == "bidirectional" else (direction,)
    states = tuple(torch.tensor(finals[n], dtype=torch.float64) for n in names)
    return torch.tensor(y, dtype=torch.float64), states


def tile_stage1_loop(x, idx, vs, vb, gs, gb, tile_size: int) -> torch.Tensor:
    """On each selected tile pixel ``(x*vs + vb) * max(x*gs + gb, 0)``; elsewhere ``x``."""
    src, out, ids = x.tolist(), x.tolist(), idx.tolist()
    vs, vb, gs, gb = vs.tolist(), vb.tolist(), gs.tolist(), gb.tolist()
    t = tile_size
    for b in range(x.shape[0]):
        for tile_id in ids[b]:
            y0, x0 = _origin(tile_id, x.shape[3], t)
            for c in range(x.shape[1]):
                for y in range(y0, y0 + t):
                    for xx in range(x0, x0 + t):
                        v = src[b][c][y][xx]
                        out[b][c][y][xx] = (v * vs[c] + vb[c]) * max(v * gs[c] + gb[c], 0.0)
    return torch.tensor(out, dtype=torch.float64)
