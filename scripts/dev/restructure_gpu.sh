#!/usr/bin/env bash
# After a restructure: the built-in backends still run every fixed-profile cell on the GPU, and what
# pinning the cells' data for the report costs at the large profile (scripts/dev/replay_cost.py).
#   bash scripts/dev/restructure_gpu.sh OUT [DEADLINE_S]
OUT_DIR=${1:?usage: restructure_gpu.sh OUT [DEADLINE_S]}
DEADLINE=${2:-330}
mkdir -p "$OUT_DIR"
[ -f scripts/gpu_env.sh ] && [ -d .whl ] && source scripts/gpu_env.sh
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 python3 scripts/dev/replay_cost.py large fp16 > "$OUT_DIR/replay_cost_large.txt" 2>&1
tail -1 "$OUT_DIR/replay_cost_large.txt"
start=$(date +%s)
timeout -s INT -k 30 "$DEADLINE" apex-bench --device cuda --profile fixed \
  --backends "${BACKENDS:-torch-reference,triton,jax}" --no-history --quiet \
  --output-json "$OUT_DIR/fixed.json" --output-csv "$OUT_DIR/fixed.csv" > "$OUT_DIR/fixed.log" 2>&1
echo "fixed: exit $? after $(( $(date +%s) - start )) s"
python3 - "$OUT_DIR/fixed.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for r in rows:
    print(f"{r['workload']:12} {r['case']:13} {r['backend']:15} {r['status']:8} p50 {r['p50_ms'] or '-':>12} ms "
          f"n {r['n'] or '-':>5} {r['flags']} {r['reason'][:100]}")
print(len(rows), "cells:", {s: sum(r["status"] == s for r in rows) for s in {r["status"] for r in rows}})
PY
