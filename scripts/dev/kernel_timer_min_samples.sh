#!/usr/bin/env bash
# The minimum sample count under --timer kernel (needs a GPU and apex-bench installed).
#
# The profiler's first session in a worker starts CUPTI, which took longer than the 3 s
# --max-time on an H100: the first cell stopped after one sample (stop_reason time_cap, n = 1).
# Now the start-up runs before the time budget and the cap waits for --iters samples unless a
# single call outlasts it. This runs one triton cell (its worker's first, so the start-up is
# its own) and the test plugin's spin kernel as a single cell, both with --timer kernel and a
# fresh worker each, and prints PASS/FAIL for: every ok cell has n >= --iters, or a
# few_samples flag saying why. Exit 0 when every check passed, 1 otherwise.
#   bash scripts/dev/kernel_timer_min_samples.sh [OUT]
OUT_DIR=${1:-$(mktemp -d)}
mkdir -p "$OUT_DIR"
[ -f scripts/gpu_env.sh ] && [ -d .whl ] && source scripts/gpu_env.sh
export PYTHONUNBUFFERED=1
ITERS=10
failed=0

check() {  # check NAME REPORT: PASS/FAIL per ok cell, FAIL when no ok cell
  python3 - "$1" "$2" "$ITERS" <<'PY' || failed=1
import json, sys
name, path, iters = sys.argv[1], sys.argv[2], int(sys.argv[3])
report = json.load(open(path))
ok = [c for c in report["benchmarks"] if c["status"] == "ok"]
bad = 0
if not ok:
    print(f"FAIL {name}: no ok cell ({[(c['backend'], c['status'], c['reason']) for c in report['benchmarks']]})")
    sys.exit(1)
for cell in ok:
    n, flags = cell["stats"]["n"], cell.get("flags", [])
    verdict = "PASS" if n >= iters or "few_samples" in flags else "FAIL"
    bad += verdict == "FAIL"
    print(f"{verdict} {name}: {cell['name']} n={n} (--iters {iters}) stop={cell.get('stop_reason')} "
          f"p50={cell['stats']['p50_ms']:.4g} ms method={cell['timing_method']} flags={flags}")
sys.exit(1 if bad else 0)
PY
}

# one triton cell, the first its worker runs
apex-bench --device cuda --backends triton --workloads tilepack:default --timer kernel \
  --iters "$ITERS" --max-time 3 --quiet --no-history \
  --output-json "$OUT_DIR/triton.json" --output-md "$OUT_DIR/triton.md"
echo "triton run: exit $?"
check triton "$OUT_DIR/triton.json"

# the test plugin's spin kernel as a single cell (installed into a private folder, offline)
SITE="$OUT_DIR/plugin-site"
if python3 -m pip install --quiet --no-deps --no-index --no-build-isolation --no-compile \
    --target "$SITE" tests/plugins; then
  PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" apex-bench --device cuda --backends test-working \
    --workloads test-spin --timer kernel --iters "$ITERS" --max-time 3 --quiet --no-history \
    --output-json "$OUT_DIR/spin.json" --output-md "$OUT_DIR/spin.md"
  echo "spin run: exit $?"
  check spin "$OUT_DIR/spin.json"
else
  echo "SKIP spin: could not install tests/plugins"
fi

[ "$failed" = 0 ] && echo "PASS all" || echo "FAIL some"
exit "$failed"
