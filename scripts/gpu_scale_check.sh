#!/usr/bin/env bash
# Several GPUs of one host (docs/scale.md): the fixed profile of torch-reference, torch-compile
# and triton with empty compile caches (a fresh machine) and then warm, on one GPU and then with
# --devices all, and through --executor ray when ray imports here. Prints each run's wall time
# and a per-cell p50 comparison against the warm one-GPU run (within 5 %?), under OUT.
#   bash scripts/gpu_scale_check.sh OUT [PART]
# PART: one (one GPU, empty then warm caches), all (--devices all, the same), ray (--executor ray,
# warm), compare (the tables), bar (the bars of docs/scale.md in one call: --devices all with empty
# caches, then one GPU and --executor ray with the caches it filled), ray-fresh (--executor ray
# with empty caches, then one GPU warm to compare against), or every part in turn (the default). A fresh one-GPU run took
# 292 s on an H100, so give each part a device command of its own when they might not fit in one.
# Every run is bounded (timeout); results.tgz is rebuilt after each, so a cut-off call still
# returns what finished. The runs' folder (/tmp/apex-gpu-scale) is kept between parts.
OUT_DIR=${1:?usage: gpu_scale_check.sh OUT [one|all|ray|ray-fresh|compare|bar]}
part=${2:-every}
work=/tmp/apex-gpu-scale
mkdir -p "$work" "$OUT_DIR"
[ -f scripts/gpu_env.sh ] && [ -d .whl ] && source scripts/gpu_env.sh
# Ray's wheel is larger than a device call carries: scripts/fetch_gpu_wheels.sh --ray packs
# the parts apex-bench uses into .whl-ray/ray-slim.tar.xz
if [ -f .whl-ray/ray-slim.tar.xz ] && ! python3 -c "import ray" 2>/dev/null; then
  mkdir -p /tmp/ray-site && tar xJf .whl-ray/ray-slim.tar.xz -C /tmp/ray-site
  export PYTHONPATH=/tmp/ray-site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
export APEX_BENCH_CACHE="$work/cache"  # emptied before each part's first run: a fresh machine
nvidia-smi --query-gpu=index,name,uuid,driver_version --format=csv | tee "$work/gpus.txt"
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
suite=(--backends torch-reference,torch-compile,triton --profile fixed --quiet)
run() {  # run NAME LIMIT ARGS...: one apex-bench run, its wall time in walls.txt
  local name=$1 limit=$2; shift 2
  local start end code
  start=$(date +%s%N)
  timeout "$limit" apex-bench "${suite[@]}" "$@" --output-json "$work/$name.json" --output-md "$work/$name.md"
  code=$?
  end=$(date +%s%N)
  printf '%s: exit %s, wall %d.%01d s: apex-bench %s\n' "$name" "$code" $(( (end - start) / 1000000000 )) \
    $(( (end - start) / 100000000 % 10 )) "$*" | tee -a "$work/walls.txt"
  tar czf "$OUT_DIR/results.tgz" -C "$work" --exclude cache .
}
if [ "$part" = one ] || [ "$part" = every ]; then
  rm -rf "$work/cache"
  run one-fresh 420 --devices 0
  run one-warm 240 --devices 0
fi
if [ "$part" = all ] || [ "$part" = every ]; then
  if [ "$gpus" -ge 2 ]; then
    rm -rf "$work/cache"
    run all-fresh 300 --devices all
    run all-warm 240 --devices all
  else
    echo "only $gpus GPU here: no --devices all run" | tee -a "$work/walls.txt"
  fi
fi
if [ "$part" = bar ]; then
  rm -rf "$work/cache"
  [ "$gpus" -ge 2 ] && run all-fresh 300 --devices all
  run one-warm 240 --devices 0
fi
if [ "$part" = ray-fresh ]; then
  # --executor ray with empty caches: warm tasks build while the GPUs measure (docs/scale.md)
  if python3 -c "import ray" 2>/dev/null; then
    rm -rf "$work/cache"
    run ray-fresh 360 --device cuda --executor ray
    run one-warm 240 --devices 0
  else
    echo "ray is not importable here: --executor ray not run" | tee -a "$work/walls.txt"
  fi
fi
if [ "$part" = ray ] || [ "$part" = every ] || [ "$part" = bar ]; then
  if python3 -c "import ray" 2>/dev/null; then
    # a local Ray instance on this host, started by apex-bench: one task per cell, num_gpus=1 each
    run ray-warm 360 --device cuda --executor ray
  else
    echo "ray is not importable here: --executor ray not run" | tee -a "$work/walls.txt"
  fi
fi
python3 - "$work" <<'PY' | tee "$work/compare.txt"
import json, sys
from pathlib import Path

work = Path(sys.argv[1])
def cells(name):
    path = work / f"{name}.json"
    if not path.exists():
        return None
    report = json.loads(path.read_text())
    return report, {b["name"]: b for b in report["benchmarks"]}

base = cells("one-warm")
if base is None:
    sys.exit("no one-GPU run to compare against")
for name in ("one-fresh", "all-fresh", "all-warm", "ray-fresh", "ray-warm"):
    got = cells(name)
    if got is None:
        continue
    report, rows = got
    statuses = {}
    for row in rows.values():
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    devices = ", ".join(f"{d['host'] + ':' if d['host'] else ''}cuda:{d['index']} {d['cells']} cells"
                        + (f" (retired: {d['retired']})" if d['retired'] else "") for d in report.get("devices", []))
    print(f"\n{name}: {report['status']}, {statuses}; devices: {devices or '-'}")
    build = sum(r.get("build_time_s") or 0 for r in rows.values())
    wait = max((r.get("wait_time_s") or 0 for r in rows.values()), default=0)
    print(f"  build {build:.1f} s in all, longest wait {wait:.1f} s")
    worst, outside = 0.0, []
    for key, row in rows.items():
        ref = base[1].get(key)
        if not ref or row["status"] != "ok" or ref["status"] != "ok":
            continue
        ratio = row["stats"]["p50_ms"] / ref["stats"]["p50_ms"]
        worst = max(worst, abs(ratio - 1))
        where = f"cuda:{row['device_index']}" if "device_index" in row else ""
        print(f"  {key:60s} {where:7s} p50 {row['stats']['p50_ms']:.4g} ms vs {ref['stats']['p50_ms']:.4g} ms"
              f"  ({ratio - 1:+.1%})")
        if abs(ratio - 1) > 0.05:
            outside.append(key)
    print(f"  largest p50 difference {worst:.1%}; {len(outside)} cell(s) outside 5 %: {', '.join(outside) or '-'}")
PY
cat "$work/walls.txt"
tar czf "$OUT_DIR/results.tgz" -C "$work" --exclude cache .
