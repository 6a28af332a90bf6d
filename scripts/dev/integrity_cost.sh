#!/usr/bin/env bash
# What the anti-cheat checks cost (docs/anti-cheat.md): wall time of the fixed-profile suite of
# the built-in backends on the built-in workloads, three ways, in turn, after one warm-up run
# that fills the compile caches:
#   on    this tree, every check on (the default);
#   off   this tree, APEX_BENCH_INTEGRITY=off (the timing loop's checks off; the correctness
#         checks before and after timing stay on);
#   base  the tree in .base/ (e.g. `git archive c350214 | tar x -C .base`), the code before them.
# Each run is a fresh apex-bench process; the table gives each run's wall time, the medians, and
# the suspect cells of the runs with the checks on (there must be none: the code is honest).
#   bash scripts/dev/integrity_cost.sh OUT [ROUNDS]
OUT_DIR=${1:?usage: integrity_cost.sh OUT [ROUNDS]}
ROUNDS=${2:-2}
BACKENDS=torch-reference,torch-compile,triton,jax
WORKLOADS=tilepack,tileunpack,fusiongate,tilessm-scan,tile-stage1,ff-infer
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1

run() {  # run LABEL: one fixed-profile run of the suite, its wall time appended to OUT/walls.txt
  local label=$1 start code
  local args=(--device cuda --profile fixed --backends "$BACKENDS" --workloads "$WORKLOADS" --quiet
              --no-history --output-json "$OUT_DIR/$label.json" --output-md "$OUT_DIR/$label.md")
  start=$(date +%s.%N)
  case $label in
    base*) (cd .base && PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" python3 -m apex_core.cli.main "${args[@]}") ;;
    off*) APEX_BENCH_INTEGRITY=off apex-bench "${args[@]}" ;;
    *) apex-bench "${args[@]}" ;;
  esac
  code=$?
  echo "$label $(python3 -c "import time; print(f'{time.time() - $start:.1f}')") $code" | tee -a "$OUT_DIR/walls.txt"
}

: > "$OUT_DIR/walls.txt"
run warmup
for round in $(seq "$ROUNDS"); do
  run "on-$round"; run "off-$round"; [ -d .base ] && run "base-$round"
done
python3 - "$OUT_DIR" <<'PY'
import json, statistics, sys
from pathlib import Path
out = Path(sys.argv[1])
walls = {}
for line in (out / "walls.txt").read_text().splitlines():
    label, wall, code = line.split()
    if label != "warmup":
        walls.setdefault(label.split("-")[0], []).append(float(wall))
for mode, values in walls.items():
    print(f"{mode:5} runs {', '.join(f'{v:.1f}' for v in values)} s; median {statistics.median(values):.1f} s")
if "on" in walls and "off" in walls:
    on, off = statistics.median(walls["on"]), statistics.median(walls["off"])
    print(f"checks on against off: {100 * (on / off - 1):+.1f} %")
if "on" in walls and "base" in walls:
    on, base = statistics.median(walls["on"]), statistics.median(walls["base"])
    print(f"checks on against the code before them: {100 * (on / base - 1):+.1f} %")
for path in sorted(out.glob("on-*.json")) + [out / "warmup.json"]:
    cells = json.loads(path.read_text())["benchmarks"]
    bad = [c for c in cells if c["status"] not in ("ok", "skipped")]
    flags = sorted({f for c in cells for f in c.get("flags", [])})
    print(f"{path.name}: {len(cells)} cells, {sum(c['status'] == 'ok' for c in cells)} ok, "
          f"{len(bad)} not ok ({'; '.join(c['backend'] + '/' + c['workload'] + ': ' + c['reason'][:120] for c in bad)}), "
          f"flags {flags}")
PY
