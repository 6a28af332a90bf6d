#!/usr/bin/env bash
# After a change to the triton path: three fresh default runs at the fixed profile (every cell
# checked against the reference by the run itself), their spread, the host cost per call, and
# each run against the committed baseline of this GPU model when there is one.
# Usage: bash scripts/dev/verify_triton.sh OUT
set -u
OUT_DIR=${1:?usage: verify_triton.sh OUT}
bash scripts/gpu_suite.sh baseline "$OUT_DIR" 2>&1 | grep -v "UserWarning\|_warn_once\|^\s*$" | tail -3
work=/tmp/apex-gpu-suite/baseline
python3 scripts/dev/spread.py "$work"/fixed-triton-{1,2,3}.json | grep -v "^|   run" | tee "$work/spread.md"
python3 - "$work/fixed-triton-2.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("host us per call:", {f"{c['workload']}/{c['case']}": round((c.get("host_ms") or 0) * 1e3, 1)
                            for c in r["benchmarks"]})
PY
source scripts/gpu_env.sh >/dev/null  # the gate needs jsonschema from the carried wheels
baseline=$(bash scripts/gpu_baseline_path.sh)
if [ -f "$baseline" ]; then
  for i in 1 2 3; do apex-bench compare --baseline "$baseline" --current "$work/fixed-triton-$i.json" --quiet; done
else
  echo "no committed baseline at $baseline"
fi
tar czf "$OUT_DIR/results-verify.tgz" -C "$work" .
