"""Golden replay fixtures: every built-in workload's inputs (sha256) and reference outputs (fingerprints).

``python -m apex_core.measure.replay_fixtures check`` regenerates the data and compares:
the parameters and the inputs' hashes must be equal, the reference outputs' fingerprints
equal within ``fingerprint.RTOL`` (BLAS results differ in their last bits between CPUs,
so they are never hashed). ``... write`` rewrites ``tests/fixtures/replay-{small,medium}.json``.
Rewrite them only when a workload's semantics change on purpose, or when the pinned torch
changes (docs/replay.md). Both run with torch's portable CPU kernels
(``ATEN_CPU_CAPABILITY=default``, which fixes the float32 random draws) on one thread.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs

from apex_core.measure.fingerprint import RTOL, fingerprints_differences, tensors_fingerprint
from apex_core.measure.replay_artifacts import HASH_FORMAT, generate_artifacts, hash_platform, tensors_sha256
from apex_core.plan import params_for
from apex_core.registry import WORKLOAD_GROUP, Registry, load_entry_points

SEED = 0
DTYPE_NAMES = ("fp32", "fp16", "bf16")
# float32 randn takes another code path under AVX2 than in the portable kernels, so the
# fixtures are made and checked with the portable ones: the inputs are then the same bits.
PINNED_CAPABILITY = "default"
# fixture name -> (base profile, overrides): small is the smoke profile, medium sits
# between smoke and fixed and still regenerates in seconds on a CPU.
FIXTURES: dict[str, tuple[str, dict[str, int]]] = {
    "small": ("smoke", {}),
    "medium": ("smoke", {"channels": 16, "height": 32, "width": 32, "tile_size": 4, "kmax": 12,
                         "steps": 32, "budget_b1": 8, "budget_b2": 4, "budget_total": 12}),
}
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
EXIT_MISMATCH, EXIT_NOT_COMPARABLE = 1, 3


def fixture_path(folder: Path, name: str) -> Path:
    return Path(folder) / f"replay-{name}.json"


def builtin_workloads() -> dict[str, Any]:
    """The workloads that ship with apex-bench (third-party plugins are not pinned here)."""
    registry = Registry.discover(
        loader=lambda group: load_entry_points(group) if group == WORKLOAD_GROUP else [])
    return {name: w for name, w in sorted(registry.workloads.items())
            if type(w).__module__.startswith("apex_core.workloads.")}


def artifact_entry(params: dict[str, Any], inputs: dict[str, Any], outputs: dict[str, Any]
                   ) -> dict[str, Any]:
    """One fixture entry: the parameters, the inputs' sha256 and the outputs' fingerprints."""
    return {"params": params, "inputs_sha256": tensors_sha256(inputs, {}),
            "outputs": tensors_fingerprint(outputs)}


def compute_fixture(name: str) -> dict[str, Any]:
    """The fixture document for ``name``: every built-in case in every dtype at ``SEED``."""
    base, overrides = FIXTURES[name]
    artifacts: dict[str, Any] = {}
    for workload in builtin_workloads().values():
        params = params_for(workload, base, overrides)[0]  # the engine workload has no smoke
        for case in workload.cases(params):
            for dtype in DTYPE_NAMES:
                inputs, outputs = generate_artifacts(workload, case.name, attrs.asdict(params),
                                                     dtype, SEED)
                artifacts[f"{workload.name}/{case.name}/{dtype}"] = artifact_entry(
                    attrs.asdict(params), inputs, outputs)
    return {
        "fixture": f"replay-{name}",
        "hash_format": HASH_FORMAT,
        "seed": SEED,
        "base_profile": base,
        "overrides": overrides,
        "generated_with": hash_platform(),
        "outputs_rtol": RTOL,
        "regenerate": "python -m apex_core.measure.replay_fixtures write  (see docs/replay.md)",
        "artifacts": artifacts,
    }


def compare_entry(key: str, stored: dict[str, Any], fresh: dict[str, Any]) -> list[str]:
    """One line per difference of one artifact: parameters and inputs exact, outputs within RTOL."""
    problems = [f"{key}: {part} differs (stored {stored.get(part)}, now {fresh[part]})"
                for part in ("params", "inputs_sha256") if stored.get(part) != fresh[part]]
    problems += [f"{key}: output {line}"
                 for line in fingerprints_differences(stored.get("outputs", {}), fresh["outputs"])]
    return problems


def compare_fixture(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """One line per difference between a stored fixture and a regenerated one."""
    problems: list[str] = []
    if expected.get("hash_format") != actual["hash_format"]:
        problems.append(f"hash format {expected.get('hash_format')} is not {actual['hash_format']}: "
                        "rewrite the fixture")
        return problems
    stored, fresh = expected.get("artifacts", {}), actual["artifacts"]
    for key in sorted(set(stored) - set(fresh)):
        problems.append(f"{key}: in the fixture but no longer generated")
    for key in sorted(set(fresh) - set(stored)):
        problems.append(f"{key}: generated but missing from the fixture")
    for key in sorted(set(stored) & set(fresh)):
        problems.extend(compare_entry(key, stored[key], fresh[key]))
    return problems


def _check(folder: Path, names: list[str]) -> int:
    code = 0
    for name in names:
        path = fixture_path(folder, name)
        expected = json.loads(path.read_text("utf-8"))
        made_with, here = expected.get("generated_with", {}).get("torch"), hash_platform()["torch"]
        if made_with != here:
            print(f"{path.name}: not comparable: made with torch {made_with}, this is torch {here}")
            code = max(code, EXIT_NOT_COMPARABLE)
            continue
        problems = compare_fixture(expected, compute_fixture(name))
        for line in problems:
            print(f"{path.name}: {line}")
        print(f"{path.name}: {'MISMATCH' if problems else 'ok'} "
              f"({len(expected.get('artifacts', {}))} artifacts)")
        if problems:
            code = EXIT_MISMATCH
    return code


def _write(folder: Path, names: list[str]) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = fixture_path(folder, name)
        path.write_text(json.dumps(compute_fixture(name), indent=2, sort_keys=True) + "\n")
        print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Check (exit 0 ok, 1 mismatch, 3 other torch) or rewrite the golden replay fixtures."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m apex_core.measure.replay_fixtures",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("check", "write"))
    parser.add_argument("--fixture", choices=sorted(FIXTURES), action="append",
                        help="one fixture (default: all)")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="fixture folder")
    args = parser.parse_args(argv)
    if os.environ.get("ATEN_CPU_CAPABILITY") != PINNED_CAPABILITY:
        # the kernel level is fixed when torch loads: start again in a child that pins it
        env = {**os.environ, "ATEN_CPU_CAPABILITY": PINNED_CAPABILITY}
        return subprocess.run([sys.executable, "-m", "apex_core.measure.replay_fixtures", *argv],
                              env=env, check=False).returncode
    names = args.fixture or sorted(FIXTURES)
    return _write(args.dir, names) if args.action == "write" else _check(args.dir, names)


if __name__ == "__main__":
    sys.exit(main())
