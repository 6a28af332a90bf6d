"""Every apex_kernels function called directly, as a project without apex-bench would call it.

Small sizes in the Triton interpreter, each against a few lines of plain torch written
here (not the workloads' references). This module imports nothing from apex_core or
adapters; the last test runs the others in a child process where importing either fails.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias

pytest.importorskip("triton")

from apex_kernels.ff_infer import ff_infer, level_weight_shapes
from apex_kernels.fusiongate import fusiongate
from apex_kernels.tile_stage1 import tile_stage1
from apex_kernels.tilepack import tilepack
from apex_kernels.tilessm_scan import tilessm_scan
from apex_kernels.tileunpack import tileunpack

ROOT = Path(__file__).resolve().parents[2]


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def origins_of(ids: torch.Tensor, width: int, t: int) -> torch.Tensor:
    """Top-left (y, x) of row-major tile ids on the t-grid, ``[B, K, 2]`` int32."""
    per_row = width // t
    return torch.stack((ids // per_row * t, ids % per_row * t), dim=-1).to(torch.int32)


def torch_tilepack(features: torch.Tensor, ids: torch.Tensor, t: int) -> torch.Tensor:
    origins = origins_of(ids, features.shape[-1], t)
    return torch.stack([torch.stack([features[b, :, y:y + t, x:x + t] for y, x in origins[b].tolist()])
                        for b in range(features.shape[0])])


def torch_tileunpack(base: torch.Tensor, packed: torch.Tensor, origins: torch.Tensor,
                     levels: torch.Tensor, mode: str, alpha: float = 0.0) -> torch.Tensor:
    out = base.clone()
    t = packed.shape[-1]
    for b in range(base.shape[0]):
        order = sorted(range(packed.shape[1]), key=lambda k, b=b: (int(levels[b, k]), k))
        for k in order:  # ascending priority: the last writer wins
            y, x = origins[b, k].tolist()
            window = out[b, :, y:y + t, x:x + t]
            window.copy_(packed[b, k] if mode == "override" else (1 - alpha) * window + alpha * packed[b, k])
    return out


def torch_scan(tokens: torch.Tensor, decay: torch.Tensor, gain: torch.Tensor, ogain: torch.Tensor,
               sbias: torch.Tensor, reverse: bool = False, clamp: float = 1e4) -> tuple[torch.Tensor, ...]:
    x = torch.nan_to_num(tokens.double()).clamp(-clamp, clamp)
    d = decay.double().clamp(1e-6, 1 - 1e-6)
    state = torch.zeros(tokens.shape[0], tokens.shape[2], dtype=torch.float64)
    ys = [torch.empty(0)] * tokens.shape[1]
    for step in (reversed(range(tokens.shape[1])) if reverse else range(tokens.shape[1])):
        state = d * state + (1 - d) * (gain.double() * x[:, step] + sbias.double())
        ys[step] = ogain.double() * state
    return torch.stack(ys, dim=1), state


def torch_gate(boundary: torch.Tensor, uncertainty: torch.Tensor, base: torch.Tensor,
               detail: torch.Tensor, wb: torch.Tensor, wu: torch.Tensor, bias: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
    def sanitize(p: torch.Tensor) -> torch.Tensor:
        return torch.nan_to_num(p, nan=0.0, posinf=1.0, neginf=0.0)

    alpha = torch.sigmoid(F.softplus(wb) * sanitize(boundary) + F.softplus(wu) * sanitize(uncertainty) + bias)
    return alpha, base + alpha * (detail - base)


def test_tilepack() -> None:
    features = torch.randn(2, 3, 8, 12, generator=generator())
    ids = torch.tensor([[0, 5, 5, 2], [4, 1, 3, 0]], dtype=torch.int32)
    assert torch.equal(tilepack(features, ids, 4), torch_tilepack(features, ids, 4))
    out = torch.empty(2, 4, 3, 4, 4)
    assert tilepack(features, ids, 4, out=out) is out


@pytest.mark.parametrize("aligned_origins", [True, False], ids=["aligned", "any-origins"])
@pytest.mark.parametrize("mode", ["override", "blend"])
def test_tileunpack(mode: str, aligned_origins: bool) -> None:
    g = generator(1)
    base = torch.randn(2, 3, 8, 12, generator=g)
    packed = torch.randn(2, 5, 3, 4, 4, generator=g)
    if aligned_origins:
        origins = origins_of(torch.randint(0, 6, (2, 5), generator=g), 12, 4)
    else:
        origins = torch.stack((torch.randint(0, 5, (2, 5), generator=g),
                               torch.randint(0, 9, (2, 5), generator=g)), dim=-1).to(torch.int32)
    levels = torch.randint(0, 2, (2, 5), generator=g, dtype=torch.int32)  # ties certain
    got = tileunpack(base, packed, origins, levels, mode, 0.25, aligned_origins=aligned_origins)
    torch.testing.assert_close(got, torch_tileunpack(base, packed, origins, levels, mode, 0.25))


def test_tile_stage1() -> None:
    g = generator(2)
    x = torch.randn(1, 3, 8, 8, generator=g, dtype=torch.float64).float()
    ids = torch.tensor([[3, 0]], dtype=torch.int32)
    vs, vb, gs, gb = (torch.randn(3, generator=g) for _ in range(4))
    want = x.clone()
    for y, x0 in origins_of(ids, 8, 4)[0].tolist():
        tile = x[0, :, y:y + 4, x0:x0 + 4]
        v = tile * vs[:, None, None] + vb[:, None, None]
        want[0, :, y:y + 4, x0:x0 + 4] = v * torch.relu(tile * gs[:, None, None] + gb[:, None, None])
    torch.testing.assert_close(tile_stage1(x, ids, vs, vb, gs, gb, 4), want)


def test_fusiongate() -> None:
    g = generator(3)
    boundary, uncertainty = torch.rand(2, 1, 3, 5, generator=g), torch.rand(2, 1, 3, 5, generator=g)
    boundary[0, 0, 0, :3] = torch.tensor([float("nan"), float("inf"), -float("inf")])
    base, detail = torch.randn(2, 4, 3, 5, generator=g), torch.randn(2, 4, 3, 5, generator=g)
    scalars = (torch.tensor(0.7), torch.tensor(1.2), torch.tensor(-0.5))
    alpha, fused = fusiongate(boundary, uncertainty, base, detail, *scalars)
    want_alpha, want_fused = torch_gate(boundary, uncertainty, base, detail, *scalars)
    torch.testing.assert_close(alpha, want_alpha)
    torch.testing.assert_close(fused, want_fused)


@pytest.mark.parametrize("direction", ["forward", "backward", "bidirectional"])
def test_tilessm_scan(direction: str) -> None:
    g = generator(4)
    tokens = torch.randn(2, 7, 3, generator=g)
    decay = torch.rand(3, generator=g)
    gain, ogain, sbias, gate = (torch.randn(3, generator=g) for _ in range(4))
    got = tilessm_scan(tokens, decay, gain, ogain, sbias, direction=direction, merge="gated",
                       gate=gate.sigmoid())
    y_f, s_f = torch_scan(tokens, decay, gain, ogain, sbias)
    y_b, s_b = torch_scan(tokens, decay, gain, ogain, sbias, reverse=True)
    if direction == "forward":
        want: tuple[torch.Tensor, ...] = (y_f, s_f)
    elif direction == "backward":
        want = (y_b, s_b)
    else:
        g_ = gate.sigmoid().double()
        want = (g_ * y_f + (1 - g_) * y_b, s_f, s_b)
    assert len(got) == len(want)
    for value, expected in zip(got, want, strict=True):
        torch.testing.assert_close(value.double(), expected, rtol=1e-4, atol=1e-5)


def torch_ff_level(dense: torch.Tensor, ids: torch.Tensor, t: int, w: dict[str, torch.Tensor],
                   alpha: torch.Tensor | None) -> torch.Tensor:
    """One refinement level: pack, scan the tile means, modulate, refine, write back."""
    packed = torch_tilepack(dense, ids, t)  # [B, K, C, t, t]
    tokens = packed.mean(dim=(-2, -1))
    y_f, _ = torch_scan(tokens, w["decay"], w["input_gain"], w["output_gain"], w["state_bias"])
    y_b, _ = torch_scan(tokens, w["decay"], w["input_gain"], w["output_gain"], w["state_bias"], True)
    scanned = ((y_f + y_b) / 2).float()
    gamma, beta = F.linear(torch.relu(F.linear(scanned, w["mlp_w1"], w["mlp_b1"])),
                           w["mlp_w2"], w["mlp_b2"]).chunk(2, dim=-1)
    tiles = ((1 + torch.tanh(gamma))[..., None, None] * packed + beta[..., None, None]).flatten(0, 1)
    mixed = F.conv2d(F.conv2d(tiles, w["dw_weight"], padding=1, groups=tiles.shape[1]),
                     w["pw_weight"][..., None, None], w["pw_bias"])
    normed = F.group_norm(mixed, 1, w["norm_weight"], w["norm_bias"], eps=1e-5)
    gated = (normed * w["value_scale"][:, None, None] + w["value_bias"][:, None, None]) * torch.relu(
        normed * w["gate_scale"][:, None, None] + w["gate_bias"][:, None, None])
    refined = (tiles + gated).reshape(packed.shape)
    out = torch_tileunpack(dense, refined, origins_of(ids, dense.shape[-1], t),
                           torch.zeros(ids.shape, dtype=torch.int32), "override")
    return out if alpha is None else dense + alpha * (out - dense)


def test_ff_infer() -> None:
    g = generator(5)
    b, c, h, w, t, hidden, k0, j = 1, 4, 8, 16, 2, 8, 3, 2
    features = torch.randn(b, c, h, w, generator=g)
    boundary, uncertainty = torch.rand(b, 1, h, w, generator=g), torch.rand(b, 1, h, w, generator=g)
    n0 = (h // (2 * t)) * (w // (2 * t))
    util0 = torch.randperm(n0, generator=g)[None].float()
    split_util = torch.randperm(n0, generator=g)[None].float()
    levels = tuple({name: 0.3 * torch.randn(shape, generator=g)
                    for name, shape in level_weight_shapes(c, hidden).items()} for _ in range(2))
    for weights in levels:
        weights["decay"] = torch.rand(c, generator=g)
    scalars = (torch.tensor(1.0), torch.tensor(0.5), torch.tensor(-1.0))
    fused, alpha = ff_infer(features, boundary, uncertainty, util0, split_util, levels, *scalars,
                            tile_size=t, level0_tiles=k0, split_parents=j)
    ids0 = torch.topk(util0, k0, dim=1).indices
    parents = torch.gather(ids0, 1, torch.topk(torch.gather(split_util, 1, ids0), j, dim=1).indices)
    cols0 = w // (2 * t)
    quad = torch.arange(4)
    ids1 = ((2 * (parents // cols0)[..., None] + quad // 2) * (2 * cols0)
            + 2 * (parents % cols0)[..., None] + quad % 2).flatten(1)
    level0 = torch_ff_level(features, ids0, 2 * t, levels[0], None)
    want_alpha, _ = torch_gate(boundary, uncertainty, level0, level0, *scalars)
    want_fused = torch_ff_level(level0, ids1, t, levels[1], want_alpha)
    torch.testing.assert_close(alpha, want_alpha)
    torch.testing.assert_close(fused, want_fused, rtol=1e-4, atol=1e-4)


BLOCK_HARNESS = """
import importlib.abc, sys

class NoHarness(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("apex_core", "adapters"):
            raise ImportError(f"{name} imported by apex_kernels")
        return None

sys.meta_path.insert(0, NoHarness())
import tests.apex_kernels.test_standalone as standalone
standalone.test_tilepack()
for mode in ("override", "blend"):
    for aligned in (True, False):
        standalone.test_tileunpack(mode, aligned)
standalone.test_tile_stage1()
standalone.test_fusiongate()
standalone.test_tilessm_scan("bidirectional")
standalone.test_ff_infer()
assert not [m for m in sys.modules if m.split(".")[0] in ("apex_core", "adapters")]
print("standalone ok")
"""

def test_every_kernel_runs_where_the_harness_cannot_be_imported() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", BLOCK_HARNESS], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "standalone ok" in done.stdout
