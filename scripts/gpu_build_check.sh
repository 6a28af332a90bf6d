#!/usr/bin/env bash
# Build in parallel, measure alone (docs/scale.md): the fixed profile of torch-reference,
# torch-compile and triton on one GPU with empty compile caches (--fresh, a fresh machine),
# once with the builders off (--build-workers 0) and once with the default builders. Prints
# both wall times, each run's build / warm / wait totals and what the builders did per cell,
# and every cell's p50 with builders against the run without (flags differences over 5 %).
#   bash scripts/gpu_build_check.sh OUT
# The serial fresh run took 292 s on an H100: it gets 330 s, the run with builders 240 s.
# Results (reports, walls.txt, compare.txt) are packed into OUT/results.tgz after each run,
# so a cut-off call still returns what finished.
OUT_DIR=${1:?usage: gpu_build_check.sh OUT}
work=/tmp/apex-gpu-build
rm -rf "$work"
mkdir -p "$work" "$OUT_DIR"
[ -f scripts/gpu_env.sh ] && [ -d .whl ] && source scripts/gpu_env.sh
export PYTHONUNBUFFERED=1
export APEX_BENCH_CACHE="$work/cache"  # --fresh ignores it; set so nothing reads the user's caches
nvidia-smi --query-gpu=index,name,uuid,driver_version --format=csv | tee "$work/gpus.txt"
nproc | sed 's/^/cpu cores: /' | tee -a "$work/gpus.txt"
suite=(--device cuda --backends torch-reference,torch-compile,triton --profile fixed --fresh --quiet)
run() {  # run NAME LIMIT ARGS...: one apex-bench run, its wall time in walls.txt
  local name=$1 limit=$2; shift 2
  local start end code
  start=$(date +%s%N)
  timeout "$limit" apex-bench "${suite[@]}" "$@" --output-json "$work/$name.json" \
    --output-md "$work/$name.md" --log-file "$work/$name.log"
  code=$?
  end=$(date +%s%N)
  printf '%s: exit %s, wall %d.%01d s: apex-bench %s\n' "$name" "$code" $(( (end - start) / 1000000000 )) \
    $(( (end - start) / 100000000 % 10 )) "$*" | tee -a "$work/walls.txt"
  tar czf "$OUT_DIR/results.tgz" -C "$work" --exclude cache .
}
run serial 330 --build-workers 0
run builders 240
python3 - "$work" <<'PY' | tee "$work/compare.txt"
import json, sys
from collections import Counter
from pathlib import Path

work = Path(sys.argv[1])
def load(name):
    path = work / f"{name}.json"
    if not path.exists():
        print(f"{name}: no report")
        return None, {}
    report = json.loads(path.read_text())
    return report, {b["name"]: b for b in report["benchmarks"]}

for name in ("serial", "builders"):
    report, rows = load(name)
    if report is None:
        continue
    build = sum(r.get("build_time_s") or 0 for r in rows.values())
    warm = sum(r.get("warm_time_s") or 0 for r in rows.values())
    wait = max((r.get("wait_time_s") or 0 for r in rows.values()), default=0)
    waited = sum((r["metadata"].get("prebuild") or {}).get("waited_s", 0) for r in rows.values())
    states = Counter(r["metadata"]["prebuild"]["state"] for r in rows.values() if "prebuild" in r["metadata"])
    print(f"\n{name}: {report['status']}, builders {report['config'].get('build_workers', 0)}, "
          f"{dict(Counter(r['status'] for r in rows.values()))}")
    print(f"  build_time_s {build:.1f} s in all; builders' warm_time_s {warm:.1f} s; worker waited for "
          f"builders {waited:.1f} s; longest wait_time_s {wait:.1f} s; prebuild states {dict(states)}")
    for key, row in rows.items():
        pre = row["metadata"].get("prebuild")
        if pre:
            print(f"  {key:60s} build {row['build_time_s'] or 0:6.1f} s  warm {row.get('warm_time_s') or 0:6.1f} s"
                  f"  waited {pre['waited_s']:5.1f} s  {pre['state']} {pre.get('reason', '')[:80]}")

_, serial = load("serial")
_, builders = load("builders")
worst, outside = 0.0, []
print("\np50 with builders vs without:")
for key, row in builders.items():
    ref = serial.get(key)
    if not ref or row["status"] != "ok" or ref["status"] != "ok":
        if ref and row["status"] != ref["status"]:
            print(f"  {key:60s} status {row['status']} vs {ref['status']}")
            outside.append(key)
        continue
    ratio = row["stats"]["p50_ms"] / ref["stats"]["p50_ms"]
    worst = max(worst, abs(ratio - 1))
    print(f"  {key:60s} p50 {row['stats']['p50_ms']:.4g} ms vs {ref['stats']['p50_ms']:.4g} ms  ({ratio - 1:+.1%})")
    if abs(ratio - 1) > 0.05:
        outside.append(key)
print(f"largest p50 difference {worst:.1%}; {len(outside)} cell(s) outside 5 % or of another status: "
      f"{', '.join(outside) or '-'}")
PY
cat "$work/walls.txt"
tar czf "$OUT_DIR/results.tgz" -C "$work" --exclude cache .
