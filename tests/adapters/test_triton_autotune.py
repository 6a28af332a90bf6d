"""Reading the autotuners' choices after a cell: a real two-config Triton autotuner, in the interpreter.

The interpreter keeps one config per apex_kernels autotuner, so this builds its own with
two and a fake benchmark (the interpreter has no CUDA events) that favours a different
config at each size: the choice per shape must come from the autotuner's cache, not
from ``best_config`` (which only holds the last launch's choice).
"""

from pathlib import Path
from typing import Any

import pytest
import torch

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

from adapters.triton_autotune import autotune_entries, cached_keys, tuning_key  # noqa: E402
from apex_kernels._utils import KernelLaunch, config_dict  # noqa: E402
from apex_kernels.tuned import Picks, seed_autotuners  # noqa: E402


def fake_bench(kernel_call: Any, quantiles: Any = None, **_: Any) -> list[float]:
    """Run the candidate once; 'time' it by its block: small blocks win at N < 32."""
    kernel_call()
    block = fake_bench.block_of_last_call  # type: ignore[attr-defined]
    n = fake_bench.n  # type: ignore[attr-defined]
    ms = 1.0 if (block == 4) == (n < 32) else 2.0
    return [ms, ms, ms]


def _pre_hook(kwargs: dict[str, Any]) -> None:
    fake_bench.block_of_last_call = kwargs["BLOCK"]  # type: ignore[attr-defined]
    fake_bench.n = kwargs["N"]  # type: ignore[attr-defined]


@triton.autotune(configs=[triton.Config({"BLOCK": 4}, num_warps=1, pre_hook=_pre_hook),
                          triton.Config({"BLOCK": 16}, num_warps=2, pre_hook=_pre_hook)],
                 key=["N"], do_bench=fake_bench)
@triton.jit
def _double_kernel(x, y, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, 2 * tl.load(x + offs, mask=offs < N), mask=offs < N)


def launch_of(n: int, dtype: torch.dtype = torch.float32) -> KernelLaunch:
    x = torch.arange(n, dtype=dtype)
    y = torch.empty_like(x)
    return KernelLaunch("double", _double_kernel, lambda meta: (triton.cdiv(n, meta["BLOCK"]),),
                        (x, y, n), {}, f"N{n}")


def test_the_choice_of_each_shape_is_read_from_the_cache() -> None:
    _double_kernel.cache.clear()
    small, large = launch_of(8), launch_of(64)
    before = cached_keys([small, large])
    for launch in (small, large, small, large):
        launch()
    assert torch.equal(small.args[1], 2 * small.args[0])
    assert _double_kernel.best_config.kwargs["BLOCK"] == 16  # the last launch's choice only
    entries = autotune_entries([small, large, small], before)
    assert [(e["shape_bucket"], e["selected_config"]["BLOCK"], e["launches"]) for e in entries] == [
        ("N8", 4, 2), ("N64", 16, 1)]
    assert all(e["selection_source"] == "triton_best_config" for e in entries)
    # this cell tuned both shapes: one miss each
    assert [(e["cache_hits"], e["cache_misses"]) for e in entries] == [(0, 1), (0, 1)]
    # a later cell of the same shapes finds them cached
    again = autotune_entries([launch_of(8)], cached_keys([small]))
    assert (again[0]["cache_hits"], again[0]["cache_misses"]) == (1, 0)


def test_tuning_key_is_the_key_triton_caches_under() -> None:
    _double_kernel.cache.clear()
    launch = launch_of(8, torch.float16)
    launch()
    assert set(_double_kernel.cache) == {tuning_key(_double_kernel, launch.args, launch.meta)}


def test_a_kernel_without_an_autotuner_reports_its_bound_config() -> None:
    x = torch.arange(8.0)
    launch = KernelLaunch("double", _double_kernel.fn, (2,), (x, torch.empty_like(x), 8),
                          {"BLOCK": 4, "num_warps": 1}, "N8")
    launch()
    (entry,) = autotune_entries([launch], cached_keys([launch]))
    assert entry["selection_source"] == "heuristic"
    assert entry["selected_config"] == {"BLOCK": 4, "num_warps": 1}
    assert (entry["launches"], entry["cache_hits"], entry["cache_misses"]) == (1, 0, 0)


def _picks_for(kernel_id: str, *entries: tuple[tuple[Any, ...], dict[str, Any]]) -> Picks:
    return Picks(Path("h100.json"), "NVIDIA H100 80GB HBM3", {}, {kernel_id: list(entries)})


def test_a_shipped_pick_is_launched_without_tuning_and_reported_as_shipped(monkeypatch) -> None:
    _double_kernel.cache.clear()
    small, large = launch_of(8), launch_of(64)
    benched = []

    def counting_bench(kernel_call: Any, quantiles: Any = None, **kwargs: Any) -> list[float]:
        benched.append(fake_bench.n if hasattr(fake_bench, "n") else None)  # type: ignore[attr-defined]
        return fake_bench(kernel_call, quantiles, **kwargs)

    monkeypatch.setattr(_double_kernel, "_do_bench", counting_bench)
    monkeypatch.setitem(vars(_double_kernel), "do_bench", counting_bench)  # where Triton caches it once read
    small_key = tuning_key(_double_kernel, small.args, small.meta)
    # ship the config the fake benchmark would not pick for N=8 (it favours BLOCK 4): the pick must win
    picks = _picks_for("tests:_double_kernel", (small_key, config_dict(_double_kernel.configs[1])))
    seeding = seed_autotuners(picks, {"tests:_double_kernel": _double_kernel})
    assert _double_kernel.cache[small_key] is _double_kernel.configs[1]  # the autotuner's own Config
    before = cached_keys([small, large])
    small()
    assert benched == [] and torch.equal(small.args[1], 2 * small.args[0])  # launched, never timed
    large()
    assert len(benched) == 2  # the shape without a pick is tuned as usual: both configs timed
    names = {id(_double_kernel): "tests:_double_kernel"}
    entries = autotune_entries([small, large], before, seeding, names)
    assert [(e["shape_bucket"], e["selected_config"]["BLOCK"], e["selection_source"]) for e in entries] == [
        ("N8", 16, "shipped_picks"), ("N64", 16, "triton_best_config")]
    assert [(e["cache_hits"], e["cache_misses"]) for e in entries] == [(1, 0), (0, 1)]
    assert entries[0]["kernel_id"] == "tests:_double_kernel" and tuple(entries[0]["tuning_key"]) == small_key
    assert tuple(entries[1]["tuning_key"]) == tuning_key(_double_kernel, large.args, large.meta)


def test_a_pick_of_a_config_the_kernel_no_longer_has_is_tuned_and_a_tuned_key_stays() -> None:
    _double_kernel.cache.clear()
    small, large = launch_of(8), launch_of(64)
    small_key = tuning_key(_double_kernel, small.args, small.meta)
    large_key = tuning_key(_double_kernel, large.args, large.meta)
    large()  # tuned here first: BLOCK 16
    gone = {**config_dict(_double_kernel.configs[1]), "BLOCK": 32}
    kept = config_dict(_double_kernel.configs[0])
    picks = _picks_for("tests:_double_kernel", (small_key, gone), (large_key, kept))
    seeding = seed_autotuners(picks, {"tests:_double_kernel": _double_kernel})
    assert seeding.stale == {("tests:_double_kernel", small_key)}
    assert small_key not in _double_kernel.cache and _double_kernel.cache[large_key].kwargs["BLOCK"] == 16
    small()
    assert _double_kernel.cache[small_key].kwargs["BLOCK"] == 4  # tuned, as without picks
    assert not seeding.was_seeded(_double_kernel, small_key)
    assert not seeding.was_seeded(_double_kernel, large_key)


def test_a_builder_compiles_only_the_shipped_pick() -> None:
    from adapters.triton_warm import _compile_jobs

    _double_kernel.cache.clear()
    small = launch_of(8)
    assert len(_compile_jobs(small)) == 2  # no pick: every config the autotuner will try
    key = tuning_key(_double_kernel, small.args, small.meta)
    seed_autotuners(_picks_for("k", (key, config_dict(_double_kernel.configs[0]))), {"k": _double_kernel})
    assert len(_compile_jobs(small)) == 1
    _double_kernel.cache.clear()


def test_the_held_timer_reaches_every_autotuner_of_apex_kernels_however_imported() -> None:
    import importlib
    import pkgutil
    import sys

    import apex_kernels
    from adapters.triton_backend import tune_with_held_timer
    from apex_core.measure.tuning_timer import TUNING_METHOD, tuning_bench
    from apex_kernels.tuned import autotuners

    for module in pkgutil.walk_packages(apex_kernels.__path__, "apex_kernels."):
        importlib.import_module(module.name)
    # every autotuner object an apex_kernels module holds, under its own name or imported
    held = {id(value): value for name, module in list(sys.modules.items())
            if name == "apex_kernels" or name.startswith("apex_kernels.")
            for value in vars(module).values() if isinstance(value, triton.runtime.autotuner.Autotuner)}
    saved = {key: (tuner._do_bench, vars(tuner).get("do_bench")) for key, tuner in held.items()}
    try:
        assert tune_with_held_timer(autotuners()) == TUNING_METHOD
        assert held and all(t._do_bench is tuning_bench and vars(t)["do_bench"] is tuning_bench
                            for t in held.values())
    finally:
        for key, tuner in held.items():
            tuner._do_bench, cached = saved[key]
            if cached is None:
                vars(tuner).pop("do_bench", None)
            else:
                vars(tuner)["do_bench"] = cached
