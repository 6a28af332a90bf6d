"""Output cheats on CUDA: each cheat backend ``incorrect`` with its problem named, honest cells
``ok``, and what the degenerate-output check costs. Prints PASS/FAIL lines; exit 1 on a FAIL.

Run from the repository root on a GPU machine:

    python scripts/dev/output_cheats_cuda.py

It installs the test plugin (tests/plugins) into a temporary folder, then runs the CLI as a
user would: the four cheat backends on every built-in workload and test-loose-check at the
smoke profile in fp32; the built-in backends at the smoke profile in fp32, fp16 and bf16;
and torch-reference at the fixed profile in this process, timing ``degenerate_output``
against the whole run (docs/anti-cheat.md, Output cheats).
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
                       "test-loose-check,ff-infer,fusiongate,tile-stage1,tilepack,tilessm-scan,tileunpack"],
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
                       "--backends", "torch-reference,torch-compile,triton,jax"], work, env)
    ran = [c for c in cells if c["status"] != "skipped"]
    bad = [f"{c['name']}: {c['status']} {c['reason'][:200]}" for c in ran if c["status"] != "ok"]
    for line in bad:
        print("  ", line)
    return verdict(code == 0 and bool(ran) and not bad,
                   f"honest smoke cells on cuda: {len(ran)} ran, {len(bad)} not ok")


COST = """
import sys, time
import apex_core.correctness as c
spent = [0.0]
inner = c.degenerate_output
def timed(*a, **k):
    s = time.perf_counter(); v = inner(*a, **k); spent[0] += time.perf_counter() - s; return v
c.degenerate_output = timed
from apex_core.cli.main import main
s = time.perf_counter(); code = main(sys.argv[1:]); wall = time.perf_counter() - s
print(f"COST degenerate_output {spent[0]:.3f} s of {wall:.1f} s ({100 * spent[0] / wall:.2f} %), exit {code}")
"""


def check_cost(work: Path, env: dict[str, str]) -> bool:
    result = subprocess.run([sys.executable, "-c", COST, "--inline", "--device", "cuda", "--backends",
                             "torch-reference,triton", "--no-history", "--output-json", "c.json",
                             "--output-md", "c.md"], cwd=work, env=env, capture_output=True, text=True)
    line = next((x for x in result.stdout.splitlines() if x.startswith("COST")), result.stderr[-500:])
    print(line)
    share = float(line.split("(")[1].split(" %")[0]) if line.startswith("COST") else 100.0
    return verdict(share < 5.0, f"degenerate_output under 5 % of a fixed-profile run ({share:.2f} %)")


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
        for step in (cheats_caught, honest_ok, check_cost):
            work = Path(tmp) / step.__name__
            work.mkdir()
            good &= step(work, env)
        print(f"{'PASS' if good else 'FAIL'}: all ({time.monotonic() - started:.0f} s)")
        return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
