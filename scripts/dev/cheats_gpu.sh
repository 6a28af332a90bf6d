#!/usr/bin/env bash
# The timing cheats on a GPU (docs/anti-cheat.md): every cheat backend of the test plugin
# (tests/plugins/apex_testplugin/cheats.py) on CUDA must be incorrect or suspect, the honest
# control ok; then the honest built-ins at the fixed profile with the checks on must have no
# suspect cell, and the same run with the checks off (APEX_BENCH_INTEGRITY=off, for this
# measurement only) gives what the checks cost in wall time. Reports under OUT.
#   bash scripts/dev/cheats_gpu.sh OUT [BACKENDS]     (BACKENDS: default torch-reference,torch-compile,triton,jax)
# PART=cheats or PART=builtins runs one half only.
OUT_DIR=${1:?usage: cheats_gpu.sh OUT [BACKENDS]}
BUILTINS=${2:-torch-reference,torch-compile,triton,jax}
mkdir -p "$OUT_DIR"
[ -f scripts/gpu_env.sh ] && [ -d .whl ] && source scripts/gpu_env.sh
export PYTHONUNBUFFERED=1
# the test plugin: a local editable install, nothing fetched
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e tests/plugins >/dev/null || exit 2
cheat() {  # name, expected statuses, extra args
  local name=$1 expect=$2; shift 2
  timeout 300 apex-bench --device cuda --workloads test-scale --backends "$name" --quiet --no-history \
    --output-json "$OUT_DIR/$name$*.json" --output-md "$OUT_DIR/$name$*.md" "$@" >"$OUT_DIR/$name$*.log" 2>&1
  python3 - "$OUT_DIR/$name$*.json" "$expect" "$name $*" <<'PY'
import json, sys
path, expect, label = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
try:
    cells = json.load(open(path))["benchmarks"]
except Exception as exc:
    print(f"FAIL {label:38} no report ({exc})"); sys.exit()
for c in cells:
    verdict = "PASS" if c["status"] in expect else "FAIL"
    print(f"{verdict} {label:38} {c['status']:9} {(c.get('reason') or '')[:150]}")
PY
}
if [ "${PART:-all}" != builtins ]; then
echo "== cheats on CUDA: each must be incorrect or suspect (cheat-none: ok)"
cheat cheat-none ok
cheat cheat-none ok --graph
for name in content-cache warmup-replay private-stream lazy-output lazy-mapping perf-counter event-timer \
            profiler call-rate call-stack call-count mutate-input; do
  cheat "cheat-$name" incorrect,suspect
done
cheat cheat-graph-stale incorrect,suspect --graph
cheat cheat-call-stack incorrect,suspect --graph
cheat cheat-call-stack incorrect,suspect --timer kernel
# under the kernel timer a call that does no device work is an error already (kernel_timer.py)
cheat cheat-content-cache incorrect,suspect --timer kernel
fi
[ "${PART:-all}" = cheats ] && exit 0

echo "== honest built-ins, fixed profile: no suspect cell; wall time with the checks on and off"
for mode in on off; do
  start=$(date +%s.%N)
  APEX_BENCH_INTEGRITY=$mode timeout 1200 apex-bench --device cuda --profile fixed --backends "$BUILTINS" \
    --quiet --no-history --output-json "$OUT_DIR/builtins-$mode.json" --output-md "$OUT_DIR/builtins-$mode.md"
  code=$?
  echo "checks $mode: exit $code, wall $(python3 -c "import time; print(f'{time.time() - $start:.1f}')") s"
done
python3 - "$OUT_DIR/builtins-on.json" "$OUT_DIR/builtins-off.json" <<'PY'
import json, sys
on, off = (json.load(open(p))["benchmarks"] for p in sys.argv[1:3])
suspect = [c for c in on if c["status"] == "suspect"]
for c in suspect:
    print(f"FAIL honest {c['workload']}/{c['case']}/{c['backend']}/{c['dtype']}: {c['reason'][:200]}")
print(f"{'PASS' if not suspect else 'FAIL'} honest built-ins: {len(suspect)} suspect of {len(on)} cells "
      f"({sum(c['status'] == 'ok' for c in on)} ok)")
def cell_wall(cells):
    return sum(c.get("wall_time_s") or 0 for c in cells)
print(f"cell wall time: checks on {cell_wall(on):.1f} s, off {cell_wall(off):.1f} s "
      f"(+{100 * (cell_wall(on) / max(cell_wall(off), 1e-9) - 1):.1f} %)")
PY
