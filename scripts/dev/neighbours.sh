#!/usr/bin/env bash
# Does what else runs on the host change a short triton cell's held-event time? (needs a GPU)
#   bash scripts/dev/neighbours.sh OUT
# The same tilepack triton cell read 1.22 us net in one run and 2.45 us in the next on one
# H100 (same configuration, clocks and floor; docs/perf.md, 2026-11-27): the first ran after
# the builders had finished, the second while they compiled. Here three short triton cells
# run in fresh processes (no builders) alone, beside an idle process that holds a CUDA
# context on the same GPU, and beside 14 busy CPU processes, twice each in turn; then
# torch-compile + triton with builders, fresh caches and warm. Prints each run's net p50s.
out=${1:?usage: neighbours.sh OUT}
mkdir -p "$out"
cells=(--backends triton --workloads tilepack,tile-stage1,tileunpack:override --quiet --no-energy)
pids=()
run() {  # run NAME ARGS...: one apex-bench run into OUT/NAME.json
  local name=$1; shift
  timeout 120 apex-bench "$@" --output-json "$out/$name.json" --output-md "$out/$name.md" > /dev/null
}
context() {  # an idle process with a CUDA context on the GPU
  python3 -c "import torch, time; torch.ones(1, device='cuda'); torch.cuda.synchronize(); time.sleep(300)" &
  pids+=($!)
  sleep 10
}
hog() { for _ in $(seq 14); do timeout 300 python3 -c "while True: pass" & pids+=($!); done; sleep 1; }
stop() { kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null; pids=(); }
for i in 1 2; do
  run "alone-$i" "${cells[@]}" --build-workers 0
  context; run "context-$i" "${cells[@]}" --build-workers 0; stop
  hog; run "cpu-$i" "${cells[@]}" --build-workers 0; stop
done
both=(--backends torch-compile,triton --workloads tilepack,tile-stage1,tileunpack:override,ff-infer,tilessm-scan
      --quiet --no-energy)
export APEX_BENCH_CACHE=/tmp/neighbours-cache
rm -rf "$APEX_BENCH_CACHE"
run builders-fresh "${both[@]}"
run builders-warm "${both[@]}"
python3 - "$out" <<'PY'
import json, sys
from pathlib import Path

for path in sorted(Path(sys.argv[1]).glob("*.json"), key=lambda p: p.stat().st_mtime):
    rows = json.loads(path.read_text())["benchmarks"]
    cells = " ".join(f"{r['workload']}:{r['case']}/{r['backend']} {r['stats']['p50_ms'] * 1e3:.2f}"
                     f" (floor {r['timer_floor_ms'] * 1e3:.2f})" for r in rows
                     if r["status"] == "ok" and r["workload"] in ("tilepack", "tile-stage1", "tileunpack"))
    print(f"{path.stem}: {cells}")
PY
