"""Output cheats on CUDA: each cheat backend ``incorrect`` with its problem named, honest cells
``ok``, and what the degenerate-output check costs. Prints PASS/FAIL lines; exit 1 on a FAIL.

Run from the repository root on a GPU machine:

    python scripts/dev/output_cheats_cuda.py [cheats_caught] [honest_ok] [check_cost]

It installs the test plugin (tests/plugins) into a temporary folder, then runs the CLI as a
user would: the four cheat backends on every built-in workload and test-loose-check at the
smoke profile in fp32; the built-in backends at the smoke profile in fp32, fp16 and bf16;
and ``degenerate_output`` timed on each fixed-profile case's outputs, five times a cell (before
and after timing, three spot checks), against the cells' wall time in a fixed-profile run of
torch-reference and triton (docs/anti-cheat.md, Output cheats).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILT_IN = "ff-infer,fusiongate,tile-stage1,tilepack,tilessm-scan,tileunpack"
CHEATS = {
    "cheat-zeros": "all zeros where the reference is not",
    "cheat-nan": "NaN/Inf value(s) where the reference is finite",
    "cheat-constant": "one constant value",
    "cheat-precision": "precision downgrade",
}
FAST = ["--min-time", "0.02", "--max-time", "0.2", "--warmup", "2", "--no-history"]


def cli(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, list[dict]]:
    result = subprocess.run([sys.executable, "-m", "apex_core.cli.main", *args, "--output-json", "r.json",
                             "--output-md", "r.md"], cwd=cwd, env=env, capture_output=True, text=True)
    if "Traceback" in result.stderr:
        print(result.stderr[-2000:])
    report = cwd / "r.json"
    return result.returncode, json.loads(report.read_text())["benchmarks"] if report.exists() else []


def verdict(ok: bool, what: str) -> bool:
    print(f"{'PASS' if ok else 'FAIL'}: {what}", flush=True)
    return ok


def cheats_caught(work: Path, env: dict[str, str]) -> bool:
    code, cells = cli(["--device", "cuda", "--profile", "smoke", "--dtype", "fp32", *FAST,
                       "--backends", ",".join(CHEATS), "--workloads",
                       f"test-loose-check,{BUILT_IN}"],
                      work, env)
    good = verdict(code == 1 and len(cells) == 4 * 11,
                   f"cheat run: exit {code}, {len(cells)} cells (44 expected)")
    for cell in cells:
        if cell["backend"] == "cheat-precision" and cell["workload"] == "test-loose-check":
            good &= verdict(cell["status"] == "ok", f"{cell['name']}: ok under the loose tolerance")
            continue
        caught = cell["status"] == "incorrect" and CHEATS[cell["backend"]] in cell["reason"]
        good &= verdict(caught, f"{cell['name']}: {cell['status']} {cell['reason'][:160]}")
    return good


def honest_ok(work: Path, env: dict[str, str]) -> bool:
    code, cells = cli(["--device", "cuda", "--profile", "smoke", "--dtype", "fp32,fp16,bf16", *FAST,
                       "--backends", "torch-reference,torch-compile,triton,jax", "--workloads", BUILT_IN],
                      work, env)
    ran = [c for c in cells if c["status"] != "skipped"]
    bad = [f"{c['name']}: {c['status']} {c['reason'][:200]}" for c in ran if c["status"] != "ok"]
    for line in bad:
        print("  ", line)
    return verdict(code == 0 and bool(ran) and not bad,
                   f"honest smoke cells on cuda: {len(ran)} ran, {len(bad)} not ok")


# degenerate_output timed directly on every built-in fixed-profile case's fp16 outputs against its
# float32 reference on the GPU. Wrapping it inside a run does not work: the harness's integrity
# guard restores every function of apex_core.correctness that changed.
COST = """
import json, sys, time, torch
from apex_core.correctness import compare_tensor, degenerate_output, upcast_inputs
from apex_core.registry import Registry
from apex_core.measure.spot_checks import SETS
registry = Registry.discover()
device = sys.argv[2]
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
per_cell = {}
for name in sys.argv[1].split(","):
    w = registry.workloads[name]
    for case in w.cases(w.make_params("fixed")):
        inputs = w.make_inputs(case, device, torch.float16, 0)
        ref = w.reference(case, upcast_inputs(inputs, torch.float32))
        out = w.reference(case, inputs)
        tol = w.tolerance("fp16")
        found = {k: compare_tensor(k, out[k], ref[k], tol) for k in ref}  # its findings, not timed
        best = float("inf")
        for _ in range(5):
            sync(); s = time.perf_counter()
            for k in ref:
                degenerate_output(out[k], ref[k], tol, found[k])
            sync(); best = min(best, time.perf_counter() - s)
        per_cell[f"{name}/{case.name}"] = best * (2 + SETS)  # before, after, each spot check
print("COST " + json.dumps(per_cell))
"""


def check_cost(work: Path, env: dict[str, str]) -> bool:
    """The degenerate-output checks' time per cell (compare_tensor's findings, which they take,
    made beforehand), against the cells' wall time in a fixed-profile run of torch-reference and triton."""
    code, cells = cli(["--device", "cuda", "--dtype", "fp16", "--backends", "torch-reference,triton",
                       "--workloads", BUILT_IN, "--no-history"], work, env)
    result = subprocess.run([sys.executable, "-c", COST, BUILT_IN, "cuda"], cwd=work, env=env,
                            capture_output=True, text=True)
    line = next((x for x in result.stdout.splitlines() if x.startswith("COST ")), "")
    if not line or not cells:
        return verdict(False, f"cost: run exit {code}, {len(cells)} cells; {result.stderr[-500:]}")
    per_cell = json.loads(line[5:])
    checks = sum(per_cell[f"{c['workload']}/{c['case']}"] for c in cells if c["status"] == "ok")
    wall = sum(c.get("wall_time_s") or 0.0 for c in cells)
    for key, seconds in per_cell.items():
        print(f"   {key}: {1000 * seconds:.1f} ms a cell")
    share = 100 * checks / wall
    return verdict(share < 5.0, f"degenerate_output {checks:.2f} s of the cells' {wall:.1f} s "
                   f"({share:.2f} %; run exit {code}, {len(cells)} cells)")


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        site, source = Path(tmp) / "site", Path(tmp) / "plugin-source"
        # built from a copy: setuptools writes build/ and *.egg-info next to the sources
        shutil.copytree(ROOT / "tests" / "plugins", source,
                        ignore=shutil.ignore_patterns("build", "*.egg-info"))
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                        "--no-build-isolation", "--target", str(site), str(source)], check=True)
        # keeps the PYTHONPATH it was given: on the GPU machines the wheels apex-bench needs live there
        paths = [str(site), str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
        started = time.monotonic()
        good = True
        steps = [cheats_caught, honest_ok, check_cost]
        chosen = [step for step in steps if step.__name__ in sys.argv[1:]] or steps  # by name, else all
        for step in chosen:
            work = Path(tmp) / step.__name__
            work.mkdir()
            good &= step(work, env)
        print(f"{'PASS' if good else 'FAIL'}: all ({time.monotonic() - started:.0f} s)")
        return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
