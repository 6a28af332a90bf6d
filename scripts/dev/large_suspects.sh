#!/usr/bin/env bash
# Honest built-in cells must never be suspect (docs/anti-cheat.md): the built-in backends at a
# profile, every check on, cut at a deadline with SIGINT (the report keeps every finished cell).
# Prints one line per cell: status, stop reason, samples, p50, wall time, flags, reason.
#   bash scripts/dev/large_suspects.sh OUT WORKLOADS [DEADLINE_S] [PROFILE]
OUT_DIR=${1:?usage: large_suspects.sh OUT WORKLOADS [DEADLINE_S] [PROFILE]}
WORKLOADS=${2:?workloads}
DEADLINE=${3:-540}
PROFILE=${4:-large}
BACKENDS=${BACKENDS:-torch-reference,torch-compile,triton,jax}
mkdir -p "$OUT_DIR"
[ -f scripts/gpu_env.sh ] && [ -d .whl ] && source scripts/gpu_env.sh
export PYTHONUNBUFFERED=1
label=$PROFILE-${WORKLOADS//[,:]/_}
start=$(date +%s)
timeout -s INT -k 30 "$DEADLINE" apex-bench --device cuda --profile "$PROFILE" --backends "$BACKENDS" \
  --workloads "$WORKLOADS" --no-history --quiet --output-json "$OUT_DIR/$label.json" \
  >"/tmp/$label.log" 2>&1
code=$?
echo "$label: exit $code after $(( $(date +%s) - start )) s"
tail -3 "/tmp/$label.log"
python3 - "$OUT_DIR/$label.json" <<'PY'
import json, sys
try:
    cells = json.load(open(sys.argv[1]))["benchmarks"]
except Exception as exc:
    sys.exit(f"no report: {exc}")
for c in cells:
    s = c.get("stats") or {}
    print(f"{c['workload']:12} {c['case']:13} {c['backend']:15} {c['status']:9} {c.get('stop_reason') or '':10} "
          f"n {s.get('n', '-')!s:>5} p50 {1000 * s.get('p50_ms', 0):10.2f} us wall {c.get('wall_time_s') or 0:6.1f} s "
          f"{','.join(c.get('flags') or [])} {(c.get('reason') or '')[:160]}")
print(f"{len(cells)} cells: " + ", ".join(f"{k} {v}" for k, v in sorted(
    {st: sum(c['status'] == st for c in cells) for st in {c['status'] for c in cells}}.items())))
PY
